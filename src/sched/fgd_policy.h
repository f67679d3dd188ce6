#pragma once
// FGD, Fragmentation Gradient Descent (Weng et al., "Beware of Fragmentation", USENIX ATC'23;
// simulator `fgd_score.go`): place where the node's fragmentation F_n (frag.h) grows least.
// score = int(100 x sigmoid((F_n before - F_n after) / 1000)), F in milli-GPU. A share is tried on
// every GPU that fits and keeps the best (lowest index on ties): that GPU is also the GPU choice.
// Whole GPUs take the first fully free ones.
//
// F_n before placing is cached per node version, and (shape, node) scores in a ScoreCache, so a
// request costs a lookup per unchanged node.

#include <vector>

#include "sched/frag.h"
#include "sched/plugin.h"
#include "sched/score_cache.h"

namespace gpugeek::sched {

// int(100 x sigmoid((before - after) / 1000)), as the simulator truncates it.
int64_t FgdScoreOfDelta(double frag_before, double frag_after);

// The state of node n after taking `shape`, with a share put on GPU `share_gpu` and several GPUs
// taken as the simulator's NodeResource.Sub does (least free first among those that fit).
// Writes free milli per GPU to gpu_free_after (size gpu_count(n)); returns free CPU after.
int64_t StateAfter(const PodShape& shape, const Cluster& cluster, NodeIndex n, int share_gpu,
                   std::span<int32_t> gpu_free_after);

class FgdScore final : public ScorePlugin {
 public:
  explicit FgdScore(std::vector<TypicalPod> typical) : typical_(std::move(typical)) {}
  std::string_view name() const override { return "FGDScore"; }
  void Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
             std::span<int64_t> scores, CycleState& state) override;
  GpuChoice SelectGpus(const PodShape& shape, const Cluster& cluster, NodeIndex n, CycleState& state) override;

 private:
  double FragBefore(const Cluster& cluster, NodeIndex n);
  ScoreCache::Entry Evaluate(const PodShape& shape, const Cluster& cluster, NodeIndex n);
  const ScoreCache::Entry& Lookup(const PodShape& shape, const Cluster& cluster, NodeIndex n, int row);

  std::vector<TypicalPod> typical_;
  ScoreCache cache_;
  std::vector<uint32_t> before_version_plus_one_;
  std::vector<double> before_;
  ScoreCache::Entry scratch_;
};

}  // namespace gpugeek::sched
