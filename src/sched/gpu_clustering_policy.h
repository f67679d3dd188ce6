#pragma once
// GpuClustering (FGD simulator `gpu_clustering_score.go`): keeps pods of one GPU-affinity class
// (a share of a GPU, or k whole GPUs) together. Four tiers of 25 points by the classes already on
// the node: only the pod's class (75..100), several including it (50..75), an idle node (25..50),
// other classes only (0..25); inside a tier, less free GPU scores higher:
// 25 x (8000 - free GPU milli) / 8000 (integer arithmetic). CPU-only pods score 0. GPU: best fit.

#include "sched/plugin.h"

namespace gpugeek::sched {

class GpuClusteringScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "GpuClusteringScore"; }
  void Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
             std::span<int64_t> scores, CycleState& state) override;
};

int64_t GpuClusteringNodeScore(const PodShape& shape, const Cluster& cluster, NodeIndex n);

}  // namespace gpugeek::sched
