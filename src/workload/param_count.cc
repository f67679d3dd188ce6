#include "workload/param_count.h"

#include <algorithm>

namespace gpugeek::workload {
namespace {

class Builder {
 public:
  // One tensor kind inside the layer stack, `per_layer` copies in each of `layers` layers.
  void Layer(std::string name, TensorKind kind, TpSplit split, int64_t in, int64_t out, int64_t layers,
             int64_t per_layer = 1, int64_t active_per_layer = -1, bool expert = false) {
    if (layers <= 0 || per_layer <= 0 || in <= 0 || out <= 0) return;
    if (active_per_layer < 0) active_per_layer = per_layer;
    groups_.push_back(
        ParamGroup{std::move(name), kind, split, in, out, layers * per_layer, layers * active_per_layer, expert, true});
  }
  // One tensor outside the layer stack.
  void Outside(std::string name, TensorKind kind, TpSplit split, int64_t in, int64_t out) {
    if (in <= 0 || out <= 0) return;
    groups_.push_back(ParamGroup{std::move(name), kind, split, in, out, 1, 1, false, false});
  }
  std::vector<ParamGroup> Take() { return std::move(groups_); }

 private:
  std::vector<ParamGroup> groups_;
};

int64_t NormParams(const ModelConfig& c, int64_t width) { return c.norm == NormKind::kLayerNorm ? 2 * width : width; }

// Standard (MHA / GQA / MQA) self-attention of a decoder-like layer, `layers` copies.
void AddAttention(const ModelConfig& c, int64_t layers, const std::string& prefix, Builder& b) {
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  b.Layer(prefix + "q_proj", TensorKind::kLinear, TpSplit::kSharded, h, q, layers);
  b.Layer(prefix + "k_proj", TensorKind::kLinear, TpSplit::kSharded, h, kv, layers);
  b.Layer(prefix + "v_proj", TensorKind::kLinear, TpSplit::kSharded, h, kv, layers);
  b.Layer(prefix + "o_proj", TensorKind::kLinear, TpSplit::kSharded, q, h, layers);
  if (c.qkv_bias) b.Layer(prefix + "qkv_bias", TensorKind::kBias, TpSplit::kSharded, 1, q + 2 * kv, layers);
  // A row-parallel output bias is added after the all-reduce, so every rank holds it.
  if (c.o_bias) b.Layer(prefix + "o_proj.bias", TensorKind::kBias, TpSplit::kReplicated, 1, h, layers);
  if (c.qk_norm) b.Layer(prefix + "qk_norm", TensorKind::kNorm, TpSplit::kReplicated, 1, 2 * c.head_dim, layers);
  if (c.attention_sinks) b.Layer(prefix + "sinks", TensorKind::kOther, TpSplit::kSharded, 1, c.num_heads, layers);
}

// DeepSeek multi-head latent attention (modeling_deepseek.py DeepseekV2Attention).
void AddMla(const ModelConfig& c, int64_t layers, Builder& b) {
  const int64_t h = c.hidden_size, n = c.num_heads;
  const MlaConfig& m = c.mla;
  const int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
  if (m.q_lora_rank > 0) {
    b.Layer("q_a_proj", TensorKind::kLinear, TpSplit::kReplicated, h, m.q_lora_rank, layers);
    b.Layer("q_a_layernorm", TensorKind::kNorm, TpSplit::kReplicated, 1, m.q_lora_rank, layers);
    b.Layer("q_b_proj", TensorKind::kLinear, TpSplit::kSharded, m.q_lora_rank, n * qk, layers);
  } else {
    b.Layer("q_proj", TensorKind::kLinear, TpSplit::kSharded, h, n * qk, layers);
  }
  b.Layer("kv_a_proj_with_mqa", TensorKind::kLinear, TpSplit::kReplicated, h, m.kv_lora_rank + m.qk_rope_head_dim,
          layers);
  b.Layer("kv_a_layernorm", TensorKind::kNorm, TpSplit::kReplicated, 1, m.kv_lora_rank, layers);
  b.Layer("kv_b_proj", TensorKind::kLinear, TpSplit::kSharded, m.kv_lora_rank, n * (m.qk_nope_head_dim + m.v_head_dim),
          layers);
  b.Layer("o_proj", TensorKind::kLinear, TpSplit::kSharded, n * m.v_head_dim, h, layers);
}

// A dense MLP of width `inter`, `per_layer` copies (shared experts use per_layer > 1).
void AddMlp(const ModelConfig& c, int64_t inter, int64_t layers, const std::string& prefix, Builder& b,
            int64_t per_layer = 1) {
  const int64_t h = c.hidden_size;
  if (c.mlp == MlpKind::kGated) {
    b.Layer(prefix + "gate_proj", TensorKind::kLinear, TpSplit::kSharded, h, inter, layers, per_layer);
  }
  b.Layer(prefix + "up_proj", TensorKind::kLinear, TpSplit::kSharded, h, inter, layers, per_layer);
  b.Layer(prefix + "down_proj", TensorKind::kLinear, TpSplit::kSharded, inter, h, layers, per_layer);
  if (c.mlp_bias) {
    const int64_t in_bias = c.mlp == MlpKind::kGated ? 2 * inter : inter;
    b.Layer(prefix + "up_proj.bias", TensorKind::kBias, TpSplit::kSharded, 1, in_bias, layers, per_layer);
    b.Layer(prefix + "down_proj.bias", TensorKind::kBias, TpSplit::kReplicated, 1, h, layers, per_layer);
  }
}

// The routed experts + router + shared experts of `layers` MoE layers.
void AddMoe(const ModelConfig& c, int64_t layers, Builder& b) {
  const int64_t h = c.hidden_size, e = c.moe.num_experts, k = c.moe.experts_per_token, i = c.moe.intermediate_size;
  const int64_t gate_up = c.mlp == MlpKind::kGated ? 2 : 1;
  if (c.mlp == MlpKind::kGated) {
    b.Layer("experts.gate_proj", TensorKind::kLinear, TpSplit::kSharded, h, i, layers, e, k, true);
  }
  b.Layer("experts.up_proj", TensorKind::kLinear, TpSplit::kSharded, h, i, layers, e, k, true);
  b.Layer("experts.down_proj", TensorKind::kLinear, TpSplit::kSharded, i, h, layers, e, k, true);
  if (c.moe.expert_bias) {
    b.Layer("experts.gate_up_proj.bias", TensorKind::kBias, TpSplit::kSharded, 1, gate_up * i, layers, e, k, true);
    b.Layer("experts.down_proj.bias", TensorKind::kBias, TpSplit::kReplicated, 1, h, layers, e, k, true);
  }
  b.Layer("router", TensorKind::kOther, TpSplit::kReplicated, h, e, layers);
  if (c.moe.router_bias) b.Layer("router.bias", TensorKind::kOther, TpSplit::kReplicated, 1, e, layers);
  if (c.moe.router_score_bias) {
    b.Layer("e_score_correction_bias", TensorKind::kOther, TpSplit::kReplicated, 1, e, layers);
  }
  if (c.moe.num_shared_experts > 0) {
    AddMlp(c, c.moe.shared_expert_intermediate_size, layers, "shared_experts.", b, c.moe.num_shared_experts);
  }
}

void AddTokenEmbeddingAndHead(const ModelConfig& c, Builder& b) {
  const int64_t h = c.hidden_size;
  const int64_t emb_dim = c.embedding_proj_dim > 0 ? c.embedding_proj_dim : h;
  b.Outside("embed_tokens", TensorKind::kEmbedding, TpSplit::kVocab, emb_dim, c.vocab_size);
  if (c.learned_positions > 0) {
    b.Outside("embed_positions", TensorKind::kEmbedding, TpSplit::kReplicated, h, c.learned_positions);
  }
  if (emb_dim != h) {  // OPT-350m style project_in / project_out (no bias)
    b.Outside("project_in", TensorKind::kLinear, TpSplit::kReplicated, emb_dim, h);
    b.Outside("project_out", TensorKind::kLinear, TpSplit::kReplicated, h, emb_dim);
  }
  if (c.embedding_norm) b.Outside("word_embeddings_layernorm", TensorKind::kNorm, TpSplit::kReplicated, 1, 2 * h);
  if (c.final_norm) b.Outside("norm", TensorKind::kNorm, TpSplit::kReplicated, 1, NormParams(c, h));
  if (!c.tie_word_embeddings) b.Outside("lm_head", TensorKind::kLmHead, TpSplit::kVocab, emb_dim, c.vocab_size);
}

void Decoder(const ModelConfig& c, Builder& b) {
  const int64_t h = c.hidden_size;
  int64_t moe_layers = 0;
  for (int64_t i = 0; i < c.num_layers; ++i) moe_layers += c.IsMoeLayer(i) ? 1 : 0;
  const int64_t dense_layers = c.num_layers - moe_layers;
  if (c.use_mla) {
    AddMla(c, c.num_layers, b);
  } else {
    AddAttention(c, c.num_layers, "", b);
  }
  AddMlp(c, c.intermediate_size, dense_layers, "", b);
  if (moe_layers > 0) AddMoe(c, moe_layers, b);
  b.Layer("layer_norms", TensorKind::kNorm, TpSplit::kReplicated, 1, c.norms_per_layer * NormParams(c, h),
          c.num_layers);
  AddTokenEmbeddingAndHead(c, b);
}

// T5 (modeling_t5.py): no biases, RMS-style norms, relative position bias in each stack's first layer.
void EncoderDecoder(const ModelConfig& c, Builder& b) {
  const int64_t h = c.hidden_size, inner = c.num_heads * c.head_dim;
  const int64_t enc = c.num_layers, dec = c.num_decoder_layers;
  for (const char* p : {"q", "k", "v"}) {
    b.Layer(std::string("attn.") + p, TensorKind::kLinear, TpSplit::kSharded, h, inner, enc + 2 * dec);
  }
  b.Layer("attn.o", TensorKind::kLinear, TpSplit::kSharded, inner, h, enc + 2 * dec);
  AddMlp(c, c.intermediate_size, enc + dec, "", b);
  b.Layer("encoder.layer_norms", TensorKind::kNorm, TpSplit::kReplicated, 1, 2 * h, enc);
  b.Layer("decoder.layer_norms", TensorKind::kNorm, TpSplit::kReplicated, 1, 3 * h, dec);
  b.Outside("relative_attention_bias", TensorKind::kOther, TpSplit::kSharded, c.num_heads,
            2 * c.relative_attention_buckets);
  b.Outside("shared", TensorKind::kEmbedding, TpSplit::kVocab, h, c.vocab_size);
  b.Outside("final_layer_norms", TensorKind::kNorm, TpSplit::kReplicated, 1, 2 * h);
  if (!c.tie_word_embeddings) b.Outside("lm_head", TensorKind::kLmHead, TpSplit::kVocab, h, c.vocab_size);
}

// ViTModel (modeling_vit.py): biases everywhere, LayerNorm, CLS token, learned positions, pooler.
void VisionEncoder(const ModelConfig& c, Builder& b) {
  const int64_t h = c.hidden_size;
  AddAttention(c, c.num_layers, "", b);
  AddMlp(c, c.intermediate_size, c.num_layers, "", b);
  b.Layer("layer_norms", TensorKind::kNorm, TpSplit::kReplicated, 1, 2 * NormParams(c, h), c.num_layers);
  const int64_t patch_in = c.num_channels * c.patch_size * c.patch_size;
  b.Outside("patch_embeddings", TensorKind::kEmbedding, TpSplit::kReplicated, patch_in + 1, h);  // + bias
  b.Outside("cls_token", TensorKind::kEmbedding, TpSplit::kReplicated, 1, h);
  b.Outside("position_embeddings", TensorKind::kEmbedding, TpSplit::kReplicated, h, c.VisionSequenceLength());
  b.Outside("layernorm", TensorKind::kNorm, TpSplit::kReplicated, 1, NormParams(c, h));
  if (c.vit_pooler) b.Outside("pooler", TensorKind::kLinear, TpSplit::kReplicated, h + 1, h);
}

}  // namespace

std::vector<ParamGroup> ParamInventory(const ModelConfig& config) {
  Builder b;
  switch (config.kind) {
    case ArchitectureKind::kDecoder:
      Decoder(config, b);
      break;
    case ArchitectureKind::kEncoderDecoder:
      EncoderDecoder(config, b);
      break;
    case ArchitectureKind::kVisionEncoder:
      VisionEncoder(config, b);
      break;
  }
  return b.Take();
}

ParamCounts CountParameters(const ModelConfig& config) {
  ParamCounts c;
  for (const ParamGroup& g : ParamInventory(config)) {
    c.total += g.Total();
    c.active += g.Active();
    if (g.kind == TensorKind::kEmbedding) c.embedding += g.Total();
    if (g.kind == TensorKind::kLmHead) c.lm_head += g.Total();
  }
  c.non_embedding = c.total - c.embedding - c.lm_head;
  c.active_without_input_embedding = c.active - c.embedding;
  if (config.mtp_layers > 0) {
    // DeepSeek-V3 MTP module (arXiv:2412.19437 Sec. 2.2): one full MoE layer, two RMSNorms on the
    // inputs, a 2h -> h projection; embedding and head shared with the main model. With V3's
    // config this gives 11.5B less the shared head, as README_WEIGHTS.md reports.
    ModelConfig layer = config;
    layer.num_layers = 1;
    layer.moe.first_dense_layers = 0;
    layer.tie_word_embeddings = true;
    layer.vocab_size = 0;
    layer.final_norm = false;
    int64_t one_layer = 0;
    for (const ParamGroup& g : ParamInventory(layer)) one_layer += g.Total();
    const int64_t h = config.hidden_size;
    c.mtp = config.mtp_layers * (one_layer + 2 * h + 2 * h * h + h);
  }
  return c;
}

int64_t LargestTensorElements(const ModelConfig& config) {
  int64_t largest = 0;
  for (const ParamGroup& g : ParamInventory(config)) largest = std::max(largest, g.Elements());
  return largest;
}

}  // namespace gpugeek::workload
