#include "store/columns.h"

#include <cstdlib>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"

namespace gpugeek::store::columns {

std::string FormatRetries(const std::map<std::string, int>& retries) {
  std::string out;
  for (const auto& [cause, n] : retries) out += fmt::format("{}{}={}", out.empty() ? "" : ",", cause, n);
  return out;
}

absl::StatusOr<std::map<std::string, int>> ParseRetries(std::string_view store, const std::string& job,
                                                        const std::string& text) {
  std::map<std::string, int> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    const size_t eq = item.find('=');
    int n = -1;
    if (eq == std::string::npos || eq == 0 || !absl::SimpleAtoi(item.substr(eq + 1), &n) || n < 0) {
      return absl::DataLossError(fmt::format("{}: job {} has a malformed retries value '{}'", store, job, text));
    }
    out[item.substr(0, eq)] = n;
    at = end + 1;
  }
  return out;
}

std::string FormatPlatformEnv(const std::map<std::string, std::string>& env) {
  return env.empty() ? std::string() : nlohmann::json(env).dump();
}

absl::StatusOr<std::map<std::string, std::string>> ParsePlatformEnv(std::string_view store, const std::string& job,
                                                                    const std::string& text) {
  if (text.empty()) return std::map<std::string, std::string>{};
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  std::map<std::string, std::string> out;
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (!v.is_string()) break;
      out[k] = v.get<std::string>();
    }
    if (out.size() == j.size()) return out;
  }
  return absl::DataLossError(fmt::format("{}: job {} has a malformed platform_env value", store, job));
}

std::string EncodeModelCaps(const std::map<std::string, int64_t>& caps) {
  std::string out;
  for (const auto& [model, n] : caps) out += fmt::format("{}{}={}", out.empty() ? "" : ",", model, n);
  return out;
}

std::map<std::string, int64_t> DecodeModelCaps(const std::string& text) {
  std::map<std::string, int64_t> caps;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    if (const size_t eq = item.rfind('='); eq != std::string::npos) {
      caps[item.substr(0, eq)] = std::strtoll(item.c_str() + eq + 1, nullptr, 10);
    }
    start = end + 1;
  }
  return caps;
}

}  // namespace gpugeek::store::columns
