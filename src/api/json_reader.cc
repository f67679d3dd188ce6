#include "api/json_reader.h"

#include <fmt/format.h>

namespace gpugeek::api {

absl::Status JsonReader::Error(const std::string& key, std::string_view what) const {
  return absl::InvalidArgumentError(fmt::format("{}: {}", key.empty() ? path_ : Path(key), what));
}

absl::Status JsonReader::CheckObject(std::initializer_list<std::string_view> allowed) const {
  if (!j_.is_object()) return Error("", "must be a JSON object");
  for (const auto& [key, value] : j_.items()) {
    bool known = false;
    for (auto a : allowed) known |= (a == key);
    if (!known) return Error(key, "is not a known field");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> JsonReader::String(const std::string& key, std::optional<std::string> fallback) const {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) {
    if (fallback) return *fallback;
    return Error(key, "is required");
  }
  if (!it->is_string()) return Error(key, "must be a string");
  return it->get<std::string>();
}

absl::StatusOr<int64_t> JsonReader::Int(const std::string& key, std::optional<int64_t> fallback, int64_t lo,
                                        int64_t hi) const {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) {
    if (fallback) return *fallback;
    return Error(key, "is required");
  }
  if (!it->is_number_integer()) return Error(key, "must be an integer");
  const int64_t v =
      it->is_number_unsigned() && it->get<uint64_t>() > uint64_t{INT64_MAX} ? INT64_MAX : it->get<int64_t>();
  if (v < lo || v > hi) return Error(key, fmt::format("= {} must be between {} and {}", v, lo, hi));
  return v;
}

absl::StatusOr<bool> JsonReader::Bool(const std::string& key, std::optional<bool> fallback) const {
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) {
    if (fallback) return *fallback;
    return Error(key, "is required");
  }
  if (!it->is_boolean()) return Error(key, "must be true or false");
  return it->get<bool>();
}

absl::StatusOr<std::vector<int64_t>> JsonReader::IntList(const std::string& key) const {
  std::vector<int64_t> out;
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return out;
  if (!it->is_array()) return Error(key, "must be a list of integers");
  for (const auto& v : *it) {
    if (!v.is_number_integer()) return Error(key, "must be a list of integers");
    out.push_back(v.get<int64_t>());
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> JsonReader::StringMap(const std::string& key) const {
  std::map<std::string, std::string> out;
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return out;
  if (!it->is_object()) return Error(key, "must be an object of strings");
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) return Error(key + "." + k, "must be a string");
    out[k] = v.get<std::string>();
  }
  return out;
}

absl::StatusOr<std::vector<JsonReader>> JsonReader::Objects(const std::string& key) const {
  std::vector<JsonReader> out;
  auto it = j_.find(key);
  if (it == j_.end() || it->is_null()) return out;
  if (!it->is_array()) return Error(key, "must be a list");
  for (size_t i = 0; i < it->size(); ++i) out.emplace_back((*it)[i], fmt::format("{}[{}]", Path(key), i));
  return out;
}

absl::StatusOr<const nlohmann::json*> JsonReader::Raw(const std::string& key) const {
  auto it = j_.find(key);
  if (it == j_.end()) return Error(key, "is required");
  return &*it;
}

}  // namespace gpugeek::api
