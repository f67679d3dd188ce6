#pragma once
// Asynchronous successive halving (ASHA: Li et al. 2020, "A System for Massively Parallel Hyperparameter
// Tuning", algorithm 2), in its stopping form: a trial reaching rung k, at step
// min_resource * eta^(min_early_stopping_rate + k), continues only if its loss there is within the best
// 1/eta of every loss recorded at that rung so far (itself included); while a rung holds fewer than eta
// losses, only a new best continues (Optuna 3.1's SuccessiveHalvingPruner rule). With max_resource set,
// no rung is placed at or past it.
//
// Hyperband (Li et al. 2018, JMLR 18(185)) runs several such ladders ("brackets") with growing grace
// periods; each trial joins one bracket, drawn from the search's seed with the bracket sizes of the paper
// (Optuna 3.1's allocation: ceil(B * eta^s / (s + 1)) for s = B - 1 - bracket), and competes only within
// it.

#include <functional>
#include <vector>

#include "hpo/pruner.h"

namespace gpugeek::hpo {

struct SuccessiveHalvingOptions {
  int64_t min_resource = 1;  // the grace period
  int reduction_factor = 3;
  int min_early_stopping_rate = 0;
  int64_t max_resource = 0;  // 0: rungs go on for ever
};

class SuccessiveHalvingPruner : public Pruner {
 public:
  explicit SuccessiveHalvingPruner(SuccessiveHalvingOptions options) : options_(options) {}
  std::string_view name() const override { return "asha"; }
  bool ShouldPrune(const Trial& trial, Trials history, uint64_t seed) const override;
  // The same rule with only the trials `peer` accepts competing.
  bool ShouldPruneAmong(const Trial& trial, Trials history, const std::function<bool(const Trial&)>& peer) const;
  // The steps of the rungs, below `up_to`.
  std::vector<int64_t> RungSteps(int64_t up_to) const;

 private:
  SuccessiveHalvingOptions options_;
};

class HyperbandPruner : public Pruner {
 public:
  HyperbandPruner(int64_t min_resource, int64_t max_resource, int reduction_factor);
  std::string_view name() const override { return "hyperband"; }
  bool ShouldPrune(const Trial& trial, Trials history, uint64_t seed) const override;
  // The bracket trial `number` of a search with `seed` joins.
  int BracketOf(uint64_t seed, int64_t number) const;
  int brackets() const { return static_cast<int>(brackets_.size()); }

 private:
  std::vector<SuccessiveHalvingPruner> brackets_;
  std::vector<int64_t> budgets_;
};

}  // namespace gpugeek::hpo
