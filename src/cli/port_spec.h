#pragma once
// The port arguments of `gpugeek port-forward`, as kubectl port-forward writes them:
//   "8000"       local 8000 -> the member's 8000
//   "9000:8000"  local 9000 -> the member's 8000
//   ":8000"      a free local port the kernel picks -> the member's 8000

#include "absl/status/statusor.h"

#include <string>

namespace gpugeek::cli {

struct PortSpec {
  int local = 0;   // 0: any free port
  int remote = 0;  // 1..65535
};

// InvalidArgument naming the argument and the forms above for anything else (a port outside 1..65535,
// more than one ':', letters).
absl::StatusOr<PortSpec> ParsePortSpec(const std::string& text);

}  // namespace gpugeek::cli
