#pragma once
// The on-disk format of a sharded dataset: shard files of records and the index.json that lists them.
// Pure: byte strings in, values or errors out; the writer (shard_writer.h) and the reader
// (shard_reader.h) do the file I/O.
//
// A dataset is a folder holding `shard-00000.bin`, `shard-00001.bin`, ... and `index.json`. Records are
// byte strings (possibly empty) numbered 0..N-1 across the whole dataset in shard order.
//
// Shard file layout, version 1 (all integers uint64 little-endian):
//   [record 0][record 1]...[record n-1]      the records' bytes, concatenated
//   [offset 0]...[offset n]                  offset i = where record i starts; offset n = where the
//                                            records end (= the offsets' own position); offset 0 = 0
//   [n][magic "GGSHARD1"]                    16-byte trailer: the record count, then 8 magic bytes
// so a file of n records is (record bytes) + 8 (n + 1) + 16 bytes, and record i is read with three small
// reads (the trailer, offsets i and i + 1, the record) without touching the rest of the file.
//
// index.json, version 1:
//   {"format": "gpugeek-shards", "version": 1, "total_records": N, "total_bytes": B,
//    "shard_bytes": limit,
//    "shards": [{"file": "shard-00000.bin", "bytes": 1234, "records": 10, "first_record": 0,
//                "sha256": "<64 lower-case hex digits>"}, ...]}
// Layout after MosaicML Streaming's index.json (one entry per shard, records and bytes) and its 64 MiB
// default shard size.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::data {

inline constexpr uint64_t kDefaultShardBytes = uint64_t{64} << 20;  // 64 MiB, as MosaicML Streaming
inline constexpr uint64_t kMinShardBytes = 64;                      // room for a footer and a few records
inline constexpr std::string_view kShardMagic = "GGSHARD1";         // 8 bytes; the '1' is the version
inline constexpr uint64_t kShardTrailerBytes = 16;
inline constexpr int kShardIndexVersion = 1;
inline constexpr std::string_view kShardIndexFormat = "gpugeek-shards";
inline constexpr std::string_view kShardIndexFile = "index.json";

// Bytes of a shard file holding `records` records of `record_bytes` bytes in all.
constexpr uint64_t ShardFileBytes(uint64_t records, uint64_t record_bytes) {
  return record_bytes + 8 * (records + 1) + kShardTrailerBytes;
}

// "shard-00042.bin" for shard 42 (at least five digits).
std::string ShardFileName(uint64_t shard);

// The offsets and trailer that follow `record_sizes` records (bytes each) in a shard file.
std::string EncodeShardFooter(const std::vector<uint64_t>& record_sizes);

// The record count in a shard's 16-byte trailer, for a file of `file_bytes` bytes. DataLoss naming
// `file` when the trailer is not 16 bytes, the magic differs ("not a gpugeek shard or a newer version;
// rewrite it with gpugeek data shard"), or the count's offsets cannot fit in the file (truncated file).
absl::StatusOr<uint64_t> DecodeShardTrailer(std::string_view trailer, uint64_t file_bytes, std::string_view file);

// The n + 1 record offsets of a whole shard file `bytes`, checked: the trailer as above, offset 0 = 0,
// offsets non-decreasing, offset n = where the offsets start. DataLoss naming `file` otherwise.
absl::StatusOr<std::vector<uint64_t>> ParseShardFile(std::string_view bytes, std::string_view file);

struct ShardInfo {
  std::string file;           // "shard-00000.bin", relative to the dataset folder
  uint64_t bytes = 0;         // file size
  uint64_t records = 0;       // records in the file (> 0)
  uint64_t first_record = 0;  // global number of its first record
  std::string sha256;         // of the whole file, 64 lower-case hex digits
};

struct ShardIndex {
  uint64_t total_records = 0;
  uint64_t total_bytes = 0;                   // sum of the shard files' bytes
  uint64_t shard_bytes = kDefaultShardBytes;  // the writer's limit per shard (a single larger record exceeds it)
  std::vector<ShardInfo> shards;

  // Record counts of the shards in order (the sampler's input).
  std::vector<uint64_t> RecordCounts() const;
  // The shard holding global record `record` (< total_records), by binary search.
  size_t ShardOf(uint64_t record) const;
};

std::string EncodeShardIndex(const ShardIndex& index);

// Parses and validates index.json text (at most 64 MiB). Every field is checked: InvalidArgument
// naming the field ("shards[3].first_record: 120, expected 118 (the records of the shards before it);
// rewrite the dataset with gpugeek data shard") for a wrong type, a missing or unknown key, a file name
// other than ShardFileName(i), records = 0, bytes smaller than ShardFileBytes(records, 0), a digest that is
// not 64 lower-case hex digits, or totals that disagree with the shards. Never throws.
absl::StatusOr<ShardIndex> ParseShardIndex(std::string_view text);

}  // namespace gpugeek::data
