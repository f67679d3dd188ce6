#include "cli/workdir_upload.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "archive/pack.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"

namespace gpugeek::cli {
namespace {

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void DrawProgress(std::FILE* out, uint64_t done, uint64_t total) {
  if (out == nullptr) return;
  constexpr int kWidth = 30;
  const int filled = total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
  std::fprintf(out, "\rworkdir: uploading [%s%s] %5.1f%% of %.1f MiB", std::string(filled, '#').c_str(),
               std::string(kWidth - filled, ' ').c_str(), total == 0 ? 100.0 : 100.0 * done / total, total / 1048576.0);
  if (done == total) std::fprintf(out, "\n");
  std::fflush(out);
}

// Removes the packed file however the upload ends.
struct TempFile {
  std::string path;
  ~TempFile() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};

}  // namespace

absl::StatusOr<WorkdirUpload> UploadWorkdir(http::Client& client, const std::string& dir,
                                            const WorkdirUploadOptions& options) {
  std::string tmp = options.temp_dir;
  if (tmp.empty()) tmp = ::getenv("TMPDIR") != nullptr ? ::getenv("TMPDIR") : "/tmp";
  std::string name = tmp + "/gpugeek-workdir-XXXXXX";
  const int fd = ::mkstemp(name.data());
  if (fd < 0)
    return absl::UnavailableError(fmt::format("workdir: cannot create a file in {}: {}", tmp, std::strerror(errno)));
  ::close(fd);
  TempFile file{name};

  WorkdirUpload out;
  const auto pack_start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(archive::PackResult packed, archive::PackWorkdir(dir, name,
                                                                    {.max_archive_bytes = options.max_archive_bytes,
                                                                     .max_entries = options.max_entries}));
  out.pack_ms = MillisSince(pack_start);
  out.digest = packed.digest;
  out.archive_bytes = packed.archive_bytes;
  out.files = packed.files;
  out.content_bytes = packed.content_bytes;

  const std::string path = "/v1/archives/" + packed.digest;
  const auto upload_start = std::chrono::steady_clock::now();
  absl::Status has = client.Head(path);
  if (has.ok()) {
    out.upload_ms = MillisSince(upload_start);
    return out;  // the server has it: nothing to send
  }
  if (!absl::IsNotFound(has)) return absl::Status(has.code(), fmt::format("workdir: {}", has.message()));

  std::FILE* bar = options.progress != nullptr && ::isatty(::fileno(options.progress)) ? options.progress : nullptr;
  const int in = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return absl::UnavailableError(fmt::format("workdir: cannot read {}: {}", name, std::strerror(errno)));
  std::string piece;
  absl::Status status;
  uint64_t offset = 0;
  while (status.ok() && offset < packed.archive_bytes) {
    piece.resize(std::min<uint64_t>(options.piece_bytes, packed.archive_bytes - offset));
    const ssize_t n = ::pread(in, piece.data(), piece.size(), static_cast<off_t>(offset));
    if (n <= 0) {
      status = absl::UnavailableError(fmt::format("workdir: reading {}: {}", name, std::strerror(errno)));
      break;
    }
    piece.resize(static_cast<size_t>(n));
    absl::StatusOr<nlohmann::json> reply = client.PutBytes(
        fmt::format("{}?offset={}&total={}", path, offset, packed.archive_bytes), piece, "application/octet-stream");
    ++out.put_requests;
    if (!reply.ok()) {
      status = absl::Status(reply.status().code(), fmt::format("workdir: {}", reply.status().message()));
      break;
    }
    offset += piece.size();
    out.bytes_sent += piece.size();
    DrawProgress(bar, offset, packed.archive_bytes);
  }
  ::close(in);
  RETURN_IF_ERROR(status);
  out.upload_ms = MillisSince(upload_start);
  return out;
}

}  // namespace gpugeek::cli
