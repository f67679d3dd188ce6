#pragma once
// Random (FGD simulator `random_score.go`, `-gpusel random`): one feasible node drawn uniformly at
// random scores 100, the others 0; a share goes to a GPU drawn uniformly among those that fit.

#include "sched/plugin.h"

namespace gpugeek::sched {

class RandomScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "RandomScore"; }
  void Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
             std::span<int64_t> scores, CycleState& state) override;
  GpuChoice SelectGpus(const PodShape& shape, const Cluster& cluster, NodeIndex n, CycleState& state) override;
};

}  // namespace gpugeek::sched
