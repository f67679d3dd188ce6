// `gpugeek plan MODEL.json --task lora [--seq 4096 --batch 1] [--gpus A100-80GB:8,H100-SXM-80GB:16@2.5]
//  [--objective time|cost|gpus] [--recipe auto|megatron|deepspeed|hf|peft|torchtune] [--framework F]
//  [--precision mixed|bf16|fp32|autocast] [--optimizer adamw|adamw-8bit|sgd-momentum|adafactor]
//  [--recompute auto|none|selective|full] [--top 5] [--json] [--svg FILE]`: sizes a job from its model's
// config.json and ranks the GPU combinations that fit (src/workload/planner.h).

#include <cmath>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "api/quantity.h"
#include "cli/commands.h"
#include "common/file.h"
#include "common/table.h"
#include "common/units.h"
#include "hw/gpu_catalog.h"
#include "workload/launch.h"
#include "workload/measured_peaks.h"
#include "workload/memory_sources.h"
#include "workload/model_source.h"
#include "workload/param_count.h"
#include "workload/plan_json.h"
#include "workload/planner.h"

namespace gpugeek::cli {
namespace {

using workload::PlanCandidate;

[[noreturn]] void Fail(const std::string& message) {
  std::cerr << "gpugeek plan: " << message << "\n";
  throw CLI::RuntimeError(2);
}

// "1.79" -> 1'790'000 micro-units (api::ParseMoneyMicros).
bool ParseMicros(const std::string& s, int64_t* out) {
  absl::StatusOr<int64_t> micros = api::ParseMoneyMicros(s);
  if (micros.ok()) *out = *micros;
  return micros.ok();
}

// "A100-80GB:8,H100-SXM-80GB:16@2.50": model, count, optional price per GPU-hour.
std::vector<workload::PoolEntry> ParsePool(const std::string& spec, const hw::GpuCatalog& catalog) {
  const std::vector<workload::PoolEntry> defaults = workload::DefaultPool(catalog);
  std::vector<workload::PoolEntry> pool;
  for (const std::string& item : std::vector<std::string>(absl::StrSplit(spec, ',', absl::SkipEmpty()))) {
    std::vector<std::string> at = absl::StrSplit(item, '@');
    std::vector<std::string> parts = absl::StrSplit(at[0], ':');
    if (parts.size() != 2 || at.size() > 2) Fail(fmt::format("--gpus entry '{}' is not NAME:COUNT[@PRICE]", item));
    const hw::GpuModel* m = catalog.Resolve(parts[0]);
    if (m == nullptr) Fail(fmt::format("unknown GPU model '{}' (see `gpugeek catalog`)", parts[0]));
    int count = 0;
    if (!absl::SimpleAtoi(parts[1], &count) || count < 1) Fail(fmt::format("bad GPU count in '{}'", item));
    int64_t price = 2'000'000;  // when unpriced and not in the default pool
    for (const auto& d : defaults) {
      if (d.gpu == m) price = d.price_micros_per_gpu_hour;
    }
    if (at.size() == 2 && !ParseMicros(at[1], &price)) Fail(fmt::format("bad price in '{}'", item));
    pool.push_back(workload::PoolEntry{m, count, price});
  }
  return pool;
}

std::string Duration(double s) {
  if (s < 120) return fmt::format("{:.1f} s", s);
  if (s < 7200) return fmt::format("{:.1f} min", s / 60);
  if (s < 172800) return fmt::format("{:.1f} h", s / 3600);
  return fmt::format("{:.1f} d", s / 86400);
}

std::string Money(int64_t micros) { return FormatMoney(micros); }

// A terminal bar of the breakdown against the usable memory: one letter per term; with `explain`, each
// term's source under its formula.
std::string MemoryBar(const PlanCandidate& c, bool explain, int width = 60) {
  const double scale = static_cast<double>(std::max<uint64_t>(c.usable_bytes, c.memory.Total())) / width;
  std::string bar, legend;
  const std::pair<const char*, char> kLetters[] = {
      {"weights", 'W'},        {"gradients", 'G'},     {"optimizer_states", 'O'},    {"activations", 'A'},
      {"kv_cache", 'K'},       {"qlora_dequant", 'Q'}, {"recompute_workspace", 'C'}, {"embedding_logits", 'L'},
      {"autocast_cache", 'X'}, {"zero3_gather", 'Z'},  {"peft_fp32_inputs", 'P'},    {"runtime", 'R'}};
  for (const auto& t : c.memory.terms) {
    char letter = '#';
    for (const auto& [label, l] : kLetters) {
      if (t.label == label) letter = l;
    }
    const int n = static_cast<int>(static_cast<double>(t.bytes) / scale + 0.5);
    bar += std::string(n, letter);
    legend += fmt::format("  {} {:<20} {:>10}  {}\n", letter, t.label, FormatBytes(t.bytes), t.formula);
    const std::string_view source = workload::MemoryTermSource(t.label, c.memory.Bytes("kv_cache") == 0);
    if (explain && !source.empty()) legend += fmt::format("  {:<33}  source: {}\n", "", source);
  }
  const int usable_at = static_cast<int>(static_cast<double>(c.usable_bytes) / scale);
  if (static_cast<int>(bar.size()) < usable_at) bar += std::string(usable_at - bar.size(), '.');
  return fmt::format("  [{}] {} of {} usable (GiB = 2^30 B)\n{}", bar, FormatBytes(c.memory.Total()),
                     FormatBytes(c.usable_bytes), legend);
}

std::string XmlEscape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      default:
        o += ch;
    }
  }
  return o;
}

// A horizontal stacked bar per candidate: memory terms per GPU against the usable line.
std::string Svg(const std::vector<PlanCandidate>& cands, const std::string& title) {
  const char* colors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                          "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  const int row_h = 34, left = 330, width = 520, top = 50;
  double max_bytes = 1;
  for (const auto& c : cands) max_bytes = std::max({max_bytes, double(c.memory.Total()), double(c.usable_bytes)});
  const int height = top + row_h * static_cast<int>(cands.size()) + 70;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<text x=\"10\" y=\"22\" font-size=\"15\">{}</text>\n",
      left + width + 40, height, XmlEscape(title));
  std::vector<std::string> labels;
  for (size_t r = 0; r < cands.size(); ++r) {
    const PlanCandidate& c = cands[r];
    const int y = top + static_cast<int>(r) * row_h;
    s += fmt::format("<text x=\"10\" y=\"{}\">{}</text>\n", y + 17, XmlEscape(c.Summary()));
    double x = left;
    for (const auto& t : c.memory.terms) {
      auto it = std::find(labels.begin(), labels.end(), t.label);
      if (it == labels.end()) {
        labels.push_back(t.label);
        it = labels.end() - 1;
      }
      const double w = width * static_cast<double>(t.bytes) / max_bytes;
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"22\" fill=\"{}\"><title>{}: {}</title></rect>\n", x,
          y + 4, w, colors[(it - labels.begin()) % 10], XmlEscape(t.label), FormatBytes(t.bytes));
      x += w;
    }
    const double ux = left + width * static_cast<double>(c.usable_bytes) / max_bytes;
    s +=
        fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"black\" stroke-dasharray=\"4\"/>\n",
                    ux, y, ux, y + 30);
  }
  const int ly = top + row_h * static_cast<int>(cands.size()) + 20;
  for (size_t i = 0; i < labels.size(); ++i) {
    const int lx = 10 + static_cast<int>(i % 5) * 160, yy = ly + static_cast<int>(i / 5) * 18;
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n", lx, yy,
        colors[i % 10], lx + 16, yy + 11, XmlEscape(labels[i]));
  }
  s += fmt::format(
      "<text x=\"{}\" y=\"{}\" fill=\"#555\">dashed: usable memory per GPU after the safety margin</text>\n", 10,
      height - 8);
  return s + "</svg>\n";
}

}  // namespace

// `gpugeek plan --compare-measured FILE`: the planner's figure for each measured run of FILE
// (workload/measured_peaks.h), the error per row, and the median and worst. Exit 1 when `max_error` > 0
// and a row's |error| exceeds it.
void CompareMeasured(const std::string& file, const std::string& models_dir, double max_error, bool json) {
  auto text = ReadFileBounded(file, 16 << 20, "--compare-measured");
  if (!text.ok()) Fail(std::string(text.status().message()));
  auto runs = workload::ParseMeasuredRuns(*text);
  if (!runs.ok()) Fail(fmt::format("--compare-measured {}: {}", file, std::string(runs.status().message())));
  const std::string base = !models_dir.empty()                   ? models_dir
                           : file.find('/') != std::string::npos ? file.substr(0, file.rfind('/'))
                                                                 : std::string(".");
  TextTable table({"LINE", "MODEL", "TASK", "SEQ", "RECIPE", "PLAN", "PLANNED", "MEASURED", "ERROR"});
  for (size_t i : {0, 3, 6, 7, 8}) table.AlignRight(i);
  nlohmann::json rows = nlohmann::json::array();
  std::vector<double> errors;
  bool over = false;
  for (const workload::MeasuredRun& run : *runs) {
    const std::string path = !run.model.empty() && run.model[0] == '/' ? run.model : base + "/" + run.model;
    auto config = workload::LoadModelConfig(path);
    if (!config.ok()) {
      Fail(fmt::format("--compare-measured {} line {}: {}", file, run.line, std::string(config.status().message())));
    }
    auto c = workload::CompareMeasured(*config, run, hw::GpuCatalog::Builtin());
    if (!c.ok()) Fail(fmt::format("--compare-measured {}: {}", file, std::string(c.status().message())));
    errors.push_back(std::abs(c->error));
    // A documented miss (expected_error) is checked against its expected error, not against zero.
    over = over || !workload::MeasuredWithinTolerance(run, *c, max_error);
    const workload::Recipe& r = run.task.recipe;
    const std::string recipe = fmt::format("{} {} {}", workload::FrameworkName(r.framework),
                                           workload::PrecisionName(r.precision), workload::OptimizerName(r.optimizer));
    table.AddRow({std::to_string(run.line), run.model, std::string(workload::TaskKindName(run.task.kind)),
                  std::to_string(run.task.seq), recipe, c->plan, FormatBytes(c->planned_bytes),
                  FormatBytes(static_cast<uint64_t>(run.measured_bytes)),
                  fmt::format("{:+.1f}%{}", 100 * c->error,
                              run.expected_error ? fmt::format(" (known {:+.0f}%)", 100 * *run.expected_error) : "")});
    rows.push_back({{"line", run.line},
                    {"model", run.model},
                    {"recipe", recipe},
                    {"plan", c->plan},
                    {"planned_bytes", c->planned_bytes},
                    {"measured_bytes", run.measured_bytes},
                    {"error", c->error},
                    {"measures", std::string(workload::MeasureName(run.measures))},
                    {"expected_error", run.expected_error ? nlohmann::json(*run.expected_error) : nlohmann::json()},
                    {"reason", run.reason},
                    {"source", run.source}});
  }
  std::sort(errors.begin(), errors.end());
  const double median = errors.empty() ? 0 : errors[errors.size() / 2];
  const double worst = errors.empty() ? 0 : errors.back();
  if (json) {
    std::cout << nlohmann::json({{"rows", rows}, {"median_abs_error", median}, {"worst_abs_error", worst}}).dump(2)
              << "\n";
  } else {
    std::cout << table.Render()
              << fmt::format("\n{} runs: median |error| {:.1f}%, worst {:.1f}%{}\n", errors.size(), 100 * median,
                             100 * worst, max_error > 0 ? fmt::format(" (limit {:.1f}%)", 100 * max_error) : "");
  }
  if (over) throw CLI::RuntimeError(1);
}

void RegisterPlanCommand(CLI::App& app) {
  struct Options {
    std::string model;
    std::string task = "lora";
    int64_t seq = 4096;
    int64_t batch = 1;
    double tokens = 0;
    std::string gpus;
    std::string objective = "time";
    int top = 5;
    double margin = 0.10;
    int64_t lora_rank = 16;
    std::string lora_targets = "all-linear";
    std::string dtype;  // empty: the checkpoint's format
    std::string kv_dtype = "bf16";
    std::string recipe = "auto";
    std::string framework, precision, optimizer;  // empty: the recipe's
    std::string features;                         // empty: the recipe's (none)
    std::string recompute = "auto";
    std::string offload = "none";
    std::string compare_measured, models_dir;
    double max_error = 0;
    int tp = 0, pp = 0, cp = 0;  // 0: any
    int zero = -1;               // -1: any stage the framework has
    bool json = false;
    bool explain = false;
    std::string svg;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("plan", "Size a job from its model's config.json and rank the GPU plans that fit");
  sub->add_option("model", o->model,
                  "Hugging Face config.json, a model directory, *.safetensors or model.safetensors.index.json "
                  "(not with --compare-measured)");
  sub->add_option("--offload", o->offload,
                  "CPU offload (DeepSpeed ZeRO-Offload): none optimizer optimizer+params, or auto (the search "
                  "offloads when that is the best plan that fits; the plan reports the host memory)")
      ->capture_default_str();
  sub->add_option("--tp", o->tp, "Only this tensor-parallel size (default: any)");
  sub->add_option("--zero", o->zero,
                  "Only this ZeRO stage 0-3 (Megatron-LM's distributed optimizer is 1; 0 for software without one; "
                  "default: any the framework has)");
  sub->add_option("--cp", o->cp,
                  "Only this context-parallel size (Megatron-LM; default: 1, and more when each rank keeps >= 8192 "
                  "tokens)");
  sub->add_option("--pp", o->pp,
                  "Only this pipeline-parallel size; training may then split the layers unevenly (default: any "
                  "divisor of the layers)");
  sub->add_option("--compare-measured", o->compare_measured,
                  "CSV of measured training peaks (docs/planner.md): print the planner's error per run");
  sub->add_option("--models-dir", o->models_dir,
                  "With --compare-measured: where relative model paths are (default: the CSV's folder)");
  sub->add_option("--max-error", o->max_error,
                  "With --compare-measured: exit 1 when a run's |error| exceeds this fraction (0: report only)");
  sub->add_option("--task", o->task, "inference | lora | qlora | full | pretrain")->capture_default_str();
  sub->add_option("--seq", o->seq, "Sequence length (context for inference)")->capture_default_str();
  sub->add_option("--batch", o->batch, "Global batch in sequences (concurrent sequences for inference)")
      ->capture_default_str();
  sub->add_option("--tokens", o->tokens, "Token budget to train or generate (0: one step)")->capture_default_str();
  sub->add_option("--gpus", o->gpus, "Pool: NAME:COUNT[@PRICE_PER_GPU_HOUR],... (default: a catalog mix)");
  sub->add_option("--objective", o->objective, "time | cost | gpus")->capture_default_str();
  sub->add_option("--top", o->top, "How many plans to show")->capture_default_str();
  sub->add_option("--margin", o->margin, "Fraction of GPU memory kept free")->capture_default_str();
  sub->add_option("--lora-rank", o->lora_rank, "LoRA rank")->capture_default_str();
  sub->add_option("--lora-targets", o->lora_targets, "LoRA target modules, comma-separated, or all-linear")
      ->capture_default_str();
  sub->add_option("--dtype", o->dtype,
                  "Serving weight format: bf16 fp16 fp8 int8 int4 nf4 (default: the checkpoint's)");
  sub->add_option("--kv-dtype", o->kv_dtype, "KV cache format: bf16 fp8")->capture_default_str();
  sub->add_option("--recipe", o->recipe,
                  "Training defaults of a tool: auto (Megatron-LM or DeepSpeed) megatron megatron-2021 (as SC'21 ran "
                  "it) deepspeed hf peft torchtune")
      ->capture_default_str();
  sub->add_option("--framework", o->framework, "auto megatron deepspeed hf (default: the recipe's)");
  sub->add_option("--precision", o->precision,
                  "mixed (bf16 + fp32 master) bf16 (pure) fp32 autocast (fp32 weights, bf16 compute) (default: the "
                  "recipe's)");
  sub->add_option("--optimizer", o->optimizer, "adamw adamw-8bit sgd-momentum adafactor (default: the recipe's)");
  sub->add_option("--features", o->features,
                  "Memory levers of the eager recipes, ';'-separated: paged-optimizer optimizer-in-backward "
                  "fused-optimizer chunked-loss activation-offload compile; and serial-grad-reduce (the data-parallel "
                  "gradient reduce after the backward, not behind it: Megatron-LM of 2021) and unfused-attention (no "
                  "FlashAttention: the scores through memory) (default: none)");
  sub->add_option("--recompute", o->recompute,
                  "Activation recompute: auto (the plan chooses none or full) none selective full")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print JSON instead of a table");
  sub->add_flag("--explain", o->explain, "Show where each memory term's formula comes from");
  sub->add_option("--svg", o->svg, "Write an SVG chart of the memory breakdowns to FILE");
  sub->callback([o] {
    if (!o->compare_measured.empty()) {
      if (!o->model.empty()) Fail("model: not with --compare-measured (the CSV names each run's model)");
      if (!(o->max_error >= 0 && std::isfinite(o->max_error))) {
        Fail(fmt::format("--max-error {} must be a fraction >= 0, e.g. 0.1", o->max_error));
      }
      CompareMeasured(o->compare_measured, o->models_dir, o->max_error, o->json);
      return;
    }
    if (o->model.empty()) {
      Fail("model: a config.json, model directory or safetensors file is required (or --compare-measured FILE)");
    }
    // Flag values first, by flag name (NaN fails each comparison, so it is refused too).
    if (o->seq < 1) Fail(fmt::format("--seq {} must be at least 1", o->seq));
    if (o->batch < 1) Fail(fmt::format("--batch {} must be at least 1", o->batch));
    if (!(o->tokens >= 0 && std::isfinite(o->tokens)))
      Fail(fmt::format("--tokens {} must be a finite number >= 0", o->tokens));
    if (!(o->margin >= 0 && o->margin < 1)) Fail(fmt::format("--margin {} must be in [0, 1), e.g. 0.1", o->margin));
    if (o->top < 1) Fail(fmt::format("--top {} must be at least 1", o->top));
    if (o->lora_rank < 1) Fail(fmt::format("--lora-rank {} must be at least 1", o->lora_rank));
    if (o->tp < 0 || o->pp < 0 || o->cp < 0) {
      Fail(fmt::format("--tp {} / --pp {} / --cp {} must be at least 1", o->tp, o->pp, o->cp));
    }
    // A config.json, a model directory, a *.safetensors or a model.safetensors.index.json: an unknown
    // architecture is sized from its safetensors headers (workload/model_source.h).
    auto loaded = workload::LoadModelForPlan(o->model);
    if (!loaded.ok()) Fail(std::string(loaded.status().message()));
    const std::optional<workload::ModelConfig> config = loaded->config;
    auto kind = workload::ParseTaskKind(o->task);
    if (!kind.ok()) Fail(std::string(kind.status().message()));
    auto objective = workload::ParseObjective(o->objective);
    if (!objective.ok()) Fail(std::string(objective.status().message()));
    auto dtype = workload::ParseDType(o->dtype.empty() ? "bf16" : o->dtype);
    auto kv = workload::ParseDType(o->kv_dtype);
    if (!dtype.ok() || !kv.ok()) Fail(std::string((!dtype.ok() ? dtype : kv).status().message()));

    auto recipe = workload::RecipePreset(o->recipe);
    if (!recipe.ok()) Fail(fmt::format("--recipe: {}", std::string(recipe.status().message())));
    if (!o->framework.empty()) {
      auto f = workload::ParseFramework(o->framework);
      if (!f.ok()) Fail(fmt::format("--framework: {}", std::string(f.status().message())));
      recipe->framework = *f;
    }
    if (!o->precision.empty()) {
      auto p = workload::ParsePrecision(o->precision);
      if (!p.ok()) Fail(fmt::format("--precision: {}", std::string(p.status().message())));
      recipe->precision = *p;
    }
    if (!o->optimizer.empty()) {
      auto opt = workload::ParseOptimizer(o->optimizer);
      if (!opt.ok()) Fail(fmt::format("--optimizer: {}", std::string(opt.status().message())));
      recipe->optimizer = *opt;
    }
    if (!o->features.empty()) {
      auto f = workload::ParseRecipeFeatures(o->features);
      if (!f.ok()) Fail(fmt::format("--features: {}", std::string(f.status().message())));
      recipe->features = *f;
    }
    if (o->recompute != "auto") {
      auto r = workload::ParseRecompute(o->recompute);
      if (!r.ok()) Fail(fmt::format("--recompute: {} (or auto)", std::string(r.status().message())));
      recipe->recompute = *r;
    }
    if (o->offload == "auto") {
      recipe->offload.reset();
    } else {
      auto off = workload::ParseOffload(o->offload);
      if (!off.ok()) Fail(fmt::format("--offload: {} (or auto)", std::string(off.status().message())));
      recipe->offload = *off;
    }

    const hw::GpuCatalog& catalog = hw::GpuCatalog::Builtin();
    const std::vector<workload::PoolEntry> pool =
        o->gpus.empty() ? workload::DefaultPool(catalog) : ParsePool(o->gpus, catalog);
    workload::Task task;
    task.kind = *kind;
    task.seq = o->seq;
    task.batch = o->batch;
    task.tokens = o->tokens;
    task.lora.rank = o->lora_rank;
    task.lora.targets = absl::StrSplit(o->lora_targets, ',', absl::SkipEmpty());
    if (!o->dtype.empty()) task.inference_dtype = *dtype;
    task.kv_dtype = *kv;
    task.recipe = *recipe;
    workload::PlannerOptions po;
    po.objective = *objective;
    po.top_k = o->top;
    po.safety_margin = o->margin;
    if (o->tp > 0) po.allowed_tp = {o->tp};
    if (o->pp > 0) po.allowed_pp = {o->pp};
    if (o->cp > 0) po.allowed_cp = {o->cp};
    if (o->zero > 3 || o->zero < -1) Fail(fmt::format("--zero {}: a ZeRO stage is 0, 1, 2 or 3", o->zero));
    if (const int max_zero = workload::RecipeMaxZeroStage(task.recipe); o->zero > max_zero) {
      Fail(
          fmt::format("--zero {}: recipe {} (framework {}) runs ZeRO stages up to {}; pick one of those or another "
                      "--recipe / --framework",
                      o->zero, o->recipe, workload::FrameworkName(task.recipe.framework), max_zero));
    }
    if (o->zero >= 0) po.zero_stages = {o->zero};
    auto plan = workload::MakePlan(*config, task, pool, po);
    if (!plan.ok()) Fail(std::string(plan.status().message()));
    const workload::ParamCounts n = workload::CountParameters(*config);

    workload::LaunchOptions launch;
    launch.model = o->model;
    nlohmann::json launch_json;
    std::string launch_text;
    if (!plan->candidates.empty()) {
      const PlanCandidate& best = plan->candidates[0];
      if (task.kind == workload::TaskKind::kInference) {
        if (auto v = workload::VllmServeArgs(*config, best, task, launch); v.ok()) {
          launch_json["vllm"] = *v;
          launch_text += "  " + workload::ShellJoin(*v) + "\n";
        }
      } else {
        const auto t = workload::TorchrunArgs(best, launch);
        launch_json["torchrun"] = t;
        launch_text += "  " + workload::ShellJoin(t) + "\n";
        if (auto ds = workload::DeepSpeedConfig(best, task); ds.ok()) {
          launch_json["deepspeed"] = *ds;
          launch_text += "  deepspeed config: " + ds->dump() + "\n";
        }
        if (auto m = workload::MegatronArgs(*config, best, task); m.ok()) {
          launch_json["megatron"] = *m;
          launch_text += "  megatron: " + workload::ShellJoin(*m) + "\n";
        }
        if (auto h = workload::HfTrainerArgs(best, task); h.ok()) {
          launch_json["hf_trainer"] = *h;
          launch_text += "  hf trainer: " + workload::ShellJoin(*h) + "\n";
          if (task.recipe.precision == workload::Precision::kPureBf16) {
            launch_text += "  (pure bf16: load the model with torch_dtype=torch.bfloat16; no --bf16)\n";
          }
        }
        if (launch_json.size() == 1) {
          launch_text += fmt::format(
              "  (no tool launch renders this recipe: framework {}, precision {}, optimizer {})\n",
              workload::FrameworkName(task.recipe.framework), workload::PrecisionName(task.recipe.precision),
              workload::OptimizerName(task.recipe.optimizer));
        }
      }
    }

    if (!o->svg.empty()) {
      std::ofstream out(o->svg);
      if (!out) Fail(fmt::format("cannot write '{}'", o->svg));
      out << Svg(plan->candidates, fmt::format("{} {} seq {} batch {}: memory per GPU", config->model_type,
                                               workload::TaskKindName(task.kind), task.seq, task.batch));
    }
    if (o->json) {
      nlohmann::json j;
      j["model"] = {{"model_type", config->model_type},
                    {"parameters", n.total},
                    {"non_embedding", n.non_embedding},
                    {"active", n.active}};
      if (!loaded->note.empty()) j["model"]["weights"] = loaded->note;
      j["task"] = {{"kind", std::string(workload::TaskKindName(task.kind))},
                   {"seq", task.seq},
                   {"batch", task.batch},
                   {"tokens", task.tokens}};
      j["recipe"] = {{"framework", std::string(workload::FrameworkName(task.recipe.framework))},
                     {"precision", std::string(workload::PrecisionName(task.recipe.precision))},
                     {"optimizer", std::string(workload::OptimizerName(task.recipe.optimizer))},
                     {"recompute", task.recipe.recompute ? std::string(workload::RecomputeName(*task.recipe.recompute))
                                                         : std::string("auto")},
                     {"offload", task.recipe.offload ? std::string(workload::OffloadName(*task.recipe.offload))
                                                     : std::string("auto")},
                     {"features", workload::RecipeFeaturesName(task.recipe.features)}};
      j["candidates"] = nlohmann::json::array();
      for (const auto& c : plan->candidates) j["candidates"].push_back(workload::PlanCandidateToJson(c));
      j["rejected"] = plan->rejected;
      j["layouts_evaluated"] = plan->layouts_evaluated;
      j["launch"] = launch_json;
      std::cout << j.dump(2) << "\n";
      return;
    }
    std::cout << fmt::format("{}: {:.4g}B parameters ({:.4g}B active), task {} seq {} batch {}, objective {}\n\n",
                             config->model_type, n.total / 1e9, n.active / 1e9, workload::TaskKindName(task.kind),
                             task.seq, task.batch, o->objective);
    if (!loaded->note.empty()) std::cout << "Weights: " << loaded->note << "\n\n";
    if (plan->candidates.empty()) {
      std::cout << "No plan fits the pool.\n";
    } else {
      TextTable table({"#", "PLAN", "MEM/GPU", "USABLE", "TOKENS/S", "TIME", "COST", "MFU"});
      for (size_t i : {0, 2, 3, 4, 5, 6, 7}) table.AlignRight(i);
      int rank = 0;
      for (const auto& c : plan->candidates) {
        table.AddRow({std::to_string(++rank), c.Summary(), FormatBytes(c.memory.Total()), FormatBytes(c.usable_bytes),
                      fmt::format("{:.0f}", c.tokens_per_second), Duration(c.seconds), Money(c.cost_micros),
                      c.mfu > 0 ? fmt::format("{:.0f}%", 100 * c.mfu) : "-"});
      }
      std::cout << table.Render() << "\n";
      const PlanCandidate& best = plan->candidates[0];
      std::cout << "Memory per GPU of #1 (" << best.Summary() << "):\n" << MemoryBar(best, o->explain);
      std::cout << "Next smaller: " << best.next_smaller << "\n";
      if (!best.other_layouts.empty()) {
        std::string others;
        for (const PlanCandidate::OtherLayout& l : best.other_layouts) {
          others += fmt::format("{}{} ({:+.1f}% time)", others.empty() ? "" : "; ", l.summary, 100 * l.slower);
        }
        std::cout << "Other layouts at this size: " << others << "\n";
      }
      if (!best.size_note.empty()) std::cout << "Size: " << best.size_note << "\n";
      if (best.cpu_offload_bytes > 0) {
        const int per_node = workload::GpusPerNode(best);
        std::cout << fmt::format("Host memory for offload: {} per GPU, {} per node of {} GPUs\n",
                                 FormatBytes(static_cast<uint64_t>(best.cpu_offload_bytes)),
                                 FormatBytes(static_cast<uint64_t>(best.cpu_offload_bytes * per_node)), per_node);
      }
      if (!launch_text.empty()) std::cout << "\nLaunch #1:\n" << launch_text;
    }
    for (const auto& r : plan->rejected) std::cout << "Rejected: " << r << "\n";
    std::cout << fmt::format("({} layouts evaluated; safety margin {:.0f}%)\n", plan->layouts_evaluated,
                             100 * o->margin);
  });
}

}  // namespace gpugeek::cli
