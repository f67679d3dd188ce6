#include "data/shard_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "archive/digest.h"
#include "common/file.h"
#include "crypto/durable_file.h"

namespace gpugeek::data {
namespace {

constexpr uint64_t kMaxIndexBytes = uint64_t{64} << 20;

uint64_t GetU64(const std::string& bytes, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

}  // namespace

ShardReader::ShardReader(std::string dir, ShardIndex index)
    : dir_(std::move(dir)), index_(std::move(index)), fds_(index_.shards.size(), -1) {}

ShardReader::~ShardReader() {
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

absl::StatusOr<std::unique_ptr<ShardReader>> ShardReader::Open(const std::string& dir,
                                                               const ShardReaderOptions& options) {
  const std::string index_path = (std::filesystem::path(dir) / kShardIndexFile).string();
  absl::StatusOr<std::string> text = ReadFileBounded(index_path, kMaxIndexBytes, "shard index");
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(
          fmt::format("{}: no index.json: not a dataset folder, or its writing did not "
                      "finish; write it with gpugeek data shard",
                      dir));
    }
    return text.status();
  }
  absl::StatusOr<ShardIndex> index = ParseShardIndex(*text);
  if (!index.ok()) {
    return absl::Status(index.status().code(), fmt::format("{}/{}", dir, std::string(index.status().message())));
  }
  for (const ShardInfo& s : index->shards) {
    const std::filesystem::path path = std::filesystem::path(dir) / s.file;
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (ec) {
      return absl::NotFoundError(fmt::format(
          "{}: {}; the dataset is incomplete, write it again with gpugeek data shard", path.string(), ec.message()));
    }
    if (size != s.bytes) {
      return absl::DataLossError(
          fmt::format("{}: {} bytes, index.json says {} (truncated or replaced); write the "
                      "dataset again with gpugeek data shard",
                      path.string(), size, s.bytes));
    }
  }
  auto reader = std::unique_ptr<ShardReader>(new ShardReader(dir, *std::move(index)));
  if (options.verify_digests) {
    for (size_t i = 0; i < reader->index_.shards.size(); ++i) {
      if (absl::Status st = reader->VerifyShard(i); !st.ok()) return st;
    }
  }
  return reader;
}

absl::StatusOr<int> ShardReader::Fd(size_t shard) {
  if (fds_[shard] >= 0) return fds_[shard];
  const std::string path = (std::filesystem::path(dir_) / index_.shards[shard].file).string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return crypto::ErrnoStatus(errno, "open", path);
  fds_[shard] = fd;
  return fd;
}

absl::Status ShardReader::ReadAt(size_t shard, uint64_t at, uint64_t n, std::string& out) {
  absl::StatusOr<int> fd = Fd(shard);
  if (!fd.ok()) return fd.status();
  out.resize(n);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(*fd, out.data() + done, n - done, static_cast<off_t>(at + done));
    if (got < 0 && errno == EINTR) continue;
    const std::string path = (std::filesystem::path(dir_) / index_.shards[shard].file).string();
    if (got < 0) return crypto::ErrnoStatus(errno, "read", path);
    if (got == 0) {
      return absl::DataLossError(fmt::format(
          "{}: ends before byte {} (truncated since it was opened); write the dataset again", path, at + n));
    }
    done += static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ShardReader::Record(uint64_t record) {
  if (record >= index_.total_records) {
    return absl::OutOfRangeError(
        fmt::format("record {} is past the dataset's {} records", record, index_.total_records));
  }
  const size_t shard = index_.ShardOf(record);
  const ShardInfo& info = index_.shards[shard];
  const std::string file = (std::filesystem::path(dir_) / info.file).string();
  std::string buf;
  if (absl::Status st = ReadAt(shard, info.bytes - kShardTrailerBytes, kShardTrailerBytes, buf); !st.ok()) return st;
  absl::StatusOr<uint64_t> n = DecodeShardTrailer(buf, info.bytes, file);
  if (!n.ok()) return n.status();
  if (*n != info.records) {
    return absl::DataLossError(
        fmt::format("{}: holds {} records, index.json says {}; write the dataset again", file, *n, info.records));
  }
  const uint64_t offsets_at = info.bytes - kShardTrailerBytes - 8 * (*n + 1);
  const uint64_t local = record - info.first_record;
  if (absl::Status st = ReadAt(shard, offsets_at + 8 * local, 16, buf); !st.ok()) return st;
  const uint64_t begin = GetU64(buf, 0), end = GetU64(buf, 8);
  if (begin > end || end > offsets_at) {
    return absl::DataLossError(
        fmt::format("{}: record {} spans bytes [{}, {}), outside the {} record bytes "
                    "(corrupt); write the dataset again",
                    file, local, begin, end, offsets_at));
  }
  std::string out;
  if (absl::Status st = ReadAt(shard, begin, end - begin, out); !st.ok()) return st;
  return out;
}

absl::Status ShardReader::VerifyShard(size_t shard) {
  const ShardInfo& info = index_.shards.at(shard);
  const std::string path = (std::filesystem::path(dir_) / info.file).string();
  absl::StatusOr<std::string> digest = archive::Sha256OfFile(path);
  if (!digest.ok()) return digest.status();
  if (*digest != info.sha256) {
    return absl::DataLossError(
        fmt::format("{}: SHA-256 {}, index.json says {} (corrupt or replaced); write the "
                    "dataset again with gpugeek data shard",
                    path, *digest, info.sha256));
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::data
