#pragma once
// Crash-safe replacement of small files (key files, keyrings): after a crash or kill -9 at any moment the
// path holds either its old bytes or its new bytes, never a mix and never nothing. The recipe is the
// usual one (as SQLite's and leveldb's CURRENT file updates): write a temporary file in the same
// directory, fsync it, rename it over the path, fsync the directory so the rename itself is durable.

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpugeek::crypto {

// Replaces (or creates) `path` with `bytes`, file mode `mode` (e.g. 0600), durably as above. Returns
// OK once the new bytes and the rename are on disk. Errors carry the path and errno text: NotFound
// (the directory does not exist), PermissionDenied, Internal (disk full, I/O error); on error the
// path is unchanged and the temporary file removed. Concurrent writers of one path must be
// serialized by the caller (FileLock): the last rename wins.
absl::Status WriteFileDurably(const std::string& path, std::string_view bytes, mode_t mode);

// As WriteFileDurably, but never replaces: AlreadyExists (naming the path) when `path` exists, checked
// atomically (link(2) of the temporary file), so two creators cannot both succeed.
absl::Status CreateFileDurably(const std::string& path, std::string_view bytes, mode_t mode);

// Removes temporary files a killed writer of `path` left behind ("<path>.tmp.*"). Call only while no
// other process writes `path` (e.g. holding its FileLock). Best effort: errors are ignored.
void RemoveStaleTempFiles(const std::string& path);

// An exclusive flock(2) on `path` (created with mode 0600 when missing) for the object's lifetime. The
// kernel drops it when the process dies, even by SIGKILL, so a crash never leaves it held.
class FileLock {
 public:
  // Blocks until the lock is free. Errors: those of open(2) on `path`, with the path and errno text.
  static absl::StatusOr<std::unique_ptr<FileLock>> Acquire(const std::string& path);
  // As Acquire, but does not wait: FailedPrecondition "<path> is held by another process" when it is
  // held (by another process, or by another FileLock of this one).
  static absl::StatusOr<std::unique_ptr<FileLock>> TryAcquire(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  const int fd_;
};

// The errno of a failed call as a Status naming what failed and on which path: NotFound for ENOENT,
// PermissionDenied for EACCES/EPERM, AlreadyExists for EEXIST, Internal otherwise.
absl::Status ErrnoStatus(int err, std::string_view what, const std::string& path);

}  // namespace gpugeek::crypto
