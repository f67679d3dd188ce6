#pragma once
// Tree-structured Parzen Estimator (Bergstra et al. 2011), with Optuna 3.1's TPESampler defaults as the
// reference: 10 random start-up trials, gamma(n) = min(ceil(0.1 n), 25) observations in the good group,
// 24 candidates drawn from the good group's estimator l(x), the one maximising log l(x) - log g(x) taken,
// prior weight 1, default observation weights (parzen_estimator.h).
//
// Observations rank complete trials by loss, then pruned ones by the last step they reached (further is
// better), then by their loss there; running trials (constant liar) and pruned trials that reported
// nothing rank last. Failed trials are left out.
//
// Univariate TPE models each parameter alone; multivariate (Falkner et al. 2018, BOHB; Optuna's
// multivariate=True) models the unconditional parameters jointly and the conditional ones alone.

#include "hpo/sampler.h"

namespace gpugeek::hpo {

struct TpeOptions {
  bool multivariate = false;
  int startup_trials = 10;
  int ei_candidates = 24;
  double prior_weight = 1.0;
};

class TpeSampler : public Sampler {
 public:
  explicit TpeSampler(TpeOptions options = {}) : options_(options) {}
  std::string_view name() const override { return options_.multivariate ? "tpe-multivariate" : "tpe"; }
  Point Suggest(const SearchSpace& space, Trials history, uint64_t seed, int64_t number) const override;

 private:
  // Fills `group` of `point` from the trials where the whole group is active.
  void SampleGroup(const SearchSpace& space, Trials history, const std::vector<size_t>& group, Point& point,
                   Rng& rng) const;
  TpeOptions options_;
};

// The number of observations in TPE's good group out of n: min(ceil(0.1 n), 25).
size_t TpeGamma(size_t n);

}  // namespace gpugeek::hpo
