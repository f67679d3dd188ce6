#include "archive/pack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "absl/status/status.h"
#include "archive/digest.h"
#include "archive/ignore_rules.h"
#include "archive/link_target.h"
#include "common/file.h"
#include "common/status_macros.h"

namespace gpugeek::archive {
namespace {

// libarchive's message for the last error; it may have none (NULL), which fmt must not be given.
const char* ErrorText(struct archive* a) {
  const char* e = archive_error_string(a);
  return e == nullptr ? "unknown libarchive error" : e;
}

constexpr uint64_t kMaxIgnoreFileBytes = 1 << 20;

// Where libarchive's output goes: the file, the digest and the byte count, with the size limit.
struct Sink {
  int fd = -1;
  Sha256 sha;
  uint64_t bytes = 0;
  uint64_t limit = 0;
  bool over_limit = false;
  int write_errno = 0;
};

la_ssize_t SinkWrite(struct archive* a, void* data, const void* buf, size_t n) {
  Sink& s = *static_cast<Sink*>(data);
  if (s.bytes + n > s.limit) {
    s.over_limit = true;
    archive_set_error(a, EFBIG, "archive over its size limit");
    return -1;
  }
  const char* p = static_cast<const char*>(buf);
  size_t left = n;
  while (left > 0) {
    const ssize_t w = ::write(s.fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      s.write_errno = errno;
      archive_set_error(a, errno, "write failed");
      return -1;
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  s.sha.Update(std::string_view(static_cast<const char*>(buf), n));
  s.bytes += n;
  return static_cast<la_ssize_t>(n);
}

struct ArchiveDeleter {
  void operator()(struct archive* a) const { archive_write_free(a); }
};
struct EntryDeleter {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

class Packer {
 public:
  Packer(std::string root, const PackOptions& options, struct archive* a, Sink& sink)
      : root_(std::move(root)), options_(options), a_(a), sink_(sink) {}

  absl::Status Walk(const std::string& rel) {
    const std::string dir = rel.empty() ? root_ : root_ + "/" + rel;
    // This folder's own rules apply to what it holds, and are dropped on leaving it.
    const size_t rules_before = rules_.size();
    for (const char* name : {".gitignore", ".gpugeekignore"}) {
      const std::string path = dir + "/" + name;
      struct stat st;
      if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      absl::StatusOr<std::string> text = ReadFileBounded(path, kMaxIgnoreFileBytes, "ignore file");
      if (!text.ok()) return text.status();
      for (IgnoreRule& r : ParseIgnoreRules(*text, rel)) rules_.push_back(std::move(r));
    }
    std::vector<std::string> names;
    {
      std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
      if (d == nullptr) {
        return absl::UnavailableError(fmt::format("workdir: cannot read folder {}: {}", dir, std::strerror(errno)));
      }
      while (const dirent* e = ::readdir(d.get())) {
        const std::string_view n = e->d_name;
        if (n == "." || n == "..") continue;
        if (rel.empty() && n == ".git") continue;
        names.emplace_back(n);
      }
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const std::string child = rel.empty() ? name : rel + "/" + name;
      const std::string path = root_ + "/" + child;
      struct stat st;
      if (::lstat(path.c_str(), &st) != 0) {
        return absl::UnavailableError(fmt::format("workdir: cannot stat {}: {}", path, std::strerror(errno)));
      }
      const bool is_dir = S_ISDIR(st.st_mode);
      if (IsIgnored(rules_, child, is_dir)) {
        ++result_.ignored;
        continue;
      }
      if (is_dir) {
        if (absl::Status s = Add(child + "/", AE_IFDIR, 0755, 0, nullptr, ""); !s.ok()) return s;
        ++result_.dirs;
        if (absl::Status s = Walk(child); !s.ok()) return s;
      } else if (S_ISREG(st.st_mode)) {
        const int mode = (st.st_mode & S_IXUSR) ? 0755 : 0644;
        if (absl::Status s = Add(child, AE_IFREG, mode, static_cast<uint64_t>(st.st_size), &path, ""); !s.ok()) {
          return s;
        }
        ++result_.files;
        result_.content_bytes += static_cast<uint64_t>(st.st_size);
      } else if (S_ISLNK(st.st_mode)) {
        std::string target(4096, '\0');
        const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
        if (n < 0) return absl::UnavailableError(fmt::format("workdir: readlink {}: {}", path, std::strerror(errno)));
        target.resize(static_cast<size_t>(n));
        if (!RelativeLinkStaysInside(static_cast<int>(std::count(child.begin(), child.end(), '/')), target)) {
          return absl::FailedPreconditionError(
              fmt::format("workdir: {} is a symlink to '{}', outside the workdir (it would not exist on the node): "
                          "copy what it points to into the workdir, or add '/{}' to .gpugeekignore",
                          path, target, child));
        }
        if (absl::Status s = Add(child, AE_IFLNK, 0777, 0, nullptr, target); !s.ok()) return s;
        ++result_.symlinks;
      } else {
        return absl::FailedPreconditionError(
            fmt::format("workdir: {} is not a file, folder or symlink (a fifo, socket or device): add '/{}' to "
                        ".gpugeekignore",
                        path, child));
      }
    }
    rules_.resize(rules_before);
    return absl::OkStatus();
  }

  // One folder entry ("a/b/"), for PackFile's parents.
  absl::Status AddFolder(const std::string& name) {
    ++result_.dirs;
    return Add(name, AE_IFDIR, 0755, 0, nullptr, "");
  }
  // One regular file `path` as entry `name`.
  absl::Status AddFile(const std::string& name, const std::string& path, const struct stat& st) {
    const int mode = (st.st_mode & S_IXUSR) ? 0755 : 0644;
    RETURN_IF_ERROR(Add(name, AE_IFREG, mode, static_cast<uint64_t>(st.st_size), &path, ""));
    ++result_.files;
    result_.content_bytes += static_cast<uint64_t>(st.st_size);
    return absl::OkStatus();
  }

  PackResult& result() { return result_; }

 private:
  absl::Status Add(const std::string& name, unsigned int type, int mode, uint64_t size, const std::string* file,
                   const std::string& link) {
    if (++entries_ > options_.max_entries) {
      return absl::ResourceExhaustedError(
          fmt::format("workdir: more than {} files and folders (the limit): add what the job does not need to "
                      ".gpugeekignore",
                      options_.max_entries));
    }
    std::unique_ptr<archive_entry, EntryDeleter> e(archive_entry_new());
    archive_entry_set_pathname(e.get(), name.c_str());
    archive_entry_set_filetype(e.get(), type);
    archive_entry_set_perm(e.get(), static_cast<mode_t>(mode));
    archive_entry_set_size(e.get(), static_cast<la_int64_t>(size));
    archive_entry_set_mtime(e.get(), 0, 0);
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    if (type == AE_IFLNK) archive_entry_set_symlink(e.get(), link.c_str());
    if (archive_write_header(a_, e.get()) != ARCHIVE_OK) return WriteError(name);
    if (file == nullptr) return absl::OkStatus();
    const int fd = ::open(file->c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return absl::UnavailableError(fmt::format("workdir: cannot open {}: {}", *file, std::strerror(errno)));
    uint64_t left = size;
    absl::Status status;
    while (left > 0) {
      const ssize_t n = ::read(fd, buf_.data(), std::min<uint64_t>(buf_.size(), left));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        status = absl::UnavailableError(
            fmt::format("workdir: {} changed while it was packed (read {} of {} bytes)", *file, size - left, size));
        break;
      }
      if (archive_write_data(a_, buf_.data(), static_cast<size_t>(n)) != n) {
        status = WriteError(name);
        break;
      }
      left -= static_cast<uint64_t>(n);
    }
    ::close(fd);
    return status;
  }

  absl::Status WriteError(const std::string& name) {
    if (sink_.over_limit) {
      return absl::ResourceExhaustedError(
          fmt::format("workdir: the archive exceeds {} bytes (the limit) at {}: add large files the job does not "
                      "need to .gpugeekignore",
                      options_.max_archive_bytes, name));
    }
    return absl::UnavailableError(fmt::format("workdir: packing {}: {}", name, ErrorText(a_)));
  }

  const std::string root_;
  const PackOptions options_;
  struct archive* a_;
  Sink& sink_;
  std::vector<IgnoreRule> rules_;
  std::vector<char> buf_ = std::vector<char>(1 << 16);
  uint64_t entries_ = 0;
  PackResult result_;
};

// Writes a deterministic tar.zst into `out_path` from what `fill` adds through a Packer over `root`.
absl::StatusOr<PackResult> PackInto(const std::string& root, const std::string& out_path, const PackOptions& options,
                                    const std::function<absl::Status(Packer&)>& fill) {
  Sink sink;
  sink.limit = options.max_archive_bytes;
  sink.fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (sink.fd < 0) {
    return absl::UnavailableError(fmt::format("workdir: cannot create {}: {}", out_path, std::strerror(errno)));
  }
  std::unique_ptr<struct archive, ArchiveDeleter> a(archive_write_new());
  archive_write_set_format_pax_restricted(a.get());
  archive_write_add_filter_zstd(a.get());
  archive_write_set_filter_option(a.get(), "zstd", "compression-level", std::to_string(options.zstd_level).c_str());
  // No padding to 10 KiB blocks: the archive ends where its data does.
  archive_write_set_bytes_in_last_block(a.get(), 1);
  absl::Status status;
  if (archive_write_open(a.get(), &sink, nullptr, SinkWrite, nullptr) != ARCHIVE_OK) {
    status = absl::InternalError(fmt::format("workdir: libarchive: {}", ErrorText(a.get())));
  }
  Packer packer(root, options, a.get(), sink);
  if (status.ok()) status = fill(packer);
  if (status.ok() && archive_write_close(a.get()) != ARCHIVE_OK) {
    status = sink.over_limit
                 ? absl::ResourceExhaustedError(
                       fmt::format("workdir: the archive exceeds {} bytes (the limit)", options.max_archive_bytes))
                 : absl::UnavailableError(fmt::format("workdir: writing {}: {}", out_path, ErrorText(a.get())));
  }
  a.reset();
  if (status.ok() && ::fsync(sink.fd) != 0) {
    status = absl::UnavailableError(fmt::format("workdir: fsync {}: {}", out_path, std::strerror(errno)));
  }
  ::close(sink.fd);
  if (!status.ok()) {
    ::unlink(out_path.c_str());
    return status;
  }
  PackResult result = packer.result();
  result.digest = sink.sha.HexDigest();
  result.archive_bytes = sink.bytes;
  return result;
}

}  // namespace

absl::StatusOr<PackResult> PackWorkdir(const std::string& root, const std::string& out_path,
                                       const PackOptions& options) {
  struct stat st;
  if (::stat(root.c_str(), &st) != 0) {
    return absl::NotFoundError(fmt::format("workdir: {} does not exist: {}", root, std::strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) return absl::FailedPreconditionError(fmt::format("workdir: {} is not a folder", root));
  return PackInto(root, out_path, options, [](Packer& p) { return p.Walk(""); });
}

absl::StatusOr<PackResult> PackFile(const std::string& file, const std::string& entry, const std::string& out_path,
                                    const PackOptions& options) {
  if (!IsSafeRelativePath(entry)) {
    return absl::InvalidArgumentError(fmt::format(
        "'{}' is not a relative path of plain components (no '..', '.', empty parts or leading '/')", entry));
  }
  struct stat st;
  if (::stat(file.c_str(), &st) != 0) {
    return absl::NotFoundError(fmt::format("{} does not exist: {}", file, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) return absl::FailedPreconditionError(fmt::format("{} is not a regular file", file));
  return PackInto("", out_path, options, [&](Packer& p) -> absl::Status {
    for (size_t slash = entry.find('/'); slash != std::string::npos; slash = entry.find('/', slash + 1)) {
      RETURN_IF_ERROR(p.AddFolder(entry.substr(0, slash + 1)));
    }
    return p.AddFile(entry, file, st);
  });
}

}  // namespace gpugeek::archive
