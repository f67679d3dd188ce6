#pragma once
// UploadWorkdir: what `gpugeek submit` does with a spec's `workdir:` (and UploadFileEntry with `files:`). Packs the
// folder (archive::PackWorkdir: deterministic, honouring .gitignore / .gpugeekignore), asks the server whether the
// caller's tenant has an archive with that SHA-256 (HEAD /v1/archives/{digest}) and uploads it only when not (PUT, in
// pieces of `piece_bytes` read from the packed file, so memory stays bounded whatever the archive's size), with a
// progress bar on `progress` when it is a terminal.

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "api/job_spec.h"
#include "http/client.h"

namespace gpugeek::cli {

struct WorkdirUploadOptions {
  uint64_t piece_bytes = uint64_t{8} << 20;        // one PUT body; under the API listener's 12 MiB limit
  uint64_t max_archive_bytes = uint64_t{1} << 30;  // refused before any upload (the server checks its own)
  uint64_t max_entries = 100'000;
  // Where the progress bar goes; nullptr or not a terminal (isatty): none.
  std::FILE* progress = nullptr;
  std::string temp_dir;  // where the archive is packed; "" = $TMPDIR or /tmp
};

struct WorkdirUpload {
  std::string digest;          // the archive's SHA-256: the spec's workdir_digest
  uint64_t archive_bytes = 0;  // compressed
  uint64_t files = 0;
  uint64_t content_bytes = 0;  // the files' bytes before compression
  uint64_t bytes_sent = 0;     // 0 when the server had it already
  int put_requests = 0;
  double pack_ms = 0;
  double upload_ms = 0;
};

// Errors: those of archive::PackWorkdir (naming the path), and the server's (a 413 names its limit), with
// "workdir: " in front. The packed file is removed in every case.
absl::StatusOr<WorkdirUpload> UploadWorkdir(http::Client& client, const std::string& dir,
                                            const WorkdirUploadOptions& options = {});

// Whether `name` ends like a tar archive the nodes can unpack: .tar, .tar.gz, .tgz, .tar.zst, .tzst.
bool IsTarArchiveName(std::string_view name);

// One `files:` entry of a job spec (docs/job-spec.md), DEST: SRC, uploaded:
//   - a folder is packed like a workdir (ignore files honoured) and unpacked into DEST;
//   - an archive (IsTarArchiveName) is sent as it is, checked by the server, and unpacked into DEST;
//   - any other file is packed as an archive holding the one entry DEST, unpacked into the working folder.
struct FileUpload {
  api::FileArchive archive;  // what the spec's file_archives gets
  std::string kind;          // "folder", "archive" or "file"
  WorkdirUpload stats;
};
// Errors as UploadWorkdir's, with "files.DEST: " in front; NotFound when SRC does not exist.
absl::StatusOr<FileUpload> UploadFileEntry(http::Client& client, const std::string& dest, const std::string& src,
                                           const WorkdirUploadOptions& options = {});

}  // namespace gpugeek::cli
