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
  // The best candidate of every TP x CP x PP (memory breakdown dropped), for the runners-up.
  std::map<std::tuple<int, int, int>, PlanCandidate> by_layout;
  double min_need = 0;
  MemoryBreakdown min_need_breakdown;
  std::string min_need_layout;
  std::string invalid;  // set when no layout passed the validity rules
};

// How much faster `b` is than `a` (a / b); 1 when either time is unknown (0).
double Speedup(double a_seconds, double b_seconds) {
  if (a_seconds <= 0 || b_seconds <= 0) return 1.0;
  return a_seconds / b_seconds;
}

// The speedup the time objective's size rule asks of `gpu_ratio` times the GPUs.
double RequiredSpeedup(double gpu_ratio, double per_doubling) { return std::pow(per_doubling, std::log2(gpu_ratio)); }

// The time objective's size rule (planner.h) over one GPU model's best plans, ascending in GPU
// count: marks the chosen size and writes every candidate's size_note.
void ApplySizeRule(std::vector<PlanCandidate>& fit, double per_doubling) {
  if (fit.empty()) return;
  size_t pick = 0;
  for (size_t j = 1; j < fit.size(); ++j) {
    const double ratio = static_cast<double>(fit[j].gpus) / fit[pick].gpus;
    if (Speedup(fit[pick].seconds, fit[j].seconds) >= RequiredSpeedup(ratio, per_doubling)) pick = j;
  }
  const PlanCandidate& p = fit[pick];
  const std::string rule = fmt::format(">= {:.2f}x per doubling of GPUs", per_doubling);
  for (size_t j = 0; j < fit.size(); ++j) {
    PlanCandidate& c = fit[j];
    c.preferred_size = j == pick;
    if (j == pick) continue;
    const PlanCandidate& small = j < pick ? c : p;
    const PlanCandidate& large = j < pick ? p : c;
    const double ratio = static_cast<double>(large.gpus) / small.gpus;
    const double speedup = Speedup(small.seconds, large.seconds);
    const double need = RequiredSpeedup(ratio, per_doubling);
    c.size_note = j < pick
                      ? fmt::format("not chosen: {} x {} is {:.2f}x faster with {:.3g}x the GPUs ({:.2f}x asked, {})",
                                    large.gpus, large.gpu->id, speedup, ratio, need, rule)
                      : fmt::format(
                            "not chosen: {:.2f}x faster than {} x {} with {:.3g}x the GPUs; the time "
                            "objective asks {:.2f}x ({})",
                            speedup, small.gpus, small.gpu->id, ratio, need, rule);
  }
  // The chosen size: why not the fastest larger count.
  size_t fastest = pick;
  for (size_t j = pick + 1; j < fit.size(); ++j) {
    if (fastest == pick || fit[j].seconds < fit[fastest].seconds) fastest = j;
  }
  PlanCandidate& chosen = fit[pick];
  if (fastest != pick) {
    const PlanCandidate& f = fit[fastest];
    const double ratio = static_cast<double>(f.gpus) / chosen.gpus;
    chosen.size_note = fmt::format(
        "chosen size for {}: {} would be {:.2f}x faster with {:.3g}x the GPUs; the time objective takes "
        "more GPUs only for {:.2f}x there ({})",
        chosen.gpu->id, f.Summary(), Speedup(chosen.seconds, f.seconds), ratio, RequiredSpeedup(ratio, per_doubling),
        rule);
  } else if (pick > 0) {
    chosen.size_note = fmt::format(
        "chosen size for {}: the largest count that fits, and every step up to it paid off ({})", chosen.gpu->id, rule);
  } else {
    chosen.size_note = fmt::format("chosen size for {}: the only count with a plan", chosen.gpu->id);
  }
}

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
      : c_(config), task_(task), opt_(options), inventory_(ParamInventory(config)) {
    if (task_.recipe.recompute) {
      recompute_modes_ = {*task_.recipe.recompute};
    } else {
      recompute_modes_ = opt_.recompute_modes;
    }
  }

  absl::Status Init() {
    if (task_.kind == TaskKind::kLora || task_.kind == TaskKind::kQlora) {
      auto l = CountLoraParams(c_, task_.lora);
      if (!l.ok()) return l.status();
      lora_ = *l;
    }
    if (task_.kind == TaskKind::kInference) {
      inference_flops_ = ComputeInferenceFlops(c_, task_.seq);
    } else {
      for (Recompute r : recompute_modes_) flops_[r] = ComputeFlopsPerToken(c_, task_.seq, r);
    }
    return absl::OkStatus();
  }

  // Serving: the smallest TP x PP (dividing one of `counts`) with which one replica holds the whole
  // load; 0 when none does.
  int ServingReplicaSize(const PoolEntry& e, const std::vector<int>& counts, int64_t& evaluated) const;
  // `replica` > 0: serving layouts are replicas of that TP x PP (counts below it try TP x PP = n).
  Outcome Evaluate(const PoolEntry& e, int n, int replica, int64_t& evaluated);
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
  TrainingOptions TrainingFor(const ParallelLayout& l, int zero, int64_t mb, Recompute r,
                              Offload off = Offload::kNone) const {
    TrainingOptions o;
    o.layout = l;
    o.mode = task_.kind == TaskKind::kLora    ? FineTune::kLora
             : task_.kind == TaskKind::kQlora ? FineTune::kQlora
                                              : FineTune::kFull;
    o.lora = task_.lora;
    o.fp32_grads = task_.kind == TaskKind::kPretrain &&  // Megatron-style main grads for pre-training
                   (task_.recipe.framework == Framework::kAuto || task_.recipe.framework == Framework::kMegatron);
    o.framework = task_.recipe.framework;
    o.precision = task_.recipe.precision;
    o.optimizer = task_.recipe.optimizer;
    o.offload_optimizer = off != Offload::kNone;
    o.offload_params = off == Offload::kOptimizerAndParams;
    o.zero_stage = zero;
    o.seq = task_.seq;
    o.micro_batch = mb;
    o.micro_batches = std::max<int64_t>(1, task_.batch / (mb * l.dp));
    o.recompute = r;
    o.dropout_masks = false;  // LLM fine-tuning and pre-training recipes run without dropout
    o.features = task_.recipe.features;
    return o;
  }
  InferenceOptions InferenceFor(const ParallelLayout& l) const {
    InferenceOptions o;
    if (task_.inference_dtype) {
      o.weights = o.expert_weights = ServingScheme(*task_.inference_dtype);
    } else {
      QuantScheme checkpoint = CheckpointScheme(c_.torch_dtype, c_.quant_method, c_.quant_block_size);
      // vLLM's `--dtype auto` serves a float32 checkpoint in 16-bit (the launch line says bfloat16).
      if (checkpoint.dtype == DType::kFp32) checkpoint = QuantScheme{DType::kBf16};
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
    const auto key = std::make_tuple(cand.layout.tp, cand.layout.cp, cand.layout.pp);
    auto it = out.by_layout.find(key);
    if (it == out.by_layout.end() || Better(cand, it->second, opt_.objective)) {
      MemoryBreakdown memory = std::move(cand.memory);  // not copied: runners-up need no breakdown
      out.by_layout.insert_or_assign(key, cand);
      cand.memory = std::move(memory);
    }
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

  // Valid TP sizes on `gpu`: powers of two within the NVLink domain that split the heads.
  std::vector<int> TpSizes(const hw::GpuModel& gpu) const {
    std::vector<int> tps;
    for (int tp : PowersOfTwoUpTo(NvlinkDomainSize(gpu))) {
      if (c_.num_heads % tp != 0) continue;
      if (!c_.use_mla && c_.num_kv_heads % tp != 0 && tp % c_.num_kv_heads != 0) continue;
      tps.push_back(tp);
    }
    if (tps.empty()) tps.push_back(1);
    return tps;
  }
  // DeepSpeed's config has no pipeline (its pipeline engine needs model changes); Hugging Face on DDP
  // has neither tensor nor pipeline parallelism.
  static bool FrameworkRuns(Framework f, int tp, int pp) {
    if (f == Framework::kHuggingFace) return tp == 1 && pp == 1;
    return f != Framework::kDeepSpeed || pp == 1;
  }
  // The offload choices at a ZeRO stage: the recipe's, or (unset) every one DeepSpeed runs there:
  // ZeRO-Offload from stage 1, parameters too (ZeRO-Infinity) at stage 3.
  std::vector<Offload> OffloadsFor(int zero) const {
    const bool deepspeed =
        task_.recipe.framework == Framework::kAuto || task_.recipe.framework == Framework::kDeepSpeed;
    if (task_.recipe.offload) {
      const Offload o = *task_.recipe.offload;
      const bool runs = o == Offload::kNone || (deepspeed && zero >= (o == Offload::kOptimizerAndParams ? 3 : 1));
      return runs ? std::vector<Offload>{o} : std::vector<Offload>{};
    }
    std::vector<Offload> v = {Offload::kNone};
    if (deepspeed && zero >= 1) v.push_back(Offload::kOptimizer);
    if (deepspeed && zero >= 3) v.push_back(Offload::kOptimizerAndParams);
    return v;
  }
  // Context-parallel sizes for `rest` GPUs beside a TP group: 1, and for long-sequence training with a
  // framework that has it (Megatron-LM), once TP fills the NVLink domain, every power of two that
  // divides `rest`, splits the sequence into 2 x cp equal chunks (Megatron's causal load balance) and
  // leaves each rank at least kMinContextParallelTokens tokens; or exactly the sizes the caller named.
  std::vector<int> ContextParallelSizes(int rest, bool tp_fills_domain) const {
    std::vector<int> cps = {1};
    const bool megatron = task_.recipe.framework == Framework::kAuto || task_.recipe.framework == Framework::kMegatron;
    if (task_.kind == TaskKind::kInference || c_.kind != ArchitectureKind::kDecoder || !megatron) {
      return Allowed(opt_.allowed_cp, 1) ? cps : std::vector<int>{};
    }
    for (int cp : PowersOfTwoUpTo(rest)) {
      if (cp == 1 || rest % cp != 0 || task_.seq % (2 * cp) != 0) continue;
      const bool named = !opt_.allowed_cp.empty() && Allowed(opt_.allowed_cp, cp);
      if (named || (opt_.allowed_cp.empty() && tp_fills_domain && task_.seq / cp >= kMinContextParallelTokens)) {
        cps.push_back(cp);
      }
    }
    if (!Allowed(opt_.allowed_cp, 1)) cps.erase(cps.begin());
    return cps;
  }
  static bool Allowed(const std::vector<int>& list, int v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  }

  const ModelConfig& c_;
  const Task& task_;
  const PlannerOptions& opt_;
  const std::vector<ParamGroup> inventory_;
  std::optional<LoraParams> lora_;
  std::vector<Recompute> recompute_modes_;  // the recipe's, else the options'
  std::map<Recompute, FlopsPerToken> flops_;
  InferenceFlops inference_flops_;
  std::map<std::tuple<int, int, int>, GpuShard> shards_;
};

int Planner::ServingReplicaSize(const PoolEntry& e, const std::vector<int>& counts, int64_t& evaluated) const {
  if (counts.empty()) return 0;
  const hw::GpuModel& gpu = *e.gpu;
  const double usable = static_cast<double>(gpu.memory_bytes) * (1 - opt_.safety_margin);
  const int max_n = *std::max_element(counts.begin(), counts.end());
  const int64_t max_pp = c_.kind == ArchitectureKind::kDecoder ? c_.TotalLayers() : 1;
  const std::vector<int> tps = TpSizes(gpu);
  std::vector<std::pair<int, int>> sizes;  // (tp, pp)
  for (int tp : tps) {
    if (!Allowed(opt_.allowed_tp, tp)) continue;
    for (int pp = 1; pp <= max_pp && static_cast<int64_t>(tp) * pp <= max_n; ++pp) {
      if (pp > 1 && tp != tps.back()) continue;  // PP only once TP fills the domain
      if (!Allowed(opt_.allowed_pp, pp)) continue;
      const int mp = tp * pp;
      if (std::none_of(counts.begin(), counts.end(), [mp](int n) { return n % mp == 0; })) continue;
      sizes.emplace_back(tp, pp);
    }
  }
  std::stable_sort(sizes.begin(), sizes.end(),
                   [](const auto& a, const auto& b) { return a.first * a.second < b.first * b.second; });
  for (const auto& [tp, pp] : sizes) {
    const MemoryBreakdown m = InferenceMemory(c_, InferenceFor(ParallelLayout{tp, pp, 1, 1, 1, false}));
    ++evaluated;
    if (static_cast<double>(m.Total()) <= usable) return tp * pp;
  }
  return 0;
}

Outcome Planner::Evaluate(const PoolEntry& e, int n, int replica, int64_t& evaluated) {
  Outcome out;
  const hw::GpuModel& gpu = *e.gpu;
  const int domain = NvlinkDomainSize(gpu);
  const double usable = static_cast<double>(gpu.memory_bytes) * (1 - opt_.safety_margin);
  const bool layered = c_.kind == ArchitectureKind::kDecoder;
  const int64_t layers = c_.TotalLayers();
  if (replica > 0 && n > replica && n % replica != 0) {
    out.invalid =
        fmt::format("not a multiple of the serving replica size {} (the smallest TP x PP that holds {} x {} tokens)",
                    replica, task_.batch, task_.seq);
    return out;
  }

  const std::vector<int> tps = TpSizes(gpu);
  std::vector<int> pps = {1};
  if (layered && task_.kind == TaskKind::kInference) {
    pps.clear();
    for (int pp = 1; pp <= layers && pp <= n; ++pp) pps.push_back(pp);
  } else if (layered) {
    pps = DivisorsOf(layers);
    // Powers of two and any pipeline size the caller names may split the layers unevenly: the middle
    // stages hold ceil(L/p) layers, the first and last share the rest (Megatron-LM --decoder-first/last-
    // pipeline-num-layers; Llama 3 405B's PP16 over 126 layers, Llama 3 paper Sec. 3.3.2). Memory is
    // priced at ceil(L/p) layers per stage.
    std::vector<int> uneven = opt_.allowed_pp;
    for (int pp : PowersOfTwoUpTo(layers)) uneven.push_back(pp);
    for (int pp : uneven) {
      if (pp > 1 && pp <= layers && std::find(pps.begin(), pps.end(), pp) == pps.end() &&
          UnevenPipelineStages(layers, pp).first > 0) {
        pps.push_back(pp);
      }
    }
    std::sort(pps.begin(), pps.end());
  }
  bool any_valid = false;
  for (int tp : tps) {
    if (n % tp != 0 || !Allowed(opt_.allowed_tp, tp)) continue;
    for (int cp : ContextParallelSizes(n / tp, tp == tps.back())) {
      for (int pp : pps) {
        if ((n / (tp * cp)) % pp != 0 || !Allowed(opt_.allowed_pp, pp)) continue;
        if (pp > 1 && tp != tps.back()) continue;  // PP only once TP fills the domain
        if (task_.kind != TaskKind::kInference && !FrameworkRuns(task_.recipe.framework, tp, pp)) continue;
        // Serving replicas: TP x PP is the replica size (below it, one replica of all n GPUs, which
        // cannot hold the load but says by how much).
        if (replica > 0 && tp * pp != std::min(n, replica)) continue;
        const int dp = n / (tp * cp * pp);
        any_valid = true;
        // Serving: a replica without a sequence to serve is no plan.
        if (task_.kind == TaskKind::kInference && dp > task_.batch) continue;
        std::vector<int> eps = {1};
        if (c_.IsMoe() && task_.kind != TaskKind::kInference) {
          for (int ep : PowersOfTwoUpTo(dp)) {
            if (ep > 1 && dp % ep == 0 && c_.moe.num_experts % ep == 0) eps.push_back(ep);
          }
        }
        std::vector<int> vs = {1};
        // Interleaving (v = 2 chunks per stage): an even split into 2 x PP chunks, or an uneven split whose
        // first and last stages keep at least 2 layers (Megatron-Core --num-virtual-stages-per-pipeline-rank;
        // Llama 3 interleaved its uneven PP16, paper Sec. 3.3.2).
        if (task_.kind == TaskKind::kPretrain && pp > 1 &&
            (layers % (2 * pp) == 0 || (layers % pp != 0 && UnevenPipelineStages(layers, pp).first >= 2))) {
          vs.push_back(2);
        }
        for (int ep : eps) {
          const GpuShard& shard = Shard(tp, pp, ep);
          for (int v : vs) {
            ParallelLayout l{tp, pp, dp, ep, v, tp > 1 && task_.recipe.sequence_parallel};
            l.cp = cp;
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
              const InferenceTime it =
                  EstimateInferenceTime(c_, cand.memory.Bytes("weights"), kv, io.concurrent_sequences, task_.seq, l,
                                        gpu, opt_.time_model, &inference_flops_);
              cand.step_seconds = it.decode_step_s;
              cand.prefill_seconds = it.prefill_s;
              cand.tp_comm_seconds = it.decode_tp_comm_s;
              // Every sequence advances one token per step of its replica (the fullest replica's step
              // for all: replicas with one sequence fewer are a little faster).
              cand.tokens_per_second = it.decode_step_s > 0 ? static_cast<double>(task_.batch) / it.decode_step_s : 0;
              cand.seconds = task_.tokens > 0 && cand.tokens_per_second > 0 ? task_.tokens / cand.tokens_per_second
                                                                            : cand.step_seconds;
              Consider(e, n, std::move(cand), out);
              continue;
            }
            std::vector<int> zeros = {0};
            if (l.ReplicaRanks() > 1) {
              if (task_.kind == TaskKind::kLora || task_.kind == TaskKind::kQlora) {
                if (pp == 1) zeros.push_back(3);
              } else {
                zeros.push_back(1);
                if (pp == 1) zeros.insert(zeros.end(), {2, 3});
              }
            } else if (pp == 1 && task_.kind != TaskKind::kLora && task_.kind != TaskKind::kQlora &&
                       task_.recipe.offload != Offload::kNone) {
              zeros.insert(zeros.end(), {2, 3});  // ZeRO-Offload on one GPU (ZeRO-Offload paper: 13B on one V100)
            }
            for (int zero : zeros) {
              if (!Allowed(opt_.zero_stages, zero) || zero > RecipeMaxZeroStage(task_.recipe)) continue;
              for (int64_t mb : opt_.micro_batches) {
                if (mb * dp > task_.batch || task_.batch % (mb * dp) != 0) continue;
                for (Recompute r : recompute_modes_) {
                  for (Offload off : OffloadsFor(zero)) {
                    const TrainingOptions o = TrainingFor(l, zero, mb, r, off);
                    MemoryContext ctx{&inventory_, &shard, lora_ ? &*lora_ : nullptr, false};
                    auto mem = EstimateTrainingMemory(c_, o, ctx);
                    ++evaluated;
                    if (!mem.ok()) continue;
                    if (static_cast<double>(mem->gpu.Total()) > usable) {
                      Miss(mem->gpu,
                           fmt::format("TP{}{} PP{} DP{} ZeRO-{} mb{} recompute={}{}", tp,
                                       cp > 1 ? fmt::format(" CP{}", cp) : std::string(), pp, dp, zero, mb,
                                       RecomputeName(r),
                                       off == Offload::kNone ? "" : " offload=" + std::string(OffloadName(off))),
                           out);
                      continue;
                    }
                    const StepTime t =
                        EstimateStepTime(c_, o, task_.batch, gpu, opt_.time_model, &shard, &flops_.at(r));
                    PlanCandidate cand;
                    cand.gpu = &gpu;
                    cand.gpus = n;
                    cand.layout = l;
                    cand.zero_stage = zero;
                    cand.micro_batch = mb;
                    cand.recompute = r;
                    cand.offload = off;
                    cand.memory = std::move(mem->gpu);
                    cand.cpu_offload_bytes = mem->cpu_offload_bytes;
                    cand.usable_bytes = static_cast<uint64_t>(usable);
                    cand.step_seconds = t.total_s;
                    cand.tp_comm_seconds = t.tp_comm_s;
                    cand.tokens_per_second = t.total_s > 0 ? t.tokens / t.total_s : 0;
                    cand.mfu = t.mfu;
                    cand.seconds = task_.tokens > 0 && cand.tokens_per_second > 0
                                       ? task_.tokens / cand.tokens_per_second
                                       : t.total_s;
                    Consider(e, n, std::move(cand), out);
                  }
                }
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
  }
  if (out.best) {
    std::vector<const PlanCandidate*> others;
    for (const auto& [key, c] : out.by_layout) {
      if (key != std::make_tuple(out.best->layout.tp, out.best->layout.cp, out.best->layout.pp)) others.push_back(&c);
    }
    std::sort(others.begin(), others.end(),
              [this](const PlanCandidate* a, const PlanCandidate* b) { return Better(*a, *b, opt_.objective); });
    for (size_t i = 0; i < others.size() && i < kOtherLayouts; ++i) {
      const double slower = out.best->seconds > 0 ? others[i]->seconds / out.best->seconds - 1 : 0;
      out.best->other_layouts.push_back({others[i]->Summary(), others[i]->seconds, slower});
    }
  }
  if (any_valid && !out.best && out.min_need == 0) {
    out.invalid = task_.kind == TaskKind::kInference
                      ? fmt::format("{} concurrent sequences leave replicas idle on {} GPUs", task_.batch, n)
                      : fmt::format("global batch {} does not split into micro-batches over {} data-parallel ranks",
                                    task_.batch, n);
  }
  return out;
}

PlanCandidate Planner::Finish(PlanCandidate c) const {
  if (task_.kind == TaskKind::kInference) return c;  // InferenceMemory always writes formulas
  const TrainingOptions o = TrainingFor(c.layout, c.zero_stage, c.micro_batch, c.recompute, c.offload);
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
  std::string s = fmt::format("{} x {} TP{}{} PP{} DP{}", gpus, gpu != nullptr ? gpu->id : "?", layout.tp,
                              layout.cp > 1 ? fmt::format(" CP{}", layout.cp) : std::string(), layout.pp, layout.dp);
  if (layout.ep > 1) s += fmt::format(" EP{}", layout.ep);
  if (layout.virtual_stages > 1) s += fmt::format(" v{}", layout.virtual_stages);
  if (zero_stage > 0) s += fmt::format(" ZeRO-{}", zero_stage);
  if (recompute != Recompute::kNone) s += fmt::format(" recompute={}", RecomputeName(recompute));
  if (offload != Offload::kNone) s += fmt::format(" offload={}", OffloadName(offload));
  return s;
}

absl::StatusOr<Plan> MakePlan(const ModelConfig& config, const Task& task, const std::vector<PoolEntry>& pool,
                              const PlannerOptions& options) {
  if (pool.empty()) return absl::InvalidArgumentError("the GPU pool is empty");
  if (task.seq < 1 || task.batch < 1) return absl::InvalidArgumentError("seq and batch must be at least 1");
  // A learned position table (GPT-2, OPT) has no row past its last position: a longer sequence cannot
  // run at all. Rotary models (Llama, ...) may be stretched with RoPE scaling, so they are planned as asked.
  if (config.learned_positions > 0 && config.max_position_embeddings > 0 && task.seq > config.max_position_embeddings) {
    return absl::InvalidArgumentError(fmt::format(
        "seq {} is longer than the {} positions model_type '{}' learned (max_position_embeddings / n_positions); "
        "use a sequence of at most {} tokens",
        task.seq, config.max_position_embeddings, config.model_type, config.max_position_embeddings));
  }
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
    const std::vector<int> counts = CountsToTry(e.count, options.exact_gpus);
    const int replica = task.kind == TaskKind::kInference && options.serving_smallest_model_parallel
                            ? planner.ServingReplicaSize(e, counts, plan.layouts_evaluated)
                            : 0;
    std::vector<std::pair<int, Outcome>> outcomes;
    for (int n : counts) outcomes.emplace_back(n, planner.Evaluate(e, n, replica, plan.layouts_evaluated));
    bool any = false;
    std::vector<PlanCandidate> fitting;  // ascending GPU count
    for (size_t i = 0; i < outcomes.size(); ++i) {
      auto& [n, out] = outcomes[i];
      if (!out.best) continue;
      any = true;
      PlanCandidate c = *out.best;
      // The next smaller count with a plan or a memory need; else the next smaller one, whatever it says.
      size_t k = i;
      while (k > 0 && !outcomes[k - 1].second.best && outcomes[k - 1].second.min_need == 0) --k;
      if (k == 0) k = i;
      if (k == 0) {
        c.next_smaller = n == 1 ? "already the smallest option (1 GPU)" : "no smaller count was tried";
      } else {
        const auto& [m, prev] = outcomes[k - 1];
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
      fitting.push_back(std::move(c));
    }
    if (options.objective == Objective::kTime && options.min_speedup_per_doubling > 1) {
      ApplySizeRule(fitting, options.min_speedup_per_doubling);
    }
    for (PlanCandidate& c : fitting) all.push_back(std::move(c));
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
  // Chosen sizes first (all candidates are "chosen" unless the time objective's size rule ran).
  std::sort(all.begin(), all.end(), [&](const PlanCandidate& a, const PlanCandidate& b) {
    if (a.preferred_size != b.preferred_size) return a.preferred_size;
    return Better(a, b, options.objective);
  });
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
    a.cp = c.layout.cp;
    a.dp = c.layout.dp;
    a.zero_stage = c.zero_stage;
    a.micro_batch = c.micro_batch;
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
