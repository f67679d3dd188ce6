#include "workload/flops.h"

#include <algorithm>
#include <cmath>

#include "workload/param_count.h"

namespace gpugeek::workload {
namespace {

double RingAllReduceSeconds(double bytes, int ranks, double bytes_per_second) {
  if (ranks <= 1 || bytes <= 0) return 0;
  return 2.0 * (ranks - 1) / ranks * bytes / bytes_per_second;
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

FlopsPerToken ComputeFlopsPerToken(const ModelConfig& c, int64_t seq, Recompute recompute) {
  double linear = 0, head = 0;
  for (const ParamGroup& g : ParamInventory(c)) {
    if (g.kind == TensorKind::kLinear) linear += static_cast<double>(g.Active());
    if (g.kind == TensorKind::kLmHead) head += static_cast<double>(g.Active());
  }
  if (c.tie_word_embeddings && c.vocab_size > 0) {
    head += static_cast<double>(c.vocab_size) * (c.embedding_proj_dim > 0 ? c.embedding_proj_dim : c.hidden_size);
  }
  double dqk = static_cast<double>(c.head_dim), dv = static_cast<double>(c.head_dim);
  if (c.use_mla) {
    dqk = static_cast<double>(c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim);
    dv = static_cast<double>(c.mla.v_head_dim);
  }
  if (c.kind == ArchitectureKind::kVisionEncoder) seq = c.VisionSequenceLength();
  const int64_t sliding = c.NumSlidingLayers();
  const double window = c.sliding_window > 0 ? static_cast<double>(std::min(seq, c.sliding_window)) : seq;
  const double span_layers = static_cast<double>(c.TotalLayers() - sliding) * seq + sliding * window;
  const double attention = 2.0 * span_layers * c.num_heads * (dqk + dv);
  FlopsPerToken f;
  const double layers_forward = 2 * linear + attention;
  f.forward = layers_forward + 2 * head;
  f.training = 3 * f.forward;
  f.hardware = f.training;
  if (recompute == Recompute::kFull) f.hardware += layers_forward;
  if (recompute == Recompute::kSelective) f.hardware += attention;
  return f;
}

int NvlinkDomainSize(const hw::GpuModel& gpu) {
  const auto& ic = gpu.interconnect;
  const bool fast_link = ic.nvlink_generation > 0 || ic.xgmi_links > 0;
  if (!fast_link) return 1;
  if (StartsWith(gpu.form_factor, "SXM") || StartsWith(gpu.form_factor, "OAM")) return 8;
  if (StartsWith(gpu.form_factor, "PCIe")) return 2;
  return 1;
}

double IntraDomainBytesPerSecond(const hw::GpuModel& gpu) {
  const auto& ic = gpu.interconnect;
  const double fast = static_cast<double>(std::max(ic.nvlink_bytes_per_second, ic.xgmi_bytes_per_second));
  if (fast > 0) return fast / 2;
  return static_cast<double>(ic.PcieBytesPerSecond()) / 2;
}

double PeakFlops(const hw::GpuModel& gpu) {
  for (hw::Precision p : {hw::Precision::kBf16, hw::Precision::kFp16, hw::Precision::kFp32}) {
    if (auto v = gpu.PeakOps(p)) return *v;
  }
  return 0;
}

StepTime EstimateStepTime(const ModelConfig& config, const TrainingOptions& o, int64_t global_batch,
                          const hw::GpuModel& gpu, const TimeModel& model, const GpuShard* given_shard,
                          const FlopsPerToken* given_flops) {
  StepTime t;
  const ParallelLayout& l = o.layout;
  const int gpus = l.Gpus();
  const double peak = PeakFlops(gpu);
  if (peak <= 0 || gpus <= 0) return t;
  const int64_t seq = config.kind == ArchitectureKind::kVisionEncoder ? config.VisionSequenceLength() : o.seq;
  const double m = std::max<double>(1, std::floor(static_cast<double>(global_batch) / (o.micro_batch * l.dp)));
  const FlopsPerToken f = given_flops != nullptr ? *given_flops : ComputeFlopsPerToken(config, seq, o.recompute);
  const double h = static_cast<double>(config.hidden_size);
  const double eff = model.max_matmul_efficiency * h / (h + model.half_efficiency_hidden);
  const double tokens_mb = static_cast<double>(seq) * o.micro_batch;
  // LoRA / QLoRA skip the weight gradients of the frozen base (about a third of the backward).
  const double frozen_factor = o.mode == FineTune::kFull ? 1.0 : 2.0 / 3.0;
  const double compute_mb = f.hardware * frozen_factor * tokens_mb / (l.tp * l.pp) / (peak * eff);

  const int domain = NvlinkDomainSize(gpu);
  const double intra = IntraDomainBytesPerSecond(gpu) * model.collective_efficiency;
  const double inter = model.inter_node_bytes_per_second * model.collective_efficiency;
  const double layers_on_stage = std::ceil(static_cast<double>(config.TotalLayers()) / l.pp);
  const double act_bytes = tokens_mb * h * 2;
  const int allreduces_per_layer = o.recompute == Recompute::kFull ? 6 : 4;
  const double tp_bw = l.tp <= domain ? intra : inter;
  const double tp_mb = layers_on_stage * allreduces_per_layer * RingAllReduceSeconds(act_bytes, l.tp, tp_bw);
  const double pp_bw = l.tp * l.pp <= domain ? intra : inter;
  const double pp_mb = l.pp > 1 ? 2 * act_bytes / l.tp / pp_bw : 0;
  const double mb = compute_mb + tp_mb + pp_mb;

  t.compute_s = m * compute_mb;
  t.tp_comm_s = m * tp_mb;
  t.pp_comm_s = m * pp_mb;
  t.pp_bubble_s = (l.pp - 1.0) / std::max(l.virtual_stages, 1) * mb;

  // Gradients: all-reduce (ZeRO 0-1) or reduce-scatter (ZeRO 2-3, half the traffic) of the trainable
  // state on this GPU, overlapped with the last micro-batch's backward (two thirds of its compute).
  std::vector<ParamGroup> inventory;
  GpuShard own_shard;
  if (given_shard == nullptr) {
    inventory = ParamInventory(config);
    own_shard = ShardForLayout(config, inventory, l);
  }
  const GpuShard& shard = given_shard != nullptr ? *given_shard : own_shard;
  const double trainable_fraction =
      o.mode == FineTune::kFull ? 1.0 : std::min(1.0, 0.01);  // adapters are ~1 % of the weights at most
  const double grad_bytes = shard.Params() * trainable_fraction * (o.fp32_grads ? 4 : 2);
  const double dp_bw = l.Gpus() <= domain ? intra : inter;
  double dp = RingAllReduceSeconds(grad_bytes, l.dp, dp_bw) * (o.zero_stage >= 2 ? 0.5 : 1.0);
  if (o.zero_stage >= 3 && l.dp > 1) {
    // Parameters gathered for every micro-batch's forward and backward, prefetched behind compute.
    const double gather = 2 * (l.dp - 1.0) / l.dp * 2 * shard.Params() / dp_bw;
    t.dp_comm_s += m * std::max(0.0, gather - compute_mb);
  }
  t.dp_comm_s += std::max(0.0, dp - 2.0 / 3.0 * compute_mb);
  t.total_s = t.compute_s + t.tp_comm_s + t.pp_comm_s + t.pp_bubble_s + t.dp_comm_s;
  t.tokens = static_cast<double>(global_batch) * seq;
  t.model_flops_per_gpu = f.training * frozen_factor * t.tokens / (t.total_s * gpus);
  t.hardware_flops_per_gpu = f.hardware * frozen_factor * t.tokens / (t.total_s * gpus);
  t.mfu = t.model_flops_per_gpu / peak;
  return t;
}

double DecodeTokensPerSecond(const ModelConfig& config, uint64_t weight_bytes_per_gpu, double kv_bytes_per_gpu,
                             int64_t batch, int tp, const hw::GpuModel& gpu, const TimeModel& model) {
  const double bw = static_cast<double>(gpu.memory_bandwidth_bytes_per_second);
  const double peak = PeakFlops(gpu);
  if (bw <= 0 || peak <= 0 || batch <= 0) return 0;
  const FlopsPerToken f = ComputeFlopsPerToken(config, 1, Recompute::kNone);
  const double h = static_cast<double>(config.hidden_size);
  const double eff = model.max_matmul_efficiency * h / (h + model.half_efficiency_hidden);
  const double memory_s = (static_cast<double>(weight_bytes_per_gpu) + kv_bytes_per_gpu) / bw;
  const double compute_s = f.forward * batch / tp / (peak * eff);
  return static_cast<double>(batch) / std::max(memory_s, compute_s);
}

}  // namespace gpugeek::workload
