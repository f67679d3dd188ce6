#include "sched/score_cache.h"

namespace gpugeek::sched {

int ScoreCache::Row(const PodShape& shape, size_t num_nodes) {
  const Key key{shape.cpu_milli, shape.gpu_milli, shape.num_gpus, shape.any_model, shape.model_mask};
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  if ((rows_.size() + 1) * num_nodes > kMaxCells) return -1;
  rows_.emplace_back(num_nodes);
  const int id = static_cast<int>(rows_.size()) - 1;
  ids_.emplace(key, id);
  return id;
}

}  // namespace gpugeek::sched
