#include "api/engines.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

namespace gpugeek::api {
namespace {

constexpr std::array<std::string_view, 4> kFormats = {"torchscript", "onnx", "onnx-int8", "tensorrt"};
// The file endings of each format of kFormats, in its order.
constexpr std::array<std::string_view, 3> kTorchScriptSuffixes = {".pt", ".pth", ".torchscript"};
constexpr std::array<std::string_view, 1> kOnnxSuffixes = {".onnx"};
constexpr std::array<std::string_view, 3> kTensorRtSuffixes = {".plan", ".engine", ".trt"};
constexpr std::array<std::span<const std::string_view>, 4> kSuffixes = {kTorchScriptSuffixes, kOnnxSuffixes,
                                                                        kOnnxSuffixes, kTensorRtSuffixes};

const std::vector<EngineRuntime>& Table() {
  static const auto* const kTable = new std::vector<EngineRuntime>{
      {"libtorch", "libtorch_cpu.so", {"torchscript"}},
      {"onnxruntime", "libonnxruntime.so", {"onnx", "onnx-int8"}},
      {"opencv-dnn", "libopencv_dnn.so", {"onnx"}},
      {"tensorrt", "libnvinfer.so", {"onnx", "onnx-int8", "tensorrt"}},
  };
  return *kTable;
}

bool RuntimeNameChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; }

}  // namespace

std::span<const EngineRuntime> EngineRuntimes() { return Table(); }

std::span<const std::string_view> EngineFormats() { return kFormats; }

absl::StatusOr<std::string> ParseEngineFormat(std::string_view field, std::string_view text) {
  if (std::find(kFormats.begin(), kFormats.end(), text) != kFormats.end()) return std::string(text);
  return absl::InvalidArgumentError(
      fmt::format("{}: unknown engine format '{}'; one of {}", field, text.substr(0, 64), fmt::join(kFormats, ", ")));
}

std::vector<std::string> RuntimesFor(std::string_view format) {
  std::vector<std::string> out;
  for (const EngineRuntime& r : Table()) {
    if (std::find(r.formats.begin(), r.formats.end(), format) != r.formats.end()) out.emplace_back(r.name);
  }
  return out;
}

std::span<const std::string_view> EngineFileSuffixes(std::string_view format) {
  const auto it = std::find(kFormats.begin(), kFormats.end(), format);
  return it == kFormats.end() ? std::span<const std::string_view>() : kSuffixes[it - kFormats.begin()];
}

bool IsEngineFile(std::string_view format, std::string_view path) {
  for (std::string_view suffix : EngineFileSuffixes(format)) {
    if (path.size() > suffix.size() && path.ends_with(suffix)) return true;
  }
  return false;
}

absl::Status ValidateEngineRuntimes(std::string_view field, const std::vector<std::string>& runtimes) {
  if (runtimes.size() > kMaxEngineRuntimesPerNode) {
    return absl::InvalidArgumentError(fmt::format("{}: at most {} runtimes", field, kMaxEngineRuntimesPerNode));
  }
  for (size_t i = 0; i < runtimes.size(); ++i) {
    const std::string& name = runtimes[i];
    if (name.empty() || name.size() > kMaxEngineRuntimeNameBytes ||
        !std::all_of(name.begin(), name.end(), RuntimeNameChar)) {
      return absl::InvalidArgumentError(fmt::format("{}[{}]: a runtime name is 1-{} of [a-z0-9-], e.g. onnxruntime",
                                                    field, i, kMaxEngineRuntimeNameBytes));
    }
    if (i > 0 && runtimes[i - 1] >= name) {
      return absl::InvalidArgumentError(fmt::format("{}[{}]: runtimes must be sorted, without duplicates", field, i));
    }
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::api
