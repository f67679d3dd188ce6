#include "workload/model_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/status/status.h"
#include "common/file.h"
#include "common/json_parse.h"
#include "common/status_macros.h"
#include "workload/config_reader.h"
#include "workload/model_families.h"
#include "workload/param_count.h"

namespace gpugeek::workload {
namespace config_internal {

// Attention geometry shared by the llama-like, DeepSeek and gpt-oss readers.
absl::Status ReadHeads(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"num_attention_heads"}, kMaxCount));
  ASSIGN_OR_RETURN(c.num_kv_heads, r.IntOr({"num_key_value_heads"}, c.num_heads, kMaxCount));
  if (c.num_heads % c.num_kv_heads != 0) {
    return r.Error(fmt::format("field 'num_key_value_heads' ({}) must divide num_attention_heads ({})", c.num_kv_heads,
                               c.num_heads));
  }
  // Read `head_dim` when given: Qwen3, Gemma and Llama 3.2 break head_dim == hidden / heads.
  if (r.Has({"head_dim"})) {
    ASSIGN_OR_RETURN(c.head_dim, r.Int({"head_dim"}));
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      return r.Error("field 'head_dim' missing and hidden_size is not a multiple of num_attention_heads");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  return absl::OkStatus();
}

// Sliding-window layers, from `layer_types` when present, else from the family's fixed pattern.
absl::Status ReadSlidingWindow(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(bool use_sliding, r.Bool("use_sliding_window", true));
  if (!r.Has({"sliding_window"}) || !use_sliding) return absl::OkStatus();
  ASSIGN_OR_RETURN(c.sliding_window, r.Int({"sliding_window"}, int64_t{1} << 40));
  c.sliding_layers.assign(c.num_layers, false);
  const json* pattern = r.Find("sliding_window_pattern");
  if (const json* types = r.Find("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c.num_layers) {
      return r.Error("field 'layer_types' must be an array with one entry per layer");
    }
    for (int64_t i = 0; i < c.num_layers; ++i) {
      const json& t = (*types)[i];
      c.sliding_layers[i] = t.is_string() && t.get<std::string>() == "sliding_attention";
    }
  } else if (c.model_type == "gemma2") {
    // modeling_gemma2.py: `is_sliding = not bool(layer_idx % 2)`.
    for (int64_t i = 0; i < c.num_layers; i += 2) c.sliding_layers[i] = true;
  } else if (pattern != nullptr && pattern->is_number_integer()) {
    // Gemma 3 (configuration_gemma3.py): every `sliding_window_pattern`-th layer is global.
    ASSIGN_OR_RETURN(const int64_t every, r.Int({"sliding_window_pattern"}, kMaxCount));
    for (int64_t i = 0; i < c.num_layers; ++i) c.sliding_layers[i] = (i + 1) % every != 0;
  } else {
    c.sliding_layers.assign(c.num_layers, true);  // Mistral v0.1 style: every layer slides
  }
  return absl::OkStatus();
}

absl::Status ReadTieDefault(const Reader& r, bool fallback, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.tie_word_embeddings, r.Bool("tie_word_embeddings", fallback));
  return absl::OkStatus();
}

}  // namespace config_internal

namespace {

using config_internal::json;
using config_internal::kMaxConfigBytes;
using config_internal::kMaxConfigDepth;
using config_internal::kMaxCount;
using config_internal::kMaxDim;
using config_internal::kMaxParameters;
using config_internal::kMaxVocab;
using config_internal::Reader;
using config_internal::ReadHeads;
using config_internal::ReadSlidingWindow;
using config_internal::ReadTieDefault;

enum class Family {
  kLlamaLike,  // llama, mistral, qwen2, qwen3, gemma, gemma2, phi3, mixtral, qwen3_moe, llama4_text
  kDeepseek,
  kGptOss,
  kGpt2,
  kOpt,
  kBloom,
  kFalcon,
  kT5,
  kVit,
  kUnsupported,
};

Family FamilyOf(const std::string& t) {
  static const char* kLlamaLike[] = {"llama",  "mistral", "qwen2",   "qwen3",     "gemma",
                                     "gemma2", "phi3",    "mixtral", "qwen3_moe", "llama4_text"};
  for (const char* f : kLlamaLike) {
    if (t == f) return Family::kLlamaLike;
  }
  if (t == "deepseek_v2" || t == "deepseek_v3") return Family::kDeepseek;
  if (t == "gpt_oss") return Family::kGptOss;
  if (t == "gpt2") return Family::kGpt2;
  if (t == "opt") return Family::kOpt;
  if (t == "bloom") return Family::kBloom;
  if (t == "falcon" || t == "RefinedWeb" || t == "RefinedWebModel") return Family::kFalcon;
  if (t == "t5" || t == "mt5") return Family::kT5;
  if (t == "vit") return Family::kVit;
  return Family::kUnsupported;
}

absl::Status ReadLlamaLike(const Reader& r, ModelConfig& c) {
  const std::string& t = c.model_type;
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"hidden_size"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"num_hidden_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(c.intermediate_size, r.Int({"intermediate_size"}));
  ASSIGN_OR_RETURN(c.max_position_embeddings, r.IntOr({"max_position_embeddings"}, 0, int64_t{1} << 40));
  RETURN_IF_ERROR(ReadHeads(r, c));
  // Qwen2 hard-codes q/k/v biases (modeling_qwen2.py); Llama's `attention_bias` also biases o_proj.
  ASSIGN_OR_RETURN(bool attention_bias, r.Bool("attention_bias", false));
  c.qkv_bias = t == "qwen2" || attention_bias;
  c.o_bias = attention_bias && (t == "llama" || t == "mistral");
  ASSIGN_OR_RETURN(c.mlp_bias, r.Bool("mlp_bias", false));
  c.qk_norm = t == "qwen3" || t == "qwen3_moe";  // llama4's qk norm is a weightless L2 norm
  c.norms_per_layer = t == "gemma2" ? 4 : 2;
  // Gemma ties by default (GemmaConfig); the other families' configs default to untied.
  RETURN_IF_ERROR(ReadTieDefault(r, t == "gemma" || t == "gemma2", c));
  if (t == "mixtral") {
    ASSIGN_OR_RETURN(c.moe.num_experts, r.Int({"num_local_experts"}, kMaxCount));
    ASSIGN_OR_RETURN(c.moe.experts_per_token, r.Int({"num_experts_per_tok"}, kMaxCount));
    c.moe.intermediate_size = c.intermediate_size;
  } else if (t == "qwen3_moe") {
    ASSIGN_OR_RETURN(c.moe.num_experts, r.Int({"num_experts"}, kMaxCount));
    ASSIGN_OR_RETURN(c.moe.experts_per_token, r.Int({"num_experts_per_tok"}, kMaxCount));
    ASSIGN_OR_RETURN(c.moe.intermediate_size, r.Int({"moe_intermediate_size"}));
    ASSIGN_OR_RETURN(c.moe.layer_step, r.IntOr({"decoder_sparse_step"}, 1, kMaxCount));
    if (const json* dense = r.Find("mlp_only_layers")) {
      if (!dense->is_array()) return r.Error("field 'mlp_only_layers' must be an array");
      for (const json& v : *dense) {
        if (!v.is_number_integer()) return r.Error("field 'mlp_only_layers' must hold integers");
        c.moe.dense_layers.push_back(v.get<int64_t>());
      }
    }
  } else if (t == "llama4_text") {
    ASSIGN_OR_RETURN(c.moe.num_experts, r.Int({"num_local_experts"}, kMaxCount));
    ASSIGN_OR_RETURN(c.moe.experts_per_token, r.Int({"num_experts_per_tok"}, kMaxCount));
    c.moe.intermediate_size = c.intermediate_size;
    c.moe.num_shared_experts = 1;
    c.moe.shared_expert_intermediate_size = c.intermediate_size;
    ASSIGN_OR_RETURN(c.moe.layer_step, r.IntOr({"interleave_moe_layer_step"}, 1, kMaxCount));
    // Dense layers of Llama 4 use the wider `intermediate_size_mlp`.
    ASSIGN_OR_RETURN(c.intermediate_size, r.IntOr({"intermediate_size_mlp"}, c.intermediate_size));
  }
  if (c.IsMoe() && c.moe.experts_per_token > c.moe.num_experts) {
    return r.Error("field 'num_experts_per_tok' exceeds the number of experts");
  }
  return ReadSlidingWindow(r, c);
}

absl::Status ReadDeepseek(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"hidden_size"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"num_hidden_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(c.intermediate_size, r.Int({"intermediate_size"}));
  ASSIGN_OR_RETURN(c.max_position_embeddings, r.IntOr({"max_position_embeddings"}, 0, int64_t{1} << 40));
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"num_attention_heads"}, kMaxCount));
  c.use_mla = true;
  c.mla.q_lora_rank = 0;
  if (r.Has({"q_lora_rank"})) {
    ASSIGN_OR_RETURN(c.mla.q_lora_rank, r.Int({"q_lora_rank"}));
  }
  ASSIGN_OR_RETURN(c.mla.kv_lora_rank, r.Int({"kv_lora_rank"}));
  ASSIGN_OR_RETURN(c.mla.qk_nope_head_dim, r.Int({"qk_nope_head_dim"}));
  ASSIGN_OR_RETURN(c.mla.qk_rope_head_dim, r.Int({"qk_rope_head_dim"}));
  ASSIGN_OR_RETURN(c.mla.v_head_dim, r.Int({"v_head_dim"}));
  // With MLA every head reads the same latent; KV heads == query heads after decompression.
  c.num_kv_heads = c.num_heads;
  c.head_dim = c.mla.qk_nope_head_dim + c.mla.qk_rope_head_dim;
  ASSIGN_OR_RETURN(c.moe.num_experts, r.Count("n_routed_experts", 0));
  if (c.IsMoe()) {
    ASSIGN_OR_RETURN(c.moe.experts_per_token, r.Int({"num_experts_per_tok"}, kMaxCount));
    ASSIGN_OR_RETURN(c.moe.intermediate_size, r.Int({"moe_intermediate_size"}));
    ASSIGN_OR_RETURN(c.moe.num_shared_experts, r.Count("n_shared_experts", 0));
    c.moe.shared_expert_intermediate_size = c.moe.intermediate_size;
    ASSIGN_OR_RETURN(c.moe.first_dense_layers, r.Count("first_k_dense_replace", 0));
    ASSIGN_OR_RETURN(c.moe.layer_step, r.IntOr({"moe_layer_freq"}, 1, kMaxCount));
    c.moe.router_score_bias = r.String("topk_method") == "noaux_tc";
    if (c.moe.experts_per_token > c.moe.num_experts) {
      return r.Error("field 'num_experts_per_tok' exceeds n_routed_experts");
    }
  }
  ASSIGN_OR_RETURN(c.mtp_layers, r.Count("num_nextn_predict_layers", 0));
  return ReadTieDefault(r, false, c);
}

absl::Status ReadGptOss(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"hidden_size"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"num_hidden_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(c.intermediate_size, r.Int({"intermediate_size"}));
  ASSIGN_OR_RETURN(c.max_position_embeddings, r.IntOr({"max_position_embeddings"}, 0, int64_t{1} << 40));
  RETURN_IF_ERROR(ReadHeads(r, c));
  ASSIGN_OR_RETURN(bool attention_bias, r.Bool("attention_bias", true));
  c.qkv_bias = c.o_bias = attention_bias;
  c.attention_sinks = true;
  ASSIGN_OR_RETURN(c.moe.num_experts, r.Int({"num_local_experts"}, kMaxCount));
  ASSIGN_OR_RETURN(c.moe.experts_per_token, r.Int({"num_experts_per_tok", "experts_per_token"}, kMaxCount));
  if (c.moe.experts_per_token > c.moe.num_experts) return r.Error("field 'num_experts_per_tok' exceeds experts");
  c.moe.intermediate_size = c.intermediate_size;
  c.moe.router_bias = c.moe.expert_bias = true;
  RETURN_IF_ERROR(ReadTieDefault(r, false, c));
  return ReadSlidingWindow(r, c);
}

// GPT-2 (n_embd, n_layer, n_head; n_inner null -> 4h), tied head, learned positions.
absl::Status ReadGpt2(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"n_embd", "hidden_size"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"n_layer", "num_hidden_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"n_head", "num_attention_heads"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(c.learned_positions, r.Int({"n_positions", "max_position_embeddings"}, kMaxCount * 64));
  ASSIGN_OR_RETURN(c.intermediate_size, r.IntOr({"n_inner"}, 4 * c.hidden_size));
  c.max_position_embeddings = c.learned_positions;
  if (c.hidden_size % c.num_heads != 0) return r.Error("field 'n_embd' must be a multiple of n_head");
  c.num_kv_heads = c.num_heads;
  c.head_dim = c.hidden_size / c.num_heads;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kLayerNorm;
  c.tie_word_embeddings = true;
  return absl::OkStatus();
}

absl::Status ReadOpt(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"hidden_size"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"num_hidden_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"num_attention_heads"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(c.intermediate_size, r.Int({"ffn_dim"}));
  ASSIGN_OR_RETURN(c.max_position_embeddings, r.Int({"max_position_embeddings"}, kMaxCount * 64));
  ASSIGN_OR_RETURN(c.embedding_proj_dim, r.IntOr({"word_embed_proj_dim"}, c.hidden_size));
  if (c.hidden_size % c.num_heads != 0) return r.Error("field 'hidden_size' must be a multiple of heads");
  // OPTLearnedPositionalEmbedding keeps 2 extra rows (offset 2).
  c.learned_positions = c.max_position_embeddings + 2;
  c.num_kv_heads = c.num_heads;
  c.head_dim = c.hidden_size / c.num_heads;
  ASSIGN_OR_RETURN(bool bias, r.Bool("enable_bias", true));
  c.qkv_bias = c.o_bias = c.mlp_bias = bias;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kLayerNorm;
  ASSIGN_OR_RETURN(bool pre_norm, r.Bool("do_layer_norm_before", true));
  ASSIGN_OR_RETURN(bool remove_final, r.Bool("_remove_final_layer_norm", false));
  c.final_norm = pre_norm && !remove_final;
  return ReadTieDefault(r, true, c);
}

absl::Status ReadBloom(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"hidden_size", "n_embed"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"n_layer", "num_hidden_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"n_head", "num_attention_heads"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  if (c.hidden_size % c.num_heads != 0) return r.Error("field 'hidden_size' must be a multiple of n_head");
  c.num_kv_heads = c.num_heads;
  c.head_dim = c.hidden_size / c.num_heads;
  c.intermediate_size = 4 * c.hidden_size;
  c.qkv_bias = c.o_bias = c.mlp_bias = true;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kLayerNorm;
  c.embedding_norm = true;
  return ReadTieDefault(r, true, c);
}

// Falcon in both key sets: RW (n_head, n_layer, n_head_kv) and in-library (num_attention_heads,
// num_hidden_layers, num_kv_heads). `multi_query` wins over `num_kv_heads` in the old architecture,
// as transformers and vLLM do (vLLM tests/config/base_model_arch_groundtruth.json: falcon-7b 1 KV head).
absl::Status ReadFalcon(const Reader& r, ModelConfig& c) {
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"hidden_size"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"num_hidden_layers", "n_layer"}, kMaxCount));
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"num_attention_heads", "n_head"}, kMaxCount));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  if (c.hidden_size % c.num_heads != 0) return r.Error("field 'hidden_size' must be a multiple of heads");
  c.head_dim = c.hidden_size / c.num_heads;
  ASSIGN_OR_RETURN(bool new_arch, r.Bool("new_decoder_architecture", false));
  ASSIGN_OR_RETURN(bool multi_query, r.Bool("multi_query", true));
  if (new_arch) {
    ASSIGN_OR_RETURN(c.num_kv_heads, r.Int({"num_kv_heads", "n_head_kv"}, kMaxCount));
    c.norms_per_layer = 2;
  } else {
    c.num_kv_heads = multi_query ? 1 : c.num_heads;
    ASSIGN_OR_RETURN(bool parallel_attn, r.Bool("parallel_attn", true));
    c.norms_per_layer = parallel_attn ? 1 : 2;
  }
  if (c.num_heads % c.num_kv_heads != 0) return r.Error("field 'num_kv_heads' must divide the heads");
  ASSIGN_OR_RETURN(c.intermediate_size, r.IntOr({"ffn_hidden_size"}, 4 * c.hidden_size));
  ASSIGN_OR_RETURN(bool bias, r.Bool("bias", false));
  c.qkv_bias = c.o_bias = c.mlp_bias = bias;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kLayerNorm;
  return ReadTieDefault(r, true, c);
}

absl::Status ReadT5(const Reader& r, ModelConfig& c) {
  c.kind = ArchitectureKind::kEncoderDecoder;
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"d_model"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"num_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.num_decoder_layers, r.IntOr({"num_decoder_layers"}, c.num_layers, kMaxCount));
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"num_heads"}, kMaxCount));
  ASSIGN_OR_RETURN(c.head_dim, r.Int({"d_kv"}));
  ASSIGN_OR_RETURN(c.intermediate_size, r.Int({"d_ff"}));
  ASSIGN_OR_RETURN(c.vocab_size, r.Int({"vocab_size"}, kMaxVocab));
  ASSIGN_OR_RETURN(c.relative_attention_buckets, r.IntOr({"relative_attention_num_buckets"}, 32, kMaxCount));
  c.num_kv_heads = c.num_heads;
  const std::string ff = r.String("feed_forward_proj");
  c.mlp = ff.rfind("gated-", 0) == 0 ? MlpKind::kGated : MlpKind::kPlain;
  c.norm = NormKind::kRmsNorm;
  // MT5Config unties the head by default (configuration_mt5.py); T5Config ties it.
  return ReadTieDefault(r, c.model_type != "mt5", c);
}

absl::Status ReadVit(const Reader& r, ModelConfig& c) {
  c.kind = ArchitectureKind::kVisionEncoder;
  ASSIGN_OR_RETURN(c.hidden_size, r.Int({"hidden_size"}));
  ASSIGN_OR_RETURN(c.num_layers, r.Int({"num_hidden_layers"}, kMaxCount));
  ASSIGN_OR_RETURN(c.num_heads, r.Int({"num_attention_heads"}, kMaxCount));
  ASSIGN_OR_RETURN(c.intermediate_size, r.Int({"intermediate_size"}));
  ASSIGN_OR_RETURN(c.image_size, r.Int({"image_size"}, kMaxCount));
  ASSIGN_OR_RETURN(c.patch_size, r.Int({"patch_size"}, kMaxCount));
  ASSIGN_OR_RETURN(c.num_channels, r.IntOr({"num_channels"}, 3, kMaxCount));
  if (c.hidden_size % c.num_heads != 0) return r.Error("field 'hidden_size' must be a multiple of heads");
  if (c.patch_size > c.image_size) return r.Error("field 'patch_size' exceeds image_size");
  c.num_kv_heads = c.num_heads;
  c.head_dim = c.hidden_size / c.num_heads;
  ASSIGN_OR_RETURN(c.qkv_bias, r.Bool("qkv_bias", true));
  c.o_bias = c.mlp_bias = true;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kLayerNorm;
  c.final_norm = true;
  c.max_position_embeddings = c.VisionSequenceLength();
  return absl::OkStatus();
}

absl::Status ReadQuantization(const Reader& r, ModelConfig& c) {
  c.torch_dtype = r.String("torch_dtype");
  if (c.torch_dtype.empty()) c.torch_dtype = r.String("dtype");
  const json* q = r.Find("quantization_config");
  if (q == nullptr) return absl::OkStatus();
  if (!q->is_object()) return r.Error("field 'quantization_config' must be an object");
  Reader qr(*q, c.model_type);
  c.quant_method = qr.String("quant_method");
  if (const json* block = qr.Find("weight_block_size")) {
    if (!block->is_array() || block->empty() || !(*block)[0].is_number_integer() || (*block)[0].get<int64_t>() <= 0 ||
        (*block)[0].get<int64_t>() > kMaxDim) {
      return r.Error("field 'quantization_config.weight_block_size' must be an array of positive integers");
    }
    c.quant_block_size = (*block)[0].get<int64_t>();
  }
  return absl::OkStatus();
}

// Guards the integer arithmetic downstream: estimates the count in floating point first.
absl::Status CheckPlausibleSize(const Reader& r, const ModelConfig& c) {
  double approx = 0;
  for (const ParamGroup& g : ParamInventory(c)) {
    approx += static_cast<double>(g.in_features) * static_cast<double>(g.out_features) * static_cast<double>(g.copies);
  }
  if (approx > kMaxParameters) {
    return r.Error(fmt::format("implausible size: {:.3g} parameters (limit {:.0e})", approx, kMaxParameters));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ParseObject(const json& root, int depth) {
  if (!root.is_object()) return absl::InvalidArgumentError("config.json: the top level must be a JSON object");
  auto it = root.find("model_type");
  if (it == root.end() || !it->is_string()) {
    return absl::InvalidArgumentError(
        "config.json: missing field 'model_type' (not a Hugging Face transformers config?)");
  }
  const std::string model_type = it->get<std::string>();
  if (config_internal::IsTowerWrapper(model_type) && depth == 0) {
    // Llava, Qwen2-VL, Gemma 3: the language model is read by its reader, the vision side here.
    const json text = config_internal::TowerTextConfig(root, model_type);
    ASSIGN_OR_RETURN(ModelConfig inner, ParseObject(text, depth + 1));
    inner.model_type = model_type + "/" + inner.model_type;
    if (inner.torch_dtype.empty()) {
      inner.torch_dtype = Reader(root, model_type).String("torch_dtype");
      if (inner.torch_dtype.empty()) inner.torch_dtype = Reader(root, model_type).String("dtype");
    }
    RETURN_IF_ERROR(config_internal::ReadTower(root, model_type, inner));
    RETURN_IF_ERROR(CheckPlausibleSize(Reader(root, model_type), inner));  // now with the tower
    return inner;
  }
  Family family = FamilyOf(model_type);
  const config_internal::FamilyReader extra = config_internal::FindFamilyReader(model_type);
  if (family == Family::kUnsupported && extra == nullptr) {
    // Other multimodal wrappers (Llama 4, Mistral 3, ...) keep the language model in text_config.
    auto text = root.find("text_config");
    if (text != root.end() && text->is_object() && depth == 0) {
      ASSIGN_OR_RETURN(ModelConfig inner, ParseObject(*text, depth + 1));
      inner.model_type = model_type + "/" + inner.model_type;
      if (inner.torch_dtype.empty()) {
        auto dt = root.find("torch_dtype");
        if (dt != root.end() && dt->is_string()) inner.torch_dtype = dt->get<std::string>();
      }
      return inner;
    }
    return absl::InvalidArgumentError(fmt::format(
        "model_type '{}': unsupported architecture (the accepted types are listed in workload/model_config.h and "
        "docs/planner.md; for any other model, plan from its safetensors headers: `gpugeek plan DIR` with the "
        "model's *.safetensors or model.safetensors.index.json)",
        model_type));
  }
  ModelConfig c;
  c.model_type = model_type;
  Reader r(root, model_type);
  if (extra != nullptr) RETURN_IF_ERROR(extra(r, c));
  switch (family) {
    case Family::kLlamaLike:
      RETURN_IF_ERROR(ReadLlamaLike(r, c));
      break;
    case Family::kDeepseek:
      RETURN_IF_ERROR(ReadDeepseek(r, c));
      break;
    case Family::kGptOss:
      RETURN_IF_ERROR(ReadGptOss(r, c));
      break;
    case Family::kGpt2:
      RETURN_IF_ERROR(ReadGpt2(r, c));
      break;
    case Family::kOpt:
      RETURN_IF_ERROR(ReadOpt(r, c));
      break;
    case Family::kBloom:
      RETURN_IF_ERROR(ReadBloom(r, c));
      break;
    case Family::kFalcon:
      RETURN_IF_ERROR(ReadFalcon(r, c));
      break;
    case Family::kT5:
      RETURN_IF_ERROR(ReadT5(r, c));
      break;
    case Family::kVit:
      RETURN_IF_ERROR(ReadVit(r, c));
      break;
    case Family::kUnsupported:
      break;
  }
  RETURN_IF_ERROR(ReadQuantization(r, c));
  RETURN_IF_ERROR(CheckPlausibleSize(r, c));
  return c;
}

}  // namespace

int64_t NormParamCount(NormKind kind, int64_t width) {
  switch (kind) {
    case NormKind::kLayerNorm:
      return 2 * width;
    case NormKind::kRmsNorm:
    case NormKind::kLayerNormNoBias:
      return width;
    case NormKind::kNonParametric:
      return 0;
  }
  return width;
}

int64_t SsmConfig::StateElementsPerLayer() const {
  // Mamba: conv window over the inner channels + an N-wide state per channel (MambaCache).
  // Mamba-2: the conv also runs over B and C (n_groups·N each); the state is heads x head_dim x N.
  if (version == 1) return inner * (conv_kernel + state_size);
  if (version == 2) return (inner + 2 * n_groups * state_size) * conv_kernel + inner * state_size;
  return 0;
}

int64_t ModelConfig::VisionSequenceLength() const {
  if (kind != ArchitectureKind::kVisionEncoder || patch_size <= 0) return 0;
  const int64_t side = image_size / patch_size;
  return side * side + 1;
}

bool ModelConfig::IsMoeLayer(int64_t i) const {
  if (moe.num_experts <= 0) return false;
  if (i < moe.first_dense_layers) return false;
  if (std::find(moe.dense_layers.begin(), moe.dense_layers.end(), i) != moe.dense_layers.end()) return false;
  const int64_t step = std::max<int64_t>(moe.layer_step, 1);
  // DeepSeek: `layer_idx % moe_layer_freq == 0`; Qwen3-MoE and Llama 4: `(layer_idx + 1) % step == 0`.
  // Both read "every layer" at step 1, the only value the configs in use carry.
  return (i + 1) % step == 0;
}

int64_t ModelConfig::NumSlidingLayers() const { return std::count(sliding_layers.begin(), sliding_layers.end(), true); }

absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text) {
  auto root = ParseJsonBounded(json_text, {.max_bytes = kMaxConfigBytes, .max_depth = kMaxConfigDepth});
  if (!root.ok())
    return absl::InvalidArgumentError(fmt::format("model_config: {}", std::string(root.status().message())));
  return ParseObject(*root, 0);
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFileBounded(path, kMaxConfigBytes, "model config"));
  auto config = ParseModelConfig(text);
  if (!config.ok()) {
    return absl::Status(config.status().code(), fmt::format("{}: {}", path, std::string(config.status().message())));
  }
  return config;
}

}  // namespace gpugeek::workload
