#pragma once
// Runs one score plugin over all nodes of a cluster, for policy tests.

#include <numeric>
#include <vector>

#include "sched/plugin.h"

namespace gpugeek::sched::testing {

inline std::vector<int64_t> ScoreAll(ScorePlugin& plugin, const PodShape& shape, const Cluster& cluster, Rng& rng) {
  std::vector<NodeIndex> nodes(cluster.size());
  std::iota(nodes.begin(), nodes.end(), 0);
  std::vector<int64_t> scores(nodes.size());
  CycleState state{&rng};
  plugin.Score(shape, cluster, nodes, scores, state);
  return scores;
}

}  // namespace gpugeek::sched::testing
