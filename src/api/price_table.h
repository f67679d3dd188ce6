#pragma once
// A provider's GPU-hour prices (docs/capacity.md): what a node costs when its agent names no price
// (`gpugeek server --prices FILE`), and the price list of the spot experiment (`gpugeek sim spot --prices`).
//
// CSV, one price per line: GPU_MODEL,CAPACITY,PRICE
//   A100-SXM-80GB,on-demand,4.10
//   A100-SXM-80GB,spot,1.23
// GPU_MODEL is the catalog id the node reports (`gpugeek catalog`), CAPACITY on-demand, spot or reserved,
// PRICE per GPU-hour in the pool's currency with up to six decimals (kept in integer micro-units).
// Blank lines, '#' comments and a header line "gpu_model,capacity,price" are skipped.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"

namespace gpugeek::api {

// (GPU model, capacity type) -> micro-units per GPU-hour.
using PriceTable = std::map<std::pair<std::string, std::string>, int64_t>;

// Errors: InvalidArgument "FILE:LINE: ..." naming the field and the fix (wrong field count, empty model,
// unknown capacity, a price that is not money, a pair given twice), or for a file without any price.
absl::StatusOr<PriceTable> ParsePriceTable(std::string_view text, std::string_view file_name);
// Reads and parses `path`. Errors: ReadFileBounded's (NotFound, PermissionDenied, InvalidArgument over
// kMaxCsvFileBytes); ParsePriceTable's.
absl::StatusOr<PriceTable> ReadPriceTable(const std::string& path);

}  // namespace gpugeek::api
