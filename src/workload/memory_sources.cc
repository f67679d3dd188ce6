#include "workload/memory_sources.h"

namespace gpugeek::workload {

std::string_view MemoryTermSource(std::string_view label, bool training) {
  if (label == "weights") {
    return training ? "ZeRO (Rajbhandari et al. 2020, arXiv:1910.02054) Sec. 5 model states; ZeRO-Infinity "
                      "(arXiv:2104.07857) for parameter offload"
                    : "the checkpoint's torch_dtype / quantization_config (dtype.h), projections quantized, "
                      "embeddings and norms in 16-bit";
  }
  if (label == "gradients") {
    return "ZeRO Sec. 5 (2 B/param, 4 for Megatron's fp32 main grads); eager PyTorch frees them after the "
           "step (measured on an H200, docs/device-check.md)";
  }
  if (label == "optimizer_states") {
    return "ZeRO Fig. 1 (K = 12 with the fp32 master); bitsandbytes 8-bit states (Dettmers et al. 2021, "
           "arXiv:2110.02861); Adafactor (Shazeer & Stern 2018, arXiv:1804.04235); ZeRO-Offload (Ren et al. "
           "2021, arXiv:2101.06840)";
  }
  if (label == "activations") {
    return training ? "Korthikanti et al. 2022 (arXiv:2205.05198) Table 2, generalised to GQA / gated MLP / "
                      "MoE; FlashAttention drops the softmax term (Dao et al. 2022, arXiv:2205.14135)"
                    : "vLLM's profiling run: one max-length batch of hidden states and logits";
  }
  if (label == "recompute_workspace") return "Korthikanti et al. 2022 Sec. 4: one layer rebuilt in its backward";
  if (label == "embedding_logits") {
    return "Megatron-LM's fp32 cross-entropy (4 B per logit); Hugging Face ForCausalLMLoss 14 B per logit "
           "(measured on an H200, docs/device-check.md)";
  }
  if (label == "autocast_cache") return "torch.autocast caches a bf16 cast of each weight (PyTorch AMP docs)";
  if (label == "peft_fp32_inputs") {
    return "PEFT LoRA layers cast the input to the fp32 adapters' dtype (measured on an H200, "
           "docs/device-check.md)";
  }
  if (label == "zero3_gather") return "DeepSpeed ZeRO-3 stage3_prefetch_bucket_size; FSDP's one-unit prefetch";
  if (label == "qlora_dequant") return "QLoRA (Dettmers et al. 2023, arXiv:2305.14314): one weight dequantized";
  if (label == "kv_cache") {
    return "2 x layers x KV heads x head_dim x bytes per token (vLLM PagedAttention, Kwon et al. 2023, "
           "arXiv:2309.06180; MLA latents for DeepSeek)";
  }
  if (label == "runtime") {
    return "CUDA context and kernels: ~723 MiB in PyTorch forum measurements; 0.67 GiB measured on an H200 "
           "(docs/device-check.md)";
  }
  return "";
}

}  // namespace gpugeek::workload
