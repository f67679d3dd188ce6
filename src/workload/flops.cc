#include "workload/flops.h"

#include <algorithm>
#include <cmath>

#include "workload/param_count.h"

namespace gpugeek::workload {
namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

double RingAllReduceSeconds(double bytes, int ranks, double bytes_per_second, double base_latency_s,
                            double hop_latency_s) {
  if (ranks <= 1 || bytes <= 0 || bytes_per_second <= 0) return 0;
  const double steps = 2.0 * (ranks - 1);  // reduce-scatter then all-gather around the ring
  return base_latency_s + steps * hop_latency_s + steps / ranks * bytes / bytes_per_second;
}

CollectiveLink TensorParallelLink(const hw::GpuModel& gpu, int ranks, const TimeModel& model) {
  CollectiveLink link;
  if (ranks > NvlinkDomainSize(gpu)) {
    link.bytes_per_second = model.inter_node_bytes_per_second * model.collective_efficiency;
    link.hop_latency_s = model.network_hop_latency_s;
    return link;
  }
  const auto& ic = gpu.interconnect;
  const bool fast = ic.nvlink_bytes_per_second > 0 || ic.xgmi_bytes_per_second > 0;
  link.bytes_per_second = IntraDomainBytesPerSecond(gpu) * model.collective_efficiency;
  link.hop_latency_s = fast ? model.nvlink_hop_latency_s : model.pcie_hop_latency_s;
  return link;
}

std::pair<int64_t, int64_t> UnevenPipelineStages(int64_t layers, int pp) {
  if (pp < 1 || layers < pp) return {0, 0};
  if (layers % pp == 0) return {layers / pp, layers / pp};
  if (pp == 2) return {layers / 2, layers - layers / 2};
  const int64_t middle = (layers + pp - 1) / pp;
  const int64_t rest = layers - (pp - 2) * middle;
  const int64_t first = rest / 2;
  if (first < 1) return {0, 0};
  return {first, rest - first};
}

double SlowestStageShare(const FlopsPerToken& f, int64_t layers, int pp) {
  if (pp <= 1 || layers < pp || f.hardware <= 0) return 1;
  const double per_layer = (f.hardware - f.head_training) / static_cast<double>(layers);
  const auto [first, last] = UnevenPipelineStages(layers, pp);
  const double middle = static_cast<double>((layers + pp - 1) / pp);
  const double slowest = std::max({middle * per_layer, static_cast<double>(first) * per_layer,
                                   static_cast<double>(last) * per_layer + f.head_training});
  return slowest / f.hardware;
}

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
  f.head_training = 3 * 2 * head;
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
  const int cp = std::max(l.cp, 1);
  const double tokens_mb = static_cast<double>(seq) * o.micro_batch / cp;  // on one context-parallel rank
  // LoRA / QLoRA skip the weight gradients of the frozen base (about a third of the backward).
  const double frozen_factor = o.mode == FineTune::kFull ? 1.0 : 2.0 / 3.0;
  // The pipeline runs at its slowest stage's pace.
  const double stage_share = SlowestStageShare(f, config.TotalLayers(), l.pp);
  const double compute_mb = f.hardware * frozen_factor * tokens_mb * stage_share / l.tp / (peak * eff);

  const int domain = NvlinkDomainSize(gpu);
  const double intra = IntraDomainBytesPerSecond(gpu) * model.collective_efficiency;
  const double inter = model.inter_node_bytes_per_second * model.collective_efficiency;
  const double layers_on_stage = std::ceil(static_cast<double>(config.TotalLayers()) / l.pp);
  const double act_bytes = tokens_mb * h * 2;
  // Megatron-LM (Shoeybi et al. 2019 Fig. 4): 2 all-reduces forward + 2 backward per layer, and the
  // forward two again under full recomputation.
  const int allreduces_per_layer = o.recompute == Recompute::kFull ? 6 : 4;
  const CollectiveLink tp_link = TensorParallelLink(gpu, l.tp, model);
  const double tp_mb = layers_on_stage * allreduces_per_layer *
                       RingAllReduceSeconds(act_bytes, l.tp, tp_link.bytes_per_second, model.all_reduce_base_latency_s,
                                            tp_link.hop_latency_s);
  const double pp_bw = l.tp * cp * l.pp <= domain ? intra : inter;
  const double pp_mb = l.pp > 1 ? 2 * act_bytes / l.tp / pp_bw : 0;
  // Context parallelism (Megatron-LM's ring attention, Liu et al. 2023 arXiv:2310.01889): in every
  // layer each rank passes its K/V chunk cp - 1 times around the ring, behind the attention compute of
  // the chunk in hand; the backward passes K/V and their gradients (twice the bytes), and full
  // recomputation repeats the forward. Only what the attention compute does not cover is exposed.
  double cp_mb = 0;
  if (cp > 1) {
    const double kv_heads = std::ceil(static_cast<double>(config.num_kv_heads) / l.tp);
    const double chunk_bytes = 2 * tokens_mb * kv_heads * static_cast<double>(config.head_dim) * 2;
    const double cp_bw = l.tp * cp <= domain ? intra : inter;
    const double ring_s = (cp - 1) * chunk_bytes / cp_bw;
    // Attention FLOPs of one layer on this rank: QK^T and AV of its tokens over the whole sequence.
    const double attention_s = 2 * tokens_mb * static_cast<double>(seq) * config.num_heads / l.tp * 2 *
                               static_cast<double>(config.head_dim) / (peak * eff);
    const double passes = o.recompute == Recompute::kFull ? 4 : 3;  // forward (again), backward x 2
    cp_mb = layers_on_stage * passes * std::max(0.0, ring_s - attention_s);
  }
  // Attention without a fused kernel (no FlashAttention, Dao et al. 2022 arXiv:2205.14135; Megatron-LM of
  // 2021): the s x s scores of each head go through HBM. Per score element, 2-byte values: the forward
  // writes QKᵀ (2), the fused scale-mask-softmax reads and writes it (4), dropout reads, writes and keeps
  // a 1-byte mask (5), AV reads the probabilities (2): 13 B; the backward reads and writes each of them
  // back (17 B); full and selective recomputation repeat the forward (selective recomputes exactly this part).
  // Memory-bound, at the catalog's HBM bandwidth.
  double attention_memory_mb = 0;
  const double hbm = static_cast<double>(gpu.memory_bandwidth_bytes_per_second) * kHbmEfficiency;
  if (o.features.unfused_attention && hbm > 0) {
    const double bytes_per_score =
        kUnfusedAttentionForwardBytes * (o.recompute != Recompute::kNone ? 2 : 1) + kUnfusedAttentionBackwardBytes;
    const double scores = std::ceil(static_cast<double>(config.num_heads) / l.tp) * static_cast<double>(seq) *
                          tokens_mb * layers_on_stage;
    attention_memory_mb = bytes_per_score * scores / hbm;
  }
  const double compute_and_attention_mb = compute_mb + attention_memory_mb;
  const double mb = compute_and_attention_mb + tp_mb + pp_mb + cp_mb;

  t.compute_s = m * compute_and_attention_mb;
  t.tp_comm_s = m * tp_mb;
  t.pp_comm_s = m * pp_mb;
  t.cp_comm_s = m * cp_mb;
  t.pp_bubble_s = (l.pp - 1.0) / std::max(l.virtual_stages, 1) * mb;

  // Gradients: all-reduce (ZeRO 0-1) or reduce-scatter (ZeRO 2-3, half the traffic) of the trainable
  // state on this GPU, overlapped with the last micro-batch's backward (two thirds of its compute), or
  // after it under RecipeFeatures::serial_grad_reduce.
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
  // Gradients are reduced over DP x CP. Ranks are placed TP fastest, then CP, then DP, PP outermost
  // (Megatron-LM's order): a group that fits in one NVLink domain reduces over it; one that spans nodes
  // runs NCCL's rings over every NIC of a node, so its r ranks per node each carry 1/r of the buffer
  // across the network (nccl-tests all_reduce busbw across DGX A100 nodes is about the 8 NICs' total).
  const int replicas = l.ReplicaRanks();
  const int model_ranks = l.tp * cp;
  const int per_node = model_ranks <= domain ? std::max(1, std::min(replicas, domain / model_ranks)) : 1;
  const double dp_bw = replicas * model_ranks <= domain ? intra : inter * per_node;
  const double hop = replicas * model_ranks <= domain ? model.nvlink_hop_latency_s : model.network_hop_latency_s;
  // One ring collective per layer and pass: r - 1 steps each (NCCL's AllGather / ReduceScatter are rings).
  const double per_layer_latency = layers_on_stage * (replicas - 1.0) * hop;
  if (o.zero_stage >= 2 && replicas > 1) {
    // ZeRO-2/3 keep only their partition of the gradients, so every micro-batch's backward reduce-scatters
    // them (DeepSpeed reduces at each micro-step under gradient accumulation), behind that backward.
    const double rs = (replicas - 1.0) / replicas * grad_bytes / dp_bw + per_layer_latency;
    t.dp_comm_s += m * (o.features.serial_grad_reduce ? rs : std::max(0.0, rs - 2.0 / 3.0 * compute_and_attention_mb));
  }
  if (o.zero_stage >= 3 && replicas > 1) {
    // Parameters gathered for every micro-batch's forward and backward (and the recomputed forward), layer by
    // layer, prefetched behind compute.
    const double passes = o.recompute == Recompute::kFull ? 3 : 2;
    const double gather = passes * ((replicas - 1.0) / replicas * 2 * shard.Params() / dp_bw + per_layer_latency);
    t.dp_comm_s += m * std::max(0.0, gather - compute_and_attention_mb);
  }
  if (o.zero_stage < 2) {
    const double dp = RingAllReduceSeconds(grad_bytes, replicas, dp_bw);
    t.dp_comm_s += o.features.serial_grad_reduce ? dp : std::max(0.0, dp - 2.0 / 3.0 * compute_and_attention_mb);
  }
  if (o.offload_optimizer) {
    const double host_link =
        static_cast<double>(gpu.interconnect.PcieBytesPerSecond()) / 2 * model.collective_efficiency;
    const double partition = shard.Params() * trainable_fraction / (o.zero_stage >= 1 ? replicas : 1);
    if (host_link > 0) t.offload_s += (2 + 2) * partition / host_link;  // bf16 gradients out, weights in
    t.offload_s += kCpuAdamBytesPerParam * partition / model.host_memory_bytes_per_second_per_gpu;
    if (o.offload_params && host_link > 0) {
      const double fetch = 2 * 2 * shard.Params() / replicas / host_link;
      t.offload_s += m * std::max(0.0, fetch - compute_and_attention_mb);
    }
  }
  t.total_s = t.compute_s + t.tp_comm_s + t.pp_comm_s + t.cp_comm_s + t.pp_bubble_s + t.dp_comm_s + t.offload_s;
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

InferenceFlops ComputeInferenceFlops(const ModelConfig& config, int64_t prompt_tokens) {
  InferenceFlops f;
  f.decode = ComputeFlopsPerToken(config, 1, Recompute::kNone).forward;
  f.prefill = ComputeFlopsPerToken(config, std::max<int64_t>(prompt_tokens, 1), Recompute::kNone).forward;
  return f;
}

InferenceTime EstimateInferenceTime(const ModelConfig& config, uint64_t weight_bytes_per_gpu, double kv_bytes_per_gpu,
                                    int64_t batch, int64_t prompt_tokens, const ParallelLayout& layout,
                                    const hw::GpuModel& gpu, const TimeModel& model,
                                    const InferenceFlops* given_flops) {
  InferenceTime t;
  const double bw = static_cast<double>(gpu.memory_bandwidth_bytes_per_second);
  const double peak = PeakFlops(gpu);
  if (bw <= 0 || peak <= 0 || batch <= 0) return t;
  const InferenceFlops f = given_flops != nullptr ? *given_flops : ComputeInferenceFlops(config, prompt_tokens);
  const int tp = std::max(layout.tp, 1), pp = std::max(layout.pp, 1);
  const double h = static_cast<double>(config.hidden_size);
  const double eff = model.max_matmul_efficiency * h / (h + model.half_efficiency_hidden);
  const double layers_on_stage = std::ceil(static_cast<double>(config.TotalLayers()) / pp);
  const CollectiveLink link = TensorParallelLink(gpu, tp, model);
  auto all_reduce = [&](double tokens) {
    return RingAllReduceSeconds(tokens * h * 2, tp, link.bytes_per_second, model.all_reduce_base_latency_s,
                                link.hop_latency_s);
  };
  const double stage_read_s = static_cast<double>(weight_bytes_per_gpu) / bw;
  // Decode: each stage reads its weights and the batch's KV, computes its share of the forward
  // pass, and all-reduces twice per layer; the token then moves on to the next stage.
  const double b = static_cast<double>(batch);
  const double stage_memory_s = stage_read_s + kv_bytes_per_gpu / bw;
  const double stage_compute_s = f.decode * b / (tp * pp) / (peak * eff);
  const double stage_comm_s = layers_on_stage * 2 * all_reduce(b);
  t.decode_memory_s = pp * stage_memory_s;
  t.decode_compute_s = pp * stage_compute_s;
  t.decode_tp_comm_s = pp * stage_comm_s;
  t.decode_step_s = pp * (std::max(stage_memory_s, stage_compute_s) + stage_comm_s);
  t.tokens_per_second = t.decode_step_s > 0 ? b / t.decode_step_s : 0;
  // Prefill of one prompt.
  const double s = static_cast<double>(std::max<int64_t>(prompt_tokens, 1));
  const double prefill_stage_compute_s = f.prefill * s / (tp * pp) / (peak * eff);
  const double prefill_stage_comm_s = layers_on_stage * 2 * all_reduce(s);
  t.prefill_compute_s = pp * prefill_stage_compute_s;
  t.prefill_tp_comm_s = pp * prefill_stage_comm_s;
  t.prefill_s = pp * (std::max(prefill_stage_compute_s, stage_read_s) + prefill_stage_comm_s);
  return t;
}

}  // namespace gpugeek::workload
