#pragma once
// JsonReader: strict, path-aware reading of JSON objects from outside (API bodies, agent
// messages). Every error is InvalidArgument naming the full field path and what was expected,
// e.g. "heartbeat.workloads[2].epoch: must be an integer".

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace gpugeek::api {

class JsonReader {
 public:
  // `path` names the object in messages ("heartbeat", "workloads[2]").
  JsonReader(const nlohmann::json& j, std::string path) : j_(j), path_(std::move(path)) {}

  // InvalidArgument unless the value is an object whose keys are all in `allowed`.
  absl::Status CheckObject(std::initializer_list<std::string_view> allowed) const;

  absl::StatusOr<std::string> String(const std::string& key, std::optional<std::string> fallback = std::nullopt) const;
  absl::StatusOr<int64_t> Int(const std::string& key, std::optional<int64_t> fallback = std::nullopt,
                              int64_t lo = INT64_MIN, int64_t hi = INT64_MAX) const;
  absl::StatusOr<bool> Bool(const std::string& key, std::optional<bool> fallback = std::nullopt) const;
  absl::StatusOr<std::vector<int64_t>> IntList(const std::string& key) const;                  // absent = empty
  absl::StatusOr<std::map<std::string, std::string>> StringMap(const std::string& key) const;  // absent = empty
  // The array under `key` (absent = empty) as readers with paths "key[i]".
  absl::StatusOr<std::vector<JsonReader>> Objects(const std::string& key) const;
  // The raw value under `key`; InvalidArgument when absent.
  absl::StatusOr<const nlohmann::json*> Raw(const std::string& key) const;

  bool Has(const std::string& key) const { return j_.is_object() && j_.contains(key); }
  const nlohmann::json& json() const { return j_; }
  std::string Path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  absl::Status Error(const std::string& key, std::string_view what) const;

 private:
  const nlohmann::json& j_;
  std::string path_;
};

}  // namespace gpugeek::api
