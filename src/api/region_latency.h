#pragma once
// Round-trip latencies between a provider's regions (`gpugeek server --region-latency FILE`): placement
// tries a job's data region first (where its dataset or last checkpoint lives), then the other regions
// nearest first (docs/scheduling.md, "Regions and data locality").
//
// CSV, one pair a line: REGION_A,REGION_B,LATENCY_MS (symmetric: one line serves both directions)
//   us-east-1,us-west-2,62
//   us-east-1,eu-west-1,75
// LATENCY_MS is an integer 0..60000. Blank lines, '#' comments and a header "region_a,..." are skipped.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::api {

// (region, region) -> round trip in ms, both orders stored.
using RegionLatency = std::map<std::pair<std::string, std::string>, int64_t>;

// Errors: InvalidArgument "FILE:LINE: ..." naming the field and the fix (wrong field count, an empty or
// repeated region, a latency that is not an integer 0..60000, a pair given twice in either order), or
// for a file without any pair.
absl::StatusOr<RegionLatency> ParseRegionLatency(std::string_view text, std::string_view file_name);
// Reads and parses `path`. Errors: ReadFileBounded's (NotFound, PermissionDenied, InvalidArgument over
// kMaxCsvFileBytes); ParseRegionLatency's.
absl::StatusOr<RegionLatency> ReadRegionLatency(const std::string& path);

// `regions` ordered nearest `from` first: `from` itself (0 ms), then by latency, then the regions the
// table does not pair with `from` (unknown distance), each group by name. Duplicates are kept once.
std::vector<std::string> NearestFirst(const RegionLatency& latency, const std::string& from,
                                      std::vector<std::string> regions);

}  // namespace gpugeek::api
