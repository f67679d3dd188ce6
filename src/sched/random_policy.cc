#include "sched/random_policy.h"

#include <algorithm>

namespace gpugeek::sched {

void RandomScore::Score(const PodShape&, const Cluster&, std::span<const NodeIndex> feasible, std::span<int64_t> scores,
                        CycleState& state) {
  std::fill(scores.begin(), scores.end(), kMinNodeScore);
  scores[state.rng->Uniform(feasible.size())] = kMaxNodeScore;
}

GpuChoice RandomScore::SelectGpus(const PodShape& shape, const Cluster& cluster, NodeIndex n, CycleState& state) {
  if (!shape.is_share()) return BestFitGpus(shape, cluster, n);  // whole GPUs: first free ones
  GpuChoice out;
  uint64_t seen = 0;
  const auto free = cluster.gpu_free(n);
  for (size_t g = 0; g < free.size(); ++g) {
    // Reservoir sampling of one fitting GPU, as the simulator's allocateGpuIdBasedOnRandomFit.
    if (free[g] >= shape.gpu_milli && state.rng->Uniform(++seen) == 0) {
      out.num = 1;
      out.gpus[0] = static_cast<uint8_t>(g);
    }
  }
  return out;
}

}  // namespace gpugeek::sched
