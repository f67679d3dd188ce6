#pragma once
// Sharded safetensors checkpoints: `model.safetensors.index.json` beside its shard files.
//
// Form (Hugging Face transformers, `save_pretrained` with max_shard_size): {"metadata": {"total_size": N},
// "weight_map": {tensor name: shard file name}}; N is the sum of every tensor's bytes (elements x dtype
// size, headers not counted); shard files sit in the index's folder.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "models/safetensors.h"

namespace gpugeek::models {

inline constexpr std::string_view kIndexFileName = "model.safetensors.index.json";

struct SafetensorsIndex {
  uint64_t total_size = 0;                        // bytes of all tensors
  std::map<std::string, std::string> weight_map;  // tensor -> shard file name
  std::vector<std::string> Shards() const;        // distinct shard names, sorted
};

// Parses an index (at most 64 MiB of JSON). InvalidArgument naming the field for: not an object; no
// metadata.total_size or not a non-negative integer; no weight_map or a value that is not a string; a
// shard name that is empty, absolute, has a '/' or is "." or "..", or does not end in ".safetensors"
// (shards sit beside the index, nowhere else).
absl::StatusOr<SafetensorsIndex> ParseSafetensorsIndex(std::string_view text);

// The index as JSON text (two-space indented, keys sorted), as transformers writes it.
std::string SafetensorsIndexJson(const SafetensorsIndex& index);

// An index and its shards, checked against each other.
struct ShardedSafetensors {
  std::string dir;  // the index's folder
  SafetensorsIndex index;
  std::map<std::string, SafetensorsFile> shards;  // by shard name
};

// Opens `path` (an index file, or a folder holding kIndexFileName) and every shard it names. Errors:
// the index's (ParseSafetensorsIndex), a shard's (SafetensorsFile::Open); a tensor the weight map puts in
// a shard that does not hold it; a tensor a shard holds that the weight map omits or puts elsewhere; a
// total_size that differs from the shards' tensor bytes. Each names the tensor and the shard.
absl::StatusOr<ShardedSafetensors> OpenShardedSafetensors(const std::string& path);

}  // namespace gpugeek::models
