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

namespace gpugeek::controlplane {
namespace {

namespace fs = std::filesystem;

// Ranks are gang ranks (a few thousand at most); the bound keeps a file name short.
constexpr int kMaxRank = 1 << 20;

// "rank-3.epoch-12.log" -> (3, 12); false for any other name.
bool ParseFileName(const std::string& name, int* rank, int64_t* epoch) {
  long long r = -1;
  long long e = -1;
  int consumed = 0;
  if (std::sscanf(name.c_str(), "rank-%lld.epoch-%lld.log%n", &r, &e, &consumed) != 2) return false;
  if (static_cast<size_t>(consumed) != name.size() || r < 0 || r >= kMaxRank || e < 0) return false;
  // Only canonical spellings ("rank-03" would alias "rank-3").
  if (name != fmt::format("rank-{}.epoch-{}.log", r, e)) return false;
  *rank = static_cast<int>(r);
  *epoch = e;
  return true;
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

std::string LogStore::FilePath(const std::string& job, int rank, int64_t epoch) const {
  return (fs::path(dir_) / job / fmt::format("rank-{}.epoch-{}.log", rank, epoch)).string();
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
      if (!ParseFileName(f.path().filename().string(), &rank, &epoch)) continue;
      const uint64_t size = f.file_size(ec);
      if (ec) continue;
      state->sizes[{rank, epoch}] = size;
      state->bytes += size;
      ++files;
    }
    // Without the marker the files never exceed the quota, so more than the quota means it was written.
    state->quota_reached = state->bytes > options_.max_bytes_per_job;
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[job] = std::move(state);
  }
  spdlog::info("log store: {} files of {} jobs under {}", files, jobs_.size(), dir_);
}

absl::StatusOr<uint64_t> LogStore::Append(const std::string& job, int rank, int64_t epoch, uint64_t offset,
                                          std::string_view data) {
  if (absl::Status s = CheckMember(job, rank, epoch); !s.ok()) return s;
  if (offset > UINT64_MAX - data.size()) {
    return absl::InvalidArgumentError(fmt::format("offset {} + {} bytes overflows", offset, data.size()));
  }
  std::lock_guard<std::mutex> file_lock(StripeFor(job, rank, epoch));
  // Under the file's stripe the in-memory size is the file's: every write to it goes through here.
  std::shared_ptr<JobState> state;
  uint64_t size = 0;
  size_t skip = 0;      // bytes of `data` the file already holds
  size_t keep = 0;      // bytes of `data` to write after `skip`
  bool marker = false;  // this write reaches the quota and appends the marker
  {
    std::lock_guard<std::mutex> lock(mu_);
    state = StateLocked(job);
    auto it = state->sizes.find({rank, epoch});
    size = it == state->sizes.end() ? 0 : it->second;
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

  const std::string path = FilePath(job, rank, epoch);
  const std::string payload =
      marker ? std::string(data.substr(skip, keep)) + QuotaMarker(options_.max_bytes_per_job) : std::string();
  const std::string_view out = marker ? std::string_view(payload) : data.substr(skip, keep);
  size_t written = 0;
  int err = 0;
  {
    std::error_code ec;
    if (size == 0) fs::create_directories(fs::path(path).parent_path(), ec);
    Fd fd{::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)};
    if (fd.fd < 0 || !WriteAll(fd.fd, out, &written)) err = errno;
  }

  std::lock_guard<std::mutex> lock(mu_);
  // Unreserve what did not reach the file (the marker's share included), so a resend continues from
  // the real size. A cut marker leaves quota_reached set: output stays dropped.
  state->bytes -= out.size() - written;
  const uint64_t new_size = size + written;
  if (written > 0) {
    state->sizes[{rank, epoch}] = new_size;
    state->changed.notify_all();
  }
  if (err != 0) return absl::UnavailableError(fmt::format("writing log {}: {}", path, ErrnoText(err)));
  return new_size;
}

absl::StatusOr<LogRange> LogStore::Read(const std::string& job, int rank, int64_t epoch, uint64_t offset,
                                        size_t limit) {
  if (absl::Status s = CheckMember(job, rank, epoch); !s.ok()) return s;
  limit = std::min(limit, kMaxLogReadBytes);
  const std::string path = FilePath(job, rank, epoch);
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
  range.data.resize(n);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd.fd, range.data.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return absl::UnavailableError(fmt::format("reading log {}: {}", path, ErrnoText(errno)));
    if (r == 0) break;  // cannot happen for an append-only file; report what was read
    got += static_cast<size_t>(r);
  }
  range.data.resize(got);
  range.next_offset = offset + got;
  return range;
}

std::vector<LogAttempt> LogStore::Attempts(const std::string& job, int rank) {
  std::vector<LogAttempt> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return out;
  for (const auto& [member, size] : it->second->sizes) {
    if (member.first == rank) out.push_back({.epoch = member.second, .size = size});
  }
  return out;  // the map orders by (rank, epoch)
}

std::vector<int> LogStore::Ranks(const std::string& job) {
  std::vector<int> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return out;
  for (const auto& [member, size] : it->second->sizes) {
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
    auto it = state->sizes.lower_bound({rank, epoch});
    if (it != state->sizes.end() && it->first == Member{rank, epoch}) {
      if (it->second > offset) return true;
      ++it;
    }
    // A newer epoch of this rank: the member was placed again.
    return it != state->sizes.end() && it->first.first == rank;
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
