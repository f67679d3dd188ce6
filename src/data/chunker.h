#pragma once
// Content-defined chunking: where a file is cut into chunks so that an edit moves only the cuts near it
// and every other chunk keeps its bytes (and so its digest, and is stored once). The cut points come from
// a gear rolling hash with normalised chunking: FastCDC (Xia et al., "FastCDC: a Fast and Efficient
// Content-Defined Chunking Approach for Data Deduplication", USENIX ATC 2016, Algorithm 1 with
// normalisation level 2). Our masks take the hash's high bits, which depend on the last 64 bytes, where the
// paper spreads its mask bits over the low 48.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace gpugeek::data {

// Chunk sizes in bytes. Defaults: at least 256 KiB, normally about 1 MiB, at most 4 MiB (a 1% edit of a
// large file stores about one or two new chunks, and a store of terabytes holds ~10^6 objects per TiB).
struct ChunkerOptions {
  size_t min_bytes = size_t{256} << 10;
  size_t normal_bytes = size_t{1} << 20;  // a power of two
  size_t max_bytes = size_t{4} << 20;
};

// InvalidArgument naming the field when the sizes are not 64 <= min < normal < max, normal a power of two,
// max at most 1 GiB.
absl::Status ValidateChunkerOptions(const ChunkerOptions& options);

// The length of the first chunk of `bytes`: the whole of `bytes` when it is at most min_bytes long, else
// the first cut point the gear hash finds after min_bytes, or max_bytes (or bytes.size()) when none is
// found before. Depends only on the chunk's own bytes, so the cut after an unchanged region is found again
// whatever came before it. Options must be valid.
size_t NextChunkLength(std::string_view bytes, const ChunkerOptions& options);

}  // namespace gpugeek::data
