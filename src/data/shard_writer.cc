#include "data/shard_writer.h"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "archive/digest.h"
#include "crypto/durable_file.h"

namespace gpugeek::data {

absl::StatusOr<std::unique_ptr<ShardWriter>> ShardWriter::Create(const ShardWriterOptions& options) {
  if (options.shard_bytes < kMinShardBytes) {
    return absl::InvalidArgumentError(
        fmt::format("shard size {} bytes is below the minimum of {} bytes", options.shard_bytes, kMinShardBytes));
  }
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) return absl::InternalError(fmt::format("{}: cannot create the folder: {}", options.dir, ec.message()));
  const std::filesystem::path index = std::filesystem::path(options.dir) / kShardIndexFile;
  if (std::filesystem::exists(index, ec)) {
    return absl::AlreadyExistsError(fmt::format(
        "{} exists: the folder holds a dataset already; remove it or choose another folder", index.string()));
  }
  auto writer = std::unique_ptr<ShardWriter>(new ShardWriter(options));
  writer->index_.shard_bytes = options.shard_bytes;
  return writer;
}

absl::Status ShardWriter::Add(std::string_view record) {
  if (finished_) return absl::FailedPreconditionError("ShardWriter::Add after Finish");
  if (!sizes_.empty() && ShardFileBytes(sizes_.size() + 1, open_.size() + record.size()) > options_.shard_bytes) {
    if (absl::Status st = FlushShard(); !st.ok()) return st;
  }
  open_.append(record);
  sizes_.push_back(record.size());
  ++records_;
  return absl::OkStatus();
}

absl::Status ShardWriter::FlushShard() {
  if (sizes_.empty()) return absl::OkStatus();
  open_ += EncodeShardFooter(sizes_);
  ShardInfo info{.file = ShardFileName(index_.shards.size()),
                 .bytes = open_.size(),
                 .records = sizes_.size(),
                 .first_record = index_.total_records,
                 .sha256 = archive::Sha256Hex(open_)};
  const std::string path = (std::filesystem::path(options_.dir) / info.file).string();
  if (absl::Status st = crypto::WriteFileDurably(path, open_, 0644); !st.ok()) return st;
  index_.total_records += info.records;
  index_.total_bytes += info.bytes;
  index_.shards.push_back(std::move(info));
  open_.clear();
  sizes_.clear();
  return absl::OkStatus();
}

absl::StatusOr<ShardIndex> ShardWriter::Finish() {
  if (finished_) return absl::FailedPreconditionError("ShardWriter::Finish called twice");
  if (absl::Status st = FlushShard(); !st.ok()) return st;
  finished_ = true;
  const std::string path = (std::filesystem::path(options_.dir) / kShardIndexFile).string();
  if (absl::Status st = crypto::WriteFileDurably(path, EncodeShardIndex(index_), 0644); !st.ok()) return st;
  return index_;
}

}  // namespace gpugeek::data
