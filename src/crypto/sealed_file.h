#pragma once
// Sealed files on disk, in two shapes, both under a Keyring (keyring.h):
//   - a whole file sealed as one blob (SealFile / OpenFile): secrets, job specs, artifacts;
//   - an append-only log of independently sealed records (SealedLogWriter / ReadSealedLog): job logs.
//
// Log layout: a sequence of frames, each
//   blob length (u32, big-endian) | sealed blob (kSealOverhead + plaintext bytes)
// Each record has its own random nonce and is sealed with additional data "<context>\0<file offset>", so a
// record opens only at the offset where it was written, in the log (context) it was written to: records
// cannot be reordered, repeated or moved between logs without Open failing. A reader can start at any
// record boundary. The plaintext size of a frame is its blob length - kSealOverhead, so an index of
// plaintext offsets (for byte-range reads) can be built from the 4-byte headers alone, without keys
// (ScanRecordFrames).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "crypto/keyring.h"

namespace gpugeek::crypto {

// Seals `plaintext` for `tenant` with `aad` (e.g. "artifact:acme/job-7/model.bin") and writes the blob to
// `path` (mode 0600) durably and atomically (WriteFileDurably). Errors: those of Keyring::Seal and of
// the write (with the path).
absl::Status SealFile(Keyring& keyring, std::string_view tenant, const std::string& path, std::string_view plaintext,
                      std::string_view aad);

// The plaintext of a file SealFile wrote for `tenant` with the same `aad`. Errors: NotFound /
// PermissionDenied reading it; InvalidArgument when it is larger than `max_bytes` or not a sealed blob;
// DataLoss as Keyring::Open (altered, another tenant's or another aad). Each names the path.
absl::StatusOr<std::string> OpenFile(const Keyring& keyring, std::string_view tenant, const std::string& path,
                                     std::string_view aad, uint64_t max_bytes = uint64_t{1} << 30);

inline constexpr size_t kRecordHeaderBytes = 4;
// The largest record plaintext: 64 MiB. A length over kSealOverhead + this is corruption, not a record.
inline constexpr uint64_t kMaxRecordPlaintextBytes = uint64_t{64} << 20;

// One frame of a log: where it starts and how long its blob is.
struct RecordFrame {
  uint64_t offset = 0;      // file offset of the frame's length prefix
  uint32_t blob_bytes = 0;  // the sealed blob after the prefix
  uint64_t plaintext_bytes() const { return blob_bytes - kSealOverhead; }
  uint64_t next_offset() const { return offset + kRecordHeaderBytes + blob_bytes; }
};

// The whole frames in `bytes`, which are the log's bytes from file offset `base` (a frame boundary),
// and the offset after the last whole frame in `end` (a partial frame at the end is not an error: a
// writer may be appending it). DataLoss when a length prefix is below kSealOverhead or above the
// largest record, or the blob after it does not start with "ggk" and version 1 (the bytes are not a
// log, or not at a frame boundary). Reads headers only: no keys.
struct FrameScan {
  std::vector<RecordFrame> frames;
  uint64_t end = 0;
};
absl::StatusOr<FrameScan> ScanRecordFrames(std::string_view bytes, uint64_t base);

// The whole frames of the sealed log open at `fd` (read-only is enough), walking the length prefixes
// with one small pread per record (no keys, no decryption), and in `end` the offset after the last whole
// frame. When `cut_torn_end` is true and a partial frame follows it (an append a crash left half
// written, never acknowledged as durable), the file is truncated to `end` (`fd` must then be writable).
// `path` names the file in messages. Errors: DataLoss as ScanRecordFrames (naming the path); those of
// fstat, pread and ftruncate.
absl::StatusOr<FrameScan> ScanSealedLogFile(int fd, const std::string& path, bool cut_torn_end);

// The frame (length prefix + blob) for `plaintext` as the record at file offset `offset` of the log
// `context`. Errors: those of Keyring::Seal; InvalidArgument over kMaxRecordPlaintextBytes.
absl::StatusOr<std::string> SealRecord(Keyring& keyring, std::string_view tenant, std::string_view context,
                                       uint64_t offset, std::string_view plaintext);
// The plaintext of the frame `frame` (exactly one whole frame) found at `offset` of log `context`.
// DataLoss / InvalidArgument as Keyring::Open, or when the length prefix disagrees with the frame.
absl::StatusOr<std::string> OpenRecord(const Keyring& keyring, std::string_view tenant, std::string_view context,
                                       uint64_t offset, std::string_view frame);

// Appends sealed records to one log file. Thread-safe: appends are serialized (each assigns the next
// offset), and the lock covers this file's writes only. Readers may read concurrently (ReadSealedLog
// sees whole records only).
class SealedLogWriter {
 public:
  // Opens (creating with mode 0600) the log at `path` for `tenant`, records sealed with `context` (e.g.
  // "log:job-7/rank-0/epoch-1"; readers pass the same). Scans the frame headers to find the end, and cuts
  // off a torn last frame that a crash left half written. `keyring` is borrowed and must outlive the
  // writer. Errors: those of open(2) with the path; DataLoss as ScanRecordFrames (not a sealed log).
  static absl::StatusOr<std::unique_ptr<SealedLogWriter>> Open(Keyring& keyring, std::string tenant, std::string path,
                                                               std::string context);
  ~SealedLogWriter();
  SealedLogWriter(const SealedLogWriter&) = delete;
  SealedLogWriter& operator=(const SealedLogWriter&) = delete;

  // Seals `plaintext` (at most kMaxRecordPlaintextBytes) as the next record and writes it; returns the
  // record's file offset. Not durable until Sync. On a write error the log's size is unchanged (the
  // next append overwrites what was partly written).
  absl::StatusOr<uint64_t> Append(std::string_view plaintext);
  // fsyncs what was appended.
  absl::Status Sync();
  // The log's size in bytes: the offset the next record gets.
  uint64_t size() const;

 private:
  SealedLogWriter(Keyring& keyring, std::string tenant, std::string path, std::string context, int fd, uint64_t size)
      : keyring_(keyring),
        tenant_(std::move(tenant)),
        path_(std::move(path)),
        context_(std::move(context)),
        fd_(fd),
        size_(size) {}

  Keyring& keyring_;
  const std::string tenant_;
  const std::string path_;
  const std::string context_;
  const int fd_;
  mutable Mutex mu_;
  uint64_t size_ ABSL_GUARDED_BY(mu_);
};

struct LogRecord {
  uint64_t offset = 0;  // file offset of the record's frame
  std::string plaintext;
};
struct LogRead {
  std::vector<LogRecord> records;
  uint64_t next_offset = 0;  // where the next read starts: after the last record returned
};
// Reads and opens the whole records of log `path` from file offset `offset` (0 or a record boundary a
// previous read or Append returned), stopping after about `max_bytes` of frames (at least one record
// when one is whole) or at the end. A partial frame at the end is left for a later read. Errors:
// NotFound etc. opening the file; DataLoss as ScanRecordFrames/OpenRecord (naming the path and offset),
// so a reader given an offset that is not a record boundary gets DataLoss, not a wait for more bytes.
absl::StatusOr<LogRead> ReadSealedLog(const Keyring& keyring, std::string_view tenant, const std::string& path,
                                      std::string_view context, uint64_t offset,
                                      uint64_t max_bytes = uint64_t{1} << 20);

}  // namespace gpugeek::crypto
