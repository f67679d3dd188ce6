#include "common/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cstring>

#include <filesystem>
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
  try {  // libstdc++'s filebuf throws on a failed read(2) whatever the stream's exception mask
    while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
      data.append(buffer, static_cast<size_t>(in.gcount()));
      if (data.size() > max_bytes) {
        return absl::InvalidArgumentError(
            fmt::format("{} {} is larger than {} bytes: is it the right file?", what, path, max_bytes));
      }
    }
  } catch (const std::ios_base::failure& e) {
    return absl::InternalError(fmt::format("cannot read {} {}: {}", what, path, e.what()));
  }
  if (in.bad()) return absl::InternalError(fmt::format("cannot read {} {}: read error", what, path));
  return data;
}

std::optional<std::string> ReadProcFile(const std::string& path, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string data;
  char buffer[8192];
  while (data.size() < max_bytes) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    data.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  if (data.size() > max_bytes) data.resize(max_bytes);
  return data;
}

namespace {

absl::Status ErrnoStatus(int err, const std::string& message) {
  const std::string full = fmt::format("{}: {}", message, std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(full);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(full);
  return absl::InternalError(full);
}

}  // namespace

absl::Status WriteFilePrivate(const std::string& path, const std::string& bytes) {
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, fmt::format("cannot write {}", tmp));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return ErrnoStatus(err, fmt::format("cannot write {}", tmp));
    }
    done += static_cast<size_t>(n);
  }
  // An existing file of another mode (umask, an older version) gets 0600 too.
  if (::fchmod(fd, 0600) != 0 || ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return ErrnoStatus(err, fmt::format("cannot sync {}", tmp));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus(err, fmt::format("cannot replace {}", path));
  }
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = std::filesystem::current_path();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return absl::OkStatus();
}

bool IsSafeRelativePath(std::string_view path) {
  if (path.empty() || path.size() > 4096 || path.front() == '/' || path.find('\0') != std::string_view::npos) {
    return false;
  }
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    const std::string_view part = path.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = slash + 1;
  }
  return true;
}

}  // namespace gpugeek
