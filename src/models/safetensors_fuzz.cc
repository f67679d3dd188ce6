// Fuzz target: any bytes as a safetensors file. The header parser must return a status, never crash,
// and a header it accepts must describe tensors that tile the rest of the input exactly.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "models/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<gpugeek::models::SafetensorsHeader> h = gpugeek::models::ParseSafetensorsHeader(bytes, size);
  if (!h.ok()) return 0;
  uint64_t at = 0;
  for (const gpugeek::models::TensorInfo& t : h->tensors) {
    if (t.begin != at || t.Bytes() != t.Elements() * gpugeek::models::DtypeBytes(t.dtype)) std::abort();
    at = t.end;
  }
  if (h->DataStart() + at != size) std::abort();
  return 0;
}
