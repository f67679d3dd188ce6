#pragma once
// Samplers propose the next trial's point from the history of a search.
//
// A sampler is a pure function of (space, history, rng): it keeps no state between calls, so a search
// rebuilt from the store after a restart proposes exactly what it would have (CMA-ES replays its
// generations from the history). Running trials in the history are the parallel trials still out; each
// sampler treats them by a constant-liar rule (Ginsbourger et al. 2010) so parallel workers are not sent to
// the same place: TPE ranks them last, the GP gives them the median loss, CMA-ES holds their slots.

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/rng.h"
#include "hpo/space.h"
#include "hpo/trial.h"

namespace gpugeek::hpo {

class Sampler {
 public:
  virtual ~Sampler() = default;
  virtual std::string_view name() const = 0;
  // The point for trial `number` of `space`, inactive parameters set to kInactive. `history` holds every
  // earlier trial. Deterministic in (space, history, seed, number).
  virtual Point Suggest(const SearchSpace& space, Trials history, uint64_t seed, int64_t number) const = 0;
};

// The random stream of one purpose of a search: SplitMix64 over (seed, a, b), so that streams of different
// trials and generations never overlap.
Rng StreamRng(uint64_t seed, uint64_t a, uint64_t b = 0);
uint64_t StreamHash(uint64_t seed, uint64_t a, uint64_t b = 0);

// A point drawn uniformly: numeric parameters uniform in their transformed scale (log-uniform when log),
// categorical ones uniform over the choices.
Point SampleUniform(const SearchSpace& space, Rng& rng);

// Trials that have a loss a sampler can learn from: complete ones.
int CountComplete(Trials history);

// The names samplers are known by in specs and the CLI: random, tpe, tpe-multivariate, cmaes, gp, auto.
// `expected_trials` sizes the portfolio (auto); 0 when unknown. InvalidArgument names the choices.
absl::StatusOr<std::unique_ptr<Sampler>> MakeSampler(std::string_view name, int expected_trials = 0);

}  // namespace gpugeek::hpo
