// Fuzz target: ParseApiToken takes any bytes a client puts after "Bearer ".
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "auth/api_token.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = gpugeek::auth::ParseApiToken(text);
  // What parses prints back to the same text.
  if (t.ok() && t->Text() != text) std::abort();
  return 0;
}
