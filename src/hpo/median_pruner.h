#pragma once
// The median stopping rule (Golovin et al. 2017, "Google Vizier", section 3.2.2), with Optuna 3.1's
// MedianPruner semantics: after `startup_trials` complete trials and past `warmup_steps`, a trial stops when
// its best loss so far is worse than the median of the complete trials' losses at the same step.

#include "hpo/pruner.h"

namespace gpugeek::hpo {

class MedianPruner : public Pruner {
 public:
  MedianPruner(int startup_trials, int64_t warmup_steps)
      : startup_trials_(startup_trials), warmup_steps_(warmup_steps) {}
  std::string_view name() const override { return "median"; }
  bool ShouldPrune(const Trial& trial, Trials history, uint64_t seed) const override;

 private:
  int startup_trials_;
  int64_t warmup_steps_;
};

}  // namespace gpugeek::hpo
