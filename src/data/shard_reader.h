#pragma once
// Random access to the records of a sharded dataset folder (format: shard_format.h), reading only what a
// record needs: three preads, of the shard's 16-byte trailer, of two offsets and of the record's bytes.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/shard_format.h"

namespace gpugeek::data {

struct ShardReaderOptions {
  // Check every shard's SHA-256 against index.json in Open (reads the whole dataset once). Otherwise call
  // VerifyShard when wanted; Record checks the structure it reads either way.
  bool verify_digests = false;
};

// Not thread-safe (it caches open files): one reader per thread.
class ShardReader {
 public:
  // Reads and validates `dir`/index.json (ParseShardIndex's errors), then checks each shard file exists
  // with the size the index gives (NotFound / DataLoss naming the file and the fix). With
  // verify_digests, also VerifyShard on each.
  static absl::StatusOr<std::unique_ptr<ShardReader>> Open(const std::string& dir,
                                                           const ShardReaderOptions& options = {});
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const ShardIndex& index() const { return index_; }
  uint64_t size() const { return index_.total_records; }

  // Global record `record`'s bytes. OutOfRange when record >= size(); DataLoss naming the file when its
  // trailer or offsets are corrupt or disagree with the index; the errno text when it cannot be read.
  absl::StatusOr<std::string> Record(uint64_t record);

  // Whether shard `shard`'s bytes have the SHA-256 in the index: DataLoss naming the file and both digests
  // otherwise.
  absl::Status VerifyShard(size_t shard);

 private:
  ShardReader(std::string dir, ShardIndex index);
  absl::StatusOr<int> Fd(size_t shard);
  absl::Status ReadAt(size_t shard, uint64_t at, uint64_t n, std::string& out);

  const std::string dir_;
  const ShardIndex index_;
  std::vector<int> fds_;  // per shard, -1 until first opened
};

}  // namespace gpugeek::data
