#include "controlplane/log_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/absl_fmt.h"
#include "crypto/keyring.h"
#include "crypto/sealed_file.h"

namespace gpugeek::controlplane {
namespace {

namespace fs = std::filesystem;

// Ranks are gang ranks (a few thousand at most); the bound keeps a file name short.
constexpr int kMaxRank = 1 << 20;

// "rank-3.epoch-12.log" -> (3, 12, raw), "rank-3.epoch-12.sealed" -> (3, 12, sealed); false for any other
// name.
bool ParseFileName(const std::string& name, int* rank, int64_t* epoch, bool* sealed) {
  long long r = -1;
  long long e = -1;
  int consumed = 0;
  if (std::sscanf(name.c_str(), "rank-%lld.epoch-%lld.%n", &r, &e, &consumed) != 2 || consumed == 0) return false;
  const std::string_view ext = std::string_view(name).substr(static_cast<size_t>(consumed));
  if ((ext != "log" && ext != "sealed") || r < 0 || r >= kMaxRank || e < 0) return false;
  // Only canonical spellings ("rank-03" would alias "rank-3").
  if (name != fmt::format("rank-{}.epoch-{}.{}", r, e, ext)) return false;
  *rank = static_cast<int>(r);
  *epoch = e;
  *sealed = ext == "sealed";
  return true;
}

// The keyring's name for a job's tenant (jobs without one belong to "default", as the store seals them).
std::string KeyTenant(const std::string& tenant) { return tenant.empty() ? "default" : tenant; }

// The additional data that binds a sealed record to its member's log (crypto::SealRecord adds the offset).
std::string RecordContext(const std::string& job, int rank, int64_t epoch) {
  return fmt::format("log:{}/rank-{}/epoch-{}", job, rank, epoch);
}

std::string ErrnoText(int err) { return std::strerror(err); }

// Closes a file descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Writes all of `data` to `fd`; the bytes written so far in `*written`. False with errno on failure.
bool WriteAll(int fd, std::string_view data, size_t* written) {
  while (*written < data.size()) {
    const ssize_t n = ::write(fd, data.data() + *written, data.size() - *written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    *written += static_cast<size_t>(n);
  }
  return true;
}

// Writes all of `data` at `offset`. False with errno on failure.
bool PwriteAll(int fd, std::string_view data, uint64_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

// Reads up to `n` bytes at `offset` into `out` (fewer only at end of file). False with errno on failure.
bool PreadAll(int fd, uint64_t offset, size_t n, std::string* out) {
  out->resize(n);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, out->data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  out->resize(got);
  return true;
}

}  // namespace

LogStore::LogStore(std::string dir, LogStoreOptions options) : dir_(std::move(dir)), options_(options) {
  IndexExisting();
}

bool LogStore::ValidJobId(const std::string& job) {
  if (job.empty() || job.size() > 64 || job.find("..") != std::string::npos) return false;
  return std::all_of(job.begin(), job.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

std::string LogStore::QuotaMarker(uint64_t max_bytes_per_job) {
  return fmt::format("\n[gpugeek: log quota of {} bytes reached; further output dropped]\n", max_bytes_per_job);
}

absl::Status LogStore::CheckMember(const std::string& job, int rank, int64_t epoch) const {
  if (!ValidJobId(job)) {
    return absl::InvalidArgumentError(
        fmt::format("job id '{}' must be 1-64 characters of [A-Za-z0-9._-] without '..'", job));
  }
  if (rank < 0 || rank >= kMaxRank) {
    return absl::InvalidArgumentError(fmt::format("rank {} must be 0..{}", rank, kMaxRank - 1));
  }
  if (epoch < 0) return absl::InvalidArgumentError(fmt::format("epoch {} must be >= 0", epoch));
  return absl::OkStatus();
}

std::string LogStore::FilePath(const std::string& job, int rank, int64_t epoch, bool sealed) const {
  return (fs::path(dir_) / job / fmt::format("rank-{}.epoch-{}.{}", rank, epoch, sealed ? "sealed" : "log")).string();
}

std::mutex& LogStore::StripeFor(const std::string& job, int rank, int64_t epoch) {
  size_t h = std::hash<std::string>{}(job);
  h ^= std::hash<int64_t>{}(epoch) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  h ^= std::hash<int>{}(rank) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return stripes_[h % stripes_.size()];
}

std::shared_ptr<LogStore::JobState> LogStore::StateLocked(const std::string& job) {
  std::shared_ptr<JobState>& s = jobs_[job];
  if (!s) s = std::make_shared<JobState>();
  return s;
}

bool LogStore::IndexSealed(const std::string& path, FileState* file) {
  Fd fd{::open(path.c_str(), O_RDWR | O_CLOEXEC)};
  if (fd.fd < 0) {
    spdlog::warn("log store: cannot open {}: {}", path, ErrnoText(errno));
    return false;
  }
  absl::StatusOr<crypto::FrameScan> scan = crypto::ScanSealedLogFile(fd.fd, path, /*cut_torn_end=*/true);
  if (!scan.ok()) {
    spdlog::error("log store: {}", scan.status());
    return false;
  }
  file->sealed = true;
  file->file_bytes = scan->end;
  file->records.reserve(scan->frames.size());
  for (const crypto::RecordFrame& f : scan->frames) {
    file->records.push_back({.start = file->size, .frame = f.offset});
    file->size += f.plaintext_bytes();
  }
  return true;
}

void LogStore::IndexExisting() {
  std::error_code ec;
  fs::directory_iterator jobs(dir_, ec);
  if (ec) {
    if (ec != std::errc::no_such_file_or_directory) spdlog::warn("log store: cannot list {}: {}", dir_, ec.message());
    return;
  }
  size_t files = 0;
  for (const fs::directory_entry& job_dir : jobs) {
    const std::string job = job_dir.path().filename().string();
    if (!ValidJobId(job) || !job_dir.is_directory(ec)) continue;
    auto state = std::make_shared<JobState>();
    for (const fs::directory_entry& f : fs::directory_iterator(job_dir.path(), ec)) {
      int rank = 0;
      int64_t epoch = 0;
      bool sealed = false;
      if (!ParseFileName(f.path().filename().string(), &rank, &epoch, &sealed)) continue;
      if (state->files.contains({rank, epoch})) {
        spdlog::error("log store: {} and {} hold the same log; serving the first", FilePath(job, rank, epoch, !sealed),
                      f.path().string());
        continue;
      }
      FileState file;
      if (sealed) {
        if (!IndexSealed(f.path().string(), &file)) {
          // Kept for a person to look at, out of the way of the member's next bytes.
          fs::rename(f.path(), f.path().string() + ".corrupt", ec);
          continue;
        }
      } else {
        file.size = f.file_size(ec);
        file.file_bytes = file.size;
        if (ec) continue;
      }
      state->bytes += file.size;
      state->files.emplace(Member{rank, epoch}, std::move(file));
      ++files;
    }
    // Without the marker the files never exceed the quota, so more than the quota means it was written.
    state->quota_reached = state->bytes > options_.max_bytes_per_job;
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[job] = std::move(state);
  }
  spdlog::info("log store: {} files of {} jobs under {}", files, jobs_.size(), dir_);
}

absl::StatusOr<uint64_t> LogStore::Append(const std::string& tenant, const std::string& job, int rank, int64_t epoch,
                                          uint64_t offset, std::string_view data) {
  if (absl::Status s = CheckMember(job, rank, epoch); !s.ok()) return s;
  if (offset > UINT64_MAX - data.size()) {
    return absl::InvalidArgumentError(fmt::format("offset {} + {} bytes overflows", offset, data.size()));
  }
  std::lock_guard<std::mutex> file_lock(StripeFor(job, rank, epoch));
  // Under the file's stripe the in-memory state is the file's: every write to it goes through here.
  std::shared_ptr<JobState> state;
  FileState before;     // size, format and file size (no records: those are only appended to)
  size_t skip = 0;      // bytes of `data` the log already holds
  size_t keep = 0;      // bytes of `data` to write after `skip`
  bool marker = false;  // this write reaches the quota and appends the marker
  {
    std::lock_guard<std::mutex> lock(mu_);
    state = StateLocked(job);
    auto it = state->files.find({rank, epoch});
    if (it == state->files.end()) {
      before.sealed = options_.keyring != nullptr;  // a new log takes the store's format
    } else {
      before.size = it->second.size;
      before.sealed = it->second.sealed;
      before.file_bytes = it->second.file_bytes;
    }
    const uint64_t size = before.size;
    if (offset + data.size() <= size) return size;  // a resend of bytes we have (or nothing)
    if (state->quota_reached) {
      return absl::ResourceExhaustedError(
          fmt::format("job {}: log quota of {} bytes reached; output dropped", job, options_.max_bytes_per_job));
    }
    if (offset > size) {
      return absl::FailedPreconditionError(
          fmt::format("job {} rank {} epoch {}: chunk at offset {} leaves a gap: the log holds {} bytes", job, rank,
                      epoch, offset, size));
    }
    if (before.sealed && options_.keyring == nullptr) {
      return absl::FailedPreconditionError(
          fmt::format("job {} rank {} epoch {}: the log is sealed and this store has no keyring", job, rank, epoch));
    }
    skip = static_cast<size_t>(size - offset);
    const uint64_t want = data.size() - skip;
    const uint64_t room = options_.max_bytes_per_job - state->bytes;  // bytes <= max until the marker
    keep = static_cast<size_t>(std::min(want, room));
    marker = keep < want;
    // Reserve now so concurrent appends to the job's other files see the quota taken.
    state->bytes += keep;
    if (marker) {
      state->quota_reached = true;
      state->bytes += QuotaMarker(options_.max_bytes_per_job).size();
    }
  }

  const std::string payload =
      marker ? std::string(data.substr(skip, keep)) + QuotaMarker(options_.max_bytes_per_job) : std::string();
  const std::string_view out = marker ? std::string_view(payload) : data.substr(skip, keep);
  if (before.size == 0) {
    std::error_code ec;
    fs::create_directories(fs::path(dir_) / job, ec);
  }
  Written w = before.sealed ? WriteSealed(tenant, job, rank, epoch, before.size, before.file_bytes, out)
                            : WriteRaw(FilePath(job, rank, epoch, false), before.size, out);

  std::lock_guard<std::mutex> lock(mu_);
  // Unreserve what did not reach the file (the marker's share included), so a resend continues from
  // the real size. A cut marker leaves quota_reached set: output stays dropped.
  state->bytes -= out.size() - w.bytes;
  const uint64_t new_size = before.size + w.bytes;
  if (w.bytes > 0) {
    FileState& file = state->files[{rank, epoch}];
    file.size = new_size;
    file.sealed = before.sealed;
    file.file_bytes = w.file_bytes;
    file.records.insert(file.records.end(), w.records.begin(), w.records.end());
    state->changed.notify_all();
  }
  if (!w.status.ok()) return w.status;
  return new_size;
}

LogStore::Written LogStore::WriteRaw(const std::string& path, uint64_t size, std::string_view out) const {
  Written w;
  Fd fd{::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)};
  if (fd.fd < 0 || !WriteAll(fd.fd, out, &w.bytes)) {
    w.status = absl::UnavailableError(fmt::format("writing log {}: {}", path, ErrnoText(errno)));
  }
  w.file_bytes = size + w.bytes;
  return w;
}

LogStore::Written LogStore::WriteSealed(const std::string& tenant, const std::string& job, int rank, int64_t epoch,
                                        uint64_t size, uint64_t file_bytes, std::string_view out) const {
  Written w;
  w.file_bytes = file_bytes;
  const std::string context = RecordContext(job, rank, epoch);
  std::string frames;
  uint64_t at = file_bytes;
  for (size_t i = 0; i < out.size(); i += kMaxLogRecordBytes) {
    const std::string_view piece = out.substr(i, kMaxLogRecordBytes);
    absl::StatusOr<std::string> frame = crypto::SealRecord(*options_.keyring, KeyTenant(tenant), context, at, piece);
    if (!frame.ok()) {
      w.records.clear();
      w.status = frame.status();
      return w;
    }
    w.records.push_back({.start = size + i, .frame = at});
    at += frame->size();
    frames += *frame;
  }
  // All the records or none: a write that fails part way is cut back to the last whole record.
  const std::string path = FilePath(job, rank, epoch, true);
  Fd fd{::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600)};
  if (fd.fd < 0 || !PwriteAll(fd.fd, frames, file_bytes)) {
    const int err = errno;
    if (fd.fd >= 0 && ::ftruncate(fd.fd, static_cast<off_t>(file_bytes)) != 0) {
      spdlog::error("log store: cannot cut {} back to {} bytes: {}", path, file_bytes, ErrnoText(errno));
    }
    w.records.clear();
    w.status = absl::UnavailableError(fmt::format("writing log {}: {}", path, ErrnoText(err)));
    return w;
  }
  w.bytes = out.size();
  w.file_bytes = at;
  return w;
}

absl::StatusOr<LogRange> LogStore::Read(const std::string& tenant, const std::string& job, int rank, int64_t epoch,
                                        uint64_t offset, size_t limit) {
  if (absl::Status s = CheckMember(job, rank, epoch); !s.ok()) return s;
  limit = std::min(limit, kMaxLogReadBytes);
  bool sealed = false;
  uint64_t size = 0;
  Span span;  // the records covering [offset, offset + limit)
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto job_it = jobs_.find(job);
    if (job_it != jobs_.end()) {
      auto it = job_it->second->files.find({rank, epoch});
      if (it != job_it->second->files.end() && it->second.sealed) {
        const FileState& file = it->second;
        sealed = true;
        size = file.size;
        if (offset < size && limit > 0) {
          const auto by_start = [](uint64_t at, const Record& r) { return at < r.start; };
          auto first = std::upper_bound(file.records.begin(), file.records.end(), offset, by_start) - 1;
          auto last = std::upper_bound(first, file.records.end(), offset + limit - 1, by_start);
          span.records.assign(first, last);
          span.file_end = last == file.records.end() ? file.file_bytes : last->frame;
          span.read_end = std::min<uint64_t>(offset + limit, size);
        }
      }
    }
  }
  if (!sealed) return ReadRaw(FilePath(job, rank, epoch, false), offset, limit);
  if (offset > size) {
    return absl::OutOfRangeError(fmt::format("offset {} is past the end of the log ({} bytes)", offset, size));
  }
  return ReadSealed(tenant, job, rank, epoch, offset, size, span);
}

absl::StatusOr<LogRange> LogStore::ReadRaw(const std::string& path, uint64_t offset, size_t limit) const {
  LogRange range;
  range.offset = offset;
  Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (fd.fd < 0) {
    if (errno != ENOENT) return absl::UnavailableError(fmt::format("reading log {}: {}", path, ErrnoText(errno)));
  } else {
    struct stat st {};
    if (::fstat(fd.fd, &st) != 0) {
      return absl::UnavailableError(fmt::format("reading log {}: {}", path, ErrnoText(errno)));
    }
    range.size = static_cast<uint64_t>(st.st_size);
  }
  if (offset > range.size) {
    return absl::OutOfRangeError(fmt::format("offset {} is past the end of the log ({} bytes)", offset, range.size));
  }
  const size_t n = static_cast<size_t>(std::min<uint64_t>(limit, range.size - offset));
  if (n > 0 && !PreadAll(fd.fd, offset, n, &range.data)) {
    return absl::UnavailableError(fmt::format("reading log {}: {}", path, ErrnoText(errno)));
  }
  range.next_offset = offset + range.data.size();
  return range;
}

absl::StatusOr<LogRange> LogStore::ReadSealed(const std::string& tenant, const std::string& job, int rank,
                                              int64_t epoch, uint64_t offset, uint64_t size, const Span& span) const {
  LogRange range;
  range.offset = offset;
  range.next_offset = offset;
  range.size = size;
  if (span.records.empty()) return range;
  if (options_.keyring == nullptr) {
    return absl::FailedPreconditionError(
        fmt::format("job {} rank {} epoch {}: the log is sealed and this store has no keyring", job, rank, epoch));
  }
  const std::string path = FilePath(job, rank, epoch, true);
  const uint64_t base = span.records.front().frame;
  std::string frames;
  {
    Fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
    if (fd.fd < 0 || !PreadAll(fd.fd, base, static_cast<size_t>(span.file_end - base), &frames)) {
      return absl::UnavailableError(fmt::format("reading log {}: {}", path, ErrnoText(errno)));
    }
  }
  if (frames.size() != span.file_end - base) {
    return absl::DataLossError(fmt::format("log {} is shorter than its index ({} of {} bytes from {})", path,
                                           frames.size(), span.file_end - base, base));
  }
  const std::string context = RecordContext(job, rank, epoch);
  const uint64_t end = span.read_end;
  for (size_t i = 0; i < span.records.size(); ++i) {
    const Record& r = span.records[i];
    const uint64_t frame_end = i + 1 < span.records.size() ? span.records[i + 1].frame : span.file_end;
    const std::string_view frame = std::string_view(frames).substr(r.frame - base, frame_end - r.frame);
    absl::StatusOr<std::string> plain =
        crypto::OpenRecord(*options_.keyring, KeyTenant(tenant), context, r.frame, frame);
    if (!plain.ok()) {
      return absl::Status(plain.status().code(),
                          fmt::format("log {} record at offset {}: {}", path, r.frame, plain.status().message()));
    }
    // The part of this record inside [offset, end).
    const uint64_t from = std::max(offset, r.start);
    const uint64_t to = std::min(end, r.start + plain->size());
    if (from < to) range.data.append(*plain, from - r.start, to - from);
  }
  range.next_offset = offset + range.data.size();
  return range;
}

std::vector<LogAttempt> LogStore::Attempts(const std::string& job, int rank) {
  std::vector<LogAttempt> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return out;
  for (const auto& [member, file] : it->second->files) {
    if (member.first == rank) out.push_back({.epoch = member.second, .size = file.size});
  }
  return out;  // the map orders by (rank, epoch)
}

std::vector<int> LogStore::Ranks(const std::string& job) {
  std::vector<int> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return out;
  for (const auto& [member, file] : it->second->files) {
    if (out.empty() || out.back() != member.first) out.push_back(member.first);
  }
  return out;
}

bool LogStore::WaitForBytes(const std::string& job, int rank, int64_t epoch, uint64_t offset,
                            std::chrono::milliseconds max_wait) {
  if (!CheckMember(job, rank, epoch).ok()) return false;
  std::unique_lock<std::mutex> lock(mu_);
  if (waiters_ >= options_.max_waiters) return false;
  std::shared_ptr<JobState> state = StateLocked(job);
  const uint64_t wakes = state->wakes;
  const auto ready = [&] {
    if (shutdown_ || state->wakes != wakes) return true;
    auto it = state->files.lower_bound({rank, epoch});
    if (it != state->files.end() && it->first == Member{rank, epoch}) {
      if (it->second.size > offset) return true;
      ++it;
    }
    // A newer epoch of this rank: the member was placed again.
    return it != state->files.end() && it->first.first == rank;
  };
  ++waiters_;
  const bool woke = state->changed.wait_for(lock, max_wait, ready);
  --waiters_;
  return woke;
}

void LogStore::Wake(const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;  // nobody waits on a job without state
  ++it->second->wakes;
  it->second->changed.notify_all();
}

void LogStore::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  for (auto& [job, state] : jobs_) {
    ++state->wakes;
    state->changed.notify_all();
  }
}

absl::Status LogStore::RemoveJob(const std::string& job) {
  if (!ValidJobId(job)) {
    return absl::InvalidArgumentError(
        fmt::format("job id '{}' must be 1-64 characters of [A-Za-z0-9._-] without '..'", job));
  }
  std::error_code ec;
  fs::remove_all(fs::path(dir_) / job, ec);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(job);
    if (it != jobs_.end()) {
      ++it->second->wakes;  // its followers re-read and find nothing
      it->second->changed.notify_all();
      jobs_.erase(it);
    }
  }
  if (ec) return absl::UnavailableError(fmt::format("removing logs of job {}: {}", job, ec.message()));
  return absl::OkStatus();
}

uint64_t LogStore::JobBytes(const std::string& job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second->bytes;
}

}  // namespace gpugeek::controlplane
