#include "hpo/successive_halving_pruner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "hpo/sampler.h"

namespace gpugeek::hpo {

std::vector<int64_t> SuccessiveHalvingPruner::RungSteps(int64_t up_to) const {
  std::vector<int64_t> steps;
  double step = static_cast<double>(options_.min_resource) *
                std::pow(options_.reduction_factor, options_.min_early_stopping_rate);
  while (step <= static_cast<double>(up_to) && step < 9e15) {
    if (options_.max_resource > 0 && step >= static_cast<double>(options_.max_resource)) break;
    steps.push_back(static_cast<int64_t>(step));
    step *= options_.reduction_factor;
  }
  return steps;
}

bool SuccessiveHalvingPruner::ShouldPruneAmong(const Trial& trial, Trials history,
                                               const std::function<bool(const Trial&)>& peer) const {
  if (trial.intermediate.empty()) return false;
  const auto [step, value] = trial.intermediate.back();
  if (std::isnan(value)) return true;
  const int64_t previous = trial.intermediate.size() >= 2 ? trial.intermediate[trial.intermediate.size() - 2].first
                                                          : std::numeric_limits<int64_t>::min();
  for (int64_t rung : RungSteps(step)) {
    if (rung <= previous) continue;  // decided at an earlier report
    std::vector<double> competing{value};
    for (const Trial& t : history) {
      if (t.number == trial.number || !peer(t)) continue;
      if (auto v = t.ValueAtOrAfter(rung); v && !std::isnan(*v)) competing.push_back(*v);
    }
    std::sort(competing.begin(), competing.end());
    const size_t promotable = std::max<size_t>(competing.size() / options_.reduction_factor, 1) - 1;
    if (value > competing[promotable]) return true;
  }
  return false;
}

bool SuccessiveHalvingPruner::ShouldPrune(const Trial& trial, Trials history, uint64_t /*seed*/) const {
  return ShouldPruneAmong(trial, history, [](const Trial&) { return true; });
}

HyperbandPruner::HyperbandPruner(int64_t min_resource, int64_t max_resource, int reduction_factor) {
  const int n = static_cast<int>(std::floor(
                    std::log(static_cast<double>(max_resource) / min_resource) / std::log(reduction_factor) + 1e-9)) +
                1;
  for (int b = 0; b < n; ++b) {
    brackets_.emplace_back(SuccessiveHalvingOptions{.min_resource = min_resource,
                                                    .reduction_factor = reduction_factor,
                                                    .min_early_stopping_rate = b,
                                                    .max_resource = max_resource});
    const int s = n - 1 - b;
    budgets_.push_back(static_cast<int64_t>(std::ceil(n * std::pow(reduction_factor, s) / (s + 1))));
  }
}

int HyperbandPruner::BracketOf(uint64_t seed, int64_t number) const {
  const int64_t total = std::accumulate(budgets_.begin(), budgets_.end(), int64_t{0});
  int64_t draw = static_cast<int64_t>(StreamHash(seed, 0x4842, static_cast<uint64_t>(number)) %  // "HB"
                                      static_cast<uint64_t>(total));
  for (size_t b = 0; b < budgets_.size(); ++b) {
    draw -= budgets_[b];
    if (draw < 0) return static_cast<int>(b);
  }
  return static_cast<int>(budgets_.size()) - 1;
}

bool HyperbandPruner::ShouldPrune(const Trial& trial, Trials history, uint64_t seed) const {
  const int bracket = BracketOf(seed, trial.number);
  return brackets_[bracket].ShouldPruneAmong(trial, history,
                                             [&](const Trial& t) { return BracketOf(seed, t.number) == bracket; });
}

}  // namespace gpugeek::hpo
