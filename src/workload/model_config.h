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
  kDecoder,         // decoder-only language model (dense or MoE); multimodal wrappers add a tower
  kEncoderDecoder,  // T5 / mT5: encoder stack + decoder stack with cross-attention
  kVisionEncoder,   // ViT: patch embedding + encoder stack, no vocabulary
  kEncoder,         // BERT / RoBERTa / XLM-R / DistilBERT: bidirectional encoder, no KV cache
  kStateSpace,      // Mamba / Mamba-2: SSM mixer layers, a fixed state per sequence, no KV cache
};

enum class MlpKind {
  kGated,  // gate, up and down projections (SwiGLU / GeGLU): 3·h·I weights
  kPlain,  // up and down projections (GELU / ReLU): 2·h·I weights
};

enum class NormKind {
  kRmsNorm,          // weight only: h parameters
  kLayerNorm,        // weight and bias: 2h parameters
  kLayerNormNoBias,  // LayerNorm without bias (MPT, Cohere, DBRX): h parameters
  kNonParametric,    // LayerNorm without affine parameters (OLMo-1): 0 parameters
};

// Parameters of one norm of `width` features of kind `kind` (see NormKind).
int64_t NormParamCount(NormKind kind, int64_t width);

// Selective state-space mixer (Mamba: arXiv:2312.00752 Sec. 3.4; Mamba-2: arXiv:2405.21060 Sec. 7),
// as transformers' modeling_mamba.py / modeling_mamba2.py store it.
struct SsmConfig {
  int version = 0;          // 1: Mamba, 2: Mamba-2; 0: no SSM
  int64_t inner = 0;        // intermediate_size (expand · hidden)
  int64_t state_size = 0;   // N
  int64_t conv_kernel = 0;  // depthwise causal conv width
  int64_t dt_rank = 0;      // Mamba-1 time_step_rank
  int64_t num_heads = 0;    // Mamba-2 heads (one dt, A, D per head)
  int64_t n_groups = 0;     // Mamba-2 B/C groups
  bool conv_bias = true;    // use_conv_bias
  bool proj_bias = false;   // use_bias (in_proj / out_proj)
  // Elements of the recurrent state one sequence keeps per layer: conv window + SSM state.
  int64_t StateElementsPerLayer() const;
};

enum class TowerKind {
  kNone,
  kClip,      // Llava / Llava-NeXT: CLIPVisionModel + 2-layer projector (modeling_llava.py)
  kQwen2Vl,   // Qwen2-VL: LayerNorm blocks, plain MLP, patch merger (modeling_qwen2_vl.py)
  kQwen25Vl,  // Qwen2.5-VL: RMSNorm blocks, gated MLP with biases, patch merger
  kSiglip,    // Gemma 3: SigLIP vision model + multimodal projector (modeling_gemma3.py)
};

// A multimodal wrapper's vision encoder and its projector into the language model. Counted in the
// total (the wrapper's checkpoint holds it), kept whole on every GPU of the first pipeline stage.
struct TowerConfig {
  TowerKind kind = TowerKind::kNone;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t image_size = 0;
  int64_t patch_size = 0;
  int64_t num_channels = 3;
  int64_t temporal_patch_size = 0;  // Qwen2-VL family: Conv3d over 2 frames
  int64_t spatial_merge_size = 0;   // Qwen2-VL family: patches merged 2x2 before the projector
  int64_t out_hidden_size = 0;      // projector output width (the language model's hidden size)
  bool projector_bias = true;       // Llava `multimodal_projector_bias`
  bool image_newline = false;       // Llava-NeXT: one learned hidden-size vector
  int64_t mm_tokens_per_image = 0;  // Gemma 3: pooled tokens per image
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
  bool shared_expert_gate = false;              // Qwen2-MoE: sigmoid gate (h -> 1) on the shared expert
};

// One group of same-shaped tensors read from safetensors headers (the generic path for an
// architecture the reader does not know; see workload/model_weights.h).
enum class HeaderTensorRole { kLinear, kBias, kEmbedding, kLmHead, kNorm, kOther };
struct HeaderTensorGroup {
  std::string name;  // tensor name with the layer index replaced by '*'
  HeaderTensorRole role = HeaderTensorRole::kOther;
  int64_t rows = 0;    // elements / cols (a vector: its length)
  int64_t cols = 1;    // last dimension of a matrix; 1 for a vector
  int64_t copies = 0;  // how many tensors of this name pattern and shape
  bool in_layers = false;
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
  bool qk_norm = false;           // norms on q and k with weights (Qwen3, Gemma 3, OLMo-2, Cohere, ...)
  bool qk_norm_per_head = false;  // weights per head (h_q·d and h_kv·d: OLMo-2, Cohere, StableLM) rather
                                  // than one d-vector shared by the heads (Qwen3, Gemma 3, Phi, Persimmon)
  NormKind qk_norm_kind = NormKind::kRmsNorm;
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
  bool lm_head_bias = false;               // Phi, GPT-J, CodeGen, PhiMoE: the output projection has a bias
  int64_t type_vocab_size = 0;             // BERT token-type embedding rows (0: none)
  bool pooler = false;                     // BERT-style pooler (dense h x h + bias) on kEncoder models
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

  // Generic path: when non-empty, ParamInventory lists these tensors (exact, from the checkpoint's
  // safetensors headers) instead of deriving them from the fields above, which are then estimates.
  std::vector<HeaderTensorGroup> header_tensors;

  SsmConfig ssm;      // kStateSpace only
  TowerConfig tower;  // multimodal wrappers (Llava, Qwen2-VL, Gemma 3): the vision side

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

// Parses a Hugging Face config.json. Accepted `model_type`s:
//   llama-like decoders: llama, mistral, mixtral, qwen2, qwen3, qwen3_moe, gemma, gemma2, gemma3_text,
//     phi3, llama4_text, baichuan, internlm, internlm2, orion, minicpm, granite, exaone4, olmo,
//     olmo2, olmo3, olmoe, cohere, stablelm, qwen2_moe, deepseek (V1 MoE), qwen (Qwen-1 remote code),
//     chatglm (ChatGLM2/3, GLM-4 remote code), nemotron;
//   GPT-style decoders: gpt2, gpt_bigcode, gpt_neox, gptj, codegen, phi, phi-msft (phi-1.5/2 remote
//     code), opt, bloom, falcon (also RefinedWeb / RefinedWebModel), mpt, persimmon;
//   MoE with MLA: deepseek_v2, deepseek_v3; gpt_oss;
//   encoders: bert, roberta, xlm-roberta, distilbert; encoder-decoders: t5, mt5; vision: vit;
//   state-space: mamba, mamba2;
//   multimodal wrappers whose vision tower and projector are counted: llava, llava_next, qwen2_vl,
//     qwen2_5_vl, gemma3; any other wrapper whose `text_config` holds an accepted type is read
//     through it (its vision side is then not counted, and model_type says "outer/inner").
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
