#pragma once
// Readers for the Alibaba GPU trace v2023 CSVs (cluster-trace-gpu-v2023, "openb"), units as its
// README states: cpu_milli (1000 = one core), memory_mib (MiB = 2^20 bytes), GPU count, gpu_milli
// per GPU (1000 = a whole GPU), gpu_spec = allowed models joined by '|' (empty = any).
//
// Columns are found by their header name, so both the 11-column pod lists and the 5-column
// multigpu* lists read; extra columns are ignored. Errors: InvalidArgument "FILE:LINE:COL: what"
// (LINE and COL 1-based) for a missing column, a short row, a non-integer or out-of-range value;
// NotFound when a file cannot be opened.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::sim {

struct TraceNode {
  std::string name;  // column sn
  int64_t cpu_milli = 0;
  uint64_t memory_mib = 0;
  int32_t gpus = 0;   // column gpu, 0..16
  std::string model;  // empty for a CPU-only node
};

struct TracePod {
  std::string name;
  int64_t cpu_milli = 0;
  uint64_t memory_mib = 0;
  int32_t num_gpu = 0;    // 0..16
  int32_t gpu_milli = 0;  // per GPU, 0..1000; < 1000 only with num_gpu == 1; 0 iff num_gpu == 0
  std::string gpu_spec;   // '|'-joined allowed models; empty = any
};

absl::StatusOr<std::vector<TraceNode>> ParseNodeCsv(std::string_view text, std::string_view file_name);
absl::StatusOr<std::vector<TracePod>> ParsePodCsv(std::string_view text, std::string_view file_name);
absl::StatusOr<std::vector<TraceNode>> ReadNodeCsv(const std::string& path);
absl::StatusOr<std::vector<TracePod>> ReadPodCsv(const std::string& path);

}  // namespace gpugeek::sim
