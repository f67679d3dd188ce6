#pragma once
// Model configs the workload tests build by hand.

#include <cstdint>

#include "workload/model_config.h"

namespace gpugeek::workload::test_models {

// A GPT model as Korthikanti et al. 2022 and Narayanan et al. SC'21 (Table 1) describe it: MHA,
// GELU MLP with I = 4h, LayerNorm, vocab 51,200. The SC'21 models also tie embeddings, learn 2048
// positions and have biases (`megatron = true`).
inline ModelConfig Gpt(int64_t h, int64_t layers, int64_t heads, bool megatron = false) {
  ModelConfig c;
  c.model_type = "gpt";
  c.hidden_size = h;
  c.num_layers = layers;
  c.num_heads = c.num_kv_heads = heads;
  c.head_dim = h / heads;
  c.intermediate_size = 4 * h;
  c.mlp = MlpKind::kPlain;
  c.norm = NormKind::kLayerNorm;
  c.vocab_size = 51200;
  if (megatron) {
    c.tie_word_embeddings = true;
    c.learned_positions = 2048;
    c.qkv_bias = c.o_bias = c.mlp_bias = true;
  }
  return c;
}

inline ModelConfig MegatronGpt(int64_t h, int64_t layers, int64_t heads) { return Gpt(h, layers, heads, true); }

}  // namespace gpugeek::workload::test_models
