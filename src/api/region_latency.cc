#include "api/region_latency.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include <fmt/format.h>

#include "api/csv_lines.h"
#include "common/file.h"
#include "common/status_macros.h"

namespace gpugeek::api {

namespace {
constexpr int64_t kMaxLatencyMs = 60'000;
}  // namespace

absl::StatusOr<RegionLatency> ParseRegionLatency(std::string_view text, std::string_view file_name) {
  RegionLatency table;
  RETURN_IF_ERROR(ForEachCsvRecord(text, "region_a,", [&](int line_no, const std::vector<std::string>& f) {
    auto error = [&](const std::string& what) {
      return absl::InvalidArgumentError(fmt::format("{}:{}: {}", file_name, line_no, what));
    };
    if (f.size() != 3) {
      return error(
          fmt::format("{} fields; want REGION_A,REGION_B,LATENCY_MS such as us-east-1,us-west-2,62", f.size()));
    }
    if (f[0].empty() || f[1].empty()) return error("empty region: name both regions, e.g. us-east-1,us-west-2,62");
    if (f[0] == f[1]) return error(fmt::format("{} is paired with itself: a region is 0 ms from itself", f[0]));
    int64_t ms = -1;
    const auto [end, ec] = std::from_chars(f[2].data(), f[2].data() + f[2].size(), ms);
    if (ec != std::errc() || end != f[2].data() + f[2].size() || ms < 0 || ms > kMaxLatencyMs) {
      return error(fmt::format("latency '{}' must be whole milliseconds, 0..{}", f[2], kMaxLatencyMs));
    }
    if (!table.emplace(std::pair{f[0], f[1]}, ms).second || !table.emplace(std::pair{f[1], f[0]}, ms).second) {
      return error(fmt::format("{} and {} are paired twice", f[0], f[1]));
    }
    return absl::OkStatus();
  }));
  if (table.empty()) {
    return absl::InvalidArgumentError(fmt::format("{}: no latency line (REGION_A,REGION_B,LATENCY_MS)", file_name));
  }
  return table;
}

absl::StatusOr<RegionLatency> ReadRegionLatency(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFileBounded(path, kMaxCsvFileBytes, "region latency file"));
  return ParseRegionLatency(text, path);
}

std::vector<std::string> NearestFirst(const RegionLatency& latency, const std::string& from,
                                      std::vector<std::string> regions) {
  auto distance = [&](const std::string& r) -> int64_t {
    if (r == from) return -1;
    auto it = latency.find({from, r});
    return it == latency.end() ? std::numeric_limits<int64_t>::max() : it->second;
  };
  std::sort(regions.begin(), regions.end(), [&](const std::string& a, const std::string& b) {
    const int64_t da = distance(a), db = distance(b);
    return da != db ? da < db : a < b;
  });
  regions.erase(std::unique(regions.begin(), regions.end()), regions.end());
  return regions;
}

}  // namespace gpugeek::api
