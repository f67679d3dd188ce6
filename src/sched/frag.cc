#include "sched/frag.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace gpugeek::sched {

std::vector<TypicalPod> ComputeTypicalPods(std::span<const ResourceShape> pods, double popularity_pct,
                                           const Cluster& cluster) {
  using Key = std::tuple<int64_t, int32_t, int32_t, std::string>;  // cpu, gpu milli, num GPUs, models
  std::map<Key, int64_t> counts;
  for (const ResourceShape& s : pods) {
    const int32_t milli = s.num_gpus > 0 ? s.gpu_milli : 0;
    ++counts[Key{s.cpu_milli, milli, s.num_gpus, absl::StrJoin(s.allowed_models, "|")}];
  }
  std::vector<std::pair<Key, int64_t>> specs(counts.begin(), counts.end());
  // Decreasing count; equal counts: the larger key first (sort.Reverse of the simulator's Less).
  std::sort(specs.begin(), specs.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first > b.first;
  });
  const double total = static_cast<double>(pods.size());
  const double expected = popularity_pct * total / 100.0;
  double cum = 0;
  size_t take = 0;
  while (take < specs.size() && cum < expected) cum += static_cast<double>(specs[take++].second);

  std::vector<TypicalPod> out;
  for (size_t i = 0; i < take; ++i) {
    const auto& [key, count] = specs[i];
    TypicalPod t;
    t.cpu_milli = std::get<0>(key);
    t.gpu_milli = std::get<1>(key);
    t.num_gpus = std::get<2>(key);
    t.models = std::get<3>(key);
    ResourceShape rs;
    rs.num_gpus = t.num_gpus;
    rs.gpu_milli = t.gpu_milli;
    if (!t.models.empty()) rs.allowed_models = absl::StrSplit(t.models, '|');
    const PodShape ps = Compile(rs, cluster);
    t.any_model = ps.any_model;
    t.model_mask = ps.model_mask;
    t.count = count;
    t.probability = static_cast<double>(count) / cum;
    out.push_back(std::move(t));
  }
  return out;
}

int64_t NodePodFragMilli(int model, int64_t cpu_free, std::span<const int32_t> gpu_free, const TypicalPod& m) {
  int64_t total = 0, below = 0;
  int32_t fitting = 0;
  for (int32_t f : gpu_free) {
    total += f;
    if (f < m.gpu_milli) {
      below += f;
    } else {
      ++fitting;
    }
  }
  if (m.gpu_milli == 0) return total;  // CPU-only spec: every idle GPU is stranded for it
  const bool allowed = m.any_model || (model >= 0 && (m.model_mask >> model & 1u));
  if (!allowed) return total;
  if (fitting >= m.num_gpus && cpu_free >= m.cpu_milli) return below;
  return total;
}

double NodeFragMilli(int model, int64_t cpu_free, std::span<const int32_t> gpu_free,
                     std::span<const TypicalPod> typical) {
  double frag = 0;
  for (const TypicalPod& m : typical) {
    frag += m.probability * static_cast<double>(NodePodFragMilli(model, cpu_free, gpu_free, m));
  }
  return frag;
}

int32_t NodeUnallocatableGpus(int model, int64_t cpu_free, std::span<const int32_t> gpu_free,
                              std::span<const TypicalPod> typical) {
  if (typical.empty()) return 0;
  // The smallest per-GPU share of the typical pods that can land on this node: a GPU with at least
  // that much free serves one of them; a GPU with less (but some) free serves none.
  int32_t smallest_usable = INT32_MAX;
  for (const TypicalPod& m : typical) {
    if (m.probability <= 0 || m.gpu_milli == 0) continue;  // CPU-only: uses no GPU
    const bool allowed = m.any_model || (model >= 0 && (m.model_mask >> model & 1u));
    if (!allowed || cpu_free < m.cpu_milli) continue;
    int32_t fitting = 0;
    for (int32_t f : gpu_free) fitting += f >= m.gpu_milli ? 1 : 0;
    if (fitting < m.num_gpus) continue;
    smallest_usable = std::min(smallest_usable, m.gpu_milli);
  }
  int32_t stranded = 0;
  for (int32_t f : gpu_free) stranded += f > 0 && f < smallest_usable ? 1 : 0;
  return stranded;
}

FragTracker::FragTracker(const Cluster& cluster, std::vector<TypicalPod> typical)
    : typical_(std::move(typical)), node_(cluster.size()) {
  for (size_t n = 0; n < cluster.size(); ++n) Refresh(cluster, static_cast<NodeIndex>(n));
}

double FragTracker::total() const {
  double sum = 0;
  for (double f : node_) sum += f;
  return sum;
}

}  // namespace gpugeek::sched
