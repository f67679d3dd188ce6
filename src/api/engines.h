#pragma once
// Compiled-engine formats a job may name (`engine:` of a job spec) and the engine runtimes that run them,
// which an agent reports for its node (Registration::engines) and the scheduler places by (sched::EngineFit).
//
// Formats (what examples/gpt/export_engine.py writes; docs/models.md "Compiled engines"):
//   torchscript  torch.jit.save output (model.torchscript.pt)
//   onnx         an fp32 ONNX graph (model.onnx)
//   onnx-int8    an ONNX graph with INT8 weights through QuantizeLinear/DequantizeLinear (QDQ, model.int8.onnx)
//   tensorrt     a serialized TensorRT engine (plan), built for one GPU model and TensorRT version
//
// Runtimes, found on a node by their shared library in the dynamic linker's cache (`ldconfig -p`):
//   libtorch     libtorch_cpu.so   torchscript            (torch.jit.load; PyTorch >= 1.5 ships libtorch_cpu)
//   onnxruntime  libonnxruntime.so onnx, onnx-int8        (ONNX Runtime runs QDQ models: its "Quantize ONNX
//                                                           models" guide)
//   opencv-dnn   libopencv_dnn.so  onnx                   (cv::dnn::readNetFromONNX; OpenCV 4.6 has no
//                                                           per-axis DequantizeLinear, so no onnx-int8)
//   tensorrt     libnvinfer.so     onnx, onnx-int8, tensorrt (TensorRT's ONNX parser; explicit quantization
//                                                           of QDQ graphs since TensorRT 8.0)

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpugeek::api {

inline constexpr size_t kMaxEngineRuntimesPerNode = 32;  // Registration::engines
inline constexpr size_t kMaxEngineRuntimeNameBytes = 32;

struct EngineRuntime {
  std::string_view name;     // "onnxruntime"
  std::string_view library;  // the soname without its version, "libonnxruntime.so"
  std::vector<std::string_view> formats;
};

// Every runtime gpugeek knows, in name order.
std::span<const EngineRuntime> EngineRuntimes();

// Every format, in the order of the table above.
std::span<const std::string_view> EngineFormats();

// `text` when it is a format; otherwise InvalidArgument "FIELD: unknown engine format 'x'; one of
// torchscript, onnx, onnx-int8, tensorrt".
absl::StatusOr<std::string> ParseEngineFormat(std::string_view field, std::string_view text);

// The runtimes that run `format`, in name order; empty for an unknown format.
std::vector<std::string> RuntimesFor(std::string_view format);

// The file name endings a file of `format` has: ".pt", ".pth", ".torchscript" (torchscript); ".onnx" (onnx,
// onnx-int8); ".plan", ".engine", ".trt" (tensorrt). Empty for an unknown format.
std::span<const std::string_view> EngineFileSuffixes(std::string_view format);

// True when `path` ends with one of EngineFileSuffixes(format).
bool IsEngineFile(std::string_view format, std::string_view path);

// OK when `runtimes` (a node's report) is sorted, without duplicates, at most kMaxEngineRuntimesPerNode names
// of 1..kMaxEngineRuntimeNameBytes of [a-z0-9-]. Names gpugeek does not know are allowed (a newer agent);
// they match no format. Otherwise InvalidArgument naming `field` and the entry.
absl::Status ValidateEngineRuntimes(std::string_view field, const std::vector<std::string>& runtimes);

}  // namespace gpugeek::api
