// Fuzz target: an experiment spec's search space and a trial's reported parameters, as they arrive from
// outside (JSON). Neither may crash, and a space that parses must take back the points it writes.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hpo/random_sampler.h"
#include "hpo/space.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpugeek::hpo;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t split = text.find('\n');
  const nlohmann::json spec = nlohmann::json::parse(text.substr(0, split), nullptr, false);
  if (spec.is_discarded()) return 0;
  auto space = SearchSpace::FromJson(spec);
  if (!space.ok()) return 0;
  if (split != std::string_view::npos) {
    const nlohmann::json params = nlohmann::json::parse(text.substr(split + 1), nullptr, false);
    if (!params.is_discarded()) (void)space->PointFromJson(params);
  }
  gpugeek::Rng rng(size);
  const Point p = SampleUniform(*space, rng);
  if (!space->PointFromJson(space->PointToJson(p)).ok()) __builtin_trap();
  return 0;
}
