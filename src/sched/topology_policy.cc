#include "sched/topology_policy.h"

#include <array>

namespace gpugeek::sched {

bool FitsOneNvlinkDomain(const PodShape& shape, const Cluster& cluster, NodeIndex n) {
  const auto free = cluster.gpu_free(n);
  const auto domain = cluster.nvlink_domain(n);
  std::array<int, 256> fitting{};
  for (size_t g = 0; g < free.size(); ++g) {
    if (free[g] >= shape.gpu_milli && ++fitting[static_cast<uint8_t>(domain[g])] >= shape.num_gpus) return true;
  }
  return false;
}

void NvlinkTopologyScore::Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
                                std::span<int64_t> scores, CycleState&) {
  for (size_t i = 0; i < feasible.size(); ++i) {
    scores[i] = shape.num_gpus > 1 && FitsOneNvlinkDomain(shape, cluster, feasible[i]) ? kMaxNodeScore : kMinNodeScore;
  }
}

}  // namespace gpugeek::sched
