#include "sched/fgd_plus_policy.h"

#include <algorithm>
#include <cmath>

#include "sched/dot_product_policy.h"
#include "sched/fgd_policy.h"

namespace gpugeek::sched {
namespace {

constexpr int64_t kTieRange = int64_t{1} << 20;

// Best-fit leftover after placing, in [0, 1]: 0.5 x CPU left / 128 cores + 0.5 x GPU left / 8 GPUs.
double Leftover(int64_t cpu_after, int64_t gpu_after) {
  return 0.5 * static_cast<double>(cpu_after) / kMaxSpecCpuMilli +
         0.5 * static_cast<double>(gpu_after) / kMaxSpecGpuMilli;
}

}  // namespace

double FgdPlusScore::FragBefore(const Cluster& cluster, NodeIndex n) {
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

int64_t FgdPlusScore::Key(const PodShape& shape, const Cluster& cluster, NodeIndex n, int* share_gpu) {
  const double before = FragBefore(cluster, n);
  std::array<int32_t, kMaxGpusPerNode> after{};
  const std::span<int32_t> after_span(after.data(), static_cast<size_t>(cluster.gpu_count(n)));
  const int model = cluster.model_id(n);
  auto key_of = [&](int64_t cpu_after) {
    int64_t gpu_after = 0;
    for (int32_t f : after_span) gpu_after += f;
    const double delta = before - NodeFragMilli(model, cpu_after, after_span, typical_);
    const auto primary =
        static_cast<int64_t>(options_.score_steps / (1.0 + std::exp(-(delta / options_.sigmoid_scale))));
    const double tie = options_.best_fit_ties ? 1 - std::min(1.0, Leftover(cpu_after, gpu_after)) : 0;
    return primary * kTieRange + static_cast<int64_t>(tie * static_cast<double>(kTieRange - 1));
  };
  *share_gpu = -1;
  if (!shape.is_share()) return key_of(StateAfter(shape, cluster, n, -1, after_span));
  int64_t best = 0;
  const auto free = cluster.gpu_free(n);
  for (size_t g = 0; g < free.size(); ++g) {
    if (free[g] < shape.gpu_milli) continue;
    int64_t k = key_of(StateAfter(shape, cluster, n, static_cast<int>(g), after_span));
    // Same node, same leftover for every GPU: prefer the tightest GPU among equal gradients.
    k = k * 2048 + (kMilliPerGpu - free[g]);
    if (*share_gpu < 0 || k > best) {
      best = k;
      *share_gpu = static_cast<int>(g);
    }
  }
  return best / 2048;
}

void FgdPlusScore::Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
                         std::span<int64_t> scores, CycleState&) {
  const std::tuple<int64_t, int32_t, int32_t, bool, uint64_t> shape_key{
      shape.cpu_milli, shape.gpu_milli, shape.num_gpus, shape.any_model, shape.model_mask};
  auto [it, inserted] = rows_index_.try_emplace(shape_key, static_cast<int>(rows_.size()));
  if (inserted) rows_.emplace_back(cluster.size());
  std::vector<Cached>& row = rows_[it->second];
  for (size_t i = 0; i < feasible.size(); ++i) {
    const NodeIndex n = feasible[i];
    Cached& c = row[n];
    if (c.version_plus_one != cluster.version(n) + 1) {
      int gpu = -1;
      c.key = Key(shape, cluster, n, &gpu);
      c.version_plus_one = cluster.version(n) + 1;
    }
    scores[i] = c.key;
  }
}

GpuChoice FgdPlusScore::SelectGpus(const PodShape& shape, const Cluster& cluster, NodeIndex n, CycleState&) {
  if (!shape.is_share()) return BestFitGpus(shape, cluster, n);
  int gpu = -1;
  Key(shape, cluster, n, &gpu);
  GpuChoice out;
  if (gpu >= 0) {
    out.num = 1;
    out.gpus[0] = static_cast<uint8_t>(gpu);
  }
  return out;
}

}  // namespace gpugeek::sched
