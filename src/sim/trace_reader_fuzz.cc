// libFuzzer target: the trace CSV readers must return a Status, never crash, on any input; and
// whatever they accept must satisfy the documented ranges.

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sim/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto pods = gpugeek::sim::ParsePodCsv(text, "fuzz.csv"); pods.ok()) {
    for (const auto& p : *pods) {
      if (p.num_gpu < 0 || p.num_gpu > 16 || p.gpu_milli < 0 || p.gpu_milli > 1000 ||
          (p.num_gpu == 0) != (p.gpu_milli == 0) || p.name.empty()) {
        std::abort();
      }
    }
  }
  if (auto nodes = gpugeek::sim::ParseNodeCsv(text, "fuzz.csv"); nodes.ok()) {
    for (const auto& n : *nodes) {
      if (n.gpus < 0 || n.gpus > 16 || (n.gpus > 0) == n.model.empty()) std::abort();
    }
  }
  if (auto jobs = gpugeek::sim::ParsePhillyCsv(text, "fuzz.csv"); jobs.ok()) {
    for (const auto& j : *jobs) {
      if (j.num_gpus < 1 || j.num_gpus > 1024 || j.duration_s < 1) std::abort();
    }
  }
  if (auto nodes = gpugeek::sim::ParseSpotNodeCsv(text, "fuzz.csv"); nodes.ok()) {
    for (const auto& n : *nodes) {
      if (n.gpus < 1 || n.gpus > 16 || n.model.empty() || n.name.empty() || n.cpu_milli < 1000) std::abort();
    }
  }
  return 0;
}
