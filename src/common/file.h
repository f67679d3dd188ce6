#pragma once
// Reading a whole file that came from a user, with a size bound: a wrong path (a dataset, /dev/zero)
// gets an error instead of filling memory or never returning.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpugeek {

// The file's bytes. Errors: NotFound / PermissionDenied / Internal (with the errno text) when it
// cannot be opened or read; InvalidArgument when it holds more than `max_bytes`, saying the bound.
// `what` names the file in messages ("job spec", "model config").
absl::StatusOr<std::string> ReadFileBounded(const std::string& path, uint64_t max_bytes, const std::string& what);

// A small kernel-made file (/proc/PID/stat, /proc/net/tcp), read with open/read: nullopt when it cannot be
// opened or read, e.g. the process exited meanwhile (reading then fails with ESRCH, which std::ifstream turns
// into an exception). At most `max_bytes`; more is cut off.
std::optional<std::string> ReadProcFile(const std::string& path, size_t max_bytes = size_t{4} << 20);

// Replaces `path` with `bytes` atomically and durably, readable by the owner only (mode 0600): writes
// a temporary file beside it, fsyncs it, renames it over `path` and fsyncs the folder, so a crash leaves
// either the old file or the new one, never a part. For secrets (tokens, keys) and configs holding
// them. Errors: the errno text naming the path (PermissionDenied, NotFound for a missing folder,
// Internal otherwise).
absl::Status WriteFilePrivate(const std::string& path, const std::string& bytes);

// Whether `path` is relative and made of plain components: not empty, at most 4096 bytes, no leading
// '/', no empty, "." or ".." component, no NUL. "data/train.bin" yes; "../x", "/x", "a//b", "a/" no.
bool IsSafeRelativePath(std::string_view path);

}  // namespace gpugeek
