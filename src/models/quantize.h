#pragma once
// Weight-only quantisation of a model's matrices: symmetric round-to-nearest, per output row or per block.
//
// A weight matrix W of shape [rows, cols] (rows = output channels, cols = the K inputs each one sums) becomes
// integers q and scales s with W ~= q * s:
//   int8          q in [-127, 127] (I8 [rows, cols]), one fp32 scale per row (F32 [rows]), s = max|row| / 127.
//                 Bytes: rows*cols + 4*rows, against 4*rows*cols in fp32: a reduction of exactly 75% - 1/cols
//                 (50% - 2/cols against fp16).
//   int8-block32  q in [-127, 127], one fp16 scale per 32 consecutive elements of a row (F16 [rows, cols/32]):
//                 8.5 bits per weight, the layout of llama.cpp's Q8_0 (ggml-common.h, block_q8_0).
//   int4-block32  q in [-7, 7] stored as q + 8 in a 4-bit nibble, two per byte, the even element in the low
//                 nibble (U8 [rows, cols/2]), one fp16 scale per 32 elements: 4.5 bits per weight.
// Every scale is rounded *up* to its storage precision, so |W / s| <= qmax and nothing clips: each element's
// error is at most s/2 (round to nearest). A scale of 0 (an all-zero block) decodes to zeros.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "models/safetensors.h"

namespace gpugeek::models {

enum class QuantScheme { kInt8Row, kInt8Block32, kInt4Block32 };

inline constexpr int64_t kQuantBlock = 32;  // elements per block of the block schemes

std::string_view SchemeName(QuantScheme scheme);  // "int8", "int8-block32", "int4-block32"
std::optional<QuantScheme> ParseScheme(std::string_view name);

// IEEE 754 binary16 and bfloat16 bit patterns to float (exact), and the smallest binary16 >= x for a finite
// x >= 0 (nullopt when x > 65504, the largest binary16).
float HalfToFloat(uint16_t bits);
float BFloat16ToFloat(uint16_t bits);
std::optional<uint16_t> HalfAtLeast(float x);

// A float tensor's raw little-endian bytes (F32, F16 or BF16) as floats, and back (F16 and BF16 rounded to
// nearest even; values past the dtype's range become infinities). Other dtypes: empty.
std::vector<float> TensorToFloats(Dtype dtype, std::string_view bytes);
std::string FloatsToTensor(Dtype dtype, std::span<const float> values);

// A quantised matrix as the file stores it: `q` and `scales` are raw little-endian tensor bytes.
struct QuantizedMatrix {
  TensorSpec q;  // I8 [rows, cols] or U8 [rows, cols/2]; name left empty
  std::string q_bytes;
  TensorSpec scales;  // F32 [rows] or F16 [rows, cols/32]
  std::string scale_bytes;
};

// Quantises `w` (row-major, rows * cols finite floats; cols a multiple of 32 for the block schemes).
// InvalidArgument when a value is not finite (naming its row and column), when the sizes disagree, or when a
// block scheme's scale exceeds the largest fp16 (max |w| over 65504 * qmax: use int8, whose scales are fp32).
absl::StatusOr<QuantizedMatrix> QuantizeMatrix(std::span<const float> w, int64_t rows, int64_t cols,
                                               QuantScheme scheme);

// The floats a QuantizedMatrix stands for: q * s, row-major [rows, cols].
std::vector<float> DequantizeMatrix(const QuantizedMatrix& m, QuantScheme scheme);

// What quantising a file does: which tensors, with what error, and which are left alone and why.
struct QuantizeOptions {
  QuantScheme scheme = QuantScheme::kInt8Row;
  bool skip_embeddings = false;   // keep embedding tables (names with embed, wte, wpe, ...) in full precision
  std::vector<std::string> skip;  // keep tensors whose name contains any of these
};

struct TensorReport {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;        // as loaded: F32, F16, BF16, ...
  std::string scheme;       // "" when kept
  std::string kept_reason;  // why the tensor was kept as it was ("" when quantised)
  uint64_t bytes_before = 0;
  uint64_t bytes_after = 0;  // including the scales
  double sqnr_db = 0;        // 10 log10(sum w^2 / sum (w - q s)^2); +inf when exact
  double max_abs_error = 0;  // max |w - q s|
  double max_scale = 0;      // the largest scale: every error is at most half of its block's scale
};

struct QuantizeReport {
  std::string scheme;
  std::vector<TensorReport> tensors;  // in the file's order
  uint64_t bytes_before = 0;          // tensor bytes (headers not counted)
  uint64_t bytes_after = 0;
  uint64_t quantised_bytes_before = 0;  // of the tensors quantised only
  uint64_t quantised_bytes_after = 0;
  double Reduction() const;  // 1 - after / before over all tensors
};

// The metadata key of a quantised file: a JSON object {"format": 1, "tensors": {NAME: {"scheme", "dtype"}}}
// naming each quantised tensor, its scheme and the dtype it had. Its scales are the tensor NAME + ".qscale".
inline constexpr std::string_view kQuantMetadataKey = "gpugeek.quantization";
inline constexpr std::string_view kScaleSuffix = ".qscale";

// Quantises the matrices of safetensors file `in` into `out` (written whole or not at all), tensor by tensor
// (memory bounded by the largest tensor). Kept: tensors not F32/F16/BF16, not 2-D, skipped by the options, or
// whose cols are not a multiple of 32 under a block scheme; each with its reason in the report.
// Errors: `in` unreadable or malformed; `in` already quantised; a tensor named NAME.qscale beside NAME; a
// non-finite weight (naming the tensor, row and column); the write of `out`.
absl::StatusOr<QuantizeReport> QuantizeSafetensors(const std::string& in, const std::string& out,
                                                   const QuantizeOptions& options);

// Tensor `name` of a file as floats: a float tensor as it is, a tensor `QuantizeSafetensors` quantised
// dequantised (q * s). NotFound for no such tensor; InvalidArgument for another dtype or a malformed scale.
absl::StatusOr<std::vector<float>> ReadFloats(const SafetensorsFile& file, std::string_view name);

// The same for a sharded checkpoint (`in`: a model.safetensors.index.json or its folder): each shard into
// the folder `out_dir` (created) under its own name, a new index there (weight map with the scales,
// total_size of the new tensors), and the folder's other top-level files (config.json, tokenizer files)
// copied, so `out_dir` loads as the model did. The report covers all shards, in shard order. Errors: those of
// OpenShardedSafetensors and QuantizeSafetensors; FailedPrecondition when `out_dir` is `in`'s folder.
absl::StatusOr<QuantizeReport> QuantizeShardedSafetensors(const std::string& in, const std::string& out_dir,
                                                          const QuantizeOptions& options);

}  // namespace gpugeek::models
