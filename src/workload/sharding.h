#pragma once
// How a parallel layout splits a model's parameters over GPUs: the shard one GPU holds.
//
// Rules (Megatron-LM, Shoeybi et al. arXiv:1909.08053 Sec. 3; Narayanan et al. arXiv:2104.04473):
//  - tensor parallelism (TP = t) splits projections column- or row-wise (1/t each), keeps norms and
//    row-parallel output biases whole on every rank, and splits the vocabulary: ceil(V/t) rows per
//    rank (the padding rows Megatron adds are counted); K/V projections with fewer KV heads than t
//    are replicated so each rank holds ceil(n_kv/t) heads (vLLM / Megatron GQA rule);
//  - pipeline parallelism (PP = p) gives each stage ceil(L/p) layers (the heaviest stage sets the
//    memory); the first stage holds the input embedding, the last the final norm and the head, and
//    with tied embeddings and p > 1 the last stage keeps its own copy of the embedding (so memory
//    counts it twice although the parameter count does not, bigscience Megatron-DeepSpeed#99);
//  - expert parallelism (EP = e) splits routed experts e ways and each expert's matrices TP ways
//    (expert tensor parallel = TP, Megatron's default); dense parts are not split by EP.
// Data and context parallelism replicate everything here; ZeRO sharding is applied in training_memory.h.

#include <cstdint>
#include <string>
#include <vector>

#include "workload/dtype.h"
#include "workload/model_config.h"
#include "workload/param_count.h"

namespace gpugeek::workload {

struct ParallelLayout {
  int tp = 1;
  int pp = 1;
  int dp = 1;
  int ep = 1;              // expert-parallel ranks, taken from the data-parallel ranks (divides dp)
  int virtual_stages = 1;  // interleaved pipeline chunks per stage (v in Narayanan et al.)
  bool sequence_parallel = false;
  // Context-parallel ranks (Megatron-LM --context-parallel-size; Llama 3 paper Sec. 3.3.2): each holds
  // seq / cp tokens of every sequence (two chunks, for causal load balance) and a full replica of its
  // TP x PP shard; K and V travel around the CP ring inside attention. Gradients are reduced, and the
  // distributed optimizer shards, over DP x CP.
  int cp = 1;
  int Gpus() const { return tp * cp * pp * dp; }
  // Ranks that hold the same weights: gradients are reduced and ZeRO shards over them.
  int ReplicaRanks() const { return dp * cp; }
};

// One parameter group as one GPU of the heaviest pipeline stage holds it.
struct ShardedGroup {
  const ParamGroup* group = nullptr;  // into the inventory passed in
  int64_t in_features = 0;            // shard shape
  int64_t out_features = 0;
  double copies = 0;  // copies on this GPU (fractional when layers do not split evenly by type)
};

struct GpuShard {
  std::vector<ShardedGroup> groups;
  int64_t layers = 0;        // transformer layers on the stage
  bool first_stage = false;  // holds the input embedding
  bool last_stage = false;   // holds the head

  // Parameters on the GPU: all, quantizable linear (non-expert), routed-expert weights.
  double Params() const;
  double LinearParams() const;
  double ExpertParams() const;
  // Weight bytes: projections (kLinear) at `linear` (routed experts at `experts`), everything else
  // (embeddings, head, norms, biases, routers) at `other`, the usual "kept in 16-bit" rule.
  uint64_t WeightBytes(const QuantScheme& linear, const QuantScheme& experts, const QuantScheme& other) const;
};

// The shard of the heaviest pipeline stage (by parameters) for `layout`. `inventory` must outlive
// the result (ShardedGroup points into it).
GpuShard ShardForLayout(const ModelConfig& config, const std::vector<ParamGroup>& inventory,
                        const ParallelLayout& layout);

}  // namespace gpugeek::workload
