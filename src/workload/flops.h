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
// (small GEMMs run further from peak); TP all-reduces (ring: 2(t−1)/t x bytes / bandwidth) are
// not overlapped, as in Megatron's 2021 schedule; the pipeline adds (p−1)/v bubble slots of one
// micro-batch; the data-parallel gradient all-reduce overlaps the last micro-batch's backward.
// Link bandwidths: NVLink / XGMI from the catalog inside an NVLink domain, else the inter-node
// network per GPU (kDefaultInterNodeBytesPerSecond).

#include <cstdint>

#include "hw/gpu_catalog.h"
#include "workload/model_config.h"
#include "workload/sharding.h"
#include "workload/training_memory.h"

namespace gpugeek::workload {

struct FlopsPerToken {
  double forward = 0;   // one forward pass
  double training = 0;  // forward + backward: 3 x forward ("model FLOPs", what MFU divides)
  double hardware = 0;  // training + recomputation ("hardware FLOPs", what Megatron reports)
};
// FLOPs per token at sequence length `seq` (per sample: patches for ViT).
FlopsPerToken ComputeFlopsPerToken(const ModelConfig& config, int64_t seq, Recompute recompute);

// DGX A100 / H100: one 200 Gb/s (A100, HDR) InfiniBand NIC per GPU -> 25 GB/s per direction
// (NVIDIA DGX A100 User Guide; the Selene cluster of Narayanan et al. SC'21).
inline constexpr double kDefaultInterNodeBytesPerSecond = 25e9;
// Fraction of link bandwidth NCCL ring collectives reach (nccl-tests "busbw" is ~70-80 % of the
// NVLink line rate on DGX A100; the 0.7 is our conservative default).
inline constexpr double kDefaultCollectiveEfficiency = 0.7;
// Matmul efficiency: eff(h) = kMaxMatmulEfficiency x h / (h + kHalfEfficiencyHidden), h the model's
// hidden size. Calibrated on Megatron SC'21 Table 1 (A100, bf16): 0.62 x 2304/(2304+700) = 0.48 of
// peak for the 1.7B model, 0.60 for 1T; flops_test.cc checks all ten rows within 15 %.
inline constexpr double kMaxMatmulEfficiency = 0.62;
inline constexpr double kHalfEfficiencyHidden = 700;

struct TimeModel {
  double inter_node_bytes_per_second = kDefaultInterNodeBytesPerSecond;
  double collective_efficiency = kDefaultCollectiveEfficiency;
  double max_matmul_efficiency = kMaxMatmulEfficiency;
  double half_efficiency_hidden = kHalfEfficiencyHidden;
};

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
  double dp_comm_s = 0;    // exposed gradient all-reduce
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
double DecodeTokensPerSecond(const ModelConfig& config, uint64_t weight_bytes_per_gpu, double kv_bytes_per_gpu,
                             int64_t batch, int tp, const hw::GpuModel& gpu, const TimeModel& model = {});

}  // namespace gpugeek::workload
