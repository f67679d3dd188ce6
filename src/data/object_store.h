#pragma once
// A content-addressed object store in a folder: every object (a chunk of a file, a tree, a commit) is
// named by the SHA-256 of its bytes and never changes once written, so the same bytes are stored once
// however many files, versions and datasets hold them (as git's and DVC's caches; DVC names by MD5).
//
// Layout under the root: objects/ab/cdef... (the digest's first two hex digits as a folder, the other 62
// as the file name; read-only files), objects/tmp/ (objects being written). A write goes to a fresh file
// in objects/tmp/ and is renamed into place, so an object file is either absent or whole: a writer killed
// at any moment (SIGKILL) leaves at most a stray file in objects/tmp/, which GarbageCollect removes.
// Nothing is fsynced per object; Sync() flushes the file system once before a commit is made visible.
//
// Thread-safety: all methods may be called concurrently, from threads and from processes.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpugeek::data {

class ObjectStore {
 public:
  // Opens the store at `root`, creating root/objects/tmp when missing. Errors: the errno text naming
  // the path (PermissionDenied, NotFound for a missing parent, Internal).
  static absl::StatusOr<std::unique_ptr<ObjectStore>> Open(const std::string& root);

  struct PutResult {
    std::string digest;       // 64 lower-case hex digits
    bool stored_new = false;  // false: the store already held these bytes
  };
  // Stores `bytes` unless present (an object of another size under that name is damaged and replaced).
  // Errors: Internal (disk full, I/O) naming the file.
  absl::StatusOr<PutResult> Put(std::string_view bytes);
  // As Put, with the digest computed by the caller (it must be the SHA-256 of `bytes`).
  absl::StatusOr<PutResult> PutWithDigest(const std::string& digest, std::string_view bytes);

  bool Has(const std::string& digest) const;
  // The object's bytes, at most `max_bytes` of them, checked against its name. Errors: NotFound naming
  // the digest; DataLoss when the bytes on disk do not hash to their name (the store is damaged: see
  // Fsck); InvalidArgument when it is larger than max_bytes or `digest` is not 64 hex digits.
  absl::StatusOr<std::string> Get(const std::string& digest, uint64_t max_bytes = uint64_t{1} << 30) const;
  // The object's size in bytes. NotFound naming the digest.
  absl::StatusOr<uint64_t> Size(const std::string& digest) const;
  // Calls fn(digest, bytes) for every object, in no particular order. Files that are not objects
  // (wrong names) are skipped. Errors: the errno text of a folder that cannot be read.
  absl::Status ForEach(const std::function<void(const std::string& digest, uint64_t bytes)>& fn) const;
  // Deletes the object (absent is OK). Only garbage collection, which excludes writers, calls this.
  absl::Status Remove(const std::string& digest);
  // Removes everything under objects/tmp/; returns how many files. Only while no writer runs.
  size_t RemoveTempFiles();
  // Flushes every object written so far to disk (syncfs(2) of the store's file system).
  absl::Status Sync();

  // The file that holds `digest` (which must be 64 hex digits).
  std::string PathOf(const std::string& digest) const;
  const std::string& root() const { return root_; }

 private:
  explicit ObjectStore(std::string root) : root_(std::move(root)) {}
  std::string root_;
};

}  // namespace gpugeek::data
