#pragma once
// NvlinkTopology: for a shape of several GPUs, 100 on nodes where one NVLink domain alone can hold
// them (collectives stay on NVLink), 0 elsewhere; 0 everywhere for shapes of at most one GPU.
// Added to any policy with FrameworkOptions::topology_weight; the best-fit GPU choice then keeps the
// GPUs inside that domain.

#include "sched/plugin.h"

namespace gpugeek::sched {

class NvlinkTopologyScore final : public ScorePlugin {
 public:
  std::string_view name() const override { return "NvlinkTopology"; }
  void Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
             std::span<int64_t> scores, CycleState& state) override;
};

// True when one NVLink domain of node n has num_gpus GPUs with gpu_milli free.
bool FitsOneNvlinkDomain(const PodShape& shape, const Cluster& cluster, NodeIndex n);

}  // namespace gpugeek::sched
