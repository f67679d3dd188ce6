// libFuzzer target: any bytes given to ParseJsonBounded yield a value or an InvalidArgument, never a
// crash; a value it returns is no deeper than the limit and its dump parses again to an equal value.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/json_parse.h"

namespace {

int Depth(const nlohmann::json& root) {
  int deepest = 0;
  std::vector<std::pair<const nlohmann::json*, int>> todo = {{&root, 0}};
  while (!todo.empty()) {
    auto [j, d] = todo.back();
    todo.pop_back();
    if (!j->is_structured()) continue;
    deepest = std::max(deepest, d + 1);
    for (const auto& child : *j) todo.emplace_back(&child, d + 1);
  }
  return deepest;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const gpugeek::JsonLimits limits{.max_bytes = 1 << 16, .max_depth = 16};
  auto j = gpugeek::ParseJsonBounded(std::string_view(reinterpret_cast<const char*>(data), size), limits);
  if (!j.ok()) {
    if (j.status().code() != absl::StatusCode::kInvalidArgument) abort();
    return 0;
  }
  if (Depth(*j) > limits.max_depth) abort();  // the scan must have refused it
  const std::string text = j->dump();
  auto again = gpugeek::ParseJsonBounded(text, {.max_bytes = 1 << 20, .max_depth = limits.max_depth});
  if (!again.ok() || *again != *j) abort();  // what it returns must read back the same
  return 0;
}
