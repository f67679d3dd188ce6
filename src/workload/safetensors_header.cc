#include "workload/safetensors_header.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>

#include "absl/status/status.h"
#include "common/json_parse.h"

namespace gpugeek::workload {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(fmt::format("safetensors header: {}", what));
}

// Shapes past 2^40 elements in one tensor are not a real model's and would overflow byte sizes.
constexpr int64_t kMaxElements = int64_t{1} << 40;

absl::StatusOr<SafetensorsTensor> ParseTensor(const std::string& name, const json& v) {
  if (!v.is_object()) return Bad(fmt::format("tensor '{}': entry must be an object", name));
  SafetensorsTensor t;
  t.name = name;
  auto dtype = v.find("dtype");
  if (dtype == v.end() || !dtype->is_string()) return Bad(fmt::format("tensor '{}': missing string 'dtype'", name));
  t.dtype = dtype->get<std::string>();
  const double elem_bytes = SafetensorsDtypeBytes(t.dtype);
  if (elem_bytes <= 0) return Bad(fmt::format("tensor '{}': unsupported dtype '{}'", name, t.dtype));
  auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array() || shape->size() > 16) {
    return Bad(fmt::format("tensor '{}': 'shape' must be an array of at most 16 dimensions", name));
  }
  int64_t elements = 1;
  for (const json& d : *shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(kMaxElements)) {
      return Bad(fmt::format("tensor '{}': 'shape' entries must be integers in [0, 2^40]", name));
    }
    const int64_t n = static_cast<int64_t>(d.get<uint64_t>());
    if (n != 0 && elements > kMaxElements / n) return Bad(fmt::format("tensor '{}': over 2^40 elements", name));
    elements *= n;
    t.shape.push_back(n);
  }
  auto offsets = v.find("data_offsets");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2 || !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    return Bad(fmt::format("tensor '{}': 'data_offsets' must be [begin, end] with unsigned integers", name));
  }
  t.begin = (*offsets)[0].get<uint64_t>();
  t.end = (*offsets)[1].get<uint64_t>();
  if (t.end < t.begin) return Bad(fmt::format("tensor '{}': data_offsets end {} < begin {}", name, t.end, t.begin));
  const uint64_t expected = static_cast<uint64_t>(static_cast<double>(elements) * elem_bytes);
  if (t.end - t.begin != expected) {
    return Bad(fmt::format("tensor '{}': {} bytes in data_offsets but shape x {} holds {}", name, t.end - t.begin,
                           t.dtype, expected));
  }
  return t;
}

}  // namespace

int64_t SafetensorsTensor::Elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

double SafetensorsDtypeBytes(std::string_view dtype) {
  // safetensors/src/tensor.rs `Dtype`; sub-byte types have no per-element size.
  static const std::map<std::string, double, std::less<>> kBytes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"F8_E8M0", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},     {"U32", 4},
      {"F32", 4},  {"F64", 8}, {"I64", 8}, {"U64", 8},     {"C64", 8},
  };
  auto it = kBytes.find(dtype);
  return it == kBytes.end() ? 0 : it->second;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(std::string_view prefix, uint64_t file_size) {
  if (prefix.size() < 8) return Bad(fmt::format("{} bytes: shorter than the 8-byte length prefix", prefix.size()));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(prefix[i]);
  if (n < 2 || n > kMaxSafetensorsHeaderBytes) {
    return Bad(
        fmt::format("header length {} is outside [2, {}] (not a safetensors file?)", n, kMaxSafetensorsHeaderBytes));
  }
  if (prefix.size() - 8 < n) return Bad(fmt::format("header length {} runs past the {} bytes read", n, prefix.size()));
  if (file_size != 0 && n > file_size - 8) return Bad(fmt::format("header length {} runs past the file's end", n));
  std::string_view text = prefix.substr(8, n);
  // The format pads the header with trailing spaces to align the data.
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  auto root = ParseJsonBounded(text, {.max_bytes = kMaxSafetensorsHeaderBytes, .max_depth = 4});
  if (!root.ok()) return Bad(std::string(root.status().message()));
  if (!root->is_object()) return Bad("the header must be a JSON object");
  SafetensorsHeader h;
  h.header_bytes = n;
  for (const auto& [name, v] : root->items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) return Bad("'__metadata__' must be an object of strings");
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) return Bad(fmt::format("'__metadata__.{}' must be a string", k));
        h.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    auto t = ParseTensor(name, v);
    if (!t.ok()) return t.status();
    h.tensors.push_back(std::move(*t));
  }
  // The data of the tensors must not overlap and must lie inside the file.
  std::vector<const SafetensorsTensor*> by_begin;
  for (const SafetensorsTensor& t : h.tensors) by_begin.push_back(&t);
  std::sort(by_begin.begin(), by_begin.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  uint64_t previous_end = 0;
  for (const SafetensorsTensor* t : by_begin) {
    if (t->begin < previous_end) return Bad(fmt::format("tensor '{}': its data overlaps another tensor's", t->name));
    previous_end = t->end;
  }
  if (file_size != 0 && previous_end > file_size - 8 - n) {
    return Bad(
        fmt::format("tensor data ends at byte {} past the file's {} data bytes", previous_end, file_size - 8 - n));
  }
  return h;
}

absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(fmt::format("{}: cannot open", path));
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  std::string prefix(8, '\0');
  if (size < 8 || !in.read(prefix.data(), 8)) {
    return absl::InvalidArgumentError(fmt::format("{}: safetensors header: shorter than 8 bytes", path));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(prefix[i]);
  // Read no more than the header (bounded); the parser reports a length outside the limits.
  const uint64_t want = std::min<uint64_t>({n, kMaxSafetensorsHeaderBytes, size - 8});
  prefix.resize(8 + want);
  if (want > 0 && !in.read(prefix.data() + 8, static_cast<std::streamsize>(want))) {
    return absl::InvalidArgumentError(fmt::format("{}: safetensors header: cannot read {} bytes", path, want));
  }
  auto h = ParseSafetensorsHeader(prefix, size);
  if (!h.ok()) return absl::InvalidArgumentError(fmt::format("{}: {}", path, std::string(h.status().message())));
  return h;
}

}  // namespace gpugeek::workload
