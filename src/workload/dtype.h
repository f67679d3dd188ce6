#pragma once
// Number formats for weights, activations and the KV cache, with the bytes each costs including
// quantization constants (scales, zero points, second-level scales).
//
// Formats and their storage (sources beside each in dtype.cc):
//   fp32 4 B, bf16 / fp16 2 B;
//   fp8 (e4m3) 1 B + one fp32 scale per `group_size` x `group_size` block (DeepSeek-V3
//     `weight_block_size` [128, 128]); group_size 0 means one scale per tensor;
//   int8 weight-only 1 B + one fp16 scale per output channel (group_size 0) or per group;
//   int4 (GPTQ / AWQ) 0.5 B + per group of `group_size` inputs an fp16 scale and a 4-bit zero point;
//   nf4 (bitsandbytes, QLoRA) 0.5 B + an fp32 absmax per 64-weight block, or with double quantization
//     an 8-bit absmax per block plus an fp32 scale per 256 blocks (Dettmers et al. 2023,
//     arXiv:2305.14314 Sec. 3: 0.5 -> 0.127 bit per parameter);
//   mxfp4 (OCP Microscaling, gpt-oss experts) 0.5 B + one 8-bit E8M0 scale per 32 weights.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpugeek::workload {

enum class DType { kFp32, kBf16, kFp16, kFp8, kInt8, kInt4, kNf4, kMxfp4 };

std::string_view DTypeName(DType t);  // "fp32", "bf16", ...
// Accepts the names above and the torch spellings ("float32", "bfloat16", "float16", "half").
// InvalidArgument for anything else, naming it.
absl::StatusOr<DType> ParseDType(std::string_view name);

// Bytes of one element of a plain (unquantized) tensor. Quantized formats return their packed size
// (0.5 for 4-bit) without constants; use QuantScheme for those.
double ElementBytes(DType t);

struct QuantScheme {
  DType dtype = DType::kBf16;
  int64_t group_size = 0;     // see the header comment; 0 = the format's default grouping
  bool double_quant = false;  // nf4 only

  // Bytes to store an `in` x `out` weight matrix (in = input features), constants included.
  // Exact to the byte for the block layouts named above (rounded up to whole bytes).
  uint64_t MatrixBytes(int64_t in, int64_t out) const;
  // Average bytes per weight for a large matrix (for reports), constants included.
  double BytesPerWeight() const;
  bool IsQuantized() const { return dtype != DType::kFp32 && dtype != DType::kBf16 && dtype != DType::kFp16; }
};

// The scheme a checkpoint is stored in: its quantization_config when present (fp8 blocks,
// mxfp4), else its torch_dtype (bf16 when absent).
QuantScheme CheckpointScheme(const std::string& torch_dtype, const std::string& quant_method, int64_t quant_block_size);

}  // namespace gpugeek::workload
