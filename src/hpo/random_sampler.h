#pragma once
// Random search (Bergstra & Bengio 2012): every point uniform, independent of the history.

#include "hpo/sampler.h"

namespace gpugeek::hpo {

class RandomSampler : public Sampler {
 public:
  std::string_view name() const override { return "random"; }
  Point Suggest(const SearchSpace& space, Trials history, uint64_t seed, int64_t number) const override;
};

}  // namespace gpugeek::hpo
