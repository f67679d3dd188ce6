#include "common/file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "absl/status/status.h"

namespace gpugeek {

absl::StatusOr<std::string> ReadFileBounded(const std::string& path, uint64_t max_bytes, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string message = fmt::format("cannot read {} {}: {}", what, path, std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::InternalError(message);
  }
  std::string data;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    data.append(buffer, static_cast<size_t>(in.gcount()));
    if (data.size() > max_bytes) {
      return absl::InvalidArgumentError(
          fmt::format("{} {} is larger than {} bytes: is it the right file?", what, path, max_bytes));
    }
  }
  if (in.bad()) return absl::InternalError(fmt::format("cannot read {} {}: read error", what, path));
  return data;
}

}  // namespace gpugeek
