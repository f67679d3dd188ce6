#include "hpo/median_pruner.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace gpugeek::hpo {

bool MedianPruner::ShouldPrune(const Trial& trial, Trials history, uint64_t /*seed*/) const {
  if (trial.intermediate.empty()) return false;
  const auto [step, latest] = trial.intermediate.back();
  if (std::isnan(latest)) return true;
  if (step < warmup_steps_) return false;
  std::vector<double> at_step;
  int complete = 0;
  for (const Trial& t : history) {
    if (t.state != TrialState::kComplete) continue;
    ++complete;
    for (const auto& [s, v] : t.intermediate) {
      if (s == step && !std::isnan(v)) at_step.push_back(v);
    }
  }
  if (complete < startup_trials_ || at_step.empty()) return false;
  double best = latest;
  for (const auto& [s, v] : trial.intermediate) {
    if (!std::isnan(v)) best = std::min(best, v);
  }
  std::sort(at_step.begin(), at_step.end());
  const size_t k = at_step.size();
  // numpy.nanpercentile(values, 50) with linear interpolation.
  const double median = k % 2 ? at_step[k / 2] : 0.5 * (at_step[k / 2 - 1] + at_step[k / 2]);
  return best > median;
}

}  // namespace gpugeek::hpo
