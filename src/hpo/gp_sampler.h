#pragma once
// Bayesian optimisation with a Gaussian process and log expected improvement (Ament et al. 2023,
// "Unexpected Improvements to Expected Improvement for Bayesian Optimization").
//
// Inputs: numeric parameters as unit coordinates, categorical ones one-hot; an inactive conditional
// parameter is 0.5 (numeric) or all zeros. Outputs: the losses of complete trials, standardised, or their
// logarithm (shifted by 1% of the spread above the minimum) when that model has the higher marginal
// likelihood counting the warp's Jacobian (a warped GP, Snelson et al. 2004). Running trials enter at the
// median loss seen (constant liar, Ginsbourger et al. 2010, CL-median); pruned and failed trials are left
// out.
//
// The acquisition is maximised over 1,000 uniform points plus perturbations of the five best trials, then
// the five best of those are polished by BOBYQA (NLopt) over the numeric coordinates with the categorical
// ones fixed. The first `startup_trials` points are uniform.

#include "hpo/sampler.h"

namespace gpugeek::hpo {

struct GpOptions {
  int startup_trials = 10;
  int random_candidates = 1000;
  int local_starts = 5;
};

class GpSampler : public Sampler {
 public:
  explicit GpSampler(GpOptions options = {}) : options_(options) {}
  std::string_view name() const override { return "gp"; }
  Point Suggest(const SearchSpace& space, Trials history, uint64_t seed, int64_t number) const override;

 private:
  GpOptions options_;
};

// log(E[max(0, best - f)]) for f ~ N(mean, variance): log EI, finite far into the tail.
double LogExpectedImprovement(double best, double mean, double variance);

}  // namespace gpugeek::hpo
