#pragma once
// CMA-ES (Hansen, "The CMA Evolution Strategy: A Tutorial", arXiv:1604.00772, 2016: default population,
// weights, learning rates and step-size control of its Table 1) over the unit cube of the numeric,
// unconditional parameters; any other parameter is drawn by univariate TPE.
//
// Stateless: the sampler replays the search from the history on every call. Generation 0 starts once the
// first `startup_trials` random trials are finished, at the best of them with step size sigma0; the points
// of generation g are drawn from a stream of (seed, g), so a trial belongs to slot k of generation g when
// its parameters equal that slot's point. A generation is told once all lambda slots are finished (pruned
// and failed slots rank last; CMA-ES uses ranks only). While slots are still running and none is free, extra
// points come from the current distribution and do not enter its update. The search restarts with a doubled
// population (IPOP, Auger & Hansen 2005) at the best point so far when sigma falls below 1e-8 of the cube.

#include "hpo/sampler.h"

namespace gpugeek::hpo {

struct CmaEsOptions {
  int startup_trials = 10;
  double sigma0 = 0.25;  // in unit-cube widths
  int population = 0;    // lambda; 0 = 4 + floor(3 ln n)
};

class CmaEsSampler : public Sampler {
 public:
  explicit CmaEsSampler(CmaEsOptions options = {}) : options_(options) {}
  std::string_view name() const override { return "cmaes"; }
  Point Suggest(const SearchSpace& space, Trials history, uint64_t seed, int64_t number) const override;

 private:
  CmaEsOptions options_;
};

}  // namespace gpugeek::hpo
