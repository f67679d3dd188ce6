#include "sched/best_fit_policy.h"

#include "sched/dot_product_policy.h"

namespace gpugeek::sched {

void BestFitScore::Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
                         std::span<int64_t> scores, CycleState&) {
  const auto req_cpu = static_cast<double>(shape.cpu_milli);
  const auto req_gpu = static_cast<double>(shape.total_gpu_milli());
  for (size_t i = 0; i < feasible.size(); ++i) {
    const NodeIndex n = feasible[i];
    // Same operation order as the simulator so the truncation to an integer matches.
    double s = (static_cast<double>(cluster.cpu_free(n)) - req_cpu) / kMaxSpecCpuMilli * 0.5;
    s += (static_cast<double>(cluster.gpu_free_total(n)) - req_gpu) / kMaxSpecGpuMilli * 0.5;
    scores[i] = static_cast<int64_t>((1.0 - s) * static_cast<double>(kMaxNodeScore));
  }
}

}  // namespace gpugeek::sched
