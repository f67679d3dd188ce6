#include "crypto/durable_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "crypto/aead.h"

namespace gpugeek::crypto {
namespace {

namespace fs = std::filesystem;

std::string DirOf(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

absl::Status SyncDir(const std::string& path) {
  const std::string dir = DirOf(path);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open directory", dir);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(err, "fsync directory", dir);
  return absl::OkStatus();
}

// Writes `bytes` to a new temporary file beside `path` and fsyncs it; returns its name.
absl::StatusOr<std::string> WriteTemp(const std::string& path, std::string_view bytes, mode_t mode) {
  // A random suffix: a stale file of a killed writer or of another process never collides.
  absl::StatusOr<std::string> suffix = RandomBytes(8);
  if (!suffix.ok()) return suffix.status();
  const std::string tmp = fmt::format("{}.tmp.{}", path, HexEncode(*suffix));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(errno, "create", tmp);
  auto fail = [&](int err, std::string_view what) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return ErrnoStatus(err, what, tmp);
  };
  // open(2) applies the umask; the mode must be exactly `mode` (0600 for key material).
  if (::fchmod(fd, mode) != 0) return fail(errno, "chmod");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(errno, "write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return fail(errno, "fsync");
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus(err, "close", tmp);
  }
  return tmp;
}

}  // namespace

absl::Status ErrnoStatus(int err, std::string_view what, const std::string& path) {
  const std::string message = fmt::format("cannot {} {}: {}", what, path, std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EEXIST:
      return absl::AlreadyExistsError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status WriteFileDurably(const std::string& path, std::string_view bytes, mode_t mode) {
  absl::StatusOr<std::string> tmp = WriteTemp(path, bytes, mode);
  if (!tmp.ok()) return tmp.status();
  if (::rename(tmp->c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp->c_str());
    return ErrnoStatus(err, "rename a new version over", path);
  }
  return SyncDir(path);
}

absl::Status CreateFileDurably(const std::string& path, std::string_view bytes, mode_t mode) {
  absl::StatusOr<std::string> tmp = WriteTemp(path, bytes, mode);
  if (!tmp.ok()) return tmp.status();
  // link(2) fails with EEXIST instead of replacing: the existence check and the creation are one step.
  const int rc = ::link(tmp->c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp->c_str());
  if (rc != 0) {
    if (err == EEXIST) {
      return absl::AlreadyExistsError(fmt::format("{} already exists; it was left unchanged", path));
    }
    return ErrnoStatus(err, "create", path);
  }
  return SyncDir(path);
}

void RemoveStaleTempFiles(const std::string& path) {
  const std::string prefix = fs::path(path).filename().string() + ".tmp.";
  std::error_code ec;
  for (fs::directory_iterator it(DirOf(path), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0) {
      std::error_code ignored;
      fs::remove(it->path(), ignored);
    }
  }
}

absl::StatusOr<std::unique_ptr<FileLock>> FileLock::Acquire(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, "open lock file", path);
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "lock", path);
  }
  return std::unique_ptr<FileLock>(new FileLock(fd));
}

absl::StatusOr<std::unique_ptr<FileLock>> FileLock::TryAcquire(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, "open lock file", path);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(fmt::format("lock {} is held by another process", path));
    }
    return ErrnoStatus(err, "lock", path);
  }
  return std::unique_ptr<FileLock>(new FileLock(fd));
}

FileLock::~FileLock() { ::close(fd_); }  // closing the descriptor drops the flock

}  // namespace gpugeek::crypto
