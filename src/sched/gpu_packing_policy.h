#pragma once
// GpuPacking (FGD simulator `gpu_packing_score.go`), from high to low:
//   fits on partially used GPUs: 100 - (sum of their free % ) / 10, at least 50;
//   needs fully free GPUs on a used node: 50 - (fully free GPUs taken), at least 33;
//   node entirely idle: max(33 - #GPUs, #GPUs).
// CPU-only pods score 0 everywhere. GPU choice: best fit.

#include "sched/plugin.h"

namespace gpugeek::sched {

class GpuPackingScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "GpuPackingScore"; }
  void Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
             std::span<int64_t> scores, CycleState& state) override;
};

// The score of one node (exposed for tests).
int64_t GpuPackingNodeScore(const PodShape& shape, const Cluster& cluster, NodeIndex n);

}  // namespace gpugeek::sched
