#pragma once
// Paging of the list routes that page in memory, by name or id (accounts, join tokens, secrets, quota):
// `?limit=` 1..1000 (default 100) and `?after=` the last key of the previous page; the reply's
// `next_after` names the last item of a full page and is null on the last one.

#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "http/server.h"

namespace gpugeek::controlplane {

inline constexpr int kDefaultPageLimit = 100;
inline constexpr int kMaxPageLimit = 1000;

// `?limit=`, or kDefaultPageLimit; InvalidArgument naming the parameter outside 1..kMaxPageLimit.
inline absl::StatusOr<int> PageLimit(const http::Request& r) {
  const std::string v = r.query_value("limit");
  if (v.empty()) return kDefaultPageLimit;
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || n < 1 || n > kMaxPageLimit) {
    return absl::InvalidArgumentError(
        fmt::format("query parameter 'limit' = '{}' must be an integer 1..{}", v, kMaxPageLimit));
  }
  return static_cast<int>(n);
}

// `out` with `field` = one page of `items` (ordered by key(item)) after `?after=`, at most `?limit=`, and
// `next_after`.
template <typename T, typename KeyFn, typename JsonFn>
absl::StatusOr<nlohmann::json> Page(const http::Request& r, const std::string& field, const std::vector<T>& items,
                                    KeyFn key, JsonFn to_json, nlohmann::json out = nlohmann::json::object()) {
  absl::StatusOr<int> limit = PageLimit(r);
  if (!limit.ok()) return limit.status();
  const std::string after = r.query_value("after");
  nlohmann::json list = nlohmann::json::array();
  nlohmann::json next = nullptr;
  std::string last;
  for (const T& item : items) {
    if (!after.empty() && key(item) <= after) continue;
    if (static_cast<int>(list.size()) == *limit) {
      next = last;
      break;
    }
    last = key(item);
    list.push_back(to_json(item));
  }
  out[field] = std::move(list);
  out["next_after"] = std::move(next);
  return out;
}

}  // namespace gpugeek::controlplane
