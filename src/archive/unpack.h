#pragma once
// UnpackWorkdir: a workdir archive (tar, plain or zstd- or gzip-compressed) into a folder, refusing
// anything that would land outside it. An archive comes from a user, so every entry is checked before
// anything is written:
//   - the path is relative, with no ".." component, no NUL, at most 4096 bytes ("./" prefixes are dropped);
//   - only files, folders and symlinks (hard links, devices, fifos are refused);
//   - a symlink's target is relative and stays inside the folder, resolved from the link's own folder;
//   - nothing is written through a symlink: every folder on an entry's way is checked with lstat, so a
//     link in the archive (or left in the folder by an earlier run) cannot redirect a later entry;
//   - at most max_entries entries and max_content_bytes of file contents (a small archive that inflates
//     without bound is refused when it passes the limit).
// An existing file at an entry's path is replaced; other files already in the folder are left as they
// are. Files keep the archive's executable bit (0755 / 0644); owners and times are not restored.
// Thread-safe: no chdir, no global state (libarchive's own disk writer is not used).

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpugeek::archive {

struct UnpackOptions {
  uint64_t max_entries = 100'000;
  uint64_t max_content_bytes = uint64_t{16} << 30;
};

struct UnpackStats {
  uint64_t entries = 0;
  uint64_t files = 0;
  uint64_t content_bytes = 0;
};

// Unpacks the archive file `archive_path` into the existing folder `dest`. Errors: InvalidArgument
// naming the entry and the rule it breaks (the folder may then hold the entries before it);
// ResourceExhausted over a limit, naming it; DataLoss when the archive is not a readable tar;
// Unavailable on a write error.
absl::StatusOr<UnpackStats> UnpackWorkdir(const std::string& archive_path, const std::string& dest,
                                          const UnpackOptions& options = {});

// The same checks over an archive in memory, writing nothing (`dest` empty), or unpacking it into `dest`.
absl::StatusOr<UnpackStats> UnpackWorkdirBytes(std::string_view archive, const std::string& dest,
                                               const UnpackOptions& options = {});

// The same checks over an archive file, writing nothing: what the server runs on an upload.
absl::StatusOr<UnpackStats> CheckWorkdirArchive(const std::string& archive_path, const UnpackOptions& options = {});

// The checks over an archive read piece by piece (e.g. decrypted records of a sealed file): `next` returns
// the next piece, an empty one at the end, or an error, which is returned as is.
using ReadPieceFn = std::function<absl::StatusOr<std::string>()>;
absl::StatusOr<UnpackStats> CheckWorkdirArchiveStream(const ReadPieceFn& next, const UnpackOptions& options = {});

}  // namespace gpugeek::archive
