#include "hpo/pruner.h"

#include "fmt/format.h"
#include "hpo/median_pruner.h"
#include "hpo/successive_halving_pruner.h"

namespace gpugeek::hpo {

absl::StatusOr<std::unique_ptr<Pruner>> MakePruner(const PrunerConfig& c) {
  auto invalid = [](const std::string& msg) { return absl::InvalidArgumentError(msg); };
  if (c.name == "none" || c.name.empty()) return std::make_unique<NopPruner>();
  if (c.name == "median") {
    if (c.startup_trials < 0) return invalid("pruner.startup_trials: must be >= 0");
    if (c.warmup_steps < 0) return invalid("pruner.warmup_steps: must be >= 0");
    return std::make_unique<MedianPruner>(c.startup_trials, c.warmup_steps);
  }
  if (c.name == "asha" || c.name == "hyperband") {
    if (c.min_resource < 1) return invalid("pruner.min_resource: must be >= 1 (the grace period, in steps)");
    if (c.reduction_factor < 2 || c.reduction_factor > 100) return invalid("pruner.reduction_factor: must be 2-100");
    if (c.max_resource < 0) return invalid("pruner.max_resource: must be >= 0");
    if (c.name == "asha") {
      return std::make_unique<SuccessiveHalvingPruner>(SuccessiveHalvingOptions{
          .min_resource = c.min_resource, .reduction_factor = c.reduction_factor, .max_resource = c.max_resource});
    }
    if (c.max_resource <= c.min_resource) {
      return invalid("pruner.max_resource: hyperband needs the step trials end at, above min_resource");
    }
    return std::make_unique<HyperbandPruner>(c.min_resource, c.max_resource, c.reduction_factor);
  }
  return invalid(fmt::format("pruner {:?}: unknown; choose none, median, asha or hyperband", c.name));
}

}  // namespace gpugeek::hpo
