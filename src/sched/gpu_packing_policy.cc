#include "sched/gpu_packing_policy.h"

#include <algorithm>
#include <numeric>

namespace gpugeek::sched {

int64_t GpuPackingNodeScore(const PodShape& shape, const Cluster& cluster, NodeIndex n) {
  if (shape.gpu_milli <= 0) return kMinNodeScore;
  const int64_t fully_free = cluster.full_free_gpus(n);
  if (fully_free == cluster.gpu_count(n)) return std::max(kMaxNodeScore / 3 - fully_free, fully_free);
  const auto free = cluster.gpu_free(n);
  std::array<uint8_t, kMaxGpusPerNode> order{};
  std::iota(order.begin(), order.begin() + free.size(), uint8_t{0});
  std::stable_sort(order.begin(), order.begin() + free.size(), [&](uint8_t a, uint8_t b) { return free[a] < free[b]; });
  int32_t need = shape.num_gpus, fully_free_used = 0;
  int64_t free_pct_on_used = 0;
  for (size_t k = 0; k < free.size() && need > 0; ++k) {
    const int32_t f = free[order[k]];
    if (f >= shape.gpu_milli) {
      --need;
      fully_free_used += f == kMilliPerGpu;
      free_pct_on_used += int64_t{f} * 100 / kMilliPerGpu;
    }
  }
  if (need != 0) return kMinNodeScore;  // does not fit; filters keep such nodes out
  if (fully_free_used > 0) return std::max(kMaxNodeScore / 2 - fully_free_used, kMaxNodeScore / 3);
  return std::max(kMaxNodeScore - free_pct_on_used / 10, kMaxNodeScore / 2);
}

void GpuPackingScore::Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
                            std::span<int64_t> scores, CycleState&) {
  for (size_t i = 0; i < feasible.size(); ++i) scores[i] = GpuPackingNodeScore(shape, cluster, feasible[i]);
}

}  // namespace gpugeek::sched
