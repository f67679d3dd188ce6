#include "controlplane/archive_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iterator>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "archive/digest.h"
#include "archive/unpack.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "crypto/sealed_file.h"

namespace gpugeek::controlplane {
namespace {

namespace fs = std::filesystem;

// A sealed record's plaintext: large enough that a 1 GiB archive is 256 records, small enough to
// hold a handful in memory at once.
constexpr size_t kRecordBytes = size_t{4} << 20;

std::string KeyTenant(const std::string& tenant) { return tenant.empty() ? "default" : tenant; }
std::string Context(const std::string& tenant, const std::string& digest) {
  return fmt::format("archive:{}/{}", KeyTenant(tenant), digest);
}

absl::Status CheckDigest(const std::string& digest) {
  if (archive::IsSha256Hex(digest)) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format(
      "digest: '{}' is not a SHA-256 (64 lower-case hex digits of the archive's bytes)", digest.substr(0, 80)));
}

}  // namespace

// An upload no piece has reached for this long is abandoned: dropped when another upload starts.
constexpr auto kAbandonedAfter = std::chrono::minutes(10);

struct ArchiveStore::Upload {
  std::chrono::steady_clock::time_point touched = std::chrono::steady_clock::now();
  uint64_t total = 0;
  uint64_t received = 0;
  bool busy = false;
  archive::Sha256 sha;
  std::unique_ptr<crypto::SealedLogWriter> writer;
};

ArchiveStore::ArchiveStore(const ArchiveStoreOptions& options) : options_(options) {}
ArchiveStore::~ArchiveStore() = default;

absl::StatusOr<std::unique_ptr<ArchiveStore>> ArchiveStore::Open(const ArchiveStoreOptions& options) {
  if (options.dir.empty() || options.keyring == nullptr) {
    return absl::InvalidArgumentError("archive store: a folder and a keyring are required");
  }
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec) return absl::UnavailableError(fmt::format("archive store: cannot create {}: {}", options.dir, ec.message()));
  fs::permissions(options.dir, fs::perms::owner_all, ec);
  // Unfinished uploads of a previous run: their hash state is gone, so they cannot be continued.
  for (const auto& tenant : fs::directory_iterator(options.dir, ec)) {
    if (!tenant.is_directory()) continue;
    for (const auto& f : fs::directory_iterator(tenant.path(), ec)) {
      if (f.path().extension() == ".upload") fs::remove(f.path(), ec);
    }
  }
  return std::unique_ptr<ArchiveStore>(new ArchiveStore(options));
}

std::string ArchiveStore::TenantDir(const std::string& tenant) const { return options_.dir + "/" + KeyTenant(tenant); }

std::string ArchiveStore::PathOf(const std::string& tenant, const std::string& digest) const {
  return TenantDir(tenant) + "/" + digest;
}

bool ArchiveStore::Has(const std::string& tenant, const std::string& digest) const {
  if (!archive::IsSha256Hex(digest)) return false;
  struct stat st;
  return ::stat(PathOf(tenant, digest).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

uint64_t ArchiveStore::put_calls() const {
  MutexLock lock(&mu_);
  return put_calls_;
}

absl::StatusOr<ArchiveStore::PutResult> ArchiveStore::Put(const std::string& tenant, const std::string& digest,
                                                          uint64_t offset, uint64_t total, std::string_view piece) {
  RETURN_IF_ERROR(CheckDigest(digest));
  if (total > options_.max_archive_bytes) {
    return absl::ResourceExhaustedError(
        fmt::format("total: the archive is {} bytes; this server's limit is {} bytes (--max-archive-bytes): add "
                    "what the job does not need to .gpugeekignore",
                    total, options_.max_archive_bytes));
  }
  if (total == 0) return absl::InvalidArgumentError("total: an archive is never empty; send its size in bytes");
  if (offset > total || piece.size() > total - offset) {
    return absl::InvalidArgumentError(
        fmt::format("offset: a piece of {} bytes at offset {} ends past total = {}", piece.size(), offset, total));
  }
  if (Has(tenant, digest)) return PutResult{.received = total, .complete = true};
  const std::string key = KeyTenant(tenant) + "/" + digest;
  Upload* up = nullptr;
  {
    MutexLock lock(&mu_);
    ++put_calls_;
    auto it = uploads_.find(key);
    if (it != uploads_.end() && offset == 0 && !it->second->busy) {
      // The client starts over (its earlier attempt broke off): what it sent before is dropped.
      uploads_.erase(it);
      it = uploads_.end();
    }
    if (it == uploads_.end()) {
      const auto now = std::chrono::steady_clock::now();
      for (auto u = uploads_.begin(); u != uploads_.end();) {
        // Abandoned uploads make room; their staging files are overwritten by their next first piece or
        // removed at the next Open.
        u = !u->second->busy && now - u->second->touched > kAbandonedAfter ? uploads_.erase(u) : std::next(u);
      }
      if (offset != 0) {
        return absl::FailedPreconditionError(
            fmt::format("offset: no upload of archive {} is in progress; start at offset 0", digest));
      }
      if (static_cast<int>(uploads_.size()) >= options_.max_uploads_in_progress) {
        return absl::ResourceExhaustedError(fmt::format(
            "{} archive uploads are in progress (the server's limit); retry when one has finished", uploads_.size()));
      }
      it = uploads_.emplace(key, std::make_unique<Upload>()).first;
      it->second->total = total;
    }
    up = it->second.get();
    if (up->busy) return absl::AbortedError(fmt::format("a piece of archive {} is being written; retry", digest));
    if (up->total != total) {
      return absl::InvalidArgumentError(
          fmt::format("total: the upload of archive {} started with total = {}, not {}", digest, up->total, total));
    }
    if (offset != up->received) {
      return absl::FailedPreconditionError(
          fmt::format("offset: the server holds {} bytes of archive {}; continue from offset {}", up->received, digest,
                      up->received));
    }
    up->busy = true;
    up->touched = std::chrono::steady_clock::now();
  }
  // The upload is ours while busy: its writer and hash are touched without the lock.
  absl::Status status;
  uint64_t entries = 0;
  if (up->writer == nullptr) {
    std::error_code ec;
    fs::create_directories(TenantDir(tenant), ec);
    const std::string staging = PathOf(tenant, digest) + ".upload";
    fs::remove(staging, ec);
    absl::StatusOr<std::unique_ptr<crypto::SealedLogWriter>> w =
        crypto::SealedLogWriter::Open(*options_.keyring, KeyTenant(tenant), staging, Context(tenant, digest));
    if (w.ok()) {
      up->writer = *std::move(w);
    } else {
      status = w.status();
    }
  }
  for (size_t at = 0; status.ok() && at < piece.size(); at += kRecordBytes) {
    const std::string_view record = piece.substr(at, kRecordBytes);
    status = up->writer->Append(record).status();
    if (status.ok()) {
      up->sha.Update(record);
      up->received += record.size();
    }
  }
  const bool last = status.ok() && up->received == up->total;
  if (last) status = Finish(tenant, digest, *up, entries);
  MutexLock lock(&mu_);
  up->busy = false;
  const uint64_t received = up->received;
  if (last || !status.ok()) {
    // Done, or broken: a failed piece leaves the upload in an unknown state; the client starts again.
    uploads_.erase(key);
    std::error_code ec;
    if (!status.ok()) fs::remove(PathOf(tenant, digest) + ".upload", ec);
  }
  if (!status.ok()) return status;
  return PutResult{.received = received, .complete = last, .entries = entries};
}

absl::Status ArchiveStore::Finish(const std::string& tenant, const std::string& digest, Upload& up, uint64_t& entries) {
  const std::string got = up.sha.HexDigest();
  if (got != digest) {
    return absl::InvalidArgumentError(fmt::format(
        "digest: the {} bytes uploaded hash to {}, not {}; nothing was kept (upload the archive's exact bytes)",
        up.total, got, digest));
  }
  RETURN_IF_ERROR(up.writer->Sync());
  const std::string staging = PathOf(tenant, digest) + ".upload";
  uint64_t offset = 0;
  const archive::ReadPieceFn next = [&]() -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(crypto::LogRead read, crypto::ReadSealedLog(*options_.keyring, KeyTenant(tenant), staging,
                                                                 Context(tenant, digest), offset, kRecordBytes));
    offset = read.next_offset;
    if (read.records.empty()) return std::string();
    std::string out;
    for (crypto::LogRecord& r : read.records) out += r.plaintext;
    return out;
  };
  absl::StatusOr<archive::UnpackStats> check =
      archive::CheckWorkdirArchiveStream(next, {.max_entries = options_.max_entries});
  if (!check.ok()) {
    if (absl::IsResourceExhausted(check.status())) {
      return absl::ResourceExhaustedError(
          fmt::format("{} (this server's --max-archive-files); nothing was kept", check.status().message()));
    }
    return absl::InvalidArgumentError(fmt::format("{}; nothing was kept", check.status().message()));
  }
  entries = check->entries;
  up.writer.reset();
  if (::rename(staging.c_str(), PathOf(tenant, digest).c_str()) != 0) {
    return absl::UnavailableError(fmt::format("archive store: cannot rename {}: {}", staging, std::strerror(errno)));
  }
  spdlog::info("archive store: tenant '{}' uploaded archive {} ({} bytes, {} entries)", KeyTenant(tenant), digest,
               up.total, entries);
  return absl::OkStatus();
}

absl::Status ArchiveStore::Read(const std::string& tenant, const std::string& digest,
                                const std::function<bool(std::string_view)>& sink) const {
  if (!Has(tenant, digest)) {
    return absl::NotFoundError(fmt::format("no archive {}", digest.substr(0, 80)));
  }
  uint64_t offset = 0;
  for (;;) {
    ASSIGN_OR_RETURN(crypto::LogRead read,
                     crypto::ReadSealedLog(*options_.keyring, KeyTenant(tenant), PathOf(tenant, digest),
                                           Context(tenant, digest), offset, kRecordBytes));
    if (read.records.empty()) return absl::OkStatus();
    for (const crypto::LogRecord& r : read.records) {
      if (!sink(r.plaintext)) return absl::OkStatus();
    }
    offset = read.next_offset;
  }
}

}  // namespace gpugeek::controlplane
