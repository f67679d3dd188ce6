#include "models/watermark.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "common/status_macros.h"

namespace gpugeek::models {
namespace {

// Only the first kMaxMarkedValues of a tensor carry the mark: the projection matrix stays under 64 MiB of
// bits at T = 256, whatever the tensor's size.
constexpr size_t kMaxMarkedValues = size_t{1} << 21;

// 256 bits: SHA-256(key || "gpugeek-watermark/v1/" || label || be64(row) || be64(block)).
void Block(std::string_view key, std::string_view label, uint64_t row, uint64_t block, uint8_t out[32]) {
  std::string msg(key);
  msg += "gpugeek-watermark/v1/";
  msg += label;
  for (uint64_t v : {row, block}) {
    for (int s = 56; s >= 0; s -= 8) msg.push_back(static_cast<char>((v >> s) & 0xff));
  }
  SHA256(reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out);
}

// Row j of X as n bits (1: +1, 0: -1), bit i = bit (i % 8) of byte (i % 256) / 8 of block i / 256.
std::vector<uint8_t> Row(std::string_view key, int j, size_t n) {
  std::vector<uint8_t> bits((n + 7) / 8);
  uint8_t b[32];
  for (size_t at = 0; at < bits.size(); at += 32) {
    Block(key, "x", static_cast<uint64_t>(j), at / 32, b);
    std::memcpy(bits.data() + at, b, std::min<size_t>(32, bits.size() - at));
  }
  return bits;
}

// kSigns[byte][k]: +1 when bit k of byte is set, else -1; eight at a time so the loops vectorise.
struct SignTable {
  float v[256][8];
  SignTable() {
    for (int b = 0; b < 256; ++b) {
      for (int k = 0; k < 8; ++k) v[b][k] = ((b >> k) & 1) != 0 ? 1.0f : -1.0f;
    }
  }
};
const SignTable& Signs() {
  static const SignTable* t = new SignTable();
  return *t;
}

double Dot(const std::vector<uint8_t>& row, std::span<const float> w) {
  const SignTable& t = Signs();
  double sum = 0;
  size_t i = 0;
  for (; i + 8 <= w.size(); i += 8) {
    const float* s = t.v[row[i / 8]];
    float part = 0;
    for (int k = 0; k < 8; ++k) part += s[k] * w[i + k];
    sum += part;
  }
  for (; i < w.size(); ++i) sum += t.v[row[i / 8]][i % 8] * w[i];
  return sum;
}

// v += step * row (as +-1).
void AddRow(const std::vector<uint8_t>& row, float step, std::span<float> v) {
  const SignTable& t = Signs();
  size_t i = 0;
  for (; i + 8 <= v.size(); i += 8) {
    const float* s = t.v[row[i / 8]];
    for (int k = 0; k < 8; ++k) v[i + k] += step * s[k];
  }
  for (; i < v.size(); ++i) v[i] += step * t.v[row[i / 8]][i % 8];
}

double Norm(std::span<const float> w) {
  double s = 0;
  for (float x : w) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

// log of P[Bin(n, 1/2) >= k].
double BinomialTail(int n, int k) {
  if (k <= 0) return 1.0;
  double log_max = -INFINITY;
  std::vector<double> logs;
  for (int i = k; i <= n; ++i) {
    double l = std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0) - n * std::log(2.0);
    logs.push_back(l);
    log_max = std::max(log_max, l);
  }
  double sum = 0;
  for (double l : logs) sum += std::exp(l - log_max);
  return std::min(1.0, std::exp(log_max + std::log(sum)));
}

std::span<const float> Marked(std::span<const float> w) { return w.first(std::min(w.size(), kMaxMarkedValues)); }

}  // namespace

std::vector<uint8_t> WatermarkMessage(std::string_view key, int bits) {
  std::vector<uint8_t> m(static_cast<size_t>(std::max(bits, 0)));
  uint8_t b[32];
  for (size_t i = 0; i < m.size(); ++i) {
    if (i % 256 == 0) Block(key, "b", 0, i / 256, b);
    m[i] = (b[(i % 256) / 8] >> (i % 8)) & 1;
  }
  return m;
}

std::vector<double> WatermarkProjections(std::string_view key, std::span<const float> w, int bits) {
  std::span<const float> v = Marked(w);
  std::vector<double> p(static_cast<size_t>(std::max(bits, 0)));
  for (int j = 0; j < bits; ++j) p[j] = Dot(Row(key, j, v.size()), v);
  return p;
}

WatermarkReading ReadWatermark(std::string_view key, std::span<const float> w, int bits) {
  std::vector<uint8_t> message = WatermarkMessage(key, bits);
  std::vector<double> p = WatermarkProjections(key, w, bits);
  double norm = Norm(Marked(w));
  WatermarkReading r{.bits = bits, .min_margin = INFINITY};
  for (int j = 0; j < bits; ++j) {
    if ((p[j] > 0 ? 1 : 0) != message[j]) ++r.errors;
    double margin = (message[j] != 0 ? p[j] : -p[j]) / (norm > 0 ? norm : 1.0);
    r.min_margin = std::min(r.min_margin, margin);
  }
  r.ber = bits > 0 ? static_cast<double>(r.errors) / bits : 0.0;
  r.false_match = BinomialTail(bits, bits - r.errors);
  return r;
}

absl::StatusOr<EmbedResult> EmbedWatermark(std::string_view key, std::span<float> w, const WatermarkParams& params) {
  if (key.empty()) return absl::InvalidArgumentError("watermark key: empty; give a file of secret bytes");
  if (params.bits < 1 || params.bits > 4096) {
    return absl::InvalidArgumentError(fmt::format("bits: {} is outside 1..4096", params.bits));
  }
  std::span<float> v = w.first(std::min(w.size(), kMaxMarkedValues));
  if (v.size() < 4 * static_cast<size_t>(params.bits)) {
    return absl::InvalidArgumentError(fmt::format(
        "the tensor has {} values, too few for {} bits (at least 4 per bit); choose a larger tensor or fewer bits",
        v.size(), params.bits));
  }
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) return absl::InvalidArgumentError(fmt::format("value {} is not finite", i));
  }
  std::vector<float> original(v.begin(), v.end());
  const double norm = Norm(v);
  if (norm == 0) return absl::InvalidArgumentError("the tensor is all zeros; a mark needs weights to hide in");
  const double margin = params.strength * norm;
  const double n = static_cast<double>(v.size());
  std::vector<uint8_t> message = WatermarkMessage(key, params.bits);
  std::vector<std::vector<uint8_t>> rows;
  for (int j = 0; j < params.bits; ++j) rows.push_back(Row(key, j, v.size()));
  EmbedResult result;
  for (; result.sweeps < params.max_sweeps; ++result.sweeps) {
    bool moved = false;
    for (int j = 0; j < params.bits; ++j) {
      double sign = message[j] != 0 ? 1.0 : -1.0;
      double p = Dot(rows[j], v);
      if (sign * p >= margin * (1 - 1e-6)) continue;
      auto step = static_cast<float>((sign * margin - p) / n);  // project onto sign (X_j . v) >= margin
      AddRow(rows[j], step, v);
      moved = true;
    }
    if (!moved) break;
  }
  double diff = 0;
  for (size_t i = 0; i < v.size(); ++i) diff += (static_cast<double>(v[i]) - original[i]) * (v[i] - original[i]);
  result.relative_change = std::sqrt(diff) / norm;
  result.after = ReadWatermark(key, w, params.bits);
  return result;
}

namespace {

bool IsFloat(Dtype d) { return d == Dtype::kF32 || d == Dtype::kF16 || d == Dtype::kBF16; }

// The named tensor, or the largest 2-D one `usable` accepts.
absl::StatusOr<std::string> PickTensor(const SafetensorsFile& file, std::string name, bool quantised_ok) {
  if (!name.empty()) {
    if (file.header().Find(name) == nullptr) {
      return absl::NotFoundError(
          fmt::format("{}: no tensor named {}; omit --tensor to use the largest matrix", file.path(), name));
    }
    return name;
  }
  uint64_t best = 0;
  for (const TensorInfo& t : file.header().tensors) {
    bool usable = IsFloat(t.dtype) || (quantised_ok && (t.dtype == Dtype::kI8 || t.dtype == Dtype::kU8) &&
                                       file.header().Find(t.name + std::string(kScaleSuffix)) != nullptr);
    if (t.shape.size() == 2 && usable && t.Elements() > best) {
      best = t.Elements();
      name = t.name;
    }
  }
  if (name.empty())
    return absl::InvalidArgumentError(fmt::format("{}: holds no 2-D float tensor to mark", file.path()));
  return name;
}

}  // namespace

absl::StatusOr<FileEmbedResult> EmbedWatermarkInFile(const std::string& in, const std::string& out,
                                                     std::string_view key, std::string tensor,
                                                     const WatermarkParams& params) {
  ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(in));
  ASSIGN_OR_RETURN(std::string name, PickTensor(file, std::move(tensor), false));
  const TensorInfo& t = *file.header().Find(name);
  if (!IsFloat(t.dtype)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: tensor {} is {}; mark a F32, F16 or BF16 tensor", in, name, DtypeName(t.dtype)));
  }
  ASSIGN_OR_RETURN(std::string bytes, file.Read(name));
  std::vector<float> w = TensorToFloats(t.dtype, bytes);
  ASSIGN_OR_RETURN(EmbedResult result, EmbedWatermark(key, w, params));
  std::vector<TensorSpec> specs;
  for (const TensorInfo& x : file.header().tensors)
    specs.push_back({.name = x.name, .dtype = x.dtype, .shape = x.shape});
  ASSIGN_OR_RETURN(SafetensorsWriter writer, SafetensorsWriter::Create(out, std::move(specs), file.header().metadata));
  for (const TensorInfo& x : file.header().tensors) {
    if (x.name == name) {
      RETURN_IF_ERROR(writer.Append(FloatsToTensor(t.dtype, w)));
    } else {
      ASSIGN_OR_RETURN(std::string other, file.Read(x.name));
      RETURN_IF_ERROR(writer.Append(other));
    }
  }
  RETURN_IF_ERROR(writer.Finish());
  // What a reader of the written file sees (F16 / BF16 rounding included).
  ASSIGN_OR_RETURN(FileReading written, ReadWatermarkInFile(out, key, name, params.bits));
  result.after = written.reading;
  return FileEmbedResult{.tensor = name, .result = result};
}

absl::StatusOr<FileReading> ReadWatermarkInFile(const std::string& path, std::string_view key, std::string tensor,
                                                int bits) {
  if (key.empty()) return absl::InvalidArgumentError("watermark key: empty; give a file of secret bytes");
  if (bits < 1 || bits > 4096) return absl::InvalidArgumentError(fmt::format("bits: {} is outside 1..4096", bits));
  ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(path));
  ASSIGN_OR_RETURN(std::string name, PickTensor(file, std::move(tensor), true));
  ASSIGN_OR_RETURN(std::vector<float> w, ReadFloats(file, name));
  return FileReading{.tensor = name, .reading = ReadWatermark(key, w, bits)};
}

}  // namespace gpugeek::models
