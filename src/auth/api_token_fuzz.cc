// Fuzz target: the token parsers take any bytes a client puts after "Bearer ".
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "auth/api_token.h"
#include "auth/node_credential.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = gpugeek::auth::ParseApiToken(text);
  // What parses prints back to the same text.
  if (t.ok() && t->Text() != text) std::abort();
  auto j = gpugeek::auth::ParseJoinToken(text);
  if (j.ok() && gpugeek::auth::JoinTokenText(*j) != text) std::abort();
  // A node credential parses to its parts; signing those parts under some key gives the same shape.
  auto c = gpugeek::auth::ParseNodeCredential(text);
  if (c.ok() && c->node.empty()) std::abort();
  return 0;
}
