#pragma once
// LogStore: the jobs' output as the agents ship it, stored byte-exact, read by range.
//
// The problem: every member of every job streams its stdout/stderr to the control plane in heartbeat
// chunks (offset + raw bytes, any values), possibly resent after a lost reply; many clients read and
// follow those logs at once (`gpugeek logs -f`). Writes to one member must not wait on another job's
// disk I/O, followers must not poll the disk or hold a server thread for long, and one chatty job must
// not fill the disk.
//
// Layout: one file per member (gang rank R) and placement (epoch E) under `<dir>/<job>/`, holding exactly
// the bytes the member wrote, in order, from byte 0 (its "log bytes"; every offset and size of this API
// counts them). A job's files together hold at most `max_bytes_per_job` log bytes, plus one marker line
// when that quota cuts the output. Two formats:
//   - `rank-R.epoch-E.sealed` (with a keyring, the server's default): AES-256-GCM records under the job's
//     tenant's data key (crypto/sealed_file.h frames; each record bound to its log and file offset), at
//     most kMaxLogRecordBytes log bytes each. An in-memory index (16 bytes per record: its first log byte
//     and its frame's file offset) maps a byte range to the records to open. Key rotation re-wraps data
//     keys only, so every record stays readable; a file holds no plaintext.
//   - `rank-R.epoch-E.log` (without a keyring: embedding, or files written before encryption): the raw
//     bytes. A member's log keeps the format it started with.
//
// Concurrency: Append to one file is serialized by a striped mutex keyed by (job, rank, epoch); appends
// to different files run in parallel. One internal index mutex guards the in-memory sizes and quota
// counters and is never held across file I/O. Read works on the file directly (appends only grow it).
// All methods are thread-safe.
//
// Sizes are kept in memory: the constructor indexes what `dir` already holds (one stat per raw file; one
// 8-byte read per record of a sealed file, cutting off a record a crash left half written; a sealed file
// that does not scan is renamed `*.corrupt` and left alone), so a restarted server keeps serving and
// charging the quota of the logs it stored before. Every write must go through this class.

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpugeek::crypto {
class Keyring;
}

namespace gpugeek::controlplane {

struct LogStoreOptions {
  // Output bytes kept per job over all its members and epochs; the rest is dropped (Append).
  uint64_t max_bytes_per_job = uint64_t{1} << 30;
  // Followers that may wait in WaitForBytes at once; a wait beyond that returns false at once, so
  // long-polls cannot take every handler thread of the server (http::ServerOptions::max_workers,
  // 256 by default): keep it well below that.
  int max_waiters = 64;
  // Seals new logs under the job's tenant's data key when set (see the layout above). Borrowed; must
  // outlive the store. nullptr: new logs are raw files.
  crypto::Keyring* keyring = nullptr;
};

// The largest Read: 1 MiB.
inline constexpr size_t kMaxLogReadBytes = size_t{1} << 20;
// Log bytes per sealed record: 64 KiB. An Append of more writes several records; a Read opens at most
// one partial record at each end of its range.
inline constexpr size_t kMaxLogRecordBytes = size_t{64} << 10;

// Bytes [offset, next_offset) of one member's log and the file's size when read.
struct LogRange {
  std::string data;  // raw bytes, any values
  uint64_t offset = 0;
  uint64_t next_offset = 0;  // offset + data.size(): where the next read starts
  uint64_t size = 0;         // bytes in the file (>= next_offset)
};

// One placement of one member and the bytes stored for it.
struct LogAttempt {
  int64_t epoch = 0;
  uint64_t size = 0;
};

class LogStore {
 public:
  // Stores under `dir` (created on the first Append) and indexes what is already there. Files whose
  // names do not parse are ignored; an unreadable directory indexes as empty (logged).
  LogStore(std::string dir, LogStoreOptions options = {});
  LogStore(const LogStore&) = delete;
  LogStore& operator=(const LogStore&) = delete;

  // Appends the chunk `data` that starts at byte `offset` of member (job, rank, epoch)'s log and
  // returns the log's new size in bytes. `tenant` is the job's owner: its data key seals the bytes
  // ("" means "default"; every Append and Read of a job must name the same tenant).
  // - Idempotent by offset: bytes the file already holds are skipped, so a resend is harmless (OK
  //   with the current size; nothing written).
  // - FailedPrecondition for a gap (offset > current size); nothing is written: the sender must
  //   resend from the size.
  // - Quota: once the job's files would exceed max_bytes_per_job the write is cut there, the line
  //   "\n[gpugeek: log quota of N bytes reached; further output dropped]\n" is appended once (it
  //   counts beyond the quota; this Append still returns the new size), and every later Append of new
  //   bytes for the job returns ResourceExhausted. The caller should still acknowledge those chunks to the agent (the
  //   bytes are dropped on purpose), or the agent would resend them forever.
  // - InvalidArgument for a bad job id (see ValidJobId), rank < 0 or epoch < 0.
  // - Unavailable when the file cannot be written (disk full, I/O error); the sizes stay those of
  //   the bytes that reached the file, so a resend continues from there (a sealed file is cut back to
  //   its last whole record). Errors of crypto::Keyring::Seal (an invalid tenant, a keyring that cannot
  //   be written); FailedPrecondition for a sealed log without a keyring. Nothing is written then.
  // Wakes the job's followers (WaitForBytes) when bytes were written.
  absl::StatusOr<uint64_t> Append(const std::string& tenant, const std::string& job, int rank, int64_t epoch,
                                  uint64_t offset, std::string_view data);

  // Reads up to `limit` log bytes (capped at kMaxLogReadBytes) from `offset`; `tenant` as Append. A
  // member that logged nothing reads as empty with size 0. OutOfRange when offset > size;
  // InvalidArgument for a bad job/rank/epoch; Unavailable when the file cannot be read; DataLoss when a
  // sealed record does not open (altered bytes, another tenant, a keyring without its data key);
  // FailedPrecondition for a sealed log without a keyring.
  absl::StatusOr<LogRange> Read(const std::string& tenant, const std::string& job, int rank, int64_t epoch,
                                uint64_t offset, size_t limit);

  // The member's stored epochs, oldest first, with their sizes; empty when none (or a bad id).
  std::vector<LogAttempt> Attempts(const std::string& job, int rank);
  // The ranks with a stored log, ascending; empty when none (or a bad id).
  std::vector<int> Ranks(const std::string& job);

  // Waits until member (job, rank, epoch)'s log holds more than `offset` bytes, the member's rank has
  // a log of a newer epoch, Wake(job) or Shutdown() is called, or `max_wait` passes. True when it
  // returned for one of those events rather than the timeout (the caller re-reads to see what
  // changed). False at once when max_waiters are already waiting, or for a bad id. Waits on a
  // condition variable that Append notifies: no disk access, and Append never waits for a waiter.
  bool WaitForBytes(const std::string& job, int rank, int64_t epoch, uint64_t offset,
                    std::chrono::milliseconds max_wait);
  // Wakes the job's waiters (its state changed, e.g. it ended or was placed again).
  void Wake(const std::string& job);
  // Wakes every waiter, and later waits return at once: a graceful stop never waits on followers.
  void Shutdown();

  // Deletes the job's logs from disk and memory (retention). OK when there were none; Unavailable
  // when the files cannot be removed. A later Append creates the job's logs anew: stop appending
  // for a job before removing it.
  absl::Status RemoveJob(const std::string& job);
  // Bytes stored for the job over all its files (the quota's count; the marker line included).
  uint64_t JobBytes(const std::string& job);

  // True for an id that is safe as a directory name: 1-64 characters of [A-Za-z0-9._-], not
  // containing "..". (Job ids are issued as j-NNNNNNNN.)
  static bool ValidJobId(const std::string& job);
  // The marker line appended when the job's quota cuts its output.
  static std::string QuotaMarker(uint64_t max_bytes_per_job);

 private:
  using Member = std::pair<int, int64_t>;  // (rank, epoch)
  // A sealed record: its first log byte and its frame's file offset.
  struct Record {
    uint64_t start = 0;
    uint64_t frame = 0;
  };
  struct FileState {
    uint64_t size = 0;  // log bytes
    bool sealed = false;
    uint64_t file_bytes = 0;      // sealed: the file's size, where the next frame goes
    std::vector<Record> records;  // sealed: in file order
  };
  // What one write put in a file.
  struct Written {
    size_t bytes = 0;  // log bytes that reached the file
    uint64_t file_bytes = 0;
    std::vector<Record> records;
    absl::Status status;
  };
  // The records of a sealed file that cover a read, at [records.front().frame, file_end) in the file,
  // and the read's end in log bytes.
  struct Span {
    std::vector<Record> records;
    uint64_t file_end = 0;
    uint64_t read_end = 0;
  };
  struct JobState {
    std::map<Member, FileState> files;
    uint64_t bytes = 0;               // sum of the files' sizes
    bool quota_reached = false;       // the marker was written (or is being written)
    uint64_t wakes = 0;               // Wake() calls, so a waiter can tell one happened
    std::condition_variable changed;  // notified on every write and Wake
  };

  absl::Status CheckMember(const std::string& job, int rank, int64_t epoch) const;
  std::string FilePath(const std::string& job, int rank, int64_t epoch, bool sealed) const;
  Written WriteRaw(const std::string& path, uint64_t size, std::string_view out) const;
  Written WriteSealed(const std::string& tenant, const std::string& job, int rank, int64_t epoch, uint64_t size,
                      uint64_t file_bytes, std::string_view out) const;
  absl::StatusOr<LogRange> ReadRaw(const std::string& path, uint64_t offset, size_t limit) const;
  absl::StatusOr<LogRange> ReadSealed(const std::string& tenant, const std::string& job, int rank, int64_t epoch,
                                      uint64_t offset, uint64_t size, const Span& span) const;
  // Indexes one sealed file (cutting a torn last record); false when it is not a sealed log.
  static bool IndexSealed(const std::string& path, FileState* file);
  std::mutex& StripeFor(const std::string& job, int rank, int64_t epoch);
  // The job's state, created when absent. Requires mu_.
  std::shared_ptr<JobState> StateLocked(const std::string& job);
  void IndexExisting();

  // Constant after construction.
  const std::string dir_;
  const LogStoreOptions options_;

  // Serialize appends per file; a file always maps to the same stripe.
  std::array<std::mutex, 64> stripes_;

  std::mutex mu_;  // held only for in-memory updates, never across I/O
  // Guarded by mu_. JobStates are shared so a waiter keeps its condition variable alive across RemoveJob.
  std::map<std::string, std::shared_ptr<JobState>> jobs_;
  int waiters_ = 0;
  bool shutdown_ = false;
};

}  // namespace gpugeek::controlplane
