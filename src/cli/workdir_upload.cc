#include "cli/workdir_upload.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <string_view>

#include <fmt/format.h>

#include "absl/strings/match.h"
#include "archive/digest.h"
#include "archive/pack.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"

namespace gpugeek::cli {
namespace {

double MillisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

void DrawProgress(std::FILE* out, const std::string& label, uint64_t done, uint64_t total) {
  if (out == nullptr) return;
  constexpr int kWidth = 30;
  const int filled = total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
  std::fprintf(out, "\r%s: uploading [%s%s] %5.1f%% of %.1f MiB", label.c_str(), std::string(filled, '#').c_str(),
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

// A file in TMPDIR (or options.temp_dir) to pack into; removed with the TempFile.
absl::StatusOr<std::string> MakeTempFile(const WorkdirUploadOptions& options, const std::string& label) {
  std::string tmp = options.temp_dir;
  if (tmp.empty()) tmp = ::getenv("TMPDIR") != nullptr ? ::getenv("TMPDIR") : "/tmp";
  std::string name = tmp + "/gpugeek-workdir-XXXXXX";
  const int fd = ::mkstemp(name.data());
  if (fd < 0) {
    return absl::UnavailableError(fmt::format("{}: cannot create a file in {}: {}", label, tmp, std::strerror(errno)));
  }
  ::close(fd);
  return name;
}

// Sends the archive file `name` (`bytes` long, SHA-256 `digest`) unless the server has it already.
absl::Status UploadArchiveFile(http::Client& client, const std::string& name, const std::string& digest, uint64_t bytes,
                               const std::string& label, const WorkdirUploadOptions& options, WorkdirUpload& out) {
  const std::string path = "/v1/archives/" + digest;
  const auto upload_start = std::chrono::steady_clock::now();
  absl::Status has = client.Head(path);
  if (has.ok()) {
    out.upload_ms = MillisSince(upload_start);
    return absl::OkStatus();  // the server has it: nothing to send
  }
  if (!absl::IsNotFound(has)) return absl::Status(has.code(), fmt::format("{}: {}", label, has.message()));

  std::FILE* bar = options.progress != nullptr && ::isatty(::fileno(options.progress)) ? options.progress : nullptr;
  const int in = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return absl::UnavailableError(fmt::format("{}: cannot read {}: {}", label, name, std::strerror(errno)));
  std::string piece;
  absl::Status status;
  uint64_t offset = 0;
  while (status.ok() && offset < bytes) {
    piece.resize(std::min<uint64_t>(options.piece_bytes, bytes - offset));
    const ssize_t n = ::pread(in, piece.data(), piece.size(), static_cast<off_t>(offset));
    if (n <= 0) {
      status = absl::UnavailableError(fmt::format("{}: reading {}: {}", label, name, std::strerror(errno)));
      break;
    }
    piece.resize(static_cast<size_t>(n));
    absl::StatusOr<nlohmann::json> reply =
        client.PutBytes(fmt::format("{}?offset={}&total={}", path, offset, bytes), piece, "application/octet-stream");
    ++out.put_requests;
    if (!reply.ok()) {
      status = absl::Status(reply.status().code(), fmt::format("{}: {}", label, reply.status().message()));
      break;
    }
    offset += piece.size();
    out.bytes_sent += piece.size();
    DrawProgress(bar, label, offset, bytes);
  }
  ::close(in);
  RETURN_IF_ERROR(status);
  out.upload_ms = MillisSince(upload_start);
  return absl::OkStatus();
}

// Packs with `pack` into a temporary file and uploads the result.
absl::StatusOr<WorkdirUpload> PackAndUpload(
    http::Client& client, const std::string& label, const WorkdirUploadOptions& options,
    const std::function<absl::StatusOr<archive::PackResult>(const std::string& out, const archive::PackOptions&)>&
        pack) {
  ASSIGN_OR_RETURN(std::string name, MakeTempFile(options, label));
  TempFile file{name};
  WorkdirUpload out;
  const auto pack_start = std::chrono::steady_clock::now();
  absl::StatusOr<archive::PackResult> packed =
      pack(name, {.max_archive_bytes = options.max_archive_bytes, .max_entries = options.max_entries});
  if (!packed.ok()) return packed.status();
  out.pack_ms = MillisSince(pack_start);
  out.digest = packed->digest;
  out.archive_bytes = packed->archive_bytes;
  out.files = packed->files;
  out.content_bytes = packed->content_bytes;
  RETURN_IF_ERROR(UploadArchiveFile(client, name, packed->digest, packed->archive_bytes, label, options, out));
  return out;
}

}  // namespace

absl::StatusOr<WorkdirUpload> UploadWorkdir(http::Client& client, const std::string& dir,
                                            const WorkdirUploadOptions& options) {
  return PackAndUpload(client, "workdir", options, [&](const std::string& out, const archive::PackOptions& o) {
    return archive::PackWorkdir(dir, out, o);
  });
}

bool IsTarArchiveName(std::string_view name) {
  for (std::string_view suffix : {".tar", ".tar.gz", ".tgz", ".tar.zst", ".tzst"}) {
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) return true;
  }
  return false;
}

absl::StatusOr<FileUpload> UploadFileEntry(http::Client& client, const std::string& dest, const std::string& src,
                                           const WorkdirUploadOptions& options) {
  const std::string label = "files." + dest;
  auto prefixed = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StartsWith(s.message(), label) ? std::string(s.message())
                                                                       : fmt::format("{}: {}", label, s.message()));
  };
  struct stat st;
  if (::stat(src.c_str(), &st) != 0) {
    return absl::NotFoundError(fmt::format("{}: {} does not exist: {}", label, src, std::strerror(errno)));
  }
  FileUpload up;
  absl::StatusOr<WorkdirUpload> sent = absl::UnknownError("unset");
  if (S_ISDIR(st.st_mode)) {
    up.kind = "folder";
    up.archive.path = dest;
    sent = PackAndUpload(client, label, options, [&](const std::string& out, const archive::PackOptions& o) {
      return archive::PackWorkdir(src, out, o);
    });
  } else if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(fmt::format("{}: {} is not a file or folder", label, src));
  } else if (IsTarArchiveName(src)) {
    // Sent as it is; the server checks it (archive/unpack.h) and the node unpacks it into DEST.
    up.kind = "archive";
    up.archive.path = dest;
    if (static_cast<uint64_t>(st.st_size) > options.max_archive_bytes) {
      return absl::ResourceExhaustedError(fmt::format("{}: {} is {} bytes, over the {} byte limit of an archive", label,
                                                      src, st.st_size, options.max_archive_bytes));
    }
    WorkdirUpload out;
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::string> digest = archive::Sha256OfFile(src);
    if (!digest.ok()) return prefixed(digest.status());
    out.pack_ms = MillisSince(start);
    out.digest = *digest;
    out.archive_bytes = static_cast<uint64_t>(st.st_size);
    out.files = 1;
    out.content_bytes = out.archive_bytes;
    absl::Status s = UploadArchiveFile(client, src, *digest, out.archive_bytes, label, options, out);
    sent = s.ok() ? absl::StatusOr<WorkdirUpload>(out) : absl::StatusOr<WorkdirUpload>(s);
  } else {
    // One file: an archive holding the entry DEST, unpacked into the working folder itself.
    up.kind = "file";
    up.archive.path = "";
    sent = PackAndUpload(client, label, options, [&](const std::string& out, const archive::PackOptions& o) {
      return archive::PackFile(src, dest, out, o);
    });
  }
  if (!sent.ok()) return prefixed(sent.status());
  up.archive.digest = sent->digest;
  up.stats = *sent;
  return up;
}

}  // namespace gpugeek::cli
