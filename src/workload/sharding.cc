#include "workload/sharding.h"

#include <algorithm>
#include <cmath>

namespace gpugeek::workload {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool IsRowParallel(const std::string& name) {
  return name == "o_proj" || name == "attn.o" || name == "down_proj" || name == "experts.down_proj" ||
         name == "shared_experts.down_proj";
}

GpuShard Stage(const ModelConfig& config, const std::vector<ParamGroup>& inventory, const ParallelLayout& l, bool first,
               bool last) {
  GpuShard shard;
  shard.first_stage = first;
  shard.last_stage = last;
  const int64_t total_layers = std::max<int64_t>(config.TotalLayers(), 1);
  shard.layers = CeilDiv(total_layers, l.pp);
  const double layer_fraction = std::min(1.0, static_cast<double>(shard.layers) / total_layers);
  const int64_t t = l.tp;
  for (const ParamGroup& g : inventory) {
    ShardedGroup s{&g, g.in_features, g.out_features, static_cast<double>(g.copies)};
    if (g.in_layers) {
      s.copies *= layer_fraction;
    } else {
      const bool input_side = g.kind == TensorKind::kEmbedding || g.tower;  // vision towers feed stage 1
      const bool output_side = !input_side;  // head, final norm, T5 relative bias / final norms
      bool here = (input_side && first) || (output_side && last);
      // Tied embeddings: the last stage needs the matrix for the head (Megatron keeps a copy).
      if (input_side && last && !first && config.tie_word_embeddings && g.split == TpSplit::kVocab) here = true;
      if (!here) continue;
    }
    if (g.expert) s.copies /= l.ep;
    switch (g.split) {
      case TpSplit::kSharded:
        if (g.name == "k_proj" || g.name == "v_proj") {
          s.out_features = CeilDiv(config.num_kv_heads, t) * config.head_dim;
        } else if (IsRowParallel(g.name)) {
          s.in_features = CeilDiv(g.in_features, t);
        } else {
          s.out_features = CeilDiv(g.out_features, t);
        }
        break;
      case TpSplit::kVocab:
        s.out_features = CeilDiv(g.out_features, t);
        break;
      case TpSplit::kReplicated:
        break;
    }
    shard.groups.push_back(s);
  }
  return shard;
}

}  // namespace

double GpuShard::Params() const {
  double n = 0;
  for (const ShardedGroup& s : groups) n += static_cast<double>(s.in_features) * s.out_features * s.copies;
  return n;
}

double GpuShard::LinearParams() const {
  double n = 0;
  for (const ShardedGroup& s : groups) {
    if (s.group->kind == TensorKind::kLinear && !s.group->expert) {
      n += static_cast<double>(s.in_features) * s.out_features * s.copies;
    }
  }
  return n;
}

double GpuShard::ExpertParams() const {
  double n = 0;
  for (const ShardedGroup& s : groups) {
    if (s.group->expert) n += static_cast<double>(s.in_features) * s.out_features * s.copies;
  }
  return n;
}

uint64_t GpuShard::WeightBytes(const QuantScheme& linear, const QuantScheme& experts, const QuantScheme& other) const {
  double bytes = 0;
  for (const ShardedGroup& s : groups) {
    const QuantScheme& q = s.group->kind != TensorKind::kLinear ? other : s.group->expert ? experts : linear;
    bytes += static_cast<double>(q.MatrixBytes(s.in_features, s.out_features)) * s.copies;
  }
  return static_cast<uint64_t>(std::ceil(bytes));
}

GpuShard ShardForLayout(const ModelConfig& config, const std::vector<ParamGroup>& inventory,
                        const ParallelLayout& layout) {
  if (layout.pp <= 1) return Stage(config, inventory, layout, true, true);
  GpuShard first = Stage(config, inventory, layout, true, false);
  GpuShard last = Stage(config, inventory, layout, false, true);
  return first.Params() >= last.Params() ? first : last;
}

}  // namespace gpugeek::workload
