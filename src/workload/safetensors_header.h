#pragma once
// Reader for the header of a `.safetensors` file: tensor names, dtypes, shapes and byte ranges,
// without touching the tensor data.
//
// Format (huggingface/safetensors, docs "Format"): 8 bytes little-endian u64 N, then N bytes of UTF-8
// JSON: an object mapping each tensor name to {"dtype": "BF16", "shape": [r, c], "data_offsets":
// [begin, end]} (offsets relative to the byte after the header), plus an optional "__metadata__"
// object of string -> string. The data follow. The reader bounds N at 100 MB (the limit the
// safetensors library itself enforces), checks every offset and shape against the dtype's size and
// the file's length, and rejects anything else as InvalidArgument naming the tensor and the field;
// it never reads past the header, so a 100 GB shard costs one small read.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::workload {

// The safetensors library's MAX_HEADER_SIZE (safetensors/src/tensor.rs): 100,000,000 bytes.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  std::string dtype;           // as written: "BF16", "F32", "F8_E4M3", "I32", ...
  std::vector<int64_t> shape;  // empty for a scalar
  uint64_t begin = 0;          // data_offsets, bytes after the header
  uint64_t end = 0;

  int64_t Elements() const;  // product of shape (1 for a scalar)
};

struct SafetensorsHeader {
  std::vector<SafetensorsTensor> tensors;  // in file order of the JSON object (sorted by name)
  std::map<std::string, std::string> metadata;
  uint64_t header_bytes = 0;  // N
};

// Bytes per element of a safetensors dtype name, or 0 for a name the format does not define.
// Sub-byte types (F4, F6_*) report 0 too: the caller cannot size them per element.
double SafetensorsDtypeBytes(std::string_view dtype);

// Parses a header from the file's first bytes: `prefix` holds at least 8 + N bytes (more is
// ignored); `file_size` is the whole file's length, used to check the data offsets (pass 0 when
// unknown to skip that check). InvalidArgument on any malformed field.
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::string_view prefix, uint64_t file_size);

// Reads only the header of the file at `path`. NotFound when it cannot be opened; InvalidArgument
// as above, with the path in the message.
absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path);

}  // namespace gpugeek::workload
