#pragma once
// ModelConfig: the architecture facts the planner needs, read from a Hugging Face `config.json`.
//
// Every family the reader accepts is mapped onto this one description: a stack of transformer
// layers (attention + MLP or mixture of experts + norms) with embeddings around it, plus the few
// family quirks that change parameter counts or KV-cache size (fused vs separate projections do not;
// biases, q/k norms, learned positions, tied heads, MLA latents and sliding windows do). The field
// names follow the Hugging Face configs; where families disagree the comment says which key wins.
//
// Sources for each family's mapping: `../shared/anchors/planner.md` §1 and the transformers
// modelling files (`modeling_<family>.py`) the counts were checked against.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::workload {

enum class ArchitectureKind {
  kDecoder,         // decoder-only language model (dense or MoE)
  kEncoderDecoder,  // T5: encoder stack + decoder stack with cross-attention
  kVisionEncoder,   // ViT: patch embedding + encoder stack, no vocabulary
};

enum class MlpKind {
  kGated,  // gate, up and down projections (SwiGLU / GeGLU): 3·h·I weights
  kPlain,  // up and down projections (GELU / ReLU): 2·h·I weights
};

enum class NormKind {
  kRmsNorm,    // weight only: h parameters
  kLayerNorm,  // weight and bias: 2h parameters
};

// Multi-head latent attention (DeepSeek-V2 / V3, arXiv:2405.04434 Sec. 2.1).
struct MlaConfig {
  int64_t q_lora_rank = 0;  // 0: queries projected directly from the hidden state
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
};

struct MoeConfig {
  int64_t num_experts = 0;  // routed experts per MoE layer; 0 means a dense model
  int64_t experts_per_token = 0;
  int64_t intermediate_size = 0;                // per routed expert
  int64_t num_shared_experts = 0;               // always-active experts
  int64_t shared_expert_intermediate_size = 0;  // per shared expert
  int64_t first_dense_layers = 0;               // DeepSeek `first_k_dense_replace`
  int64_t layer_step = 1;                       // every layer_step-th layer is MoE (Qwen3, Llama 4)
  std::vector<int64_t> dense_layers;            // Qwen3-MoE `mlp_only_layers`
  bool router_bias = false;                     // gpt-oss: router has a bias
  bool router_score_bias = false;               // DeepSeek-V3 `noaux_tc`: e_score_correction_bias
  bool expert_bias = false;                     // gpt-oss: expert projections have biases
};

struct ModelConfig {
  std::string model_type;  // as in the file; for a multimodal wrapper, "outer/inner"
  ArchitectureKind kind = ArchitectureKind::kDecoder;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;          // decoder layers (encoder layers for ViT and T5's encoder)
  int64_t num_decoder_layers = 0;  // T5 only
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // == num_heads for MHA, 1 for MQA
  int64_t head_dim = 0;      // from `head_dim` when given, else hidden / heads
  int64_t intermediate_size = 0;
  int64_t vocab_size = 0;  // rows of the embedding as stored (already padded if the checkpoint is)
  int64_t max_position_embeddings = 0;

  bool qkv_bias = false;
  bool o_bias = false;
  bool qk_norm = false;          // per-head RMSNorm on q and k with weights (Qwen3, OLMo-2 style)
  bool attention_sinks = false;  // gpt-oss: one learned logit per head per layer
  bool use_mla = false;
  MlaConfig mla;

  MlpKind mlp = MlpKind::kGated;
  bool mlp_bias = false;
  MoeConfig moe;

  NormKind norm = NormKind::kRmsNorm;
  int norms_per_layer = 2;  // layer norms per transformer layer (Gemma 2: 4; T5 decoder: 3)
  bool final_norm = true;

  bool tie_word_embeddings = false;
  int64_t learned_positions = 0;           // rows of a learned position table (GPT-2; OPT adds 2)
  int64_t embedding_proj_dim = 0;          // OPT `word_embed_proj_dim` when != hidden (project_in/out)
  bool embedding_norm = false;             // BLOOM word_embeddings_layernorm
  int64_t relative_attention_buckets = 0;  // T5 relative position bias (per stack)

  // ViT
  int64_t image_size = 0;
  int64_t patch_size = 0;
  int64_t num_channels = 0;
  bool vit_pooler = true;  // ViTModel's pooler (dense h×h + bias) is counted, as transformers does

  // Attention span: layers whose KV is capped at `sliding_window` tokens (empty: all full).
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // size num_layers when any layer slides

  int64_t mtp_layers = 0;        // DeepSeek-V3 multi-token-prediction modules: not in the main count
  std::string torch_dtype;       // checkpoint dtype, e.g. "bfloat16"
  std::string quant_method;      // quantization_config.quant_method ("fp8", "mxfp4", ...), "" if none
  int64_t quant_block_size = 0;  // fp8 `weight_block_size` side, when given

  // Sequence positions one sample occupies for a vision encoder: patches + CLS. 0 otherwise.
  int64_t VisionSequenceLength() const;
  // Whether layer `i` (0-based) is a mixture-of-experts layer.
  bool IsMoeLayer(int64_t i) const;
  bool IsMoe() const { return moe.num_experts > 0; }
  // Number of layers whose KV is capped by the sliding window.
  int64_t NumSlidingLayers() const;
  // Every transformer layer of the model (encoder + decoder for T5).
  int64_t TotalLayers() const { return num_layers + num_decoder_layers; }
};

// Parses a Hugging Face config.json. Accepted `model_type`s: llama, mistral, mixtral, qwen2, qwen3,
// qwen3_moe, gemma, gemma2, phi3, falcon (also RefinedWeb / RefinedWebModel), gpt2, opt, bloom,
// deepseek_v2, deepseek_v3, gpt_oss, llama4 / llama4_text, t5, vit; any wrapper whose `text_config`
// holds one of these is read through it.
//
// Errors (InvalidArgument): text over 4 MiB, nested deeper than 64 levels, not JSON (syntax, invalid
// UTF-8, a number beyond a double or an integer beyond 64 bits, a key twice in one object: the message
// starts "model_config: " and names the limit, offset or JSON path; see common/json_parse.h) or not an
// object; no `model_type`; an unsupported model type
// (the message names it); a required field missing, of the wrong type or out of range (the message
// names the field and the model type); a model so large that its count would pass 10^15 parameters.
absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text);

// Reads and parses a config file. NotFound when the file cannot be read; otherwise as above, with the
// path in the message.
absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path);

}  // namespace gpugeek::workload
