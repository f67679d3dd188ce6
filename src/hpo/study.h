#pragma once
// A search in memory: the space, the direction, a sampler and a pruner, and its trials. The experiment
// controller keeps one per experiment and rebuilds it from the store with Restore; the benchmark drives it
// directly. Pure: no I/O, clock or threads; randomness from the seed.
//
// Values are the objective as reported (accuracy when maximising, loss when minimising); the trials it
// hands to samplers and pruners hold losses (negated values when maximising).

#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "hpo/pruner.h"
#include "hpo/sampler.h"

namespace gpugeek::hpo {

enum class Direction { kMinimize, kMaximize };

class Study {
 public:
  Study(SearchSpace space, Direction direction, std::unique_ptr<Sampler> sampler, std::unique_ptr<Pruner> pruner,
        uint64_t seed);

  // Continues a search from its stored trials (values as reported; numbers 0..n-1 in order).
  // InvalidArgument when a trial's number or point does not fit.
  absl::Status Restore(std::vector<Trial> trials);

  // A new running trial at the sampler's point.
  const Trial& Ask();
  // A new running trial at a given point (a user's own first guesses); InvalidArgument when it is not a
  // point of the space.
  absl::StatusOr<const Trial*> Enqueue(Point point);
  // Records `value` at `step` of a running trial and answers whether it should stop (the pruner's call;
  // the caller stops it and calls Prune). NotFound for an unknown trial, FailedPrecondition when it is not
  // running, InvalidArgument when step does not exceed the last one reported.
  absl::StatusOr<bool> Report(int64_t number, int64_t step, double value);
  // Completes a running trial with its final value; a NaN or infinite value fails it instead.
  absl::Status Tell(int64_t number, double value);
  absl::Status Prune(int64_t number);
  absl::Status Fail(int64_t number);

  const SearchSpace& space() const { return space_; }
  Direction direction() const { return direction_; }
  // Trials as samplers see them (losses).
  const std::vector<Trial>& trials() const { return trials_; }
  // A loss as the value reported.
  double ValueOf(double loss) const { return direction_ == Direction::kMaximize ? -loss : loss; }
  // The complete trial with the lowest loss, or nullptr.
  const Trial* Best() const;

 private:
  absl::StatusOr<Trial*> Running(int64_t number);
  double LossOf(double value) const { return direction_ == Direction::kMaximize ? -value : value; }

  SearchSpace space_;
  Direction direction_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Pruner> pruner_;
  uint64_t seed_;
  std::vector<Trial> trials_;
};

}  // namespace gpugeek::hpo
