#pragma once
// Writes records into a sharded dataset folder (format: shard_format.h).
//
// Crash-safe: each shard file and then index.json are written with crypto::WriteFileDurably (a temporary
// file, fsync, rename, fsync of the folder), index.json last. A folder without index.json is an unfinished
// dataset that readers refuse; one with it lists only shards that are completely on disk.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/shard_format.h"

namespace gpugeek::data {

struct ShardWriterOptions {
  std::string dir;                            // created when missing
  uint64_t shard_bytes = kDefaultShardBytes;  // most bytes per shard file, footer included; >= kMinShardBytes
};

// Not thread-safe: one writer per folder, one thread at a time.
class ShardWriter {
 public:
  // InvalidArgument when shard_bytes < kMinShardBytes; AlreadyExists when `dir` already holds index.json
  // (a finished dataset is never overwritten: remove it or choose another folder); the errno text of
  // create_directories otherwise.
  static absl::StatusOr<std::unique_ptr<ShardWriter>> Create(const ShardWriterOptions& options);

  // Appends one record (any bytes, possibly empty) as global record number records_added(). A record
  // goes into the open shard when the shard, with it, stays within shard_bytes; otherwise the open shard
  // is written out and the record starts the next one. A record too big for any shard gets one of its
  // own. Errors: those of writing a shard file (the path and errno text).
  absl::Status Add(std::string_view record);

  // Writes the open shard, then index.json, and returns the index. Call once; Add after it is an error.
  absl::StatusOr<ShardIndex> Finish();

  uint64_t records_added() const { return records_; }
  // Bytes of shard files written so far (not counting the open shard).
  uint64_t bytes_written() const { return index_.total_bytes; }

 private:
  explicit ShardWriter(const ShardWriterOptions& options) : options_(options) {}
  absl::Status FlushShard();

  const ShardWriterOptions options_;
  ShardIndex index_;
  std::string open_;             // records of the open shard, concatenated
  std::vector<uint64_t> sizes_;  // their sizes
  uint64_t records_ = 0;
  bool finished_ = false;
};

}  // namespace gpugeek::data
