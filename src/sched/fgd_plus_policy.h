#pragma once
// FGDPlus: our policy. FGD's fragmentation gradient on a coarser scale, best fit among equals.
//
// FGD scores int(100 x sigmoid(dF / 1000)) (dF = F_n before - after placing, milli-GPU, frag.h) and
// lets the seeded node order decide ties, which acts as first fit among near-equal gradients.
// Measured on the trace (docs/scheduling.md), two changes help:
//   - half the score resolution (50 steps): more near-equal gradients tie, so more pods pack onto
//     the same nodes (an exact, unquantised gradient is worse: 5.9 % vs 4.8 % unallocated on
//     default, because it spreads pods over nodes that differ by a few milli);
//   - among equal scores, the placement that leaves the least CPU and GPU free on the node (the
//     BestFit measure) wins before the node order; a share goes to the GPU with the best gradient,
//     then the least free milli.
// score = int(steps x sigmoid(dF / scale)) x 2^20 + tie, tie in [0, 2^20).

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "sched/frag.h"
#include "sched/plugin.h"

namespace gpugeek::sched {

struct FgdPlusOptions {
  double sigmoid_scale = 1000;  // milli-GPU of dF per unit of the sigmoid's argument (FGD: 1000)
  double score_steps = 50;      // integer score levels (FGD: 100)
  bool best_fit_ties = true;    // false: ties go to the node order, as FGD
};

class FgdPlusScore final : public ScorePlugin {
 public:
  explicit FgdPlusScore(std::vector<TypicalPod> typical, FgdPlusOptions options = {})
      : typical_(std::move(typical)), options_(options) {}
  std::string_view name() const override { return "FGDPlusScore"; }
  void Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
             std::span<int64_t> scores, CycleState& state) override;
  GpuChoice SelectGpus(const PodShape& shape, const Cluster& cluster, NodeIndex n, CycleState& state) override;

  // The score of node n for `shape` (higher is better) and, for a share, the GPU chosen.
  int64_t Key(const PodShape& shape, const Cluster& cluster, NodeIndex n, int* share_gpu);

 private:
  double FragBefore(const Cluster& cluster, NodeIndex n);

  std::vector<TypicalPod> typical_;
  FgdPlusOptions options_;
  std::vector<uint32_t> before_version_plus_one_;
  std::vector<double> before_;
  struct Cached {
    uint32_t version_plus_one = 0;
    int64_t key = 0;
  };
  absl::flat_hash_map<std::tuple<int64_t, int32_t, int32_t, bool, uint64_t>, int> rows_index_;
  std::vector<std::vector<Cached>> rows_;
};

}  // namespace gpugeek::sched
