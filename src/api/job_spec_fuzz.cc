// libFuzzer target: any bytes given as a job spec yield a spec or an InvalidArgument, never a crash;
// a spec that parses renders to YAML that parses again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "api/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto spec = gpugeek::api::ParseJobSpec(std::string_view(reinterpret_cast<const char*>(data), size));
  if (spec.ok()) {
    auto again = gpugeek::api::ParseJobSpec(gpugeek::api::JobSpecToYaml(*spec));
    if (!again.ok()) abort();  // the renderer must produce what the parser accepts
  }
  return 0;
}
