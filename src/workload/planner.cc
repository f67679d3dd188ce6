#include "workload/planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "common/units.h"
#include "workload/inference_memory.h"
#include "workload/param_count.h"

namespace gpugeek::workload {
namespace {

std::vector<int> PowersOfTwoUpTo(int64_t limit) {
  std::vector<int> v;
  for (int64_t x = 1; x <= limit; x *= 2) v.push_back(static_cast<int>(x));
  return v;
}

std::vector<int> DivisorsOf(int64_t n) {
  std::vector<int> v;
  for (int64_t d = 1; d <= n && d <= (int64_t{1} << 20); ++d) {
    if (n % d == 0) v.push_back(static_cast<int>(d));
  }
  return v;
}

// GPU counts tried for one pool entry: 1..8, then powers of two, then the whole pool.
std::vector<int> CountsToTry(int pool_count, const std::optional<int>& exact) {
  if (exact) return *exact <= pool_count ? std::vector<int>{*exact} : std::vector<int>{};
  std::vector<int> v;
  for (int n = 1; n <= std::min(pool_count, 8); ++n) v.push_back(n);
  for (int n = 16; n <= pool_count; n *= 2) v.push_back(n);
  if (v.empty() || v.back() != pool_count) v.push_back(pool_count);
  return v;
}

QuantScheme ServingScheme(DType d) {
  switch (d) {
    case DType::kInt4:
      return QuantScheme{d, 128, false};
    case DType::kNf4:
      return QuantScheme{d, 0, true};
    case DType::kFp8:
      return QuantScheme{d, 128, false};
    default:
      return QuantScheme{d, 0, false};
  }
}

std::string GiB(double bytes) { return fmt::format("{:.1f} GiB", bytes / kGiB); }

// The two largest terms of a breakdown, for one-line explanations.
std::string LargestTerms(const MemoryBreakdown& m) {
  std::vector<MemoryTerm> t = m.terms;
  std::sort(t.begin(), t.end(), [](const MemoryTerm& a, const MemoryTerm& b) { return a.bytes > b.bytes; });
  std::string s;
  for (size_t i = 0; i < t.size() && i < 2; ++i) {
    s += fmt::format("{}{} {}", i ? ", " : "", t[i].label, GiB(static_cast<double>(t[i].bytes)));
  }
  return s;
}

// The best outcome for one (GPU model, count): a fitting plan, or the smallest need that failed.
struct Outcome {
  std::optional<PlanCandidate> best;
  double min_need = 0;
  MemoryBreakdown min_need_breakdown;
  std::string min_need_layout;
  std::string invalid;  // set when no layout passed the validity rules
};

bool Better(const PlanCandidate& a, const PlanCandidate& b, Objective o) {
  switch (o) {
    case Objective::kTime:
      return std::tie(a.seconds, a.cost_micros, a.gpus) < std::tie(b.seconds, b.cost_micros, b.gpus);
    case Objective::kCost:
      return std::tie(a.cost_micros, a.seconds) < std::tie(b.cost_micros, b.seconds);
    case Objective::kGpus:
      return std::tie(a.gpus, a.seconds) < std::tie(b.gpus, b.seconds);
  }
  return false;
}

class Planner {
 public:
  Planner(const ModelConfig& config, const Task& task, const PlannerOptions& options)
      : c_(config), task_(task), opt_(options), inventory_(ParamInventory(config)) {}

  absl::Status Init() {
    if (task_.kind == TaskKind::kLora || task_.kind == TaskKind::kQlora) {
      auto l = CountLoraParams(c_, task_.lora);
      if (!l.ok()) return l.status();
      lora_ = *l;
    }
    for (Recompute r : opt_.recompute_modes) flops_[r] = ComputeFlopsPerToken(c_, task_.seq, r);
    return absl::OkStatus();
  }

  Outcome Evaluate(const PoolEntry& e, int n, int64_t& evaluated);
  PlanCandidate Finish(PlanCandidate c) const;  // fills the breakdown formulas

 private:
  // The shard does not depend on DP; EP needs a DP it divides, so the key layout uses dp = ep.
  const GpuShard& Shard(int tp, int pp, int ep) {
    auto key = std::make_tuple(tp, pp, ep);
    auto it = shards_.find(key);
    if (it == shards_.end()) {
      it = shards_.emplace(key, ShardForLayout(c_, inventory_, ParallelLayout{tp, pp, ep, ep, 1, false})).first;
    }
    return it->second;
  }
  TrainingOptions TrainingFor(const ParallelLayout& l, int zero, int64_t mb, Recompute r) const {
    TrainingOptions o;
    o.layout = l;
    o.mode = task_.kind == TaskKind::kLora    ? FineTune::kLora
             : task_.kind == TaskKind::kQlora ? FineTune::kQlora
                                              : FineTune::kFull;
    o.lora = task_.lora;
    o.fp32_grads = task_.kind == TaskKind::kPretrain;  // Megatron-style main grads for pre-training
    o.zero_stage = zero;
    o.seq = task_.seq;
    o.micro_batch = mb;
    o.micro_batches = std::max<int64_t>(1, task_.batch / (mb * l.dp));
    o.recompute = r;
    o.flash_attention = true;
    o.dropout_masks = false;  // LLM fine-tuning and pre-training recipes run without dropout
    return o;
  }
  InferenceOptions InferenceFor(const ParallelLayout& l) const {
    InferenceOptions o;
    if (task_.inference_dtype) {
      o.weights = o.expert_weights = ServingScheme(*task_.inference_dtype);
    } else {
      const QuantScheme checkpoint = CheckpointScheme(c_.torch_dtype, c_.quant_method, c_.quant_block_size);
      o.weights = o.expert_weights = checkpoint;
      // gpt-oss quantizes only its experts (quantization_config.modules_to_not_convert).
      if (c_.quant_method == "mxfp4") o.weights = QuantScheme{DType::kBf16};
    }
    o.kv_dtype = task_.kv_dtype;
    o.context_tokens = task_.seq;
    o.concurrent_sequences = (task_.batch + l.dp - 1) / l.dp;
    o.layout = l;
    return o;
  }
  void Consider(const PoolEntry& e, int n, PlanCandidate cand, Outcome& out) const {
    const double hours = cand.seconds / 3600.0;
    cand.cost_micros = std::llround(static_cast<double>(e.price_micros_per_gpu_hour) * n * hours);
    if (!out.best || Better(cand, *out.best, opt_.objective)) out.best = std::move(cand);
  }
  void Miss(const MemoryBreakdown& m, const std::string& layout, Outcome& out) const {
    const double need = static_cast<double>(m.Total());
    if (out.min_need == 0 || need < out.min_need) {
      out.min_need = need;
      out.min_need_breakdown = m;
      out.min_need_layout = layout;
    }
  }

  const ModelConfig& c_;
  const Task& task_;
  const PlannerOptions& opt_;
  const std::vector<ParamGroup> inventory_;
  std::optional<LoraParams> lora_;
  std::map<Recompute, FlopsPerToken> flops_;
  std::map<std::tuple<int, int, int>, GpuShard> shards_;
};

Outcome Planner::Evaluate(const PoolEntry& e, int n, int64_t& evaluated) {
  Outcome out;
  const hw::GpuModel& gpu = *e.gpu;
  const int domain = NvlinkDomainSize(gpu);
  const double usable = static_cast<double>(gpu.memory_bytes) * (1 - opt_.safety_margin);
  const bool layered = c_.kind == ArchitectureKind::kDecoder;
  const int64_t layers = c_.TotalLayers();

  std::vector<int> tps;
  for (int tp : PowersOfTwoUpTo(domain)) {
    if (c_.num_heads % tp != 0) continue;
    if (!c_.use_mla && c_.num_kv_heads % tp != 0 && tp % c_.num_kv_heads != 0) continue;
    tps.push_back(tp);
  }
  if (tps.empty()) tps.push_back(1);
  std::vector<int> pps = {1};
  if (layered && task_.kind == TaskKind::kInference) {
    pps.clear();
    for (int pp = 1; pp <= layers && pp <= n; ++pp) pps.push_back(pp);
  } else if (layered) {
    pps = DivisorsOf(layers);
  }
  bool any_valid = false;
  auto allowed = [](const std::vector<int>& list, int v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  for (int tp : tps) {
    if (n % tp != 0 || !allowed(opt_.allowed_tp, tp)) continue;
    for (int pp : pps) {
      if ((n / tp) % pp != 0 || !allowed(opt_.allowed_pp, pp)) continue;
      if (pp > 1 && tp != tps.back()) continue;  // PP only once TP fills the domain
      const int dp = n / (tp * pp);
      any_valid = true;
      std::vector<int> eps = {1};
      if (c_.IsMoe() && task_.kind != TaskKind::kInference) {
        for (int ep : PowersOfTwoUpTo(dp)) {
          if (ep > 1 && dp % ep == 0 && c_.moe.num_experts % ep == 0) eps.push_back(ep);
        }
      }
      std::vector<int> vs = {1};
      if (task_.kind == TaskKind::kPretrain && pp > 1 && layers % (2 * pp) == 0) vs.push_back(2);
      for (int ep : eps) {
        const GpuShard& shard = Shard(tp, pp, ep);
        for (int v : vs) {
          ParallelLayout l{tp, pp, dp, ep, v, tp > 1};
          if (task_.kind == TaskKind::kInference) {
            l.sequence_parallel = false;
            const InferenceOptions io = InferenceFor(l);
            MemoryBreakdown m = InferenceMemory(c_, io);
            ++evaluated;
            const std::string desc = fmt::format("TP{} PP{} DP{}", tp, pp, dp);
            if (static_cast<double>(m.Total()) > usable) {
              Miss(m, desc, out);
              continue;
            }
            PlanCandidate cand;
            cand.gpu = &gpu;
            cand.gpus = n;
            cand.layout = l;
            cand.memory = std::move(m);
            cand.usable_bytes = static_cast<uint64_t>(usable);
            const double kv = KvBytesPerSequence(c_, task_.seq, ElementBytes(task_.kv_dtype), l) *
                              static_cast<double>(io.concurrent_sequences);
            const double per_replica = DecodeTokensPerSecond(c_, cand.memory.Bytes("weights"), kv,
                                                             io.concurrent_sequences, tp, gpu, opt_.time_model) /
                                       pp;
            cand.tokens_per_second = per_replica * dp;
            cand.step_seconds = per_replica > 0 ? io.concurrent_sequences / per_replica : 0;
            cand.seconds = task_.tokens > 0 && cand.tokens_per_second > 0 ? task_.tokens / cand.tokens_per_second
                                                                          : cand.step_seconds;
            Consider(e, n, std::move(cand), out);
            continue;
          }
          std::vector<int> zeros = {0};
          if (dp > 1) {
            if (task_.kind == TaskKind::kLora || task_.kind == TaskKind::kQlora) {
              if (pp == 1) zeros.push_back(3);
            } else {
              zeros.push_back(1);
              if (pp == 1) zeros.insert(zeros.end(), {2, 3});
            }
          }
          for (int zero : zeros) {
            if (!allowed(opt_.zero_stages, zero)) continue;
            for (int64_t mb : opt_.micro_batches) {
              if (mb * dp > task_.batch || task_.batch % (mb * dp) != 0) continue;
              for (Recompute r : opt_.recompute_modes) {
                const TrainingOptions o = TrainingFor(l, zero, mb, r);
                MemoryContext ctx{&inventory_, &shard, lora_ ? &*lora_ : nullptr, false};
                auto mem = EstimateTrainingMemory(c_, o, ctx);
                ++evaluated;
                if (!mem.ok()) continue;
                if (static_cast<double>(mem->gpu.Total()) > usable) {
                  Miss(mem->gpu,
                       fmt::format("TP{} PP{} DP{} ZeRO-{} mb{} recompute={}", tp, pp, dp, zero, mb, RecomputeName(r)),
                       out);
                  continue;
                }
                const StepTime t = EstimateStepTime(c_, o, task_.batch, gpu, opt_.time_model, &shard, &flops_.at(r));
                PlanCandidate cand;
                cand.gpu = &gpu;
                cand.gpus = n;
                cand.layout = l;
                cand.zero_stage = zero;
                cand.micro_batch = mb;
                cand.recompute = r;
                cand.memory = std::move(mem->gpu);
                cand.cpu_offload_bytes = mem->cpu_offload_bytes;
                cand.usable_bytes = static_cast<uint64_t>(usable);
                cand.step_seconds = t.total_s;
                cand.tokens_per_second = t.total_s > 0 ? t.tokens / t.total_s : 0;
                cand.mfu = t.mfu;
                cand.seconds =
                    task_.tokens > 0 && cand.tokens_per_second > 0 ? task_.tokens / cand.tokens_per_second : t.total_s;
                Consider(e, n, std::move(cand), out);
              }
            }
          }
        }
      }
    }
  }
  if (!any_valid) {
    out.invalid = fmt::format(
        "no valid layout: {} heads / {} KV heads / {} layers do not split over {} GPUs with TP "
        "<= {} (NVLink domain)",
        c_.num_heads, c_.num_kv_heads, layers, n, domain);
  } else if (!out.best && out.min_need == 0) {
    out.invalid =
        fmt::format("global batch {} does not split into micro-batches over {} data-parallel ranks", task_.batch, n);
  }
  return out;
}

PlanCandidate Planner::Finish(PlanCandidate c) const {
  if (task_.kind == TaskKind::kInference) return c;  // InferenceMemory always writes formulas
  const TrainingOptions o = TrainingFor(c.layout, c.zero_stage, c.micro_batch, c.recompute);
  auto mem = EstimateTrainingMemory(c_, o);
  if (mem.ok()) c.memory = std::move(mem->gpu);
  return c;
}

}  // namespace

absl::StatusOr<TaskKind> ParseTaskKind(std::string_view name) {
  for (TaskKind k : {TaskKind::kInference, TaskKind::kLora, TaskKind::kQlora, TaskKind::kFull, TaskKind::kPretrain}) {
    if (TaskKindName(k) == name) return k;
  }
  return absl::InvalidArgumentError(
      fmt::format("unknown task '{}' (inference, lora, qlora, full, pretrain)", std::string(name)));
}

absl::StatusOr<Objective> ParseObjective(std::string_view name) {
  if (name == "time") return Objective::kTime;
  if (name == "cost") return Objective::kCost;
  if (name == "gpus") return Objective::kGpus;
  return absl::InvalidArgumentError(fmt::format("unknown objective '{}' (time, cost, gpus)", std::string(name)));
}

std::string PlanCandidate::Summary() const {
  std::string s =
      fmt::format("{} x {} TP{} PP{} DP{}", gpus, gpu != nullptr ? gpu->id : "?", layout.tp, layout.pp, layout.dp);
  if (layout.ep > 1) s += fmt::format(" EP{}", layout.ep);
  if (layout.virtual_stages > 1) s += fmt::format(" v{}", layout.virtual_stages);
  if (zero_stage > 0) s += fmt::format(" ZeRO-{}", zero_stage);
  if (recompute != Recompute::kNone) s += fmt::format(" recompute={}", RecomputeName(recompute));
  return s;
}

absl::StatusOr<Plan> MakePlan(const ModelConfig& config, const Task& task, const std::vector<PoolEntry>& pool,
                              const PlannerOptions& options) {
  if (pool.empty()) return absl::InvalidArgumentError("the GPU pool is empty");
  if (task.seq < 1 || task.batch < 1) return absl::InvalidArgumentError("seq and batch must be at least 1");
  // Written so that NaN fails too.
  if (!(task.tokens >= 0 && std::isfinite(task.tokens))) {
    return absl::InvalidArgumentError(fmt::format("tokens must be a finite number >= 0, not {}", task.tokens));
  }
  if (!(options.safety_margin >= 0 && options.safety_margin < 1)) {
    return absl::InvalidArgumentError(fmt::format("safety margin must be in [0, 1), not {}", options.safety_margin));
  }
  if ((task.kind == TaskKind::kLora || task.kind == TaskKind::kQlora) && task.lora.rank < 1) {
    return absl::InvalidArgumentError(fmt::format("LoRA rank must be at least 1, not {}", task.lora.rank));
  }
  for (const PoolEntry& e : pool) {
    if (e.gpu == nullptr || e.count < 1) return absl::InvalidArgumentError("pool entries need a GPU model and a count");
    if (e.price_micros_per_gpu_hour < 0) return absl::InvalidArgumentError("prices must not be negative");
  }
  if (config.kind == ArchitectureKind::kVisionEncoder &&
      (task.kind == TaskKind::kLora || task.kind == TaskKind::kQlora) && task.lora.targets.empty()) {
    return absl::InvalidArgumentError("LoRA needs target modules");
  }
  Planner planner(config, task, options);
  if (absl::Status s = planner.Init(); !s.ok()) return s;

  Plan plan;
  std::vector<PlanCandidate> all;
  for (const PoolEntry& e : pool) {
    if (!e.gpu->disclosed || e.gpu->memory_bytes == 0) {
      plan.rejected.push_back(fmt::format("{}: no datasheet figures in the catalog", e.gpu->id));
      continue;
    }
    std::vector<std::pair<int, Outcome>> outcomes;
    for (int n : CountsToTry(e.count, options.exact_gpus)) {
      outcomes.emplace_back(n, planner.Evaluate(e, n, plan.layouts_evaluated));
    }
    bool any = false;
    for (size_t i = 0; i < outcomes.size(); ++i) {
      auto& [n, out] = outcomes[i];
      if (!out.best) continue;
      any = true;
      PlanCandidate c = *out.best;
      if (i == 0) {
        c.next_smaller = n == 1 ? "already the smallest option (1 GPU)" : "no smaller count was tried";
      } else {
        const auto& [m, prev] = outcomes[i - 1];
        if (prev.best) {
          c.next_smaller = fmt::format("{} x {} also fits but takes {:.3g} s vs {:.3g} s ({})", m, e.gpu->id,
                                       prev.best->seconds, c.seconds, prev.best->Summary());
        } else if (!prev.invalid.empty()) {
          c.next_smaller = fmt::format("{} x {}: {}", m, e.gpu->id, prev.invalid);
        } else {
          c.next_smaller = fmt::format("{} x {}: needs {} per GPU > {} usable at best ({}: {})", m, e.gpu->id,
                                       GiB(prev.min_need), GiB(static_cast<double>(c.usable_bytes)),
                                       prev.min_need_layout, LargestTerms(prev.min_need_breakdown));
        }
      }
      all.push_back(std::move(c));
    }
    if (!any && !outcomes.empty()) {
      // Report the largest count that failed on memory (the most telling), else the last reason.
      size_t pick = outcomes.size() - 1;
      for (size_t i = outcomes.size(); i-- > 0;) {
        if (outcomes[i].second.min_need > 0) {
          pick = i;
          break;
        }
      }
      const auto& [n, last] = outcomes[pick];
      const double usable = static_cast<double>(e.gpu->memory_bytes) * (1 - options.safety_margin);
      plan.rejected.push_back(last.invalid.empty()
                                  ? fmt::format("{}: even {} GPUs need {} per GPU > {} usable ({}: {})", e.gpu->id, n,
                                                GiB(last.min_need), GiB(usable), last.min_need_layout,
                                                LargestTerms(last.min_need_breakdown))
                                  : fmt::format("{}: {}", e.gpu->id, last.invalid));
    }
  }
  std::sort(all.begin(), all.end(),
            [&](const PlanCandidate& a, const PlanCandidate& b) { return Better(a, b, options.objective); });
  if (static_cast<int>(all.size()) > options.top_k) all.resize(std::max(options.top_k, 0));
  for (PlanCandidate& c : all) plan.candidates.push_back(planner.Finish(std::move(c)));
  return plan;
}

ResourceRequest ToResourceRequest(const Plan& plan) {
  ResourceRequest r;
  for (const PlanCandidate& c : plan.candidates) {
    ResourceRequest::Alternative a;
    a.gpu_model = c.gpu->id;
    a.gpus = c.gpus;
    a.gpus_per_node = std::min(c.gpus, NvlinkDomainSize(*c.gpu));
    a.tp = c.layout.tp;
    a.pp = c.layout.pp;
    a.dp = c.layout.dp;
    a.memory_per_gpu_bytes = c.memory.Total();
    a.est_seconds = std::llround(c.seconds);
    a.est_cost_micros = c.cost_micros;
    r.alternatives.push_back(a);
  }
  return r;
}

std::vector<PoolEntry> DefaultPool(const hw::GpuCatalog& catalog) {
  // Illustrative on-demand prices (micro-USD per GPU-hour), in the range public clouds and GPU
  // marketplaces listed in 2024-2025; a site sets its own with --gpus NAME:COUNT@PRICE.
  const std::pair<const char*, int64_t> kDefaults[] = {
      {"A100-SXM-80GB", 1'800'000}, {"H100-SXM-80GB", 2'500'000}, {"H200-SXM-141GB", 3'500'000},
      {"L40S", 1'000'000},          {"MI300X", 2'500'000},        {"RTX-4090", 400'000},
  };
  std::vector<PoolEntry> pool;
  for (const auto& [name, price] : kDefaults) {
    if (const hw::GpuModel* m = catalog.Resolve(name)) pool.push_back(PoolEntry{m, 8, price});
  }
  return pool;
}

}  // namespace gpugeek::workload
