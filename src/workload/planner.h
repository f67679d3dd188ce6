#pragma once
// The workload planner: model + task + GPU pool -> ranked parallel plans that fit.
//
// For every GPU model in the pool and every GPU count up to what the pool holds, the planner
// enumerates tensor (TP), pipeline (PP, with interleaving for pre-training) and data (DP)
// parallel sizes, expert parallelism for MoE, the ZeRO stage, micro-batch size and recomputation;
// keeps those that pass the validity rules and fit in memory with a safety margin; estimates their
// speed (flops.h) and cost; and returns the best k by the objective, one per (GPU model, count),
// each with its memory breakdown and a line on why the next smaller count fails.
//
// Validity rules (anchors/planner.md §4.4): attention heads divisible by TP, KV heads divisible by TP
// or TP by KV heads (replicated); the vocabulary is padded to a multiple of TP (never a reason to
// refuse); for training, layers divisible by PP (and by PP x v when interleaved), or a power-of-two
// PP or one named in PlannerOptions::allowed_pp, split unevenly (UnevenPipelineStages); for serving any
// PP up to the layer count (vLLM splits layers unevenly); TP no larger than the GPU's
// NVLink / XGMI domain (flops.h NvlinkDomainSize); PP and context parallelism (CP) only once TP fills
// the domain (Narayanan et al. SC'21 takeaway 1); CP only for Megatron-LM training, with the sequence
// in 2 x CP equal chunks and at least kMinContextParallelTokens per rank; ZeRO-2/3 only without PP
// (DeepSpeed refuses the combination); EP divides DP and the expert count. GPUs = TP x CP x PP x DP.
//
// Serving layouts (PlannerOptions::serving_smallest_model_parallel, on by default): model
// parallelism is for fitting, data parallelism for throughput. A replica's TP x PP is the smallest
// with which one replica holds the whole requested load (every concurrent sequence at the full
// context, with the margin) — vLLM's guidance ("if your model fits in a single GPU, you probably
// don't need to use distributed inference"; TP when it does not) and Narayanan et al.'s takeaway 2
// (model-parallel size just large enough to fit; scale the rest with data parallelism). A count is
// then that many replicas (DP), which share the concurrent sequences; counts that are not a multiple
// of the replica size have no serving plan. Only when no replica holds the whole load are all
// layouts tried (the load then has to be split over replicas).
//
// The size rule of the "time" objective (PlannerOptions::min_speedup_per_doubling, 1.6 by default):
// time alone always asks for more GPUs, since almost every extra GPU saves a little. For each GPU
// model, the planner walks its fitting counts from the smallest up and moves from the current
// choice n to a larger count m only when m is faster by at least s^log2(m/n) (1.6x for twice the
// GPUs, 2.56x for four times, 1.27x for 1.5x): each doubling must keep >= 80 % parallel efficiency,
// i.e. GPU-hours grow at most 25 % per doubling (the usual strong-scaling cut-off). The chosen size
// of every GPU model is listed first, fastest first; then the other sizes, fastest first, each with
// a note (PlanCandidate::size_note) saying how much faster it is and what the rule asks. The walk is
// deterministic (ascending counts, no ties). "cost" and "gpus" rank as before: they weigh GPUs
// already.
//
// Thread-safety: Plan() is a pure function of its inputs.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "api/job_spec.h"
#include "hw/gpu_catalog.h"
#include "workload/dtype.h"
#include "workload/flops.h"
#include "workload/lora.h"
#include "workload/memory_breakdown.h"
#include "workload/model_config.h"
#include "workload/sharding.h"
#include "workload/training_memory.h"

namespace gpugeek::workload {

// The task kinds of the job spec (api/job_spec.h): inference, lora, qlora, full, pretrain.
using TaskKind = api::TaskKind;
using api::TaskKindName;
absl::StatusOr<TaskKind> ParseTaskKind(std::string_view name);  // "inference", "lora", ...

struct Task {
  TaskKind kind = TaskKind::kLora;
  int64_t seq = 4096;  // tokens per sequence (context length for inference)
  // Training: global batch in sequences per optimizer step. Inference: concurrent sequences.
  int64_t batch = 1;
  double tokens = 0;  // token budget (trained or generated); 0: report one step's time
  LoraConfig lora{16, {"all-linear"}};
  Recipe recipe;  // training: framework, precision, optimizer, forced recompute (training_memory.h)
  // Weights when serving; unset: the checkpoint's own format (quantization_config, else torch_dtype,
  // dtype.h CheckpointScheme), e.g. DeepSeek-V3's fp8 blocks or gpt-oss's MXFP4 experts; a float32
  // checkpoint is served in bf16, as vLLM's `--dtype auto` and the printed `vllm serve` line do.
  std::optional<DType> inference_dtype;
  DType kv_dtype = DType::kBf16;
};

struct PoolEntry {
  const hw::GpuModel* gpu = nullptr;  // borrowed from a catalog that outlives the plan
  int count = 0;
  int64_t price_micros_per_gpu_hour = 0;  // integer micro-units of a currency
};

enum class Objective { kTime, kCost, kGpus };
// The "time" objective's size rule (see above): a larger GPU count of the same model must cut the
// time by this factor per doubling of GPUs (80 % parallel efficiency).
inline constexpr double kMinSpeedupPerDoubling = 1.6;
absl::StatusOr<Objective> ParseObjective(std::string_view name);  // "time", "cost", "gpus"

// Runners-up kept per (GPU model, count): PlanCandidate::other_layouts.
inline constexpr size_t kOtherLayouts = 3;

// Context parallelism is searched only while each rank keeps at least this many tokens of a sequence:
// below it the K/V ring traffic outgrows the attention compute it hides behind (our choice; Llama 3
// ran CP16 at 131,072 tokens, 8,192 per rank, Llama 3 paper arXiv:2407.21783 Table 4). A size named in
// PlannerOptions::allowed_cp is tried whatever the tokens per rank.
inline constexpr int64_t kMinContextParallelTokens = 8192;

struct PlannerOptions {
  Objective objective = Objective::kTime;
  int top_k = 5;
  // Fraction of GPU memory kept free for fragmentation and what the model leaves out
  // (allocator caching, NCCL buffers, framework workspaces).
  double safety_margin = 0.10;
  std::optional<int> exact_gpus;  // only plans with exactly this many GPUs
  std::vector<Recompute> recompute_modes = {Recompute::kNone, Recompute::kFull};
  std::vector<int64_t> micro_batches = {1, 2, 4, 8};
  // Restrictions (empty: any valid size): the ZeRO stages the training framework offers, and
  // fixed TP / PP sizes (to price a given layout, or to mirror software without ZeRO).
  std::vector<int> zero_stages = {0, 1, 2, 3};
  std::vector<int> allowed_tp;
  std::vector<int> allowed_pp;
  std::vector<int> allowed_cp;  // context-parallel sizes; empty: 1, and more for long sequences (below)
  TimeModel time_model;
  // "time": the speedup per doubling of GPUs a larger count must deliver to be preferred; 1 (or
  // less) turns the rule off (plain fastest first).
  double min_speedup_per_doubling = kMinSpeedupPerDoubling;
  // Serving: replicas of the smallest TP x PP that holds the whole load (see above); false: any TP x
  // PP x DP, the best by the objective per count.
  bool serving_smallest_model_parallel = true;
};

struct PlanCandidate {
  const hw::GpuModel* gpu = nullptr;
  int gpus = 0;
  ParallelLayout layout;
  int zero_stage = 0;
  int64_t micro_batch = 1;
  Recompute recompute = Recompute::kNone;
  Offload offload = Offload::kNone;
  MemoryBreakdown memory;     // per GPU, with formulas
  uint64_t usable_bytes = 0;  // GPU memory x (1 − safety margin)
  double cpu_offload_bytes = 0;
  double step_seconds = 0;     // one optimizer step (training) or one decode step (inference)
  double prefill_seconds = 0;  // inference: one full-context prompt on one replica (TTFT bound)
  double tp_comm_seconds = 0;  // the TP all-reduces inside step_seconds
  double tokens_per_second = 0;
  double mfu = 0;            // training only
  double seconds = 0;        // for the token budget (or one step when the budget is 0)
  int64_t cost_micros = 0;   // gpus x price x seconds / 3600, rounded
  std::string next_smaller;  // why the next smaller GPU count of this model does not do better
  // The best plan of each other TP x CP x PP at this GPU model and count, best first (at most
  // kOtherLayouts): how close the runners-up are, e.g. a published layout the search ranked second.
  struct OtherLayout {
    std::string summary;  // PlanCandidate::Summary()
    double seconds = 0;   // as `seconds`
    double slower = 0;    // seconds / the chosen plan's seconds - 1 (time objective; 0 when unknown)
  };
  std::vector<OtherLayout> other_layouts;
  // "time": whether this is its GPU model's chosen size under the size rule, and why (or why not).
  bool preferred_size = true;
  std::string size_note;

  std::string Summary() const;  // e.g. "4 x A100-SXM-80GB TP4 PP1 DP1 ZeRO-0 mb1 recompute=full"
};

struct Plan {
  std::vector<PlanCandidate> candidates;  // best first
  // One line per GPU model in the pool that yields no plan, saying why (smallest need vs capacity).
  std::vector<std::string> rejected;
  int64_t layouts_evaluated = 0;
};

// Plans `task` for `config` over `pool`. InvalidArgument for an empty pool, a non-positive count,
// seq or batch, a seq longer than a learned position table (GPT-2, OPT), an unknown LoRA target, or a
// task the architecture cannot do (inference on a vision encoder is allowed; LoRA on a model without
// projections is not). A pool where nothing fits is not an error: `candidates` is empty and `rejected`
// says why.
absl::StatusOr<Plan> MakePlan(const ModelConfig& config, const Task& task, const std::vector<PoolEntry>& pool,
                              const PlannerOptions& options = {});

// The plan as the scheduler consumes it: a gang resource request with alternatives, best first.
struct ResourceRequest {
  struct Alternative {
    std::string gpu_model;  // catalog id
    int gpus = 0;
    int gpus_per_node = 0;  // the NVLink domain the plan assumes (TP stays inside it)
    int tp = 1, pp = 1, dp = 1;
    int cp = 1;                         // context-parallel ranks (gpus = tp x cp x pp x dp)
    int zero_stage = 0;                 // ZeRO / FSDP sharding stage 0..3
    int64_t micro_batch = 1;            // sequences per GPU per forward pass
    uint64_t memory_per_gpu_bytes = 0;  // the plan's peak, margin excluded
    int64_t est_seconds = 0;
    int64_t est_cost_micros = 0;
  };
  std::vector<Alternative> alternatives;
};
ResourceRequest ToResourceRequest(const Plan& plan);

// A default pool when the user gives none: common data-center and workstation GPUs, eight each,
// with illustrative on-demand prices (micro-USD per GPU-hour; override them with --gpus).
std::vector<PoolEntry> DefaultPool(const hw::GpuCatalog& catalog);

}  // namespace gpugeek::workload
