#pragma once
// FLOPs per token and the time of a training step or of serving, from catalog peaks.
//
// FLOPs (Kaplan et al. 2020 arXiv:2001.08361 Sec. 2.1; Narayanan et al. SC'21 arXiv:2104.04473
// Sec. 5.1): a forward pass costs 2 FLOPs per active matmul parameter per token plus the attention
// term 2·s·n_q·(d_qk + d_v) per layer per token (QKᵀ and AV over the full sequence s, as Megatron
// counts; sliding-window layers use the window), plus 2·V·h for the head (the input embedding
// lookup costs nothing). Training is 3x forward (6N); full recompute adds one more forward of the
// layers (Megatron's 96·B·s·L·h²·(1 + s/(6h) + V/(16·L·h)) for a GPT), selective recompute adds
// the attention term once more.
//
// Time: compute at catalog dense peak x a matmul efficiency that grows with the hidden size
// (small GEMMs run further from peak); TP all-reduces are not overlapped, as in Megatron's 2021
// schedule; a pipeline runs at the pace of its slowest stage (the most layers, or the last stage's
// layers plus the LM head: 2·V·h per token, 0.30 of a layer for SC'21's 76B) and adds (p−1)/v bubble
// slots of one micro-batch of that stage; without FlashAttention (RecipeFeatures::unfused_attention:
// Megatron-LM of 2021) each head's s x s scores also pass through HBM (kUnfusedAttention*Bytes per score at
// kHbmEfficiency of the catalog's bandwidth); the data-parallel gradient
// all-reduce (over DP x CP) overlaps the last micro-batch's backward (or follows it: the recipe feature
// serial-grad-reduce, Megatron-LM's 2021 local DDP); across nodes it runs over all the
// NICs of a node (each of the group's r ranks per node carries 1/r of the buffer).
//
// Tensor-parallel communication (Shoeybi et al. 2019, Megatron-LM, arXiv:1909.08053 Sec. 3 and
// Fig. 4): a transformer layer split over t GPUs needs two all-reduces of its activations in the
// forward pass (after the attention output projection and after the MLP down projection) and two
// in the backward pass; full recomputation repeats the forward two. Each all-reduce carries
// tokens x hidden x 2 bytes (16-bit activations). Its time is NCCL's ring model (NCCL
// src/graph/tuning.cc, `ncclTopoTuneModel`; nccl-tests doc/PERFORMANCE.md "bus bandwidth"):
//   T(bytes, t) = base + 2(t−1) x hop  +  2(t−1)/t x bytes / (link bandwidth x efficiency)
// with base = 6.6 µs and a per-step hop latency of 0.6 µs over NVLink / XGMI, 1.0 µs over PCIe and
// 2.7 µs over the network (NCCL's Ring / LL constants; an all-reduce is 2(t−1) ring steps). The
// latency term is what dominates serving: a decode step all-reduces only batch x hidden x 2 bytes
// per layer (Qwen2.5-7B at batch 1: 7 KiB, 56 times per token), so extra TP GPUs never make a
// decode step linearly faster.
// Link bandwidths: NVLink / XGMI from the catalog (per direction) inside an NVLink domain; GPUs
// without one fall back to PCIe (catalog `pcie_generation`); across domains the inter-node network
// per GPU (kDefaultInterNodeBytesPerSecond).

#include <cstdint>
#include <utility>

#include "hw/gpu_catalog.h"
#include "workload/model_config.h"
#include "workload/sharding.h"
#include "workload/training_memory.h"

namespace gpugeek::workload {

struct FlopsPerToken {
  double forward = 0;        // one forward pass
  double training = 0;       // forward + backward: 3 x forward ("model FLOPs", what MFU divides)
  double hardware = 0;       // training + recomputation ("hardware FLOPs", what Megatron reports)
  double head_training = 0;  // the LM head's share of `training` (and of `hardware`: never recomputed)
};

// Layers of the first and last pipeline stages when `pp` stages split `layers` unevenly: the middle
// stages hold ceil(layers/pp) each, the first and last the rest, first <= last. {0, 0} when the split
// leaves the first stage no layer; {layers/pp, layers/pp} when it is even.
std::pair<int64_t, int64_t> UnevenPipelineStages(int64_t layers, int pp);

// Share of a model's hardware FLOPs per token that its slowest pipeline stage runs: the middle stages'
// ceil(L/p) layers, or the last stage's layers plus the head (even splits: L/p layers each, the head on
// the last). 1 for pp = 1.
double SlowestStageShare(const FlopsPerToken& f, int64_t layers, int pp);
// FLOPs per token at sequence length `seq` (per sample: patches for ViT).
FlopsPerToken ComputeFlopsPerToken(const ModelConfig& config, int64_t seq, Recompute recompute);

// DGX A100 / H100: one 200 Gb/s (A100, HDR) InfiniBand NIC per GPU -> 25 GB/s per direction
// (NVIDIA DGX A100 User Guide; the Selene cluster of Narayanan et al. SC'21).
inline constexpr double kDefaultInterNodeBytesPerSecond = 25e9;
// Fraction of link bandwidth NCCL ring collectives reach (nccl-tests "busbw" is ~70-80 % of the
// NVLink line rate on DGX A100; the 0.7 is our conservative default).
inline constexpr double kDefaultCollectiveEfficiency = 0.7;
// Host DRAM bandwidth one GPU's CPU optimizer step gets under ZeRO-Offload: a two-socket server's
// ~200 GB/s shared by its 8 GPUs (an assumption; the catalog has no host figures).
inline constexpr double kDefaultHostMemoryBytesPerSecondPerGpu = 25e9;
// Bytes the CPU AdamW step moves per parameter: reads fp32 master, two moments and the gradient
// (4 x 4), writes master, moments (3 x 4) and the bf16 copy sent back (2): 30.
inline constexpr double kCpuAdamBytesPerParam = 30;
// Matmul efficiency: eff(h) = kMaxMatmulEfficiency x h / (h + kHalfEfficiencyHidden), h the model's
// hidden size: 0.70 x 2304/(2304+400) = 0.60 of peak at h = 2304, 0.69 at h = 25600. Fitted jointly on two
// published A100 tables from two software generations: Megatron-LM SC'21 Table 1 (unfused attention,
// priced by the term below) and MosaicML llm-foundry's MPT FSDP benchmarks (FlashAttention); flops_test.cc
// checks all ten SC'21 rows within 6 % and all eight MPT rows within 11 %.
inline constexpr double kMaxMatmulEfficiency = 0.70;
inline constexpr double kHalfEfficiencyHidden = 400;
// Unfused attention (RecipeFeatures::unfused_attention): HBM bytes per attention score element in
// the forward and the backward (derived in EstimateStepTime from the kernels Megatron-LM ran in 2021), and
// the fraction of the catalog's HBM bandwidth a streaming kernel reaches (an assumption: STREAM-like copies
// reach most of the line rate).
inline constexpr double kUnfusedAttentionForwardBytes = 13;
inline constexpr double kUnfusedAttentionBackwardBytes = 17;
inline constexpr double kHbmEfficiency = 0.9;

// NCCL's ring all-reduce latency model (src/graph/tuning.cc: baseLat Ring/LL 6.6 µs; hwLat Ring/LL
// 0.6 µs per step over NVLink, 1.0 µs over PCIe, 2.7 µs over the network).
inline constexpr double kAllReduceBaseLatencySeconds = 6.6e-6;
inline constexpr double kNvlinkHopLatencySeconds = 0.6e-6;
inline constexpr double kPcieHopLatencySeconds = 1.0e-6;
inline constexpr double kNetworkHopLatencySeconds = 2.7e-6;

struct TimeModel {
  double inter_node_bytes_per_second = kDefaultInterNodeBytesPerSecond;
  double collective_efficiency = kDefaultCollectiveEfficiency;
  double max_matmul_efficiency = kMaxMatmulEfficiency;
  double half_efficiency_hidden = kHalfEfficiencyHidden;
  double all_reduce_base_latency_s = kAllReduceBaseLatencySeconds;
  double nvlink_hop_latency_s = kNvlinkHopLatencySeconds;
  double pcie_hop_latency_s = kPcieHopLatencySeconds;
  double network_hop_latency_s = kNetworkHopLatencySeconds;
  double host_memory_bytes_per_second_per_gpu = kDefaultHostMemoryBytesPerSecondPerGpu;
};

// One ring all-reduce of `bytes` over `ranks` GPUs (NCCL's model above): 0 for one rank.
double RingAllReduceSeconds(double bytes, int ranks, double bytes_per_second, double base_latency_s = 0,
                            double hop_latency_s = 0);

// The link a TP group of `ranks` GPUs of `gpu` uses: bandwidth per direction x collective
// efficiency, and the per-step latency. Inside the NVLink / XGMI domain (ranks <= NvlinkDomainSize)
// the fast link, or PCIe for GPUs without one; beyond it the inter-node network.
struct CollectiveLink {
  double bytes_per_second = 0;
  double hop_latency_s = 0;
};
CollectiveLink TensorParallelLink(const hw::GpuModel& gpu, int ranks, const TimeModel& model = {});

// GPUs that share NVLink / XGMI all-to-all: SXM / OAM boards with NVLink or XGMI form 8-GPU
// domains (HGX / MI300X platforms); PCIe cards with an NVLink or XGMI bridge pair up; others 1.
int NvlinkDomainSize(const hw::GpuModel& gpu);
// Per-direction bandwidth of one GPU's fast link (catalog figures are bidirectional totals), or
// PCIe when it has none.
double IntraDomainBytesPerSecond(const hw::GpuModel& gpu);
// Dense peak in FLOP/s for bf16 (fp16 where bf16 is absent, fp32 last). 0 when undisclosed.
double PeakFlops(const hw::GpuModel& gpu);

struct StepTime {
  double compute_s = 0;    // matmul time of all micro-batches on one GPU
  double tp_comm_s = 0;    // exposed tensor-parallel all-reduces
  double pp_bubble_s = 0;  // pipeline fill and drain
  double pp_comm_s = 0;    // stage-to-stage activations
  double cp_comm_s = 0;    // exposed context-parallel K/V ring passes
  double dp_comm_s = 0;    // exposed gradient all-reduce
  // ZeRO-Offload: gradients to the host and updated bf16 weights back over PCIe, and the CPU AdamW step
  // (memory-bound, kCpuAdamBytesPerParam); with parameter offload also the weights fetched for every
  // micro-batch's forward and backward, prefetched behind compute. Not overlapped with the step.
  double offload_s = 0;
  double total_s = 0;
  double tokens = 0;               // per step (global batch x seq)
  double model_flops_per_gpu = 0;  // FLOP/s per GPU counting model FLOPs (for MFU)
  double hardware_flops_per_gpu = 0;
  double mfu = 0;  // model_flops_per_gpu / peak
};

// One optimizer step of `global_batch` sequences with `options` (layout, seq, micro_batch,
// recompute; options.micro_batches is recomputed as global_batch / (micro_batch x dp)).
// `shard` and `flops` may carry precomputed ShardForLayout(options.layout) and
// ComputeFlopsPerToken(seq, options.recompute) (the planner's fast path); null: computed here.
StepTime EstimateStepTime(const ModelConfig& config, const TrainingOptions& options, int64_t global_batch,
                          const hw::GpuModel& gpu, const TimeModel& model = {}, const GpuShard* shard = nullptr,
                          const FlopsPerToken* flops = nullptr);

// Decode throughput upper bound for serving: every step reads the weight shard and the KV of the
// batch from HBM, so tokens/s per replica ≈ batch / max(bytes / HBM bandwidth, FLOPs / peak).
// No communication: EstimateInferenceTime is the serving model with TP all-reduces.
double DecodeTokensPerSecond(const ModelConfig& config, uint64_t weight_bytes_per_gpu, double kv_bytes_per_gpu,
                             int64_t batch, int tp, const hw::GpuModel& gpu, const TimeModel& model = {});

// Forward FLOPs per token for serving: decode (one new token attending to the cache; the cache
// reads are bandwidth, not FLOPs) and prefill of a `prompt_tokens` prompt (attention over it).
struct InferenceFlops {
  double decode = 0;
  double prefill = 0;
};
InferenceFlops ComputeInferenceFlops(const ModelConfig& config, int64_t prompt_tokens);

// Serving time of one replica (TP x PP of `layout`; DP replicas are independent).
struct InferenceTime {
  // One decode step of `batch` sequences: per stage max(HBM bytes / bandwidth, FLOPs / (peak x
  // eff)) plus 2 all-reduces per layer of batch x hidden x 2 bytes; stages run one after another.
  double decode_memory_s = 0;   // weights + KV read, all stages
  double decode_compute_s = 0;  // all stages
  double decode_tp_comm_s = 0;  // exposed TP all-reduces, all stages
  double decode_step_s = 0;
  // Prefill of one `prompt_tokens` prompt (time to first token, queueing aside): compute (or the
  // weight read when that is longer) plus 2 all-reduces per layer of prompt x hidden x 2 bytes.
  double prefill_compute_s = 0;
  double prefill_tp_comm_s = 0;
  double prefill_s = 0;
  double tokens_per_second = 0;  // batch / decode_step_s
};
// `weight_bytes_per_gpu` / `kv_bytes_per_gpu`: one GPU's shard (one stage at TP). `flops` may carry
// ComputeInferenceFlops(config, prompt_tokens) (the planner's fast path); null: computed here.
InferenceTime EstimateInferenceTime(const ModelConfig& config, uint64_t weight_bytes_per_gpu, double kv_bytes_per_gpu,
                                    int64_t batch, int64_t prompt_tokens, const ParallelLayout& layout,
                                    const hw::GpuModel& gpu, const TimeModel& model = {},
                                    const InferenceFlops* flops = nullptr);

}  // namespace gpugeek::workload
