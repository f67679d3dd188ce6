#pragma once
// BestFit (FGD simulator `best_fit_score.go`): score = int(100 x (1 - sum_i 0.5 (free_i - req_i) /
// max_i)), i in {CPU milli, total GPU milli}, max = 128 cores / 8 GPUs, then min-max normalised to
// [0, 100] over the feasible nodes. Least leftover wins. GPU choice: best fit.

#include "sched/plugin.h"

namespace gpugeek::sched {

class BestFitScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "BestFitScore"; }
  void Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
             std::span<int64_t> scores, CycleState& state) override;
  bool normalize() const override { return true; }
};

}  // namespace gpugeek::sched
