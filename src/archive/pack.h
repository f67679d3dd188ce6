#pragma once
// PackWorkdir: a folder of the user's (a job's `workdir:`) as one deterministic archive, tar (POSIX pax)
// compressed with zstd, named by its SHA-256.
//
// Deterministic: the same tree gives the same bytes, wherever and whenever it is packed. Entries are in
// byte order of their paths, depth first (a folder before what it holds); every mtime is 0, uid and gid
// 0, no user or group names; a file's mode is 0755 when its owner may execute it, else 0644; folders
// 0755. Only names, contents, the executable bit and symlink targets reach the archive.
//
// What is left out: the `.git` folder, and whatever the tree's `.gitignore` / `.gpugeekignore` files
// exclude (ignore_rules.h); the ignore files themselves are packed. A symlink is packed as a link when it
// points inside the tree (relative, never above the workdir's root); one pointing outside (absolute, or
// through "..") is refused: its target would not exist on the node. Fifos, sockets and devices are refused.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace gpugeek::archive {

struct PackOptions {
  uint64_t max_archive_bytes = uint64_t{1} << 30;  // the compressed archive, bytes
  uint64_t max_entries = 100'000;                  // files + folders + links
  int zstd_level = 3;                              // 1 (fast) .. 19
};

struct PackResult {
  std::string digest;          // SHA-256 of the archive's bytes, 64 hex digits
  uint64_t archive_bytes = 0;  // compressed size
  uint64_t files = 0;          // regular files packed
  uint64_t dirs = 0;
  uint64_t symlinks = 0;
  uint64_t content_bytes = 0;  // the files' bytes before compression
  uint64_t ignored = 0;        // paths left out by ignore rules (an ignored folder counts once)
};

// Packs the folder `root` into a new file `out_path` (created or truncated, mode 0600).
// Errors, each naming the path and what to do: NotFound / FailedPrecondition when `root` is not a
// readable folder; FailedPrecondition for a symlink pointing outside the tree or a special file
// ("add it to .gpugeekignore"); ResourceExhausted when the archive would exceed max_archive_bytes or
// max_entries (naming the limit); Unavailable on a read or write error. On an error `out_path` is removed.
absl::StatusOr<PackResult> PackWorkdir(const std::string& root, const std::string& out_path,
                                       const PackOptions& options = {});

// Packs one regular file `file` as the entry `entry` ("weights/init.pt", with a folder entry for each
// parent), the same deterministic way, into `out_path`: what a job spec's `files:` sends for a file.
// InvalidArgument when `entry` is not IsSafeRelativePath (common/file.h); NotFound / FailedPrecondition when `file` is
// not a readable regular file; otherwise as PackWorkdir.
absl::StatusOr<PackResult> PackFile(const std::string& file, const std::string& entry, const std::string& out_path,
                                    const PackOptions& options = {});

}  // namespace gpugeek::archive
