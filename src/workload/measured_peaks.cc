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

constexpr std::string_view kColumns[] = {"model",  "task",      "seq",       "batch",     "micro_batch",    "gpu",
                                         "recipe", "precision", "optimizer", "recompute", "measured_bytes", "source"};

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

}  // namespace

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
    auto kind = ParseTaskKind(get("task"));
    if (!kind.ok() || *kind == TaskKind::kInference) {
      return At(line_no, "task", fmt::format("'{}' is not a training task (full, pretrain, lora, qlora)", get("task")));
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
    r.task.recipe = *recipe;
    r.task.lora = LoraConfig{16, {"all-linear"}};
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
  const PlanCandidate& best = plan->candidates.front();
  MeasuredComparison c;
  c.planned_bytes = best.memory.Total();
  c.plan = best.Summary();
  c.error = (static_cast<double>(c.planned_bytes) - run.measured_bytes) / run.measured_bytes;
  return c;
}

}  // namespace gpugeek::workload
