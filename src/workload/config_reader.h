#pragma once
// Internal to workload/: typed access to one object of a Hugging Face config.json, shared by the
// family readers (model_config.cc and model_families.cc). Every error names the field and the
// model type, so a user can fix the file.

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpugeek::workload::config_internal {

using nlohmann::json;

// Upper bounds that keep every product in the parameter and memory arithmetic far inside int64
// while admitting any real model (the largest config in ../shared/models has hidden 25,600 in the
// Megatron tables, vocab 256,000 and 256 experts).
inline constexpr int64_t kMaxDim = int64_t{1} << 22;  // hidden, intermediate, head_dim, ranks
inline constexpr int64_t kMaxVocab = int64_t{1} << 24;
inline constexpr int64_t kMaxCount = int64_t{1} << 16;  // layers, heads, experts, positions / 64
inline constexpr double kMaxParameters = 1e15;          // 1000x today's largest models
// A Hugging Face config.json is a few KiB, nested three or four levels (quantization_config,
// rope_scaling, text_config.rope_scaling); these bounds refuse hostile text before it is parsed.
inline constexpr size_t kMaxConfigBytes = size_t{4} << 20;
inline constexpr int kMaxConfigDepth = 64;

// Typed access to one config object with errors that name the field and the model type.
class Reader {
 public:
  Reader(const json& j, std::string model_type) : j_(j), model_type_(std::move(model_type)) {}

  const std::string& model_type() const { return model_type_; }

  bool Has(std::initializer_list<const char*> keys) const {
    for (const char* k : keys) {
      auto it = j_.find(k);
      if (it != j_.end() && !it->is_null()) return true;
    }
    return false;
  }

  // The first present, non-null key of `keys`, as a positive integer no larger than `max`.
  absl::StatusOr<int64_t> Int(std::initializer_list<const char*> keys, int64_t max = kMaxDim) const {
    for (const char* k : keys) {
      auto it = j_.find(k);
      if (it == j_.end() || it->is_null()) continue;
      return Checked(k, *it, max);
    }
    return Error(fmt::format("missing field '{}'", *keys.begin()));
  }
  absl::StatusOr<int64_t> IntOr(std::initializer_list<const char*> keys, int64_t fallback,
                                int64_t max = kMaxDim) const {
    if (!Has(keys)) return fallback;
    return Int(keys, max);
  }
  // A non-negative integer (0 allowed), e.g. first_k_dense_replace.
  absl::StatusOr<int64_t> Count(const char* key, int64_t fallback, int64_t max = kMaxCount) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > max) {
      return Error(fmt::format("field '{}' must be an integer in [0, {}]", key, max));
    }
    return it->get<int64_t>();
  }
  absl::StatusOr<bool> Bool(const char* key, bool fallback) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) return Error(fmt::format("field '{}' must be a boolean", key));
    return it->get<bool>();
  }
  std::string String(const char* key) const {
    auto it = j_.find(key);
    return it != j_.end() && it->is_string() ? it->get<std::string>() : std::string();
  }
  const json* Find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(fmt::format("model_type '{}': {}", model_type_, what));
  }

 private:
  absl::StatusOr<int64_t> Checked(const char* key, const json& v, int64_t max) const {
    // Configs sometimes write integral values as floats ("rope_theta": 10000.0 style); accept 4096.0.
    double d = 0;
    if (v.is_number_integer()) {
      d = static_cast<double>(v.get<int64_t>());
    } else if (v.is_number_float()) {
      d = v.get<double>();
      if (d != static_cast<double>(static_cast<int64_t>(std::clamp(d, -1e18, 1e18)))) {
        return Error(fmt::format("field '{}' must be an integer", key));
      }
    } else {
      return Error(fmt::format("field '{}' must be a number", key));
    }
    if (d < 1 || d > static_cast<double>(max)) {
      return Error(fmt::format("field '{}' must be in [1, {}]", key, max));
    }
    return static_cast<int64_t>(d);
  }

  const json& j_;
  std::string model_type_;
};

}  // namespace gpugeek::workload::config_internal
