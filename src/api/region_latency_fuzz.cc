// libFuzzer target: the region latency parser returns a Status on any input, never crashes, and whatever
// it accepts is symmetric, between two named distinct regions, and within 0..60000 ms.

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/region_latency.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto table = gpugeek::api::ParseRegionLatency(text, "fuzz.csv"); table.ok()) {
    for (const auto& [pair, ms] : *table) {
      const auto& [a, b] = pair;
      auto back = table->find({b, a});
      if (a.empty() || b.empty() || a == b || ms < 0 || ms > 60000 || back == table->end() || back->second != ms) {
        std::abort();
      }
    }
  }
  return 0;
}
