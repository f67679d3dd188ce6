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

// Microsoft Philly (Jeon et al., ATC'19) compact job table, as ../shared/traces/philly/philly_jobs.csv:
// columns timestamp (YYYY-MM-DD HH:MM:SS, the cluster's local time), duration (s, may have a
// fraction), num_gpus; others ignored.
struct PhillyJob {
  int64_t submit_s = 0;    // the timestamp as seconds since 1970-01-01 00:00:00 of the same clock
  int64_t duration_s = 0;  // rounded up to whole seconds, >= 1
  int32_t num_gpus = 0;    // 1..1024
};

// Alibaba's spot-GPU node list (Duan et al., ASPLOS'26 GFS), as
// ../shared/traces/alibaba-spot-gpu-v2026/node_info_df.csv: gpu_model, gpu_capacity_num (GPUs on the
// node), cpu_num (vCPUs), node_name.
struct SpotTraceNode {
  std::string name;
  std::string model;
  int32_t gpus = 0;  // 1..16
  int64_t cpu_milli = 0;
};

absl::StatusOr<std::vector<TraceNode>> ParseNodeCsv(std::string_view text, std::string_view file_name);
absl::StatusOr<std::vector<TracePod>> ParsePodCsv(std::string_view text, std::string_view file_name);
absl::StatusOr<std::vector<TraceNode>> ReadNodeCsv(const std::string& path);
absl::StatusOr<std::vector<TracePod>> ReadPodCsv(const std::string& path);
// Errors name the file, line and column of the first bad field (InvalidArgument), or NotFound.
absl::StatusOr<std::vector<PhillyJob>> ParsePhillyCsv(std::string_view text, std::string_view file_name);
absl::StatusOr<std::vector<PhillyJob>> ReadPhillyCsv(const std::string& path);
absl::StatusOr<std::vector<SpotTraceNode>> ParseSpotNodeCsv(std::string_view text, std::string_view file_name);
absl::StatusOr<std::vector<SpotTraceNode>> ReadSpotNodeCsv(const std::string& path);

}  // namespace gpugeek::sim
