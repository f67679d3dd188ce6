#include "sched/gpu_clustering_policy.h"

namespace gpugeek::sched {

int64_t GpuClusteringNodeScore(const PodShape& shape, const Cluster& cluster, NodeIndex n) {
  const int cls = GpuClassOf(shape.num_gpus, shape.gpu_milli);
  if (cls == 0) return kMinNodeScore;
  constexpr int64_t kMaxSpecGpu = 8000;  // the simulator's MaxSpecGpu: 8 GPUs
  const int64_t within = kMaxNodeScore / 4 * (kMaxSpecGpu - cluster.gpu_free_total(n)) / kMaxSpecGpu;
  const int32_t classes = cluster.distinct_gpu_classes(n);
  if (cluster.class_count(n, cls) > 0) return within + (classes == 1 ? kMaxNodeScore * 3 / 4 : kMaxNodeScore * 2 / 4);
  return within + (classes == 0 ? kMaxNodeScore / 4 : 0);
}

void GpuClusteringScore::Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
                               std::span<int64_t> scores, CycleState&) {
  for (size_t i = 0; i < feasible.size(); ++i) scores[i] = GpuClusteringNodeScore(shape, cluster, feasible[i]);
}

}  // namespace gpugeek::sched
