#include "archive/unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "archive/link_target.h"
#include "common/quote.h"

namespace gpugeek::archive {
namespace {

// libarchive's message for the last error; it may have none (NULL), which fmt must not be given.
const char* ErrorText(struct archive* a) {
  const char* e = archive_error_string(a);
  return e == nullptr ? "unknown libarchive error" : e;
}

constexpr size_t kMaxPathBytes = 4096;

struct ReaderDeleter {
  void operator()(struct archive* a) const { archive_read_free(a); }
};

absl::Status Bad(std::string_view entry, std::string_view why) {
  return absl::InvalidArgumentError(
      fmt::format("workdir archive: entry {} {}; the archive is refused", QuoteForMessage(entry, 200), why));
}

// The path's components, or an error for an absolute path, "..", NUL or an empty path.
absl::StatusOr<std::vector<std::string_view>> Components(std::string_view path) {
  if (path.empty()) return Bad(path, "has an empty path");
  if (path.size() > kMaxPathBytes) return Bad(path, "has a path over 4096 bytes");
  if (path.front() == '/') return Bad(path, "has an absolute path");
  if (path.find('\0') != std::string_view::npos) return Bad(path, "has a NUL byte in its path");
  std::vector<std::string_view> parts;
  size_t i = 0;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    const std::string_view part = path.substr(i, j - i);
    if (part == "..") return Bad(path, "has a '..' component (it would be written outside the working folder)");
    if (!part.empty() && part != ".") parts.push_back(part);
    i = j + 1;
  }
  if (parts.empty()) return Bad(path, "names the folder itself");
  return parts;
}

class Unpacker {
 public:
  Unpacker(struct archive* a, std::string dest, const UnpackOptions& options)
      : a_(a), dest_(std::move(dest)), options_(options) {}

  absl::StatusOr<UnpackStats> Run() {
    for (;;) {
      archive_entry* e = nullptr;
      const int r = archive_read_next_header(a_, &e);
      if (r == ARCHIVE_EOF) break;
      if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
        return absl::DataLossError(fmt::format("workdir archive: not a readable tar archive after {} entries: {}",
                                               stats_.entries, ErrorText(a_)));
      }
      if (++stats_.entries > options_.max_entries) {
        return absl::ResourceExhaustedError(
            fmt::format("workdir archive: more than {} entries (the limit)", options_.max_entries));
      }
      const char* name = archive_entry_pathname(e);
      const std::string path = name == nullptr ? std::string() : std::string(name);
      absl::StatusOr<std::vector<std::string_view>> parts = Components(path);
      if (!parts.ok()) return parts.status();
      if (archive_entry_hardlink(e) != nullptr) return Bad(path, "is a hard link (not supported)");
      const mode_t type = archive_entry_filetype(e);
      std::string rel;
      for (std::string_view p : *parts) {
        // A link this archive made earlier on the way: writing below it would follow it.
        if (!rel.empty() && links_.contains(rel)) return Bad(path, "would be written through a symlink");
        rel += (rel.empty() ? "" : "/") + std::string(p);
      }
      if (type == AE_IFLNK) {
        const char* t = archive_entry_symlink(e);
        const std::string target = t == nullptr ? std::string() : std::string(t);
        if (!RelativeLinkStaysInside(static_cast<int>(parts->size()) - 1, target)) {
          return Bad(path, fmt::format("is a symlink to {}, outside the working folder", QuoteForMessage(target)));
        }
        links_.insert(rel);
        if (!dest_.empty()) {
          if (absl::Status s = Prepare(*parts, path); !s.ok()) return s;
          const std::string full = dest_ + "/" + rel;
          ::unlink(full.c_str());
          if (::symlink(target.c_str(), full.c_str()) != 0) return WriteError(full);
        }
      } else if (type == AE_IFDIR) {
        if (!dest_.empty()) {
          if (absl::Status s = Prepare(*parts, path); !s.ok()) return s;
          if (absl::Status s = MakeDir(dest_ + "/" + rel, path); !s.ok()) return s;
        }
      } else if (type == AE_IFREG) {
        ++stats_.files;
        int fd = -1;
        if (!dest_.empty()) {
          if (absl::Status s = Prepare(*parts, path); !s.ok()) return s;
          const std::string full = dest_ + "/" + rel;
          const mode_t mode = (archive_entry_perm(e) & S_IXUSR) ? 0755 : 0644;
          fd = ::open(full.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
          if (fd < 0 && errno == ELOOP) {  // a symlink of an earlier run stands there: replace it
            ::unlink(full.c_str());
            fd = ::open(full.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
          }
          if (fd < 0) return WriteError(full);
          ::fchmod(fd, mode);
        }
        absl::Status s = CopyData(fd, path);
        if (fd >= 0) ::close(fd);
        if (!s.ok()) return s;
      } else {
        return Bad(path, "is not a file, folder or symlink");
      }
    }
    return stats_;
  }

 private:
  // Makes the folders on the way to an entry; refuses one that is a symlink or not a folder.
  absl::Status Prepare(const std::vector<std::string_view>& parts, const std::string& path) {
    std::string at = dest_;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      at += "/" + std::string(parts[i]);
      if (absl::Status s = MakeDir(at, path); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status MakeDir(const std::string& full, const std::string& path) {
    if (::mkdir(full.c_str(), 0755) == 0) return absl::OkStatus();
    if (errno != EEXIST) return WriteError(full);
    struct stat st;
    if (::lstat(full.c_str(), &st) != 0) return WriteError(full);
    if (S_ISLNK(st.st_mode)) return Bad(path, "would be written through a symlink");
    if (!S_ISDIR(st.st_mode)) return Bad(path, "needs a folder where a file stands");
    return absl::OkStatus();
  }

  absl::Status CopyData(int fd, const std::string& path) {
    for (;;) {
      const la_ssize_t n = archive_read_data(a_, buf_.data(), buf_.size());
      if (n == 0) return absl::OkStatus();
      if (n < 0) {
        return absl::DataLossError(
            fmt::format("workdir archive: entry {}: {}", QuoteForMessage(path, 200), ErrorText(a_)));
      }
      stats_.content_bytes += static_cast<uint64_t>(n);
      if (stats_.content_bytes > options_.max_content_bytes) {
        return absl::ResourceExhaustedError(fmt::format(
            "workdir archive: the files hold more than {} bytes unpacked (the limit)", options_.max_content_bytes));
      }
      if (fd < 0) continue;
      const char* p = buf_.data();
      size_t left = static_cast<size_t>(n);
      while (left > 0) {
        const ssize_t w = ::write(fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return WriteError(path);
        p += w;
        left -= static_cast<size_t>(w);
      }
    }
  }

  absl::Status WriteError(const std::string& full) {
    return absl::UnavailableError(fmt::format("workdir archive: cannot write {}: {}", full, std::strerror(errno)));
  }

  struct archive* a_;
  const std::string dest_;
  const UnpackOptions options_;
  UnpackStats stats_;
  std::set<std::string> links_;  // the links written so far, relative paths
  std::vector<char> buf_ = std::vector<char>(1 << 16);
};

std::unique_ptr<struct archive, ReaderDeleter> NewReader() {
  std::unique_ptr<struct archive, ReaderDeleter> a(archive_read_new());
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_zstd(a.get());
  archive_read_support_filter_gzip(a.get());
  archive_read_support_filter_none(a.get());
  return a;
}

}  // namespace

absl::StatusOr<UnpackStats> UnpackWorkdir(const std::string& archive_path, const std::string& dest,
                                          const UnpackOptions& options) {
  auto a = NewReader();
  if (archive_read_open_filename(a.get(), archive_path.c_str(), 1 << 16) != ARCHIVE_OK) {
    return absl::DataLossError(fmt::format("workdir archive {}: cannot open: {}", archive_path, ErrorText(a.get())));
  }
  return Unpacker(a.get(), dest, options).Run();
}

absl::StatusOr<UnpackStats> UnpackWorkdirBytes(std::string_view archive, const std::string& dest,
                                               const UnpackOptions& options) {
  auto a = NewReader();
  if (archive_read_open_memory(a.get(), archive.data(), archive.size()) != ARCHIVE_OK) {
    return absl::DataLossError(fmt::format("workdir archive: cannot open: {}", ErrorText(a.get())));
  }
  return Unpacker(a.get(), dest, options).Run();
}

namespace {

struct PieceSource {
  const ReadPieceFn* next;
  std::string piece;
  absl::Status error;
};

la_ssize_t ReadPiece(struct archive* a, void* data, const void** buf) {
  PieceSource& src = *static_cast<PieceSource*>(data);
  absl::StatusOr<std::string> piece = (*src.next)();
  if (!piece.ok()) {
    src.error = piece.status();
    archive_set_error(a, EIO, "%s", std::string(piece.status().message()).c_str());
    return -1;
  }
  src.piece = *std::move(piece);
  *buf = src.piece.data();
  return static_cast<la_ssize_t>(src.piece.size());
}

}  // namespace

absl::StatusOr<UnpackStats> CheckWorkdirArchiveStream(const ReadPieceFn& next, const UnpackOptions& options) {
  auto a = NewReader();
  PieceSource src{.next = &next, .piece = {}, .error = {}};
  if (archive_read_open(a.get(), &src, nullptr, ReadPiece, nullptr) != ARCHIVE_OK) {
    if (!src.error.ok()) return src.error;
    return absl::DataLossError(fmt::format("workdir archive: cannot open: {}", ErrorText(a.get())));
  }
  absl::StatusOr<UnpackStats> r = Unpacker(a.get(), "", options).Run();
  if (!src.error.ok()) return src.error;
  return r;
}

absl::StatusOr<UnpackStats> CheckWorkdirArchive(const std::string& archive_path, const UnpackOptions& options) {
  return UnpackWorkdir(archive_path, "", options);
}

}  // namespace gpugeek::archive
