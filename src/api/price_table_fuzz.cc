// libFuzzer target: the price table parser returns a Status on any input, never crashes, and whatever it
// accepts has a model, a known capacity and a price that is not negative.

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/price_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto table = gpugeek::api::ParsePriceTable(text, "fuzz.csv"); table.ok()) {
    for (const auto& [key, price] : *table) {
      const auto& [model, capacity] = key;
      if (model.empty() || price < 0 || (capacity != "on-demand" && capacity != "spot" && capacity != "reserved")) {
        std::abort();
      }
    }
  }
  return 0;
}
