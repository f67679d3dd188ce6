#pragma once
// Reading a whole file that came from a user, with a size bound: a wrong path (a dataset, /dev/zero)
// gets an error instead of filling memory or never returning.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace gpugeek {

// The file's bytes. Errors: NotFound / PermissionDenied / Internal (with the errno text) when it
// cannot be opened or read; InvalidArgument when it holds more than `max_bytes`, saying the bound.
// `what` names the file in messages ("job spec", "model config").
absl::StatusOr<std::string> ReadFileBounded(const std::string& path, uint64_t max_bytes, const std::string& what);

}  // namespace gpugeek
