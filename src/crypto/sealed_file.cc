#include "crypto/sealed_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "common/absl_fmt.h"
#include "common/file.h"
#include "common/status_macros.h"
#include "crypto/durable_file.h"

namespace gpugeek::crypto {
namespace {

constexpr uint64_t kMaxBlobBytes = kSealOverhead + kMaxRecordPlaintextBytes;

std::string RecordAad(std::string_view context, uint64_t offset) {
  std::string aad(context);
  aad.push_back('\0');
  for (int shift = 56; shift >= 0; shift -= 8) aad.push_back(static_cast<char>((offset >> shift) & 0xff));
  return aad;
}

uint32_t GetU32(std::string_view in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

// The bytes of a frame's start that identify it: the length prefix and the blob's "ggk" + version.
constexpr size_t kFrameStartBytes = kRecordHeaderBytes + 4;

// Checks the start of a frame: `start` holds its first 4 to 8 bytes. A length out of range, or a blob
// that does not begin as sealed blobs do, means the bytes are not a log or `offset` is not a boundary;
// checking the magic too keeps a misplaced reader from taking a random length for a frame in progress.
absl::Status CheckFrameStart(std::string_view start, uint64_t offset) {
  const uint32_t blob_bytes = GetU32(start);
  if (blob_bytes < kSealOverhead || blob_bytes > kMaxBlobBytes) {
    return absl::DataLossError(fmt::format(
        "sealed log frame at offset {} claims {} bytes, outside {}-{}: not a sealed log, or not a frame boundary",
        offset, blob_bytes, kSealOverhead, kMaxBlobBytes));
  }
  const std::string_view blob_start = start.substr(kRecordHeaderBytes);
  if (blob_start != std::string_view("ggk\x01", 4).substr(0, blob_start.size())) {
    return absl::DataLossError(fmt::format(
        "sealed log frame at offset {} does not hold a sealed blob: not a sealed log, or not a frame boundary",
        offset));
  }
  return absl::OkStatus();
}

// Reads exactly `n` bytes at `offset`; returns fewer only at end of file.
absl::StatusOr<std::string> PreadUpTo(int fd, uint64_t offset, size_t n, const std::string& path) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, out.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "read", path);
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  out.resize(got);
  return out;
}

}  // namespace

absl::Status SealFile(Keyring& keyring, std::string_view tenant, const std::string& path, std::string_view plaintext,
                      std::string_view aad) {
  ASSIGN_OR_RETURN(const std::string blob, keyring.Seal(tenant, plaintext, aad));
  return WriteFileDurably(path, blob, 0600);
}

absl::StatusOr<std::string> OpenFile(const Keyring& keyring, std::string_view tenant, const std::string& path,
                                     std::string_view aad, uint64_t max_bytes) {
  ASSIGN_OR_RETURN(const std::string blob, ReadFileBounded(path, max_bytes, "sealed file"));
  absl::StatusOr<std::string> plaintext = keyring.Open(tenant, blob, aad);
  if (!plaintext.ok()) {
    return absl::Status(plaintext.status().code(),
                        fmt::format("sealed file {}: {}", path, plaintext.status().message()));
  }
  return plaintext;
}

absl::StatusOr<FrameScan> ScanRecordFrames(std::string_view bytes, uint64_t base) {
  FrameScan scan;
  size_t at = 0;
  while (bytes.size() - at >= kRecordHeaderBytes) {
    const uint32_t blob_bytes = GetU32(bytes.substr(at));
    RETURN_IF_ERROR(CheckFrameStart(bytes.substr(at, kFrameStartBytes), base + at));
    if (bytes.size() - at - kRecordHeaderBytes < blob_bytes) break;  // partial: a writer may be appending it
    scan.frames.push_back({.offset = base + at, .blob_bytes = blob_bytes});
    at += kRecordHeaderBytes + blob_bytes;
  }
  scan.end = base + at;
  return scan;
}

absl::StatusOr<FrameScan> ScanSealedLogFile(int fd, const std::string& path, bool cut_torn_end) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "stat sealed log", path);
  const auto file_size = static_cast<uint64_t>(st.st_size);
  FrameScan scan;
  while (file_size - scan.end >= kRecordHeaderBytes) {
    ASSIGN_OR_RETURN(const std::string header, PreadUpTo(fd, scan.end, kFrameStartBytes, path));
    const uint32_t blob_bytes = GetU32(header);
    if (absl::Status s = CheckFrameStart(header, scan.end); !s.ok()) {
      return absl::DataLossError(fmt::format("sealed log {}: {}", path, s.message()));
    }
    if (file_size - scan.end - kRecordHeaderBytes < blob_bytes) break;
    scan.frames.push_back({.offset = scan.end, .blob_bytes = blob_bytes});
    scan.end += kRecordHeaderBytes + blob_bytes;
  }
  if (cut_torn_end && scan.end < file_size && ::ftruncate(fd, static_cast<off_t>(scan.end)) != 0) {
    return ErrnoStatus(errno, "truncate the torn end of sealed log", path);
  }
  return scan;
}

absl::StatusOr<std::string> SealRecord(Keyring& keyring, std::string_view tenant, std::string_view context,
                                       uint64_t offset, std::string_view plaintext) {
  if (plaintext.size() > kMaxRecordPlaintextBytes) {
    return absl::InvalidArgumentError(
        fmt::format("a log record is at most {} bytes, not {}", kMaxRecordPlaintextBytes, plaintext.size()));
  }
  ASSIGN_OR_RETURN(const std::string blob, keyring.Seal(tenant, plaintext, RecordAad(context, offset)));
  std::string frame;
  frame.reserve(kRecordHeaderBytes + blob.size());
  const auto n = static_cast<uint32_t>(blob.size());
  for (int shift = 24; shift >= 0; shift -= 8) frame.push_back(static_cast<char>((n >> shift) & 0xff));
  frame += blob;
  return frame;
}

absl::StatusOr<std::string> OpenRecord(const Keyring& keyring, std::string_view tenant, std::string_view context,
                                       uint64_t offset, std::string_view frame) {
  if (frame.size() < kRecordHeaderBytes || GetU32(frame) != frame.size() - kRecordHeaderBytes) {
    return absl::DataLossError(
        fmt::format("sealed log record at offset {}: its length prefix does not match the frame", offset));
  }
  return keyring.Open(tenant, frame.substr(kRecordHeaderBytes), RecordAad(context, offset));
}

absl::StatusOr<std::unique_ptr<SealedLogWriter>> SealedLogWriter::Open(Keyring& keyring, std::string tenant,
                                                                       std::string path, std::string context) {
  RETURN_IF_ERROR(ValidateTenant(tenant));
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, "open sealed log", path);
  const auto fail = [fd](absl::Status s) {
    ::close(fd);
    return s;
  };
  absl::StatusOr<FrameScan> scan = ScanSealedLogFile(fd, path, /*cut_torn_end=*/true);
  if (!scan.ok()) return fail(scan.status());
  const uint64_t end = scan->end;
  return std::unique_ptr<SealedLogWriter>(
      new SealedLogWriter(keyring, std::move(tenant), std::move(path), std::move(context), fd, end));
}

SealedLogWriter::~SealedLogWriter() { ::close(fd_); }

absl::StatusOr<uint64_t> SealedLogWriter::Append(std::string_view plaintext) {
  MutexLock lock(&mu_);
  const uint64_t offset = size_;
  ASSIGN_OR_RETURN(const std::string frame, SealRecord(keyring_, tenant_, context_, offset, plaintext));
  size_t done = 0;
  while (done < frame.size()) {
    const ssize_t n = ::pwrite(fd_, frame.data() + done, frame.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "append to sealed log", path_);
    }
    done += static_cast<size_t>(n);
  }
  size_ = offset + frame.size();
  return offset;
}

absl::Status SealedLogWriter::Sync() {
  if (::fdatasync(fd_) != 0) return ErrnoStatus(errno, "fsync sealed log", path_);
  return absl::OkStatus();
}

uint64_t SealedLogWriter::size() const {
  MutexLock lock(&mu_);
  return size_;
}

absl::StatusOr<LogRead> ReadSealedLog(const Keyring& keyring, std::string_view tenant, const std::string& path,
                                      std::string_view context, uint64_t offset, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open sealed log", path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  LogRead read;
  read.next_offset = offset;
  uint64_t taken = 0;
  while (read.records.empty() || taken < max_bytes) {
    ASSIGN_OR_RETURN(const std::string header, PreadUpTo(fd, read.next_offset, kFrameStartBytes, path));
    if (header.size() < kRecordHeaderBytes) break;
    const uint32_t blob_bytes = GetU32(header);
    if (absl::Status s = CheckFrameStart(header, read.next_offset); !s.ok()) {
      return absl::DataLossError(fmt::format("sealed log {}: {}", path, s.message()));
    }
    ASSIGN_OR_RETURN(std::string frame, PreadUpTo(fd, read.next_offset, kRecordHeaderBytes + size_t{blob_bytes}, path));
    if (frame.size() < kRecordHeaderBytes + size_t{blob_bytes}) break;  // being appended
    absl::StatusOr<std::string> plaintext = OpenRecord(keyring, tenant, context, read.next_offset, frame);
    if (!plaintext.ok()) {
      return absl::Status(plaintext.status().code(), fmt::format("sealed log {} record at offset {}: {}", path,
                                                                 read.next_offset, plaintext.status().message()));
    }
    read.records.push_back({.offset = read.next_offset, .plaintext = *std::move(plaintext)});
    read.next_offset += frame.size();
    taken += frame.size();
  }
  return read;
}

}  // namespace gpugeek::crypto
