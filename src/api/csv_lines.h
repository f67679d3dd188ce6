#pragma once
// The small CSV files providers hand the server (price lists, region latencies): one record a line,
// fields split at ',' and trimmed; blank lines, '#' comments and a header line are skipped. No quoting:
// no field of these files holds a comma.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace gpugeek::api {

// Calls `record(line_no, fields)` (1-based line number, trimmed fields) for each record of `text` in
// order, skipping lines that start with `header` (e.g. "gpu_model,"). Stops at, and returns, the first
// error `record` returns.
absl::Status ForEachCsvRecord(std::string_view text, std::string_view header,
                              const std::function<absl::Status(int, const std::vector<std::string>&)>& record);

// The largest such file read (common/file.h ReadFileBounded): far above any real price or latency list.
inline constexpr uint64_t kMaxCsvFileBytes = uint64_t{16} << 20;

}  // namespace gpugeek::api
