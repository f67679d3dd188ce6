#include "sched/dot_product_policy.h"

namespace gpugeek::sched {

void DotProductScore::Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
                            std::span<int64_t> scores, CycleState&) {
  const double req_cpu = static_cast<double>(shape.cpu_milli) / kMaxSpecCpuMilli;
  const double req_gpu = static_cast<double>(shape.total_gpu_milli()) / kMaxSpecGpuMilli;
  for (size_t i = 0; i < feasible.size(); ++i) {
    const NodeIndex n = feasible[i];
    const double dot = static_cast<double>(cluster.cpu_free(n)) / kMaxSpecCpuMilli * req_cpu +
                       static_cast<double>(cluster.gpu_free_total(n)) / kMaxSpecGpuMilli * req_gpu;
    scores[i] = static_cast<int64_t>(static_cast<double>(kMaxNodeScore) * (1 - dot / 2));
  }
}

}  // namespace gpugeek::sched
