#pragma once
// DotProd (Tetris; FGD simulator `dot_product_score.go`, `-dimext merge -norm max -gpusel best`):
// score = int(100 x (1 - (free . req) / 2)) over vectors [CPU milli, total GPU milli], each divided
// by the largest node (128 cores, 8 GPUs). Prefers nodes whose free resources align least with
// the request, i.e. the fullest nodes. GPU choice: best fit.

#include "sched/plugin.h"

namespace gpugeek::sched {

inline constexpr double kMaxSpecCpuMilli = 128000;  // FGD simulator MaxSpecCpu
inline constexpr double kMaxSpecGpuMilli = 8000;    // FGD simulator MaxSpecGpu

class DotProductScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "DotProductScore"; }
  void Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
             std::span<int64_t> scores, CycleState& state) override;
};

}  // namespace gpugeek::sched
