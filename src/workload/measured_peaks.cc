#include "workload/measured_peaks.h"

#include "api/csv_lines.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>

namespace gpugeek::workload {
namespace {

constexpr std::string_view kColumns[] = {
    "model",     "task",         "seq",       "batch",          "micro_batch",    "gpu",
    "recipe",    "precision",    "optimizer", "recompute",      "measured_bytes", "source",
    "gpus",      "tp",           "zero",      "offload",        "framework",      "features",
    "lora_rank", "lora_targets", "measures",  "expected_error", "reason"};
// Columns whose value makes the row estimated at its own layout.
constexpr std::string_view kLayoutColumns[] = {"gpus",      "tp",       "zero",      "offload",
                                               "framework", "features", "lora_rank", "lora_targets"};

absl::Status At(int line, std::string_view column, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("line {}, column {}: {}", line, column, what));
}

absl::StatusOr<int64_t> PositiveInt(int line, std::string_view column, std::string_view v) {
  int64_t x = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || x < 1) {
    return At(line, column, fmt::format("'{}' is not a positive integer", v));
  }
  return x;
}

absl::StatusOr<double> Number(int line, std::string_view column, std::string_view v) {
  const std::string text(v);
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(x)) {
    return At(line, column, fmt::format("'{}' is not a number", v));
  }
  return x;
}

std::vector<std::string> SplitList(std::string_view v) {
  std::vector<std::string> out;
  while (!v.empty()) {
    const size_t end = v.find(';');
    std::string_view item = v.substr(0, end);
    v = end == std::string_view::npos ? std::string_view() : v.substr(end + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
  }
  return out;
}

// The row's training options at its own layout, as the planner would set them (planner.cc TrainingFor):
// flash attention, no dropout, Megatron-style fp32 main grads only for pre-training under Megatron.
TrainingOptions OwnLayoutOptions(const MeasuredRun& run) {
  const Recipe& r = run.task.recipe;
  TrainingOptions o;
  o.layout = ParallelLayout{run.tp, 1, run.gpus / run.tp, 1, 1, false};
  o.mode = run.task.kind == TaskKind::kLora    ? FineTune::kLora
           : run.task.kind == TaskKind::kQlora ? FineTune::kQlora
                                               : FineTune::kFull;
  o.lora = run.task.lora;
  o.framework = r.framework;
  o.precision = r.precision;
  o.optimizer = r.optimizer;
  o.fp32_grads =
      run.task.kind == TaskKind::kPretrain && (r.framework == Framework::kAuto || r.framework == Framework::kMegatron);
  o.zero_stage = run.zero_stage;
  const Offload off = r.offload.value_or(Offload::kNone);
  o.offload_optimizer = off != Offload::kNone;
  o.offload_params = off == Offload::kOptimizerAndParams;
  o.seq = run.task.seq;
  o.micro_batch = run.micro_batch;
  o.micro_batches = std::max<int64_t>(1, run.task.batch / (run.micro_batch * o.layout.dp));
  o.recompute = r.recompute.value_or(Recompute::kNone);
  o.dropout_masks = false;
  o.features = r.features;
  return o;
}

}  // namespace

std::string_view MeasureName(Measure m) {
  switch (m) {
    case Measure::kAllocatedWithContext:
      return "allocated+context";
    case Measure::kAllocated:
      return "allocated";
    case Measure::kActive:
      return "active";
    case Measure::kReserved:
      return "reserved";
    case Measure::kNvidiaSmi:
      return "nvidia-smi";
    case Measure::kWeights:
      return "weights";
  }
  return "?";
}

absl::StatusOr<Measure> ParseMeasure(std::string_view name) {
  std::vector<std::string_view> names;
  for (int i = 0; i <= static_cast<int>(Measure::kWeights); ++i) {
    const Measure m = static_cast<Measure>(i);
    if (MeasureName(m) == name) return m;
    names.push_back(MeasureName(m));
  }
  return absl::InvalidArgumentError(fmt::format("unknown measure '{}' (one of: {})", name, fmt::join(names, ", ")));
}

absl::StatusOr<std::vector<MeasuredRun>> ParseMeasuredRuns(std::string_view csv) {
  std::vector<MeasuredRun> runs;
  std::vector<std::string> header;
  // No line starts with "\n": every record reaches the callback, the first one being the header.
  absl::Status st = api::ForEachCsvRecord(csv, "\n", [&](int line_no, const std::vector<std::string>& cells) {
    if (header.empty()) {
      for (const std::string& c : cells) {
        if (std::find(std::begin(kColumns), std::end(kColumns), c) == std::end(kColumns)) {
          return At(line_no, c, fmt::format("unknown column (known: {})", fmt::join(kColumns, ", ")));
        }
        if (std::find(header.begin(), header.end(), c) != header.end()) return At(line_no, c, "named twice");
        header.push_back(c);
      }
      for (std::string_view need : {"model", "task", "seq", "batch", "gpu", "measured_bytes"}) {
        if (std::find(header.begin(), header.end(), need) == header.end()) {
          return At(line_no, need, "missing from the header");
        }
      }
      return absl::OkStatus();
    }
    if (cells.size() != header.size()) {
      return absl::InvalidArgumentError(
          fmt::format("line {}: {} fields, the header has {}", line_no, cells.size(), header.size()));
    }
    if (runs.size() >= kMaxMeasuredRows) {
      return absl::InvalidArgumentError(fmt::format("more than {} runs", kMaxMeasuredRows));
    }
    std::map<std::string, std::string_view, std::less<>> row;
    for (size_t i = 0; i < cells.size(); ++i) row[header[i]] = cells[i];
    auto get = [&row](std::string_view k) -> std::string_view {
      auto it = row.find(k);
      return it == row.end() ? std::string_view() : it->second;
    };
    MeasuredRun r;
    r.line = line_no;
    r.model = std::string(get("model"));
    if (r.model.empty()) return At(line_no, "model", "empty (a config.json path)");
    if (!get("measures").empty()) {
      auto m = ParseMeasure(get("measures"));
      if (!m.ok()) return At(line_no, "measures", std::string(m.status().message()));
      r.measures = *m;
    }
    auto kind = ParseTaskKind(get("task"));
    const bool serving = r.measures == Measure::kWeights;
    if (!kind.ok() || (*kind == TaskKind::kInference) != serving) {
      return At(line_no, "task",
                serving ? fmt::format("'{}': measures=weights is a serving figure (task inference)", get("task"))
                        : fmt::format("'{}' is not a training task (full, pretrain, lora, qlora; inference only "
                                      "with measures=weights)",
                                      get("task")));
    }
    r.task.kind = *kind;
    auto seq = PositiveInt(line_no, "seq", get("seq"));
    if (!seq.ok()) return seq.status();
    auto batch = PositiveInt(line_no, "batch", get("batch"));
    if (!batch.ok()) return batch.status();
    if (!get("micro_batch").empty()) {
      auto mb = PositiveInt(line_no, "micro_batch", get("micro_batch"));
      if (!mb.ok()) return mb.status();
      r.micro_batch = *mb;
    }
    r.task.seq = *seq;
    r.task.batch = *batch;
    r.gpu = std::string(get("gpu"));
    if (r.gpu.empty()) return At(line_no, "gpu", "empty (a catalog GPU, e.g. H200-SXM-141GB)");
    auto recipe = RecipePreset(get("recipe").empty() ? "auto" : get("recipe"));
    if (!recipe.ok()) return At(line_no, "recipe", std::string(recipe.status().message()));
    if (!get("precision").empty()) {
      auto p = ParsePrecision(get("precision"));
      if (!p.ok()) return At(line_no, "precision", std::string(p.status().message()));
      recipe->precision = *p;
    }
    if (!get("optimizer").empty()) {
      auto o = ParseOptimizer(get("optimizer"));
      if (!o.ok()) return At(line_no, "optimizer", std::string(o.status().message()));
      recipe->optimizer = *o;
    }
    if (!get("recompute").empty() && get("recompute") != "auto") {
      auto rc = ParseRecompute(get("recompute"));
      if (!rc.ok()) return At(line_no, "recompute", std::string(rc.status().message()));
      recipe->recompute = *rc;
    }
    if (!get("framework").empty()) {
      auto f = ParseFramework(get("framework"));
      if (!f.ok()) return At(line_no, "framework", std::string(f.status().message()));
      recipe->framework = *f;
    }
    if (!get("offload").empty()) {
      auto off = ParseOffload(get("offload"));
      if (!off.ok()) return At(line_no, "offload", std::string(off.status().message()));
      recipe->offload = *off;
    }
    if (!get("features").empty()) {
      auto f = ParseRecipeFeatures(get("features"));
      if (!f.ok()) return At(line_no, "features", std::string(f.status().message()));
      recipe->features = *f;
    }
    r.task.recipe = *recipe;
    r.task.lora = LoraConfig{16, {"all-linear"}};
    if (!get("lora_rank").empty()) {
      auto rank = PositiveInt(line_no, "lora_rank", get("lora_rank"));
      if (!rank.ok()) return rank.status();
      r.task.lora.rank = static_cast<int>(std::min<int64_t>(*rank, 1 << 20));
    }
    if (!get("lora_targets").empty()) {
      r.task.lora.targets = SplitList(get("lora_targets"));
      if (r.task.lora.targets.empty()) return At(line_no, "lora_targets", "no target (';'-separated module names)");
    }
    for (std::string_view c : kLayoutColumns) r.own_layout = r.own_layout || !get(c).empty();
    if (!get("gpus").empty()) {
      auto g = PositiveInt(line_no, "gpus", get("gpus"));
      if (!g.ok()) return g.status();
      if (*g > 1 << 20) return At(line_no, "gpus", fmt::format("'{}' is more than {} GPUs", *g, 1 << 20));
      r.gpus = static_cast<int>(*g);
    }
    if (!get("tp").empty()) {
      auto tp = PositiveInt(line_no, "tp", get("tp"));
      if (!tp.ok()) return tp.status();
      if (*tp > r.gpus || r.gpus % *tp != 0) {
        return At(line_no, "tp", fmt::format("{} does not divide the {} GPUs of the run", *tp, r.gpus));
      }
      r.tp = static_cast<int>(*tp);
    }
    if (!get("zero").empty()) {
      const std::string_view z = get("zero");
      if (z.size() != 1 || z[0] < '0' || z[0] > '3') {
        return At(line_no, "zero", fmt::format("'{}' is not a ZeRO stage 0, 1, 2 or 3 (FSDP FULL_SHARD: 3)", z));
      }
      r.zero_stage = z[0] - '0';
    }
    if (r.own_layout && serving && (r.zero_stage != 0 || !get("offload").empty() || !get("features").empty())) {
      return At(line_no, "measures", "a serving row takes gpus and tp only (no zero, offload or features)");
    }
    if (r.own_layout && !serving && r.micro_batch == 0) {
      return At(line_no, "micro_batch", "empty: a row with its own layout (gpus, tp, zero, ...) names its micro-batch");
    }
    if (!get("expected_error").empty()) {
      auto e = Number(line_no, "expected_error", get("expected_error"));
      if (!e.ok()) return e.status();
      if (*e <= -1 || *e > 100) {
        return At(line_no, "expected_error", fmt::format("{} is not a fraction in (-1, 100]", *e));
      }
      r.expected_error = *e;
    }
    r.reason = std::string(get("reason"));
    if (r.expected_error && r.reason.empty()) {
      return At(line_no, "reason", "empty: a row with an expected_error says why the model misses it");
    }
    const std::string bytes(get("measured_bytes"));
    char* end = nullptr;
    r.measured_bytes = std::strtod(bytes.c_str(), &end);
    if (bytes.empty() || end != bytes.c_str() + bytes.size() || !std::isfinite(r.measured_bytes) ||
        r.measured_bytes <= 0) {
      return At(line_no, "measured_bytes", fmt::format("'{}' is not a positive number of bytes", bytes));
    }
    r.source = std::string(get("source"));
    runs.push_back(std::move(r));
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  if (header.empty()) return absl::InvalidArgumentError("no header line (model,task,seq,batch,gpu,measured_bytes,...)");
  return runs;
}

absl::StatusOr<MeasuredComparison> CompareMeasured(const ModelConfig& config, const MeasuredRun& run,
                                                   const hw::GpuCatalog& catalog) {
  const hw::GpuModel* gpu = catalog.Resolve(run.gpu);
  if (gpu == nullptr) return absl::NotFoundError(fmt::format("line {}: no GPU '{}' in the catalog", run.line, run.gpu));
  MeasuredComparison c;
  // Allocator figures leave out the CUDA context the plan's "runtime" term holds.
  const bool without_context =
      run.measures == Measure::kAllocated || run.measures == Measure::kActive || run.measures == Measure::kReserved;
  auto finish = [&](const MemoryBreakdown& m, std::string plan) {
    c.planned_bytes = run.measures == Measure::kWeights ? m.Bytes("weights")
                      : without_context                 ? m.Total() - m.Bytes("runtime")
                                                        : m.Total();
    c.plan = std::move(plan);
    c.memory = m;
    c.error = (static_cast<double>(c.planned_bytes) - run.measured_bytes) / run.measured_bytes;
    return c;
  };
  if (run.measures == Measure::kWeights) {
    PlannerOptions o;
    o.exact_gpus = run.gpus;
    o.top_k = 1;
    o.safety_margin = 0;
    o.allowed_tp = {run.tp};
    o.allowed_pp = {1};
    o.serving_smallest_model_parallel = false;
    auto plan = MakePlan(config, run.task, {PoolEntry{gpu, run.gpus, 0}}, o);
    if (!plan.ok()) return plan.status();
    if (plan->candidates.empty()) {
      return absl::FailedPreconditionError(fmt::format("line {}: no serving plan at TP{} on {} GPUs ({})", run.line,
                                                       run.tp, run.gpus,
                                                       plan->rejected.empty() ? "no layout" : plan->rejected.front()));
    }
    return finish(plan->candidates.front().memory, plan->candidates.front().Summary());
  }
  if (run.own_layout) {
    const TrainingOptions t = OwnLayoutOptions(run);
    auto mem = EstimateTrainingMemory(config, t);
    if (!mem.ok()) {
      return absl::InvalidArgumentError(fmt::format("line {}: {}", run.line, std::string(mem.status().message())));
    }
    const Offload off = run.task.recipe.offload.value_or(Offload::kNone);
    const std::string features = RecipeFeaturesName(t.features);
    return finish(mem->gpu,
                  fmt::format("{} x {} TP{} PP1 DP{} ZeRO-{} mb{} recompute={}{}{}", run.gpus, gpu->id, t.layout.tp,
                              t.layout.dp, t.zero_stage, t.micro_batch, RecomputeName(t.recompute),
                              off == Offload::kNone ? "" : fmt::format(" offload={}", OffloadName(off)),
                              features.empty() ? "" : " " + features));
  }
  PlannerOptions o;
  o.exact_gpus = 1;
  o.top_k = 1;
  o.safety_margin = 0;
  if (run.micro_batch > 0) o.micro_batches = {run.micro_batch};
  auto plan = MakePlan(config, run.task, {PoolEntry{gpu, 1, 0}}, o);
  if (!plan.ok()) return plan.status();
  if (plan->candidates.empty()) {
    return absl::FailedPreconditionError(
        fmt::format("line {}: no one-GPU plan fits ({})", run.line,
                    plan->rejected.empty() ? std::string("no layout") : plan->rejected.front()));
  }
  return finish(plan->candidates.front().memory, plan->candidates.front().Summary());
}

bool MeasuredWithinTolerance(const MeasuredRun& run, const MeasuredComparison& c, double max_error) {
  if (max_error <= 0) return true;
  return std::abs(c.error - run.expected_error.value_or(0.0)) <= max_error;
}

}  // namespace gpugeek::workload
