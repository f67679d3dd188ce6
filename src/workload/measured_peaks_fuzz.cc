// libFuzzer target for the measured-runs CSV reader (`gpugeek plan --compare-measured`): any input must
// give runs or an error naming the line and column, never a crash, a sanitizer report or a hang.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "workload/measured_peaks.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpugeek::workload;
  auto runs = ParseMeasuredRuns(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!runs.ok()) return 0;
  for (const MeasuredRun& r : *runs) {
    if (r.task.seq < 1 || r.task.batch < 1 || !(r.measured_bytes > 0) || r.model.empty()) __builtin_trap();
  }
  return 0;
}
