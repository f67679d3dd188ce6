#pragma once
// FGDFit: our policy. FGD's fragmentation gradient on a coarser scale, best fit among equal
// gradients where no model-constrained demand needs the node, GPU shares exactly as FGD.
//
// FGD scores int(100 x sigmoid(dF / 1000)) (dF = F_n before - after placing, milli-GPU, frag.h)
// and lets the seeded node order decide ties, i.e. first fit among near-equal gradients. FGDFit:
//   - CPU-only and whole-GPU pods: primary = int(50 x sigmoid(dF / 1000)) (half FGD's resolution,
//     so more near-equal gradients tie); among equal primaries the node that is left with the least
//     free CPU + GPU (BestFit's measure: CPU / 128 cores + GPU / 8 GPUs, as integers), then the
//     node order. Nodes whose GPU model some model-constrained typical pod may use take no best-fit
//     bonus (they rank after the others at equal primary): best fit would otherwise fill exactly
//     the nodes that constrained pods have no alternative to.
//   - GPU shares (one GPU, < 1000 milli): FGD's score and GPU choice, unchanged (best fit among
//     equal gradients packs shares worse than FGD's node order on the gpushare workloads).
// Measured on all 17 workloads of Alibaba's 2023 trace, with what did not work: docs/scheduling.md.
//
// Score of a CPU-only or whole-GPU pod: primary x 2^18 + bonus, bonus in [0, 256000]
// (256000 - CPU milli left - 16 x GPU milli left, floored at 0). Score of a share: FGD's 0..100.

#include <vector>

#include "sched/fgd_policy.h"
#include "sched/frag.h"
#include "sched/plugin.h"
#include "sched/score_cache.h"

namespace gpugeek::sched {

// FGD's gradient on 50 levels: int(50 x sigmoid((before - after) / 1000)).
int64_t FgdFitPrimary(double frag_before, double frag_after);

// Best-fit bonus of a node left with cpu_after milli-CPU and gpu_after milli-GPU free:
// 256000 - cpu_after - 16 x gpu_after, floored at 0 (128 cores and 8 GPUs weigh the same).
int64_t FgdFitBonus(int64_t cpu_after, int64_t gpu_after);

class FgdFitScore final : public ScorePlugin {
 public:
  static constexpr int64_t kBonusRange = int64_t{1} << 18;

  explicit FgdFitScore(std::vector<TypicalPod> typical);
  std::string_view name() const override { return "FGDFitScore"; }
  void Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
             std::span<int64_t> scores, CycleState& state) override;
  GpuChoice SelectGpus(const PodShape& shape, const Cluster& cluster, NodeIndex n, CycleState& state) override;

 private:
  double FragBefore(const Cluster& cluster, NodeIndex n);
  int32_t Evaluate(const PodShape& shape, const Cluster& cluster, NodeIndex n);

  std::vector<TypicalPod> typical_;
  FgdScore fgd_;  // shares
  // Bit m set: some typical pod with a model constraint may use GPU model id m (the typical pods'
  // model masks are resolved against the cluster they were computed for).
  uint64_t claimed_models_ = 0;
  ScoreCache cache_;
  std::vector<uint32_t> before_version_plus_one_;
  std::vector<double> before_;
};

}  // namespace gpugeek::sched
