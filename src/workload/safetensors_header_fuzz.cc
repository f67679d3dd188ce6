// libFuzzer target for the safetensors header reader: any bytes must give a header or an error,
// never a crash, a sanitizer report or a hang; an accepted header's byte ranges must match its
// shapes (the reader's contract).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "workload/safetensors_header.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpugeek::workload;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto h = ParseSafetensorsHeader(bytes, size);
  if (!h.ok()) return 0;
  for (const SafetensorsTensor& t : h->tensors) {
    if (t.end < t.begin || t.end > size) __builtin_trap();
    const double expected = static_cast<double>(t.Elements()) * SafetensorsDtypeBytes(t.dtype);
    if (static_cast<double>(t.end - t.begin) != expected) __builtin_trap();
  }
  return 0;
}
