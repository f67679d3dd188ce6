// libFuzzer target: any bytes given as a service spec yield a spec or an InvalidArgument, never a crash; a
// spec that parses renders to YAML that parses again to the same rendering.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "api/service_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto spec = gpugeek::api::ParseServiceSpec(std::string_view(reinterpret_cast<const char*>(data), size));
  if (spec.ok()) {
    const std::string yaml = gpugeek::api::ServiceSpecToYaml(*spec);
    auto again = gpugeek::api::ParseServiceSpec(yaml);
    if (!again.ok()) abort();                                      // the renderer must produce what the parser accepts
    if (gpugeek::api::ServiceSpecToYaml(*again) != yaml) abort();  // ... and what parses to the same spec
  }
  return 0;
}
