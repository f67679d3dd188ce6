#include "workload/dtype.h"

#include <fmt/format.h>

#include <cmath>

namespace gpugeek::workload {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// bitsandbytes `quantize_4bit` default blocksize (bitsandbytes/functional.py) and its double
// quantization of the absmax values in blocks of 256 (QLoRA paper Sec. 3, "Double Quantization").
constexpr int64_t kNf4BlockSize = 64;
constexpr int64_t kNf4DoubleQuantBlocks = 256;
// GPTQ / AWQ default group size (AutoGPTQ `BaseQuantizeConfig.group_size`, AutoAWQ `q_group_size`).
constexpr int64_t kInt4DefaultGroup = 128;
// OCP Microscaling Formats (MX) v1.0 spec: 32-element blocks with one E8M0 scale.
constexpr int64_t kMxBlock = 32;

}  // namespace

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kFp32:
      return "fp32";
    case DType::kBf16:
      return "bf16";
    case DType::kFp16:
      return "fp16";
    case DType::kFp8:
      return "fp8";
    case DType::kInt8:
      return "int8";
    case DType::kInt4:
      return "int4";
    case DType::kNf4:
      return "nf4";
    case DType::kMxfp4:
      return "mxfp4";
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(std::string_view name) {
  const std::string n(name);
  if (n == "fp32" || n == "float32" || n == "float") return DType::kFp32;
  if (n == "bf16" || n == "bfloat16") return DType::kBf16;
  if (n == "fp16" || n == "float16" || n == "half") return DType::kFp16;
  if (n == "fp8" || n == "float8" || n == "float8_e4m3fn" || n == "e4m3") return DType::kFp8;
  if (n == "int8") return DType::kInt8;
  if (n == "int4" || n == "gptq" || n == "awq") return DType::kInt4;
  if (n == "nf4") return DType::kNf4;
  if (n == "mxfp4") return DType::kMxfp4;
  return absl::InvalidArgumentError(
      fmt::format("unknown dtype '{}' (fp32, bf16, fp16, fp8, int8, int4, nf4, mxfp4)", n));
}

double ElementBytes(DType t) {
  switch (t) {
    case DType::kFp32:
      return 4;
    case DType::kBf16:
    case DType::kFp16:
      return 2;
    case DType::kFp8:
    case DType::kInt8:
      return 1;
    case DType::kInt4:
    case DType::kNf4:
    case DType::kMxfp4:
      return 0.5;
  }
  return 2;
}

uint64_t QuantScheme::MatrixBytes(int64_t in, int64_t out) const {
  const int64_t n = in * out;
  switch (dtype) {
    case DType::kFp32:
      return 4 * n;
    case DType::kBf16:
    case DType::kFp16:
      return 2 * n;
    case DType::kFp8: {
      if (group_size <= 0) return n + 4;  // one fp32 per-tensor scale
      return n + 4 * CeilDiv(in, group_size) * CeilDiv(out, group_size);
    }
    case DType::kInt8: {
      const int64_t groups = group_size <= 0 ? 1 : CeilDiv(in, group_size);
      return n + 2 * groups * out;  // fp16 scale per output channel (per group)
    }
    case DType::kInt4: {
      const int64_t g = group_size <= 0 ? kInt4DefaultGroup : group_size;
      const int64_t groups = CeilDiv(in, g) * out;
      return CeilDiv(n, 2) + 2 * groups + CeilDiv(groups, 2);  // packed weights, fp16 scales, 4-bit zeros
    }
    case DType::kNf4: {
      const int64_t g = group_size <= 0 ? kNf4BlockSize : group_size;
      const int64_t blocks = CeilDiv(n, g);
      const int64_t constants = double_quant ? blocks + 4 * CeilDiv(blocks, kNf4DoubleQuantBlocks) : 4 * blocks;
      return CeilDiv(n, 2) + constants;
    }
    case DType::kMxfp4:
      return CeilDiv(n, 2) + CeilDiv(n, kMxBlock);
  }
  return 2 * n;
}

double QuantScheme::BytesPerWeight() const {
  constexpr int64_t kSide = 1 << 14;
  return static_cast<double>(MatrixBytes(kSide, kSide)) / (static_cast<double>(kSide) * kSide);
}

QuantScheme CheckpointScheme(const std::string& torch_dtype, const std::string& quant_method,
                             int64_t quant_block_size) {
  if (quant_method == "fp8") return QuantScheme{DType::kFp8, quant_block_size, false};
  if (quant_method == "mxfp4") return QuantScheme{DType::kMxfp4, 0, false};
  if (quant_method == "gptq" || quant_method == "awq") return QuantScheme{DType::kInt4, 0, false};
  auto parsed = ParseDType(torch_dtype);
  if (parsed.ok() && !QuantScheme{*parsed}.IsQuantized()) return QuantScheme{*parsed, 0, false};
  return QuantScheme{DType::kBf16, 0, false};
}

}  // namespace gpugeek::workload
