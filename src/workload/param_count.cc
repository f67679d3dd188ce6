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
  // A tensor of a multimodal wrapper's vision tower or projector (replicated, first stage).
  void Tower(std::string name, TensorKind kind, int64_t in, int64_t out, int64_t copies = 1) {
    if (in <= 0 || out <= 0 || copies <= 0) return;
    groups_.push_back(
        ParamGroup{std::move(name), kind, TpSplit::kReplicated, in, out, copies, copies, false, false, true});
  }
  std::vector<ParamGroup> Take() { return std::move(groups_); }

 private:
  std::vector<ParamGroup> groups_;
};

int64_t NormParams(const ModelConfig& c, int64_t width) { return NormParamCount(c.norm, width); }

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
  if (c.qk_norm) {
    // Per-head weights (OLMo-2, Cohere, StableLM) span q's and k's full widths; shared ones
    // (Qwen3, Gemma 3, Phi, Persimmon) are one head_dim vector each.
    const int64_t width = c.qk_norm_per_head ? q + kv : 2 * c.head_dim;
    const int64_t n =
        c.qk_norm_per_head ? NormParamCount(c.qk_norm_kind, width) : 2 * NormParamCount(c.qk_norm_kind, c.head_dim);
    b.Layer(prefix + "qk_norm", TensorKind::kNorm, TpSplit::kReplicated, 1, n, layers);
  }
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
  if (c.moe.shared_expert_gate) b.Layer("shared_expert_gate", TensorKind::kOther, TpSplit::kReplicated, h, 1, layers);
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
  if (c.type_vocab_size > 0) {
    b.Outside("token_type_embeddings", TensorKind::kEmbedding, TpSplit::kReplicated, h, c.type_vocab_size);
  }
  if (c.embedding_norm) b.Outside("word_embeddings_layernorm", TensorKind::kNorm, TpSplit::kReplicated, 1, 2 * h);
  if (c.final_norm) b.Outside("norm", TensorKind::kNorm, TpSplit::kReplicated, 1, NormParams(c, h));
  if (!c.tie_word_embeddings) b.Outside("lm_head", TensorKind::kLmHead, TpSplit::kVocab, emb_dim, c.vocab_size);
  if (c.lm_head_bias) b.Outside("lm_head.bias", TensorKind::kBias, TpSplit::kVocab, 1, c.vocab_size);
}

// CLIP (Llava) and SigLIP (Gemma 3) vision transformers: patch conv, learned positions, pre-norm
// layers with biases everywhere (CLIPVisionTransformer / SiglipVisionTransformer).
void ClipLikeTower(const TowerConfig& t, bool clip, Builder& b) {
  const int64_t v = t.hidden_size, side = t.image_size / t.patch_size;
  const int64_t positions = side * side + (clip ? 1 : 0);  // CLIP adds the class token's position
  const int64_t patch_in = t.num_channels * t.patch_size * t.patch_size;
  b.Tower("vision.patch_embedding", TensorKind::kEmbedding, patch_in + (clip ? 0 : 1), v);  // SigLIP: conv bias
  if (clip) b.Tower("vision.class_embedding", TensorKind::kEmbedding, 1, v);
  b.Tower("vision.position_embedding", TensorKind::kEmbedding, v, positions);
  for (const char* p : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
    b.Tower(std::string("vision.") + p, TensorKind::kLinear, v + 1, v, t.num_layers);  // + bias
  }
  b.Tower("vision.fc1", TensorKind::kLinear, v + 1, t.intermediate_size, t.num_layers);
  b.Tower("vision.fc2", TensorKind::kLinear, t.intermediate_size + 1, v, t.num_layers);
  b.Tower("vision.layer_norms", TensorKind::kNorm, 1, 4 * v, t.num_layers);
  // CLIP: pre_layrnorm + post_layernorm; SigLIP: post_layernorm (its pooling head is unused by Gemma 3
  // and not in the checkpoint: vision_use_head false).
  b.Tower("vision.final_norms", TensorKind::kNorm, 1, (clip ? 4 : 2) * v);
}

// The vision tower and projector of a multimodal wrapper (see TowerKind for the sources).
void AddTower(const ModelConfig& c, Builder& b) {
  const TowerConfig& t = c.tower;
  const int64_t v = t.hidden_size, out = t.out_hidden_size;
  switch (t.kind) {
    case TowerKind::kNone:
      return;
    case TowerKind::kClip: {
      ClipLikeTower(t, true, b);
      const int64_t bias = t.projector_bias ? 1 : 0;
      b.Tower("multi_modal_projector.linear_1", TensorKind::kLinear, v + bias, out);
      b.Tower("multi_modal_projector.linear_2", TensorKind::kLinear, out + bias, out);
      if (t.image_newline) b.Tower("image_newline", TensorKind::kOther, 1, out);
      return;
    }
    case TowerKind::kSiglip:
      ClipLikeTower(t, false, b);
      // Gemma3MultiModalProjector: mm_input_projection_weight (v x h) and mm_soft_emb_norm (RMS, v).
      b.Tower("multi_modal_projector.mm_input_projection", TensorKind::kLinear, v, out);
      b.Tower("multi_modal_projector.mm_soft_emb_norm", TensorKind::kNorm, 1, v);
      return;
    case TowerKind::kQwen2Vl:
    case TowerKind::kQwen25Vl: {
      const bool v25 = t.kind == TowerKind::kQwen25Vl;
      const int64_t patch_in = t.num_channels * t.temporal_patch_size * t.patch_size * t.patch_size;
      b.Tower("visual.patch_embed", TensorKind::kEmbedding, patch_in, v);  // Conv3d without bias
      b.Tower("visual.attn.qkv", TensorKind::kLinear, v + 1, 3 * v, t.num_layers);
      b.Tower("visual.attn.proj", TensorKind::kLinear, v + 1, v, t.num_layers);
      if (v25) {  // Qwen2_5_VLMLP: gate / up / down, all with bias
        b.Tower("visual.mlp.gate_proj", TensorKind::kLinear, v + 1, t.intermediate_size, t.num_layers);
        b.Tower("visual.mlp.up_proj", TensorKind::kLinear, v + 1, t.intermediate_size, t.num_layers);
      } else {  // VisionMlp: fc1 / fc2
        b.Tower("visual.mlp.fc1", TensorKind::kLinear, v + 1, t.intermediate_size, t.num_layers);
      }
      b.Tower("visual.mlp.down_proj", TensorKind::kLinear, t.intermediate_size + 1, v, t.num_layers);
      const NormKind norm = v25 ? NormKind::kRmsNorm : NormKind::kLayerNorm;
      b.Tower("visual.norms", TensorKind::kNorm, 1, 2 * NormParamCount(norm, v), t.num_layers);
      // Patch merger: ln_q over the tower width, then an MLP over merge^2 concatenated patches.
      const int64_t merged = v * t.spatial_merge_size * t.spatial_merge_size;
      b.Tower("visual.merger.ln_q", TensorKind::kNorm, 1, NormParamCount(norm, v));
      b.Tower("visual.merger.mlp.0", TensorKind::kLinear, merged + 1, merged);
      b.Tower("visual.merger.mlp.2", TensorKind::kLinear, merged + 1, out);
      return;
    }
  }
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
  AddTower(c, b);
}

// BERT-family encoders: the decoder's tensors (post-norm, biases) plus token types and the pooler.
void Encoder(const ModelConfig& c, Builder& b) {
  AddAttention(c, c.num_layers, "", b);
  AddMlp(c, c.intermediate_size, c.num_layers, "", b);
  b.Layer("layer_norms", TensorKind::kNorm, TpSplit::kReplicated, 1, 2 * NormParams(c, c.hidden_size), c.num_layers);
  AddTokenEmbeddingAndHead(c, b);
  if (c.pooler) b.Outside("pooler", TensorKind::kLinear, TpSplit::kReplicated, c.hidden_size + 1, c.hidden_size);
}

// Mamba / Mamba-2 mixers (modeling_mamba.py MambaMixer, modeling_mamba2.py Mamba2Mixer), one per
// layer behind an RMSNorm.
void StateSpace(const ModelConfig& c, Builder& b) {
  const SsmConfig& s = c.ssm;
  const int64_t h = c.hidden_size, L = c.num_layers, d = s.inner, n = s.state_size;
  const int64_t bias = s.proj_bias ? 1 : 0;
  if (s.version == 2) {
    const int64_t conv_dim = d + 2 * s.n_groups * n;
    b.Layer("in_proj", TensorKind::kLinear, TpSplit::kSharded, h + bias, 2 * d + 2 * s.n_groups * n + s.num_heads, L);
    b.Layer("conv1d", TensorKind::kOther, TpSplit::kSharded, s.conv_kernel + (s.conv_bias ? 1 : 0), conv_dim, L);
    b.Layer("dt_bias_A_log_D", TensorKind::kOther, TpSplit::kSharded, 3, s.num_heads, L);
    b.Layer("mixer.norm", TensorKind::kNorm, TpSplit::kSharded, 1, d, L);
  } else {
    b.Layer("in_proj", TensorKind::kLinear, TpSplit::kSharded, h + bias, 2 * d, L);
    b.Layer("conv1d", TensorKind::kOther, TpSplit::kSharded, s.conv_kernel + (s.conv_bias ? 1 : 0), d, L);
    b.Layer("x_proj", TensorKind::kLinear, TpSplit::kSharded, d, s.dt_rank + 2 * n, L);
    b.Layer("dt_proj", TensorKind::kLinear, TpSplit::kSharded, s.dt_rank + 1, d, L);  // + bias
    b.Layer("A_log_D", TensorKind::kOther, TpSplit::kSharded, n + 1, d, L);
  }
  b.Layer("out_proj", TensorKind::kLinear, TpSplit::kSharded, d + bias, h, L);
  b.Layer("layer_norms", TensorKind::kNorm, TpSplit::kReplicated, 1, NormParams(c, h), L);
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

// The generic path: tensors exactly as the safetensors headers list them, classified by name.
void FromHeaders(const ModelConfig& c, Builder& b) {
  for (const HeaderTensorGroup& g : c.header_tensors) {
    TensorKind kind = TensorKind::kOther;
    TpSplit split = TpSplit::kReplicated;
    switch (g.role) {
      case HeaderTensorRole::kLinear:
        kind = TensorKind::kLinear;
        split = TpSplit::kSharded;
        break;
      case HeaderTensorRole::kBias:
        kind = TensorKind::kBias;
        break;
      case HeaderTensorRole::kEmbedding:
        kind = TensorKind::kEmbedding;
        split = TpSplit::kVocab;
        break;
      case HeaderTensorRole::kLmHead:
        kind = TensorKind::kLmHead;
        split = TpSplit::kVocab;
        break;
      case HeaderTensorRole::kNorm:
        kind = TensorKind::kNorm;
        break;
      case HeaderTensorRole::kOther:
        break;
    }
    if (g.in_layers) {
      b.Layer(g.name, kind, split, g.cols, g.rows, g.copies);
    } else {
      for (int64_t i = 0; i < g.copies; ++i) b.Outside(g.name, kind, split, g.cols, g.rows);
    }
  }
}

}  // namespace

std::vector<ParamGroup> ParamInventory(const ModelConfig& config) {
  Builder b;
  if (!config.header_tensors.empty()) {
    FromHeaders(config, b);
    return b.Take();
  }
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
    case ArchitectureKind::kEncoder:
      Encoder(config, b);
      break;
    case ArchitectureKind::kStateSpace:
      StateSpace(config, b);
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
