// Best-fit GPU choice inside a node, with NVLink-domain awareness for multi-GPU shapes.

#include <algorithm>

#include "sched/plugin.h"

namespace gpugeek::sched {

GpuChoice BestFitGpus(const PodShape& shape, const Cluster& cluster, NodeIndex n) {
  GpuChoice out;
  if (!shape.uses_gpu()) return out;
  const std::span<const int32_t> free = cluster.gpu_free(n);
  const int count = static_cast<int>(free.size());
  if (shape.is_share()) {
    int best = -1;
    for (int g = 0; g < count; ++g) {
      if (free[g] >= shape.gpu_milli && (best < 0 || free[g] < free[best])) best = g;
    }
    if (best >= 0) out.gpus[out.num++] = static_cast<uint8_t>(best);
    return out;
  }
  // Several GPUs: keep them in one NVLink domain when one can hold them all, choosing the domain
  // with the fewest fitting GPUs (best fit across domains keeps big domains whole).
  const std::span<const int8_t> domain = cluster.nvlink_domain(n);
  const bool multi_domain =
      shape.num_gpus > 1 && std::any_of(domain.begin(), domain.end(), [&](int8_t d) { return d != domain[0]; });
  int chosen_domain = -1;
  if (multi_domain) {
    int best_fitting = 1 << 30;
    for (int g = 0; g < count; ++g) {
      const int d = domain[g];
      bool seen = false;
      for (int h = 0; h < g; ++h) seen |= domain[h] == d;
      if (seen) continue;
      int fitting = 0;
      for (int h = 0; h < count; ++h) fitting += domain[h] == d && free[h] >= shape.gpu_milli;
      if (fitting >= shape.num_gpus && fitting < best_fitting) {
        best_fitting = fitting;
        chosen_domain = d;
      }
    }
  }
  // Whole GPUs: the first fitting GPUs by index (the FGD simulator's AllocateExclusiveGpuId); a share
  // of several GPUs (not produced by Validate'd requests) would take them the same way.
  for (int g = 0; g < count && out.num < shape.num_gpus; ++g) {
    if (free[g] >= shape.gpu_milli && (chosen_domain < 0 || domain[g] == chosen_domain)) {
      out.gpus[out.num++] = static_cast<uint8_t>(g);
    }
  }
  return out;
}

GpuChoice ScorePlugin::SelectGpus(const PodShape& shape, const Cluster& cluster, NodeIndex n, CycleState&) {
  return BestFitGpus(shape, cluster, n);
}

}  // namespace gpugeek::sched
