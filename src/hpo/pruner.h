#pragma once
// Pruners decide, each time a running trial reports a loss at a step, whether to stop it now so its GPUs
// go to more promising trials. Like samplers they are pure functions of the history: a search rebuilt
// from the store decides exactly as before.

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "hpo/trial.h"

namespace gpugeek::hpo {

class Pruner {
 public:
  virtual ~Pruner() = default;
  virtual std::string_view name() const = 0;
  // Whether `trial`, which has just reported its last entry of `intermediate`, should stop. `history`
  // holds every trial of the search, `trial` among them. `seed` is the search's.
  virtual bool ShouldPrune(const Trial& trial, Trials history, uint64_t seed) const = 0;
};

// Never prunes.
class NopPruner : public Pruner {
 public:
  std::string_view name() const override { return "none"; }
  bool ShouldPrune(const Trial&, Trials, uint64_t) const override { return false; }
};

struct PrunerConfig {
  std::string name = "none";  // none, median, asha, hyperband
  int64_t min_resource = 1;   // asha, hyperband: the grace period, in steps
  int64_t max_resource = 0;   // asha (0: no top rung), hyperband (required): the step a trial ends at
  int reduction_factor = 3;   // asha, hyperband: eta
  int startup_trials = 5;     // median: complete trials before it prunes
  int64_t warmup_steps = 0;   // median: steps of each trial it never prunes at
};

// InvalidArgument naming the field for an unknown name or out-of-range number.
absl::StatusOr<std::unique_ptr<Pruner>> MakePruner(const PrunerConfig& config);

}  // namespace gpugeek::hpo
