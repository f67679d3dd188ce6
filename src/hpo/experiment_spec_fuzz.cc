// Fuzz target: experiment specs as users submit them (YAML). Must never crash; a spec that parses must
// render every trial's job from a uniform point.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hpo/experiment_spec.h"
#include "hpo/sampler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpugeek::hpo;
  auto spec = ParseExperimentSpec(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!spec.ok()) return 0;
  gpugeek::Rng rng(size);
  const Point p = SampleUniform(spec->space, rng);
  (void)TrialJob(*spec, 3, p);
  (void)TrialEnv(*spec, "x-000001", 3, p);
  return 0;
}
