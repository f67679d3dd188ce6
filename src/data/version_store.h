#pragma once
// Dataset versions, git-like, over the content-addressed object store (object_store.h): each push of a
// folder is a commit (version_objects.h) on a branch; branches move, tags never do; any version can be
// diffed against another and checked out byte for byte. Files are cut into content-defined chunks
// (chunker.h), so storage grows only by the chunks a version changes. Many datasets share one store (and
// its chunks). Anchors: lakeFS (commits as content digests, branches as pointers), DVC (a cache of
// content-addressed files), git (trees per folder).
//
// Layout under the root, beside objects/:
//   refs/<dataset>/branches/<name>, refs/<dataset>/tags/<name>   one commit digest and "\n" each
//   lock        flock(2): every operation holds it shared, garbage collection exclusive
//   refs.lock   flock(2): held exclusive while a ref is read and replaced (compare-and-swap)
// Crash safety: a push writes chunks, then trees, then the commit, flushes them (syncfs), and only then
// replaces the branch's ref file (write, fsync, rename, fsync the folder). Killed at any moment, the ref
// names the old commit or the new one, and every object it reaches is whole; what a killed push wrote is
// unreferenced and garbage collection removes it. Locks are released by the kernel when a process dies.
//
// Revisions (`rev` below): a full commit digest (64 hex digits), a branch, a tag, or a unique prefix of a
// commit digest (at least 6 hex digits), tried in that order, each optionally followed by ~N for the Nth
// first-parent ancestor ("main~2"). Branch and tag names of 6-64 hex digits are refused, and a name is
// never both a branch and a tag, so a revision means one thing.
//
// Thread-safety: a VersionStore may be used from many threads and processes at once.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "data/chunker.h"
#include "data/object_store.h"
#include "data/version_objects.h"

namespace gpugeek::data {

struct PushOptions {
  std::string dataset;
  std::string branch = "main";
  std::string message;
  std::string author;
  ChunkerOptions chunking;
  int threads = 0;  // hashing threads; 0: one per hardware thread
  // A symbolic link to a regular file is stored as that file's bytes (as cp -L); otherwise it is refused.
  bool follow_links = false;
  // Called (serialised) as files finish: bytes hashed so far and in all.
  std::function<void(uint64_t done_bytes, uint64_t total_bytes)> progress;
};

struct PushResult {
  std::string commit;      // the branch's head after the push
  bool unchanged = false;  // the folder equals the head's tree: no commit was made
  uint64_t files = 0;
  uint64_t bytes = 0;        // bytes in the folder's files
  uint64_t chunks = 0;       // chunks they were cut into
  uint64_t new_objects = 0;  // objects (chunks, trees, commit) the store did not hold before
  uint64_t new_bytes = 0;    // their bytes: what the push added to the store
};

struct LogEntry {
  std::string digest;
  Commit commit;
};

struct DiffEntry {
  enum class Change { kAdded, kRemoved, kModified };
  std::string path;  // relative, '/'-separated
  Change change = Change::kModified;
  uint64_t bytes_before = 0;  // 0 when added
  uint64_t bytes_after = 0;   // 0 when removed
};

struct Ref {
  enum class Kind { kBranch, kTag };
  Kind kind = Kind::kBranch;
  std::string name;
  std::string commit;  // empty when the ref file is damaged
  std::string error;   // why the ref cannot be read (a damaged or misnamed ref file); empty when fine
};

struct CheckoutResult {
  std::string commit;
  uint64_t files = 0;
  uint64_t bytes = 0;
};

class VersionStore {
 public:
  // Opens (creating when missing) the store at `root`. `clock` stamps commits with wall time.
  static absl::StatusOr<std::unique_ptr<VersionStore>> Open(const std::string& root, const Clock& clock);

  // Snapshots folder `dir` (regular files and folders; a device, socket, or symbolic link (unless
  // follow_links and it leads to a regular file) is an InvalidArgument naming it) as a commit on options.branch of
  // options.dataset, whose head becomes its parent (created when the branch does not exist). Errors: InvalidArgument
  // for bad names (dataset, branch, a file name that is not UTF-8 or longer than 255 bytes) or options; NotFound for
  // `dir`; Aborted when a file changes size while read; the errno text of I/O failures. Nothing is visible until the
  // ref moves, so a failed push changes no version.
  absl::StatusOr<PushResult> Push(const std::string& dir, const PushOptions& options);

  // Like Push, but moves no branch: stores `dir`'s chunks and trees and a commit on `parent` ("" = a
  // first commit; otherwise a commit of options.dataset this store holds) and returns it (options.branch
  // is not used). `unchanged` with commit = parent when the folder equals the parent's tree. What a
  // client pushing to a remote store (`gpugeek data push --remote`) builds locally before uploading.
  // Errors as Push, and NotFound / InvalidArgument for a parent that is absent or of another dataset.
  absl::StatusOr<PushResult> Snapshot(const std::string& dir, const PushOptions& options, const std::string& parent);
  // Compare-and-swap of branch `name`: points it at `commit` (a commit of `dataset` this store holds) if
  // its head is `expected` now ("" = the branch must not exist; it is created). FailedPrecondition naming
  // both digests when the head moved; NotFound for an absent commit; InvalidArgument for bad names, a
  // commit of another dataset, or a name a tag has.
  absl::Status SetBranch(const std::string& dataset, const std::string& name, const std::string& commit,
                         const std::string& expected);
  // The commit digest `rev` names in `dataset`. NotFound naming the revision; InvalidArgument when a
  // digest prefix is ambiguous (naming the candidates) or ~N goes past the first commit.
  absl::StatusOr<std::string> Resolve(const std::string& dataset, const std::string& rev) const;
  absl::StatusOr<Commit> ReadCommit(const std::string& digest) const;
  absl::StatusOr<Tree> ReadTree(const std::string& digest) const;

  // Every file of commit `commit` as (path, entry), '/'-separated paths sorted in byte order.
  absl::StatusOr<std::vector<std::pair<std::string, TreeEntry>>> ListFiles(const std::string& commit) const;
  // A file's bytes (an entry ListFiles gave), every chunk checked against its digest. InvalidArgument
  // naming the size when the file is larger than `max_bytes`; DataLoss for a damaged chunk.
  absl::StatusOr<std::string> ReadFile(const TreeEntry& file, uint64_t max_bytes) const;

  // Up to `limit` commits from `rev` back along first parents, newest first.
  absl::StatusOr<std::vector<LogEntry>> Log(const std::string& dataset, const std::string& rev, size_t limit) const;
  // Files added, removed and modified (content or executable bit) from `from` to `to`, sorted by path.
  // Folders whose trees are equal are skipped without being read.
  absl::StatusOr<std::vector<DiffEntry>> Diff(const std::string& dataset, const std::string& from,
                                              const std::string& to) const;
  // Writes version `rev` into folder `dir`, which must not exist or be empty: every file's bytes
  // exactly, verified chunk by chunk against their digests, mode 0755 when executable else 0644. The
  // files are written beside `dir` and renamed into place at the end, so `dir` is either complete or
  // absent. Errors: FailedPrecondition when `dir` holds anything; DataLoss for a damaged object.
  absl::StatusOr<CheckoutResult> Checkout(const std::string& dataset, const std::string& rev, const std::string& dir,
                                          int threads = 0) const;

  // Branches and tags. AlreadyExists when the name is taken by a branch or a tag (tags never move: delete
  // and re-create); InvalidArgument for a name of 6 to 64 hex digits, which would read as a commit.
  absl::Status CreateBranch(const std::string& dataset, const std::string& name, const std::string& from_rev);
  absl::Status CreateTag(const std::string& dataset, const std::string& name, const std::string& rev);
  // NotFound when absent. Deleting a dataset's last ref makes its versions garbage.
  absl::Status DeleteRef(const std::string& dataset, Ref::Kind kind, const std::string& name);
  // The dataset's branches then tags, each sorted by name, damaged ones included (with `error` set) so
  // that fsck reports and garbage collection refuses them rather than dropping what they reach.
  absl::StatusOr<std::vector<Ref>> ListRefs(const std::string& dataset) const;
  // Every dataset with at least one ref, sorted.
  std::vector<std::string> ListDatasets() const;

  ObjectStore& objects() const { return *objects_; }
  const std::string& root() const { return root_; }
  // The lock every operation holds shared, and garbage collection exclusive (version_gc.h).
  std::string LockPath() const { return root_ + "/lock"; }

 private:
  VersionStore(std::string root, std::unique_ptr<ObjectStore> objects, const Clock& clock)
      : root_(std::move(root)), objects_(std::move(objects)), clock_(clock) {}
  std::string RefPath(const std::string& dataset, Ref::Kind kind, const std::string& name) const;
  absl::StatusOr<std::string> ReadRef(const std::string& dataset, Ref::Kind kind, const std::string& name) const;
  absl::Status CreateRef(const std::string& dataset, Ref::Kind kind, const std::string& name, const std::string& rev);
  absl::Status WriteRef(const std::string& dataset, Ref::Kind kind, const std::string& name, const std::string& commit,
                        bool must_not_exist);

  std::string root_;
  std::unique_ptr<ObjectStore> objects_;
  const Clock& clock_;
};

// A flock(2) on `path` (created when missing), shared or exclusive, for the object's lifetime; the kernel
// drops it when the process dies. Errors: the errno text naming the path.
class StoreLock {
 public:
  enum class Mode { kShared, kExclusive };
  static absl::StatusOr<std::unique_ptr<StoreLock>> Acquire(const std::string& path, Mode mode);
  ~StoreLock();
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;

 private:
  explicit StoreLock(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace gpugeek::data
