#pragma once
// ScoreCache: per (pod shape, node) memo of a score plugin's result, valid while the node's
// Cluster::version is unchanged. Expensive policies (FGD evaluates the fragmentation of every node
// before and after a hypothetical placement) recompute only nodes that changed since the shape was
// last scored; workloads repeat a few dozen shapes, so most lookups hit.

#include <cstdint>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "sched/cluster.h"
#include "sched/request.h"

namespace gpugeek::sched {

class ScoreCache {
 public:
  struct Entry {
    uint32_t version_plus_one = 0;  // 0: empty
    int32_t score = 0;
    int8_t gpu = -1;  // the GPU chosen for a share, -1 otherwise
  };
  // At most this many shape rows are kept (rows are cluster-sized); further shapes go uncached.
  static constexpr size_t kMaxCells = size_t{1} << 26;

  // Row of `shape` (interned on first use), or -1 when the cache is full.
  int Row(const PodShape& shape, size_t num_nodes);
  // The cached entry of node n, or nullptr when absent or stale.
  const Entry* Find(int row, NodeIndex n, uint32_t version) const {
    if (row < 0) return nullptr;
    const Entry& e = rows_[row][n];
    return e.version_plus_one == version + 1 ? &e : nullptr;
  }
  void Put(int row, NodeIndex n, uint32_t version, int32_t score, int8_t gpu) {
    if (row >= 0) rows_[row][n] = Entry{version + 1, score, gpu};
  }

 private:
  using Key = std::tuple<int64_t, int32_t, int32_t, bool, uint64_t>;
  absl::flat_hash_map<Key, int> ids_;
  std::vector<std::vector<Entry>> rows_;
};

}  // namespace gpugeek::sched
