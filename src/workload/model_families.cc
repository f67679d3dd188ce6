#include "workload/model_families.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>

#include "common/status_macros.h"

namespace gpugeek::workload::config_internal {
namespace {

// hidden, layers, vocab, intermediate, positions and heads under the llama key names.
absl::Status ReadLlamaKeys(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"hidden_size"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"num_hidden_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(c.intermediate_size, r.Int({"intermediate_size"}));
  ASSIGN_OR_RETURN(c.max_position_embeddings, r.IntOr({"max_position_embeddings"}, 0, int64_t{1} << 40));
  return ReadHeads(r, c);
}

absl::Status CheckTopK(const Reader& r, const ModelConfig& c) {
  if (c.IsMoe() && c.moe.experts_per_token > c.moe.num_experts) {
    return r.Error("field 'num_experts_per_tok' exceeds the number of experts");
  }
  return absl::OkStatus();
}

// Llama-shaped decoders that differ from Llama only in the parameters below. Sources per type:
//   baichuan (Baichuan2 remote code: W_pack = fused q/k/v without bias; NormHead lm_head v x h),
//   internlm (remote code: q/k/v/o biases from `bias`), internlm2 (remote code: wqkv / wo biases
//   from `bias`), orion (remote code: LayerNorm with bias), minicpm (remote code; MiniCPM-MoE:
//   `num_experts` gated experts), granite (modeling_granite.py: multipliers only), exaone4
//   (modeling_exaone4.py: q/k RMSNorm over head_dim, post-norms), olmo (modeling_olmo.py:
//   LayerNorm without parameters), olmo2 / olmo3 (q_norm over h_q·d, k_norm over h_kv·d), olmoe
//   (OLMo-2's q/k norms, every layer a mixture of experts),
//   cohere (modeling_cohere.py: one weight-only LayerNorm per layer, parallel attention + MLP,
//   optional per-head q/k norms, tied head), nemotron (modeling_nemotron.py: plain squared-ReLU MLP,
//   LayerNorm1P with bias).
absl::Status ReadLlamaVariant(const Reader& r, ModelConfig& c) {
  const std::string& t = c.model_type;
  RETURN_IF_ERROR(ReadLlamaKeys(r, c));
  ASSIGN_OR_RETURN(const bool attention_bias, r.Bool("attention_bias", false));
  ASSIGN_OR_RETURN(c.mlp_bias, r.Bool("mlp_bias", false));
  c.qkv_bias = c.o_bias = attention_bias;
  bool tie_default = false;
  if (t == "internlm" || t == "internlm2") {
    ASSIGN_OR_RETURN(const bool bias, r.Bool("bias", true));
    c.qkv_bias = c.o_bias = bias;
  } else if (t == "orion") {
    c.norm = NormKind::kLayerNorm;
  } else if (t == "minicpm") {
    ASSIGN_OR_RETURN(c.moe.num_experts, r.Count("num_experts", 0));
    if (c.IsMoe()) {
      ASSIGN_OR_RETURN(c.moe.experts_per_token, r.Int({"num_experts_per_tok"}, kMaxCount));
      c.moe.intermediate_size = c.intermediate_size;
    }
  } else if (t == "exaone4") {
    c.qk_norm = true;
  } else if (t == "olmo") {
    c.norm = NormKind::kNonParametric;
  } else if (t == "olmo2" || t == "olmo3") {
    c.qk_norm = c.qk_norm_per_head = true;
  } else if (t == "olmoe") {
    // modeling_olmoe.py: q_norm over h, k_norm over the KV width; every layer routes to
    // `num_experts` gated experts of `intermediate_size`, router without bias, no shared expert.
    c.qk_norm = c.qk_norm_per_head = true;
    ASSIGN_OR_RETURN(c.moe.num_experts, r.Int({"num_experts"}, kMaxCount));
    ASSIGN_OR_RETURN(c.moe.experts_per_token, r.Int({"num_experts_per_tok"}, kMaxCount));
    c.moe.intermediate_size = c.intermediate_size;
  } else if (t == "cohere") {
    c.norm = NormKind::kLayerNormNoBias;
    c.norms_per_layer = 1;
    ASSIGN_OR_RETURN(c.qk_norm, r.Bool("use_qk_norm", false));
    c.qk_norm_per_head = c.qk_norm;
    c.qk_norm_kind = NormKind::kLayerNormNoBias;
    tie_default = true;
  } else if (t == "nemotron") {
    c.mlp = MlpKind::kPlain;
    c.norm = NormKind::kLayerNorm;
  }
  RETURN_IF_ERROR(CheckTopK(r, c));
  RETURN_IF_ERROR(ReadTieDefault(r, tie_default, c));
  return ReadSlidingWindow(r, c);
}

// Gemma 3 text model (modeling_gemma3.py): Gemma 2's four norms per layer plus q/k RMSNorms over
// head_dim, a tied head, and every `sliding_window_pattern`-th layer global.
absl::Status ReadGemma3Text(const Reader& r, ModelConfig& c) {
  RETURN_IF_ERROR(ReadLlamaKeys(r, c));
  ASSIGN_OR_RETURN(const bool attention_bias, r.Bool("attention_bias", false));
  c.qkv_bias = c.o_bias = attention_bias;
  c.qk_norm = true;
  c.norms_per_layer = 4;
  RETURN_IF_ERROR(ReadTieDefault(r, true, c));
  return ReadSlidingWindow(r, c);
}

// StableLM (modeling_stablelm.py): q/k/v biases from `use_qkv_bias`, LayerNorm with bias, one norm
// per layer with `use_parallel_residual`, per-head weight-only q/k LayerNorms with `qk_layernorm`.
absl::Status ReadStableLm(const Reader& r, ModelConfig& c) {
  RETURN_IF_ERROR(ReadLlamaKeys(r, c));
  ASSIGN_OR_RETURN(c.qkv_bias, r.Bool("use_qkv_bias", false));
  c.norm = NormKind::kLayerNorm;
  ASSIGN_OR_RETURN(const bool parallel, r.Bool("use_parallel_residual", false));
  c.norms_per_layer = parallel ? 1 : 2;
  ASSIGN_OR_RETURN(c.qk_norm, r.Bool("qk_layernorm", false));
  c.qk_norm_per_head = c.qk_norm;
  c.qk_norm_kind = NormKind::kLayerNormNoBias;
  return ReadTieDefault(r, false, c);
}

// Qwen2-MoE (modeling_qwen2_moe.py): Qwen2 attention (q/k/v biases), routed experts of
// `moe_intermediate_size`, one shared expert of `shared_expert_intermediate_size` behind a
// sigmoid gate (h -> 1), dense MLPs of `intermediate_size` on `mlp_only_layers`.
absl::Status ReadQwen2Moe(const Reader& r, ModelConfig& c) {
  RETURN_IF_ERROR(ReadLlamaKeys(r, c));
  c.qkv_bias = true;
  ASSIGN_OR_RETURN(c.moe.num_experts, r.Int({"num_experts"}, kMaxCount));
  ASSIGN_OR_RETURN(c.moe.experts_per_token, r.Int({"num_experts_per_tok"}, kMaxCount));
  ASSIGN_OR_RETURN(c.moe.intermediate_size, r.Int({"moe_intermediate_size"}));
  ASSIGN_OR_RETURN(c.moe.shared_expert_intermediate_size, r.Count("shared_expert_intermediate_size", 0, kMaxDim));
  c.moe.num_shared_experts = c.moe.shared_expert_intermediate_size > 0 ? 1 : 0;
  c.moe.shared_expert_gate = c.moe.num_shared_experts > 0;
  ASSIGN_OR_RETURN(c.moe.layer_step, r.IntOr({"decoder_sparse_step"}, 1, kMaxCount));
  if (const json* dense = r.Find("mlp_only_layers")) {
    if (!dense->is_array()) return r.Error("field 'mlp_only_layers' must be an array");
    for (const json& v : *dense) {
      if (!v.is_number_integer()) return r.Error("field 'mlp_only_layers' must hold integers");
      c.moe.dense_layers.push_back(v.get<int64_t>());
    }
  }
  RETURN_IF_ERROR(CheckTopK(r, c));
  RETURN_IF_ERROR(ReadTieDefault(r, false, c));
  return ReadSlidingWindow(r, c);
}

// DeepSeek-MoE V1 (DeepSeek's modeling_deepseek.py for `deepseek`): Llama attention, the first
// `first_k_dense_replace` layers dense, then `n_routed_experts` experts of `moe_intermediate_size`
// plus `n_shared_experts` always-on experts of the same width.
absl::Status ReadDeepseekV1(const Reader& r, ModelConfig& c) {
  RETURN_IF_ERROR(ReadLlamaKeys(r, c));
  ASSIGN_OR_RETURN(const bool attention_bias, r.Bool("attention_bias", false));
  c.qkv_bias = c.o_bias = attention_bias;
  ASSIGN_OR_RETURN(c.moe.num_experts, r.Count("n_routed_experts", 0));
  if (c.IsMoe()) {
    ASSIGN_OR_RETURN(c.moe.experts_per_token, r.Int({"num_experts_per_tok"}, kMaxCount));
    ASSIGN_OR_RETURN(c.moe.intermediate_size, r.Int({"moe_intermediate_size"}));
    ASSIGN_OR_RETURN(c.moe.num_shared_experts, r.Count("n_shared_experts", 0));
    c.moe.shared_expert_intermediate_size = c.moe.intermediate_size;
    ASSIGN_OR_RETURN(c.moe.first_dense_layers, r.Count("first_k_dense_replace", 0));
    ASSIGN_OR_RETURN(c.moe.layer_step, r.IntOr({"moe_layer_freq"}, 1, kMaxCount));
  }
  RETURN_IF_ERROR(CheckTopK(r, c));
  return ReadTieDefault(r, false, c);
}

// Qwen-1 (QWen remote code, modeling_qwen.py): c_attn = fused q/k/v with bias, c_proj without; the
// MLP's w1 and w2 are each intermediate_size / 2 wide (a gated MLP of that width); RMSNorm.
absl::Status ReadQwenV1(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"hidden_size"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"num_hidden_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(const int64_t ff, r.Int({"intermediate_size"}));
  if (ff % 2 != 0) return r.Error("field 'intermediate_size' must be even (w1 and w2 are half of it each)");
  c.intermediate_size = ff / 2;
  ASSIGN_OR_RETURN(c.max_position_embeddings, r.IntOr({"max_position_embeddings", "seq_length"}, 0, kMaxCount * 64));
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"num_attention_heads"}, kMaxCount));
  c.num_kv_heads = c.num_heads;
  ASSIGN_OR_RETURN(c.head_dim, r.IntOr({"kv_channels"}, std::max<int64_t>(1, c.hidden_size / c.num_heads)));
  c.qkv_bias = true;
  ASSIGN_OR_RETURN(const bool no_bias, r.Bool("no_bias", true));
  c.o_bias = !no_bias;
  return ReadTieDefault(r, false, c);
}

// ChatGLM2/3 and GLM-4 remote code (modeling_chatglm.py): query_key_value = fused q + grouped k/v
// (`multi_query_group_num` KV heads of `kv_channels`) with `add_qkv_bias`; dense_h_to_4h holds the
// SwiGLU gate and up halves; `add_bias_linear` biases dense and the MLP; untied output_layer of
// `padded_vocab_size` rows.
absl::Status ReadChatGlm(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"hidden_size"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"num_layers", "num_hidden_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"padded_vocab_size", "vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(c.intermediate_size, r.Int({"ffn_hidden_size"}));
  ASSIGN_OR_RETURN(c.max_position_embeddings, r.IntOr({"seq_length"}, 0, kMaxCount * 64));
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"num_attention_heads"}, kMaxCount));
  ASSIGN_OR_RETURN(c.head_dim, r.IntOr({"kv_channels"}, std::max<int64_t>(1, c.hidden_size / c.num_heads)));
  ASSIGN_OR_RETURN(const bool mqa, r.Bool("multi_query_attention", false));
  c.num_kv_heads = c.num_heads;
  if (mqa) {
    ASSIGN_OR_RETURN(c.num_kv_heads, r.Int({"multi_query_group_num"}, kMaxCount));
  }
  if (c.num_heads % c.num_kv_heads != 0) return r.Error("field 'multi_query_group_num' must divide the heads");
  ASSIGN_OR_RETURN(c.qkv_bias, r.Bool("add_qkv_bias", false));
  ASSIGN_OR_RETURN(const bool bias_linear, r.Bool("add_bias_linear", false));
  c.o_bias = c.mlp_bias = bias_linear;
  ASSIGN_OR_RETURN(const bool rms, r.Bool("rmsnorm", true));
  c.norm = rms ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  ASSIGN_OR_RETURN(c.final_norm, r.Bool("post_layer_norm", true));
  return ReadTieDefault(r, false, c);
}

// GPT-NeoX / Pythia (modeling_gpt_neox.py): fused query_key_value and dense with biases
// (`attention_bias`, default true), plain MLP with biases, two LayerNorms per layer (also with the
// parallel residual), untied embed_out.
absl::Status ReadGptNeox(const Reader& r, ModelConfig& c) {
  RETURN_IF_ERROR(ReadLlamaKeys(r, c));
  ASSIGN_OR_RETURN(const bool bias, r.Bool("attention_bias", true));
  c.qkv_bias = c.o_bias = bias;
  c.mlp_bias = true;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kLayerNorm;
  return ReadTieDefault(r, false, c);
}

// GPT-2-keyed families: n_embd, n_layer, n_head, n_inner (null: 4h), n_positions.
absl::Status ReadGptKeys(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"n_embd", "hidden_size"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"n_layer", "num_hidden_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"n_head", "num_attention_heads"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(c.intermediate_size, r.IntOr({"n_inner"}, 4 * c.hidden_size));
  ASSIGN_OR_RETURN(c.max_position_embeddings, r.IntOr({"n_positions", "max_position_embeddings"}, 0, kMaxCount * 64));
  if (c.hidden_size % c.num_heads != 0) return r.Error("field 'n_embd' must be a multiple of n_head");
  c.num_kv_heads = c.num_heads;
  c.head_dim = c.hidden_size / c.num_heads;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kLayerNorm;
  return absl::OkStatus();
}

// GPTBigCode / StarCoder / SantaCoder (modeling_gpt_bigcode.py): GPT-2 with multi-query attention
// (`multi_query`, default true: one KV head), learned positions, tied head.
absl::Status ReadGptBigCode(const Reader& r, ModelConfig& c) {
  RETURN_IF_ERROR(ReadGptKeys(r, c));
  ASSIGN_OR_RETURN(const bool mqa, r.Bool("multi_query", true));
  c.num_kv_heads = mqa ? 1 : c.num_heads;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.learned_positions = c.max_position_embeddings;
  if (c.learned_positions <= 0) return r.Error("missing field 'n_positions'");
  return ReadTieDefault(r, true, c);
}

// GPT-J (modeling_gptj.py) and CodeGen (modeling_codegen.py): q/k/v/out without bias, fc_in /
// fc_out with bias, one LayerNorm per layer (parallel attention + MLP), untied lm_head with bias.
absl::Status ReadGptJ(const Reader& r, ModelConfig& c) {
  RETURN_IF_ERROR(ReadGptKeys(r, c));
  c.mlp_bias = true;
  c.norms_per_layer = 1;
  c.lm_head_bias = true;
  return ReadTieDefault(r, false, c);
}

// Phi-1 / 1.5 / 2 (modeling_phi.py; `phi-msft` is the original remote code with GPT-style keys and
// the same tensors): biases everywhere, one LayerNorm per layer (parallel attention + MLP), plain
// MLP, lm_head with bias; optional q/k LayerNorms over head_dim (`qk_layernorm`).
absl::Status ReadPhi(const Reader& r, ModelConfig& c) {
  if (c.model_type == "phi-msft") {
    RETURN_IF_ERROR(ReadGptKeys(r, c));
    if (r.Has({"n_head_kv"})) {
      ASSIGN_OR_RETURN(c.num_kv_heads, r.Int({"n_head_kv"}, kMaxCount));
    }
    if (c.num_heads % c.num_kv_heads != 0) return r.Error("field 'n_head_kv' must divide n_head");
  } else {
    RETURN_IF_ERROR(ReadLlamaKeys(r, c));
    c.mlp = MlpKind::kPlain;
    c.norm = NormKind::kLayerNorm;
    ASSIGN_OR_RETURN(c.qk_norm, r.Bool("qk_layernorm", false));
    c.qk_norm_kind = NormKind::kLayerNorm;
  }
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.norms_per_layer = 1;
  c.lm_head_bias = true;
  return ReadTieDefault(r, false, c);
}

// StarCoder2 (modeling_starcoder2.py): GQA, biases from `use_bias` (default true), plain MLP
// (c_fc / c_proj), LayerNorm with bias, tied head by default, sliding window on every layer.
absl::Status ReadStarcoder2(const Reader& r, ModelConfig& c) {
  RETURN_IF_ERROR(ReadLlamaKeys(r, c));
  ASSIGN_OR_RETURN(const bool bias, r.Bool("use_bias", true));
  c.qkv_bias = c.o_bias = c.mlp_bias = bias;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kLayerNorm;
  RETURN_IF_ERROR(ReadTieDefault(r, true, c));
  return ReadSlidingWindow(r, c);
}

// MPT (MosaicML remote code and modeling_mpt.py): fused Wqkv and out_proj, up/down MLP of
// expansion_ratio x d_model, weight-only LayerNorms and no biases when `no_bias` (default true),
// ALiBi (no position table unless `attn_config.alibi` is false and `learned_pos_emb` true), tied.
absl::Status ReadMpt(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"d_model"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"n_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"n_heads"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(c.max_position_embeddings, r.IntOr({"max_seq_len"}, 2048, kMaxCount * 64));
  ASSIGN_OR_RETURN(const int64_t ratio, r.IntOr({"expansion_ratio"}, 4, 64));
  if (c.hidden_size % c.num_heads != 0) return r.Error("field 'd_model' must be a multiple of n_heads");
  c.head_dim = c.hidden_size / c.num_heads;
  c.intermediate_size = ratio * c.hidden_size;
  c.num_kv_heads = c.num_heads;
  bool alibi = true;
  if (const json* attn = r.Find("attn_config")) {
    if (!attn->is_object()) return r.Error("field 'attn_config' must be an object");
    Reader ar(*attn, c.model_type);
    ASSIGN_OR_RETURN(c.num_kv_heads, ar.IntOr({"kv_n_heads"}, c.num_heads, kMaxCount));
    ASSIGN_OR_RETURN(alibi, ar.Bool("alibi", true));
    ASSIGN_OR_RETURN(c.qk_norm, ar.Bool("qk_ln", false));
    c.qk_norm_per_head = c.qk_norm;  // q_ln over d_model, k_ln over kv width
  }
  if (c.num_heads % c.num_kv_heads != 0) return r.Error("field 'attn_config.kv_n_heads' must divide n_heads");
  ASSIGN_OR_RETURN(const bool no_bias, r.Bool("no_bias", true));
  c.qkv_bias = c.o_bias = c.mlp_bias = !no_bias;
  c.mlp = MlpKind::kPlain;
  c.norm = no_bias ? NormKind::kLayerNormNoBias : NormKind::kLayerNorm;
  c.qk_norm_kind = c.norm;
  ASSIGN_OR_RETURN(const bool learned, r.Bool("learned_pos_emb", true));
  if (learned && !alibi) c.learned_positions = c.max_position_embeddings;
  return ReadTieDefault(r, true, c);
}

// Persimmon (modeling_persimmon.py): fused query_key_value and dense with biases, squared-ReLU
// plain MLP with biases, LayerNorms with bias, q/k LayerNorms over head_dim (`qk_layernorm`,
// default true), untied lm_head without bias.
absl::Status ReadPersimmon(const Reader& r, ModelConfig& c) {
  RETURN_IF_ERROR(ReadLlamaKeys(r, c));
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kLayerNorm;
  ASSIGN_OR_RETURN(c.qk_norm, r.Bool("qk_layernorm", true));
  c.qk_norm_kind = NormKind::kLayerNorm;
  return ReadTieDefault(r, false, c);
}

// BERT, RoBERTa, XLM-RoBERTa (modeling_bert.py / modeling_roberta.py / modeling_xlm_roberta.py):
// word + position + token-type embeddings with a LayerNorm, post-norm layers with biases
// everywhere, the pooler (BertModel's default `add_pooling_layer=True`); no MLM / task head.
absl::Status ReadBert(const Reader& r, ModelConfig& c) {
  c.kind = ArchitectureKind::kEncoder;
  RETURN_IF_ERROR(ReadLlamaKeys(r, c));
  ASSIGN_OR_RETURN(c.type_vocab_size, r.Count("type_vocab_size", 2, kMaxVocab));
  if (c.max_position_embeddings <= 0) return r.Error("missing field 'max_position_embeddings'");
  c.learned_positions = c.max_position_embeddings;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kLayerNorm;
  c.embedding_norm = true;
  c.final_norm = false;  // post-norm: each layer ends with its own LayerNorm
  c.pooler = true;
  c.tie_word_embeddings = true;  // no output head is counted
  return absl::OkStatus();
}

// DistilBERT (modeling_distilbert.py): dim, n_layers, n_heads, hidden_dim; word + position
// embeddings with a LayerNorm, no token types, no pooler.
absl::Status ReadDistilBert(const Reader& r, ModelConfig& c) {
  c.kind = ArchitectureKind::kEncoder;
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"dim"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"n_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"n_heads"}, kMaxCount));
  ASSIGN_OR_RETURN(c.intermediate_size, r.Int({"hidden_dim"}));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(c.max_position_embeddings, r.Int({"max_position_embeddings"}, kMaxCount * 64));
  if (c.hidden_size % c.num_heads != 0) return r.Error("field 'dim' must be a multiple of n_heads");
  c.num_kv_heads = c.num_heads;
  c.head_dim = c.hidden_size / c.num_heads;
  c.learned_positions = c.max_position_embeddings;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kLayerNorm;
  c.embedding_norm = true;
  c.final_norm = false;
  c.tie_word_embeddings = true;
  return absl::OkStatus();
}

// Mamba (modeling_mamba.py) and Mamba-2 (modeling_mamba2.py): one RMSNorm + mixer per layer, final
// norm_f, head tied by default (both configs' `tie_word_embeddings=True`).
absl::Status ReadMamba(const Reader& r, ModelConfig& c) {
  c.kind = ArchitectureKind::kStateSpace;
  SsmConfig& s = c.ssm;
  s.version = c.model_type == "mamba2" ? 2 : 1;
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"hidden_size", "d_model"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"num_hidden_layers", "n_layer"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(const int64_t expand, r.IntOr({"expand"}, 2, 64));
  ASSIGN_OR_RETURN(s.inner, r.IntOr({"intermediate_size"}, expand * c.hidden_size));
  ASSIGN_OR_RETURN(s.state_size, r.IntOr({"state_size"}, s.version == 2 ? 128 : 16, 1 << 16));
  ASSIGN_OR_RETURN(s.conv_kernel, r.IntOr({"conv_kernel"}, 4, 1 << 10));
  ASSIGN_OR_RETURN(s.conv_bias, r.Bool("use_conv_bias", true));
  ASSIGN_OR_RETURN(s.proj_bias, r.Bool("use_bias", false));
  if (s.version == 1) {
    // MambaConfig: time_step_rank "auto" -> ceil(hidden / 16).
    const json* rank = r.Find("time_step_rank");
    if (rank == nullptr || rank->is_string()) {
      s.dt_rank = (c.hidden_size + 15) / 16;
    } else {
      ASSIGN_OR_RETURN(s.dt_rank, r.Int({"time_step_rank"}));
    }
  } else {
    ASSIGN_OR_RETURN(s.num_heads, r.Int({"num_heads"}, kMaxCount));
    ASSIGN_OR_RETURN(s.n_groups, r.IntOr({"n_groups"}, 1, kMaxCount));
    ASSIGN_OR_RETURN(const int64_t head_dim, r.IntOr({"head_dim"}, 64));
    s.inner = s.num_heads * head_dim;  // Mamba2Mixer: intermediate_size = num_heads * head_dim
  }
  // The activation estimates size the mixer's expanded width like an MLP's (inference_memory.h).
  c.intermediate_size = s.inner;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kRmsNorm;
  c.norms_per_layer = 1;
  return ReadTieDefault(r, true, c);
}

const std::map<std::string, FamilyReader, std::less<>>& Readers() {
  static const auto* readers = new std::map<std::string, FamilyReader, std::less<>>{
      {"baichuan", ReadLlamaVariant},
      {"internlm", ReadLlamaVariant},
      {"internlm2", ReadLlamaVariant},
      {"orion", ReadLlamaVariant},
      {"minicpm", ReadLlamaVariant},
      {"granite", ReadLlamaVariant},
      {"exaone4", ReadLlamaVariant},
      {"olmo", ReadLlamaVariant},
      {"olmo2", ReadLlamaVariant},
      {"olmo3", ReadLlamaVariant},
      {"cohere", ReadLlamaVariant},
      {"nemotron", ReadLlamaVariant},
      {"olmoe", ReadLlamaVariant},
      {"gemma3_text", ReadGemma3Text},
      {"stablelm", ReadStableLm},
      {"qwen2_moe", ReadQwen2Moe},
      {"deepseek", ReadDeepseekV1},
      {"qwen", ReadQwenV1},
      {"chatglm", ReadChatGlm},
      {"gpt_neox", ReadGptNeox},
      {"gpt_bigcode", ReadGptBigCode},
      {"gptj", ReadGptJ},
      {"codegen", ReadGptJ},
      {"phi", ReadPhi},
      {"phi-msft", ReadPhi},
      {"starcoder2", ReadStarcoder2},
      {"mpt", ReadMpt},
      {"persimmon", ReadPersimmon},
      {"bert", ReadBert},
      {"roberta", ReadBert},
      {"xlm-roberta", ReadBert},
      {"distilbert", ReadDistilBert},
      {"mamba", ReadMamba},
      {"mamba2", ReadMamba},
  };
  return *readers;
}

}  // namespace

FamilyReader FindFamilyReader(std::string_view model_type) {
  auto it = Readers().find(model_type);
  return it == Readers().end() ? nullptr : it->second;
}

}  // namespace gpugeek::workload::config_internal
