#pragma once
// Exact parameter counts from a ModelConfig, and the tensor inventory they are summed from.
//
// The inventory lists every parameter tensor kind once with how many copies the model holds, what
// kind of tensor it is (quantizable linear, embedding, norm, ...) and how tensor parallelism splits
// it. Counts, weight bytes at a serving format, tensor-parallel shards, LoRA targets and the
// largest layer (DeepSpeed's ZeRO-3 estimate) are all derived from this one list, so they cannot
// disagree. Formulas per family: `../shared/anchors/planner.md` §1; every count in
// `../shared/models/INDEX.md` is reproduced exactly (param_count_test.cc).

#include <cstdint>
#include <string>
#include <vector>

#include "workload/model_config.h"

namespace gpugeek::workload {

enum class TensorKind {
  kLinear,     // a projection weight: quantizable, LoRA-adaptable
  kBias,       // a projection bias
  kEmbedding,  // token / position / patch embedding (input side)
  kLmHead,     // untied output projection
  kNorm,       // LayerNorm / RMSNorm weights and biases
  kOther,      // routers, attention sinks, relative position bias, MoE score bias
};

// How Megatron-style tensor parallelism stores the tensor on each of t ranks.
enum class TpSplit {
  kSharded,     // column- or row-parallel: 1/t per rank
  kReplicated,  // every rank holds it whole
  kVocab,       // vocabulary-parallel: ceil(V/t) rows per rank
};

struct ParamGroup {
  std::string name;  // Hugging Face module name, e.g. "q_proj", "experts.down_proj"
  TensorKind kind = TensorKind::kLinear;
  TpSplit split = TpSplit::kSharded;
  int64_t in_features = 0;    // columns (for a vector: 1)
  int64_t out_features = 0;   // rows (for a vector: its length)
  int64_t copies = 0;         // copies in the whole model (layers × experts, ...)
  int64_t active_copies = 0;  // copies a token passes through (== copies unless routed experts)
  bool expert = false;        // routed-expert weight: sharded by expert parallelism
  bool in_layers = true;      // false: outside the layer stack (embeddings, head, final norm)
  bool tower = false;         // multimodal vision tower or projector: on the first pipeline stage

  int64_t Elements() const { return in_features * out_features; }
  int64_t Total() const { return Elements() * copies; }
  int64_t Active() const { return Elements() * active_copies; }
};

struct ParamCounts {
  int64_t total = 0;
  int64_t embedding = 0;      // input embeddings: token + learned position (+ patch for ViT)
  int64_t lm_head = 0;        // untied output projection; 0 when tied
  int64_t non_embedding = 0;  // total − embedding − lm_head (the Qwen / Gemma / Kaplan convention)
  int64_t active = 0;         // per token, MoE: shared parts + experts_per_token routed experts
  // Active without the input embedding: OpenAI's convention for gpt-oss "active" figures.
  int64_t active_without_input_embedding = 0;
  int64_t mtp = 0;  // DeepSeek MTP module parameters, excluded from total
};

// The tensor inventory of `config` (main model only; MTP modules are reported in counts.mtp).
std::vector<ParamGroup> ParamInventory(const ModelConfig& config);

// Sums the inventory. Exact: computed in int64 (ParseModelConfig rejects configs over 10^15).
ParamCounts CountParameters(const ModelConfig& config);

// The largest single tensor in elements (DeepSpeed's `largest_layer_params` in its ZeRO-3 estimator,
// deepspeed/runtime/zero/stage3.py `estimate_zero3_model_states_mem_needs_all_live`).
int64_t LargestTensorElements(const ModelConfig& config);

}  // namespace gpugeek::workload
