#pragma once
// safetensors files: reading them bounded, writing them as the format's reference implementation does.
//
// Format (https://github.com/huggingface/safetensors, README "Format"): an 8-byte little-endian unsigned
// header length N; N bytes of UTF-8 JSON, an object mapping each tensor's name to {"dtype", "shape",
// "data_offsets": [begin, end]} plus an optional "__metadata__" object of string values; then the data
// section: each tensor's bytes, row-major and little-endian, at [begin, end) counted from the start of the
// data section. The reference implementation refuses a header over 100,000,000 bytes and requires the
// tensors to tile the data section exactly (no holes, no overlaps); so does this one. Nothing in a file is
// ever executed, unlike a pickle.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpugeek::models {

// Element types, named as the format names them ("F32", "BF16", ...).
enum class Dtype { kBool, kU8, kI8, kU16, kI16, kF16, kBF16, kU32, kI32, kF32, kU64, kI64, kF64, kF8E4M3, kF8E5M2 };

std::string_view DtypeName(Dtype dtype);
std::optional<Dtype> ParseDtype(std::string_view name);
// Bytes per element: 1 (BOOL, U8, I8, F8_*), 2, 4 or 8.
uint64_t DtypeBytes(Dtype dtype);

// One tensor as the header describes it. `begin`/`end` are byte offsets into the data section.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;  // empty for a scalar (one element)
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t Elements() const;  // product of `shape` (1 for a scalar); the header check bounds it
  uint64_t Bytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;              // in data order (ascending `begin`)
  std::map<std::string, std::string> metadata;  // "__metadata__"
  uint64_t header_bytes = 0;                    // N, the JSON's length
  uint64_t data_bytes = 0;                      // size of the data section
  uint64_t DataStart() const { return 8 + header_bytes; }
  const TensorInfo* Find(std::string_view name) const;  // nullptr when absent; O(tensors)
};

inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's cap

// Parses and checks a header. `prefix` holds at least the file's first 8 + N bytes (it may hold the whole
// file); `file_size` is the whole file's size in bytes. InvalidArgument naming the tensor and field for:
// a file under 8 bytes; N of 0, over kMaxHeaderBytes or past the end of the file; JSON that is not an object,
// nested too deep or repeats a key; a tensor without dtype/shape/data_offsets or with other fields; an unknown
// dtype; a negative dimension or an element count overflowing 64 bits; offsets whose span differs from
// elements x dtype size; tensors that overlap, leave a hole, or do not end where the file ends; a
// "__metadata__" value that is not a string. Never throws; linear in N (plus sorting the tensors).
absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::string_view prefix, uint64_t file_size);

// A safetensors file opened for reading tensors one at a time (memory bounded by the largest tensor read).
class SafetensorsFile {
 public:
  // Reads and checks the header (ParseSafetensorsHeader). NotFound / InvalidArgument naming `path`.
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);
  const SafetensorsHeader& header() const { return header_; }
  const std::string& path() const { return path_; }
  // The raw little-endian bytes of tensor `name`. NotFound when the file has no such tensor; Internal when
  // the file shrank since Open.
  absl::StatusOr<std::string> Read(std::string_view name) const;

 private:
  std::string path_;
  SafetensorsHeader header_;
};

// A tensor to write, without its bytes.
struct TensorSpec {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
};

// The header JSON for `tensors` in the given order, data offsets assigned back to back, keys and metadata
// in sorted order, padded with spaces to a multiple of 8 bytes (as the reference writer does, so the data
// section is 8-byte aligned). InvalidArgument for an empty or repeated name, the name "__metadata__", a
// negative dimension or a tensor over 2^62 bytes.
absl::StatusOr<std::string> SafetensorsHeaderJson(const std::vector<TensorSpec>& tensors,
                                                  const std::map<std::string, std::string>& metadata);

// Writes a safetensors file tensor by tensor (memory bounded by one tensor): to `path`.tmp, then on
// Finish fsync and rename over `path`, so a reader never sees half a file. Destroying an unfinished
// writer removes the temporary file.
class SafetensorsWriter {
 public:
  // Errors: as SafetensorsHeaderJson, or the I/O error naming the path.
  static absl::StatusOr<SafetensorsWriter> Create(const std::string& path, std::vector<TensorSpec> tensors,
                                                  const std::map<std::string, std::string>& metadata = {});
  SafetensorsWriter(SafetensorsWriter&& other) noexcept;
  SafetensorsWriter& operator=(SafetensorsWriter&&) = delete;
  ~SafetensorsWriter();
  // The raw little-endian bytes of the next tensor in the order given to Create: InvalidArgument naming
  // the tensor when the size is not elements x dtype size, FailedPrecondition after the last one.
  absl::Status Append(std::string_view bytes);
  // FailedPrecondition when tensors are missing; the I/O error otherwise.
  absl::Status Finish();

 private:
  SafetensorsWriter() = default;
  std::string path_;
  std::string tmp_path_;
  std::vector<TensorSpec> tensors_;
  size_t next_ = 0;
  int fd_ = -1;
};

// A tensor with its raw little-endian bytes (exactly elements x dtype size).
struct TensorData {
  TensorSpec spec;
  std::string bytes;
};

// The whole file at once, through SafetensorsWriter.
absl::Status WriteSafetensors(const std::string& path, const std::vector<TensorData>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

}  // namespace gpugeek::models
