#pragma once
// Inference (serving) memory per GPU: weights at the serving format, the KV cache, the activation
// workspace and the runtime's fixed overhead; and the vLLM view of how many KV tokens fit.
//
// Sources: `../shared/anchors/planner.md` §2.3. KV bytes per token = 2 (K and V) x layers x KV heads
// x head_dim x bytes for MHA / GQA / MQA; MLA (DeepSeek-V2/V3) caches one latent of
// kv_lora_rank + qk_rope_head_dim per layer (vLLM `is_deepseek_mla`, head size 576). The vLLM
// budget (vllm-project/vllm#235, `gpu_worker.determine_num_available_blocks`): KV pool =
// total x gpu_memory_utilization − weights − non-torch memory − peak activation of a profile run.

#include <cstdint>

#include "workload/dtype.h"
#include "workload/memory_breakdown.h"
#include "workload/model_config.h"
#include "workload/sharding.h"

namespace gpugeek::workload {

// PyTorch's CUDA context and kernel images: "~700+ MB" per process (discuss.pytorch.org threads
// "high-gpu-memory-overhead" (81330) and "pytorch's GPU memory floor" (73021): 723 MiB measured);
// rounded up to 768 MiB.
inline constexpr uint64_t kCudaContextBytes = uint64_t{768} << 20;
// vLLM EngineArgs defaults: gpu_memory_utilization 0.9, max_num_seqs 256; max_num_batched_tokens
// 8192 for the V1 engine's chunked prefill (vllm/engine/arg_utils.py).
inline constexpr double kVllmDefaultGpuMemoryUtilization = 0.9;
inline constexpr int64_t kVllmDefaultMaxNumSeqs = 256;
inline constexpr int64_t kVllmDefaultMaxNumBatchedTokens = 8192;

// KV bytes one token adds on one GPU holding all layers at TP `tp`, with every layer counted as
// vLLM allocates (sliding-window layers included, hf-mem#60). `kv_bytes` per element (2 for bf16,
// 1 for fp8). Per rank: ceil(n_kv / tp) heads (heads replicated when n_kv < tp); MLA latents are
// replicated on every rank. Vision encoders have no KV cache: 0.
double KvBytesPerToken(const ModelConfig& config, double kv_bytes, int tp = 1);

// KV bytes of one sequence of `tokens` tokens on one GPU of layout (TP and PP applied), with
// sliding-window layers capped at the window (what a window-aware cache such as vLLM's hybrid
// allocator or HF's HybridCache holds).
double KvBytesPerSequence(const ModelConfig& config, int64_t tokens, double kv_bytes, const ParallelLayout& layout);

struct InferenceOptions {
  QuantScheme weights{DType::kBf16};  // projections; routed experts use `expert_weights`
  QuantScheme expert_weights{DType::kBf16};
  DType other_dtype = DType::kBf16;  // embeddings, head, norms, biases, routers
  DType kv_dtype = DType::kBf16;
  DType activation_dtype = DType::kBf16;
  int64_t context_tokens = 4096;  // per sequence (prompt + generated)
  int64_t concurrent_sequences = 1;
  int64_t max_num_batched_tokens = kVllmDefaultMaxNumBatchedTokens;
  int64_t max_num_seqs = kVllmDefaultMaxNumSeqs;
  ParallelLayout layout;
};

// Per-GPU memory to serve `concurrent_sequences` of `context_tokens`. Terms:
//  "weights"    shard bytes (sharding.h) at the options' formats;
//  "kv_cache"   KvBytesPerSequence x concurrent_sequences;
//  "activations" the profile-run peak: max_num_batched_tokens x (hidden + widest projection shard)
//               x activation bytes, plus fp32 logits for max_num_seqs rows of ceil(V/TP) (the
//               sampler's logits; our model of vLLM's profile run);
//  "runtime"    kCudaContextBytes.
MemoryBreakdown InferenceMemory(const ModelConfig& config, const InferenceOptions& options);

struct KvCapacity {
  uint64_t kv_pool_bytes = 0;     // per GPU; 0 when weights + overhead exceed the budget
  double kv_bytes_per_token = 0;  // per GPU, all layers counted (as vLLM sizes blocks)
  int64_t tokens = 0;             // tokens of KV the pool holds
};

// vLLM's capacity: (gpu_memory_bytes x utilization − weights − activations − runtime) /
// KvBytesPerToken on the GPU's shard (layers of one stage, heads of one TP rank).
KvCapacity VllmKvCapacity(const ModelConfig& config, const InferenceOptions& options, uint64_t gpu_memory_bytes,
                          double gpu_memory_utilization = kVllmDefaultGpuMemoryUtilization);

}  // namespace gpugeek::workload
