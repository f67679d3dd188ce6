// libFuzzer target: the catalog loader must reject any input with a Status, never crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hw/gpu_catalog.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto catalog = gpugeek::hw::GpuCatalog::Parse(std::string_view(reinterpret_cast<const char*>(data), size));
  if (catalog.ok()) {
    for (const auto& m : (*catalog)->models()) (void)(*catalog)->Resolve(m.id);
  }
  return 0;
}
