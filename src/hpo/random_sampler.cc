#include "hpo/random_sampler.h"

namespace gpugeek::hpo {

Point SampleUniform(const SearchSpace& space, Rng& rng) {
  Point point(space.size(), kInactive);
  for (size_t i = 0; i < space.size(); ++i) {
    const ParamSpec& p = space.params()[i];
    if (p.kind == ParamKind::kCategorical) {
      point[i] = static_cast<double>(rng.Uniform(p.choices.size()));
    } else {
      const double lo = space.TransformedLow(i), hi = space.TransformedHigh(i);
      point[i] = space.Untransform(i, lo + rng.UniformDouble() * (hi - lo));
    }
  }
  space.Deactivate(point);
  return point;
}

int CountComplete(Trials history) {
  int n = 0;
  for (const Trial& t : history) n += t.state == TrialState::kComplete;
  return n;
}

uint64_t StreamHash(uint64_t seed, uint64_t a, uint64_t b) {
  // SplitMix64 (Steele, Lea & Flood 2014) folded over the three words.
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  return mix(mix(mix(seed) ^ a) ^ b);
}

Rng StreamRng(uint64_t seed, uint64_t a, uint64_t b) { return Rng(StreamHash(seed, a, b)); }

Point RandomSampler::Suggest(const SearchSpace& space, Trials /*history*/, uint64_t seed, int64_t number) const {
  Rng rng = StreamRng(seed, static_cast<uint64_t>(number));
  return SampleUniform(space, rng);
}

}  // namespace gpugeek::hpo
