// libFuzzer target: the emulate-spec parser must answer any input with a spec or an
// InvalidArgument, never crash; a spec it accepts must emulate into a valid inventory.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "hw/emulated_discovery.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpugeek::hw;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = ParseEmulateSpec(text);
  if (!spec.ok()) {
    if (spec.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  if (spec->TotalGpus() < 1 || spec->TotalGpus() > kMaxEmulatedGpus) std::abort();
  // The canonical form must parse back to the same spec.
  auto again = ParseEmulateSpec(spec->Canonical());
  if (!again.ok() || again->Canonical() != spec->Canonical()) std::abort();
  NodeInventory inv = BuildEmulatedInventory(*spec, "fuzz", HostInfo{});
  if (!ValidateInventory(inv).ok()) std::abort();
  return 0;
}
