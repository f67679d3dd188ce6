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

// Replaces `path` with `bytes` atomically and durably, readable by the owner only (mode 0600): writes
// a temporary file beside it, fsyncs it, renames it over `path` and fsyncs the folder, so a crash leaves
// either the old file or the new one, never a part. For secrets (tokens, keys) and configs holding
// them. Errors: the errno text naming the path (PermissionDenied, NotFound for a missing folder,
// Internal otherwise).
absl::Status WriteFilePrivate(const std::string& path, const std::string& bytes);

}  // namespace gpugeek
