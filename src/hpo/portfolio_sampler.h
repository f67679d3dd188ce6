#pragma once
// The sampler `auto` picks for a search, by its space and budget (measured in bench/hpo.sh against
// Optuna 3.1 on five test functions; docs/hpo.md has the table):
//   conditional parameters            univariate TPE (the only model here that follows the tree)
//   categorical parameters            multivariate TPE (mixed: 0.044 against the GP's 0.27)
//   numeric, expected trials <= 400 (or unknown), at most 24 parameters: the GP (branin, hartmann6,
//                                     levy10, rosenbrock10: lowest of all, Optuna's included)
//   otherwise                         multivariate TPE (its cost grows linearly, the GP's cubically)

#include <memory>

#include "hpo/sampler.h"

namespace gpugeek::hpo {

class PortfolioSampler : public Sampler {
 public:
  explicit PortfolioSampler(int expected_trials = 0) : expected_trials_(expected_trials) {}
  std::string_view name() const override { return "auto"; }
  Point Suggest(const SearchSpace& space, Trials history, uint64_t seed, int64_t number) const override;
  // The sampler `auto` uses for `space`.
  std::unique_ptr<Sampler> Choose(const SearchSpace& space) const;

 private:
  int expected_trials_;
};

}  // namespace gpugeek::hpo
