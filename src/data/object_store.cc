#include "data/object_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>

#include <fmt/format.h>

#include "archive/digest.h"
#include "common/file.h"
#include "crypto/durable_file.h"

namespace gpugeek::data {
namespace {

namespace fs = std::filesystem;

absl::Status WriteAll(int fd, std::string_view bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return crypto::ErrnoStatus(errno, "write", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

bool IsHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ObjectStore>> ObjectStore::Open(const std::string& root) {
  std::error_code ec;
  fs::create_directories(fs::path(root) / "objects" / "tmp", ec);
  if (ec) return crypto::ErrnoStatus(ec.value(), "create the object store", root);
  return std::unique_ptr<ObjectStore>(new ObjectStore(root));
}

std::string ObjectStore::PathOf(const std::string& digest) const {
  return fmt::format("{}/objects/{}/{}", root_, digest.substr(0, 2), digest.substr(2));
}

bool ObjectStore::Has(const std::string& digest) const {
  struct stat st {};
  return archive::IsSha256Hex(digest) && ::stat(PathOf(digest).c_str(), &st) == 0;
}

absl::StatusOr<ObjectStore::PutResult> ObjectStore::Put(std::string_view bytes) {
  return PutWithDigest(archive::Sha256Hex(bytes), bytes);
}

absl::StatusOr<ObjectStore::PutResult> ObjectStore::PutWithDigest(const std::string& digest, std::string_view bytes) {
  // A present object of the wrong size is damaged (truncated, overwritten): it is replaced by the good
  // bytes at hand. A same-size corruption is found by Get and Fsck.
  if (absl::StatusOr<uint64_t> size = Size(digest); size.ok() && *size == bytes.size()) {
    return PutResult{digest, false};
  }
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = fmt::format("{}/objects/tmp/{}-{}", root_, ::getpid(), counter.fetch_add(1));
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
    // EEXIST: a file a killed process with the same pid left behind; take the next name.
    if (fd < 0 && (errno != EEXIST || attempt > 100)) return crypto::ErrnoStatus(errno, "create", tmp);
  }
  absl::Status written = WriteAll(fd, bytes, tmp);
  if (::close(fd) != 0 && written.ok()) written = crypto::ErrnoStatus(errno, "close", tmp);
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  const std::string path = PathOf(digest);
  std::error_code ec;
  fs::create_directory(fs::path(path).parent_path(), ec);
  if (ec) {
    ::unlink(tmp.c_str());
    return crypto::ErrnoStatus(ec.value(), "create", fs::path(path).parent_path().string());
  }
  // rename(2) is atomic: readers see no object or the whole one. Two writers of the same bytes both
  // succeed; the second replaces identical bytes.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return crypto::ErrnoStatus(err, "rename into", path);
  }
  return PutResult{digest, true};
}

absl::StatusOr<std::string> ObjectStore::Get(const std::string& digest, uint64_t max_bytes) const {
  if (!archive::IsSha256Hex(digest)) {
    return absl::InvalidArgumentError(fmt::format("object name {:?} is not 64 lower-case hex digits", digest));
  }
  absl::StatusOr<std::string> bytes = ReadFileBounded(PathOf(digest), max_bytes, "object");
  if (!bytes.ok()) {
    if (absl::IsNotFound(bytes.status())) return absl::NotFoundError(fmt::format("no object {}", digest));
    return bytes.status();
  }
  if (archive::Sha256Hex(*bytes) != digest) {
    return absl::DataLossError(
        fmt::format("object {} is damaged: its bytes hash to something else (run `gpugeek data fsck`)", digest));
  }
  return bytes;
}

absl::StatusOr<uint64_t> ObjectStore::Size(const std::string& digest) const {
  struct stat st {};
  if (!archive::IsSha256Hex(digest) || ::stat(PathOf(digest).c_str(), &st) != 0) {
    return absl::NotFoundError(fmt::format("no object {}", digest));
  }
  return static_cast<uint64_t>(st.st_size);
}

absl::Status ObjectStore::ForEach(const std::function<void(const std::string&, uint64_t)>& fn) const {
  const fs::path objects = fs::path(root_) / "objects";
  std::error_code ec;
  for (fs::directory_iterator dir(objects, ec), end; !ec && dir != end; dir.increment(ec)) {
    const std::string prefix = dir->path().filename().string();
    if (prefix.size() != 2 || !IsHex(prefix) || !dir->is_directory(ec)) continue;
    std::error_code ec2;
    for (fs::directory_iterator it(dir->path(), ec2), end2; !ec2 && it != end2; it.increment(ec2)) {
      const std::string rest = it->path().filename().string();
      if (rest.size() != 62 || !IsHex(rest)) continue;
      std::error_code ec3;
      const uint64_t size = it->file_size(ec3);
      if (!ec3) fn(prefix + rest, size);
    }
    if (ec2) return crypto::ErrnoStatus(ec2.value(), "list", dir->path().string());
  }
  if (ec) return crypto::ErrnoStatus(ec.value(), "list", objects.string());
  return absl::OkStatus();
}

absl::Status ObjectStore::Remove(const std::string& digest) {
  if (!archive::IsSha256Hex(digest)) return absl::OkStatus();
  const std::string path = PathOf(digest);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return crypto::ErrnoStatus(errno, "remove", path);
  return absl::OkStatus();
}

size_t ObjectStore::RemoveTempFiles() {
  size_t removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(root_) / "objects" / "tmp", ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code ec2;
    if (fs::remove(it->path(), ec2)) ++removed;
  }
  return removed;
}

absl::Status ObjectStore::Sync() {
  const int fd = ::open(root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return crypto::ErrnoStatus(errno, "open", root_);
  const int rc = ::syncfs(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return crypto::ErrnoStatus(err, "syncfs", root_);
  return absl::OkStatus();
}

}  // namespace gpugeek::data
