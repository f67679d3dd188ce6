#include "workload/inference_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "workload/param_count.h"

namespace gpugeek::workload {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// KV elements one token adds to one layer on one TP rank.
double KvElementsPerLayer(const ModelConfig& c, int tp) {
  if (c.use_mla) return static_cast<double>(c.mla.kv_lora_rank + c.mla.qk_rope_head_dim);
  return 2.0 * CeilDiv(c.num_kv_heads, tp) * c.head_dim;
}

// Layers with a KV cache: decoder layers (T5: decoder self-attention; its cross-attention KV is
// sized by the encoder input and counted the same way per token here).
int64_t KvLayers(const ModelConfig& c) {
  switch (c.kind) {
    case ArchitectureKind::kDecoder:
      return c.num_layers;
    case ArchitectureKind::kEncoderDecoder:
      return 2 * c.num_decoder_layers;
    case ArchitectureKind::kVisionEncoder:
    case ArchitectureKind::kEncoder:     // bidirectional: no cache across steps
    case ArchitectureKind::kStateSpace:  // a fixed state per sequence instead (see "ssm_state")
      return 0;
  }
  return 0;
}

}  // namespace

double KvBytesPerToken(const ModelConfig& config, double kv_bytes, int tp) {
  return KvLayers(config) * KvElementsPerLayer(config, tp) * kv_bytes;
}

double KvBytesPerSequence(const ModelConfig& config, int64_t tokens, double kv_bytes, const ParallelLayout& layout) {
  const int64_t layers = KvLayers(config);
  if (layers == 0) return 0;
  const double per_layer_token = KvElementsPerLayer(config, layout.tp) * kv_bytes;
  const int64_t sliding = config.NumSlidingLayers();
  const int64_t window_tokens = config.sliding_window > 0 ? std::min(tokens, config.sliding_window) : tokens;
  const double all = static_cast<double>(layers - sliding) * tokens + static_cast<double>(sliding) * window_tokens;
  // The heaviest stage holds ceil(L/pp) of the layers, with the same mix of window and full layers.
  const double stage_fraction =
      std::min(1.0, static_cast<double>(CeilDiv(layers, layout.pp)) / static_cast<double>(layers));
  return all * per_layer_token * stage_fraction;
}

MemoryBreakdown InferenceMemory(const ModelConfig& config, const InferenceOptions& o) {
  MemoryBreakdown m;
  const std::vector<ParamGroup> inventory = ParamInventory(config);
  const GpuShard shard = ShardForLayout(config, inventory, o.layout);
  const QuantScheme other{o.other_dtype};
  const uint64_t weights = shard.WeightBytes(o.weights, o.expert_weights, other);
  m.Add("weights", static_cast<double>(weights),
        fmt::format("{:.4g} params on this GPU (TP {}, PP {}, EP {}): projections at {} ({:.4g} B/param), "
                    "experts at {}, embeddings/norms/biases at {}",
                    shard.Params(), o.layout.tp, o.layout.pp, o.layout.ep, DTypeName(o.weights.dtype),
                    o.weights.BytesPerWeight(), DTypeName(o.expert_weights.dtype), DTypeName(o.other_dtype)));

  const double kv_elem = ElementBytes(o.kv_dtype);
  const double kv_seq = KvBytesPerSequence(config, o.context_tokens, kv_elem, o.layout);
  m.Add("kv_cache", kv_seq * o.concurrent_sequences,
        fmt::format("{} seqs x {} tokens: {:.0f} B/token/GPU ({} KV), sliding layers capped at {}",
                    o.concurrent_sequences, o.context_tokens, KvBytesPerToken(config, kv_elem, o.layout.tp),
                    DTypeName(o.kv_dtype), config.sliding_window));

  if (config.kind == ArchitectureKind::kStateSpace) {
    // Mamba's recurrent state does not grow with the context: conv window + SSM state per layer
    // (SsmConfig::StateElementsPerLayer), in the KV dtype, split over TP with the inner channels.
    const double per_seq = static_cast<double>(config.ssm.StateElementsPerLayer()) * config.num_layers *
                           ElementBytes(o.kv_dtype) / o.layout.tp;
    m.Add("ssm_state", per_seq * o.concurrent_sequences,
          fmt::format("{} seqs x {} layers x {} state elements / TP {} ({} each); no KV cache", o.concurrent_sequences,
                      config.num_layers, config.ssm.StateElementsPerLayer(), o.layout.tp, DTypeName(o.kv_dtype)));
  }
  const int64_t t = o.layout.tp;
  const int64_t q_width =
      CeilDiv(config.num_heads, t) * config.head_dim + 2 * CeilDiv(config.num_kv_heads, t) * config.head_dim;
  const int64_t widest_inter = std::max(
      config.intermediate_size, config.moe.intermediate_size * std::max<int64_t>(config.moe.experts_per_token, 1));
  const int64_t mlp_width = (config.mlp == MlpKind::kGated ? 3 : 2) * CeilDiv(widest_inter, t);
  const int64_t tokens = config.kind == ArchitectureKind::kVisionEncoder
                             ? o.concurrent_sequences * config.VisionSequenceLength()
                             : std::min(o.max_num_batched_tokens, o.context_tokens * o.concurrent_sequences);
  const double act_bytes = ElementBytes(o.activation_dtype);
  const double hidden_act =
      static_cast<double>(tokens) * (2 * config.hidden_size + std::max(q_width, mlp_width)) * act_bytes;
  const int64_t logit_rows = std::min(o.max_num_seqs, std::max<int64_t>(o.concurrent_sequences, 1));
  const double logits = config.vocab_size > 0 ? 4.0 * logit_rows * CeilDiv(config.vocab_size, t) : 0;
  // Geometry the planner does not model exactly is marked: an SSM mixer is sized as an MLP of its
  // expanded width; a model read from safetensors headers has its widths from config fields.
  const char* approximation = config.kind == ArchitectureKind::kStateSpace
                                  ? " (estimate: the SSM mixer sized as an MLP of its expanded width)"
                              : !config.header_tensors.empty() ? " (estimate: widths from config fields)"
                                                               : "";
  m.Add("activations", hidden_act + logits,
        fmt::format("{} tokens x (2 x {} + {}) x {} B + fp32 logits {} x {}{}", tokens, config.hidden_size,
                    std::max(q_width, mlp_width), act_bytes, logit_rows, CeilDiv(config.vocab_size, t), approximation));
  m.Add("runtime", static_cast<double>(kCudaContextBytes), "CUDA context and kernels (kCudaContextBytes)");
  return m;
}

KvCapacity VllmKvCapacity(const ModelConfig& config, const InferenceOptions& options, uint64_t gpu_memory_bytes,
                          double gpu_memory_utilization) {
  InferenceOptions o = options;
  o.concurrent_sequences = o.max_num_seqs;
  o.context_tokens = std::max<int64_t>(1, o.max_num_batched_tokens / std::max<int64_t>(o.max_num_seqs, 1));
  const MemoryBreakdown m = InferenceMemory(config, o);
  const double budget = static_cast<double>(gpu_memory_bytes) * gpu_memory_utilization;
  const double used = static_cast<double>(m.Bytes("weights") + m.Bytes("activations") + m.Bytes("runtime"));
  KvCapacity k;
  const int64_t layers = KvLayers(config);
  const double stage_fraction =
      layers > 0 ? std::min(1.0, static_cast<double>(CeilDiv(layers, options.layout.pp)) / layers) : 0;
  k.kv_bytes_per_token = KvBytesPerToken(config, ElementBytes(options.kv_dtype), options.layout.tp) * stage_fraction;
  if (budget <= used || k.kv_bytes_per_token <= 0) return k;
  k.kv_pool_bytes = static_cast<uint64_t>(budget - used);
  k.tokens = static_cast<int64_t>(std::floor(static_cast<double>(k.kv_pool_bytes) / k.kv_bytes_per_token));
  return k;
}

}  // namespace gpugeek::workload
