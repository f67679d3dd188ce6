#include "sched/fgd_policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace gpugeek::sched {

int64_t FgdScoreOfDelta(double frag_before, double frag_after) {
  const double sigmoid = 1.0 / (1.0 + std::exp(-((frag_before - frag_after) / 1000)));
  return static_cast<int64_t>(sigmoid * static_cast<double>(kMaxNodeScore));
}

int64_t StateAfter(const PodShape& shape, const Cluster& cluster, NodeIndex n, int share_gpu,
                   std::span<int32_t> gpu_free_after) {
  const auto free = cluster.gpu_free(n);
  std::copy(free.begin(), free.end(), gpu_free_after.begin());
  if (shape.uses_gpu()) {
    if (shape.is_share()) {
      gpu_free_after[share_gpu] -= shape.gpu_milli;
    } else {
      std::array<uint8_t, kMaxGpusPerNode> order{};
      std::iota(order.begin(), order.begin() + free.size(), uint8_t{0});
      std::stable_sort(order.begin(), order.begin() + free.size(),
                       [&](uint8_t a, uint8_t b) { return free[a] < free[b]; });
      int32_t need = shape.num_gpus;
      for (size_t k = 0; k < free.size() && need > 0; ++k) {
        if (free[order[k]] >= shape.gpu_milli) {
          gpu_free_after[order[k]] -= shape.gpu_milli;
          --need;
        }
      }
    }
  }
  return cluster.cpu_free(n) - shape.cpu_milli;
}

double FgdScore::FragBefore(const Cluster& cluster, NodeIndex n) {
  if (before_.size() != cluster.size()) {
    before_.assign(cluster.size(), 0);
    before_version_plus_one_.assign(cluster.size(), 0);
  }
  if (before_version_plus_one_[n] != cluster.version(n) + 1) {
    before_[n] = NodeFragMilli(cluster, n, typical_);
    before_version_plus_one_[n] = cluster.version(n) + 1;
  }
  return before_[n];
}

ScoreCache::Entry FgdScore::Evaluate(const PodShape& shape, const Cluster& cluster, NodeIndex n) {
  const double before = FragBefore(cluster, n);
  std::array<int32_t, kMaxGpusPerNode> after{};
  const std::span<int32_t> after_span(after.data(), static_cast<size_t>(cluster.gpu_count(n)));
  const int model = cluster.model_id(n);
  ScoreCache::Entry e;
  if (shape.is_share()) {
    const auto free = cluster.gpu_free(n);
    for (size_t g = 0; g < free.size(); ++g) {
      if (free[g] < shape.gpu_milli) continue;
      const int64_t cpu_after = StateAfter(shape, cluster, n, static_cast<int>(g), after_span);
      const int64_t s = FgdScoreOfDelta(before, NodeFragMilli(model, cpu_after, after_span, typical_));
      if (e.gpu < 0 || s > e.score) {
        e.score = static_cast<int32_t>(s);
        e.gpu = static_cast<int8_t>(g);
      }
    }
    return e;
  }
  const int64_t cpu_after = StateAfter(shape, cluster, n, -1, after_span);
  e.score = static_cast<int32_t>(FgdScoreOfDelta(before, NodeFragMilli(model, cpu_after, after_span, typical_)));
  return e;
}

const ScoreCache::Entry& FgdScore::Lookup(const PodShape& shape, const Cluster& cluster, NodeIndex n, int row) {
  const uint32_t version = cluster.version(n);
  if (const ScoreCache::Entry* hit = cache_.Find(row, n, version)) return *hit;
  scratch_ = Evaluate(shape, cluster, n);
  cache_.Put(row, n, version, scratch_.score, scratch_.gpu);
  return scratch_;
}

void FgdScore::Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
                     std::span<int64_t> scores, CycleState&) {
  const int row = cache_.Row(shape, cluster.size());
  for (size_t i = 0; i < feasible.size(); ++i) scores[i] = Lookup(shape, cluster, feasible[i], row).score;
}

GpuChoice FgdScore::SelectGpus(const PodShape& shape, const Cluster& cluster, NodeIndex n, CycleState&) {
  if (!shape.is_share()) return BestFitGpus(shape, cluster, n);
  GpuChoice out;
  const ScoreCache::Entry& e = Lookup(shape, cluster, n, cache_.Row(shape, cluster.size()));
  if (e.gpu >= 0) {
    out.num = 1;
    out.gpus[0] = static_cast<uint8_t>(e.gpu);
  }
  return out;
}

}  // namespace gpugeek::sched
