#include "sched/fgd_fit_policy.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace gpugeek::sched {
namespace {

constexpr double kPrimaryLevels = 50;
constexpr int64_t kBonusCpuMilli = 128000;  // BestFit's MaxSpecCpu; 8 GPUs (8000 milli) weigh the same
constexpr int64_t kGpuToCpu = 16;           // 128000 / 8000

}  // namespace

int64_t FgdFitPrimary(double frag_before, double frag_after) {
  return static_cast<int64_t>(kPrimaryLevels / (1.0 + std::exp(-((frag_before - frag_after) / 1000))));
}

int64_t FgdFitBonus(int64_t cpu_after, int64_t gpu_after) {
  return std::max<int64_t>(0, 2 * kBonusCpuMilli - cpu_after - kGpuToCpu * gpu_after);
}

FgdFitScore::FgdFitScore(std::vector<TypicalPod> typical) : typical_(typical), fgd_(std::move(typical)) {
  for (const TypicalPod& t : typical_) {
    if (t.gpu_milli > 0 && !t.any_model) claimed_models_ |= t.model_mask;
  }
}

double FgdFitScore::FragBefore(const Cluster& cluster, NodeIndex n) {
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

int32_t FgdFitScore::Evaluate(const PodShape& shape, const Cluster& cluster, NodeIndex n) {
  std::array<int32_t, kMaxGpusPerNode> after{};
  const std::span<int32_t> after_span(after.data(), static_cast<size_t>(cluster.gpu_count(n)));
  const int model = cluster.model_id(n);
  const int64_t cpu_after = StateAfter(shape, cluster, n, -1, after_span);
  const int64_t primary = FgdFitPrimary(FragBefore(cluster, n), NodeFragMilli(model, cpu_after, after_span, typical_));
  const bool claimed = model >= 0 && (claimed_models_ >> model & 1u);
  int64_t gpu_after = 0;
  for (int32_t f : after_span) gpu_after += f;
  const int64_t bonus = claimed ? 0 : FgdFitBonus(cpu_after, gpu_after);
  return static_cast<int32_t>(primary * kBonusRange + bonus);
}

void FgdFitScore::Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
                        std::span<int64_t> scores, CycleState& state) {
  if (shape.is_share()) {
    fgd_.Score(shape, cluster, feasible, scores, state);
    return;
  }
  const int row = cache_.Row(shape, cluster.size());
  for (size_t i = 0; i < feasible.size(); ++i) {
    const NodeIndex n = feasible[i];
    const uint32_t version = cluster.version(n);
    if (const ScoreCache::Entry* hit = cache_.Find(row, n, version)) {
      scores[i] = hit->score;
      continue;
    }
    const int32_t s = Evaluate(shape, cluster, n);
    cache_.Put(row, n, version, s, -1);
    scores[i] = s;
  }
}

GpuChoice FgdFitScore::SelectGpus(const PodShape& shape, const Cluster& cluster, NodeIndex n, CycleState& state) {
  if (shape.is_share()) return fgd_.SelectGpus(shape, cluster, n, state);
  return BestFitGpus(shape, cluster, n);
}

}  // namespace gpugeek::sched
