// libFuzzer target: arbitrary bytes through the index.json parser (first byte even) or the shard footer
// parser (first byte odd). Neither may crash, and what they accept must be consistent: an accepted index
// re-encodes to text that parses to the same index; accepted shard offsets start at 0, never decrease and end
// before the footer.

#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "data/shard_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpugeek::data;
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    absl::StatusOr<ShardIndex> index = ParseShardIndex(rest);
    if (!index.ok()) return 0;
    absl::StatusOr<ShardIndex> again = ParseShardIndex(EncodeShardIndex(*index));
    if (!again.ok() || again->total_records != index->total_records || again->shards.size() != index->shards.size()) {
      std::abort();  // the encoder wrote what the parser refuses, or changed it
    }
    for (size_t i = 0; i < index->shards.size(); ++i) {
      if (index->shards[i].records > 0 && index->ShardOf(index->shards[i].first_record) != i) std::abort();
    }
    return 0;
  }
  absl::StatusOr<std::vector<uint64_t>> offsets = ParseShardFile(rest, "fuzz.bin");
  if (!offsets.ok()) return 0;
  const uint64_t n = offsets->size() - 1;
  if ((*offsets)[0] != 0 || ShardFileBytes(n, offsets->back()) != rest.size()) std::abort();
  for (uint64_t i = 0; i < n; ++i) {
    if ((*offsets)[i] > (*offsets)[i + 1]) std::abort();
  }
  return 0;
}
