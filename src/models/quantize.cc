#include "models/quantize.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <utility>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/json_parse.h"
#include "common/status_macros.h"
#include "models/safetensors_index.h"

namespace gpugeek::models {
namespace {

int QMax(QuantScheme scheme) { return scheme == QuantScheme::kInt4Block32 ? 7 : 127; }

// binary16 bits nearest to a finite x >= 0 (round to nearest even), x <= 65504.
uint16_t HalfNearest(float x) {
  uint32_t f = std::bit_cast<uint32_t>(x);
  int32_t exp = static_cast<int32_t>((f >> 23) & 0xff) - 127 + 15;
  uint32_t mant = f & 0x7fffff;
  if (exp >= 31) return 0x7c00;
  if (exp <= 0) {  // subnormal half: value = m * 2^-24
    if (exp < -10) return 0;
    mant |= 0x800000;
    int shift = 14 - exp;
    uint32_t h = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1))) ++h;
    return static_cast<uint16_t>(h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // a carry into the exponent is still right
  return static_cast<uint16_t>(h);
}

bool IsEmbedding(std::string_view name) {
  for (std::string_view k : {"embed", "wte.", "wpe.", "tok_embeddings", "word_embeddings", "position_embeddings"}) {
    if (name.find(k) != std::string_view::npos) return true;
  }
  return false;
}

// Why tensor `t` stays as it is, or nullopt when it is quantised.
std::optional<std::string> KeepReason(const TensorInfo& t, const QuantizeOptions& options) {
  if (t.dtype != Dtype::kF32 && t.dtype != Dtype::kF16 && t.dtype != Dtype::kBF16) {
    return fmt::format("dtype {}: only F32, F16 and BF16 weights are quantised", DtypeName(t.dtype));
  }
  if (t.shape.size() == 1) return std::string("1-D (a bias or a norm): small, and its errors cost the most accuracy");
  if (t.shape.size() != 2) return fmt::format("{}-D: only matrices are quantised", t.shape.size());
  if (options.skip_embeddings && IsEmbedding(t.name)) return std::string("an embedding table (--skip embeddings)");
  for (const std::string& s : options.skip) {
    if (t.name.find(s) != std::string::npos) return fmt::format("matches --skip {}", s);
  }
  if (options.scheme != QuantScheme::kInt8Row && t.shape[1] % kQuantBlock != 0) {
    return fmt::format("{} columns are not a multiple of the {}-element block", t.shape[1], kQuantBlock);
  }
  if (t.shape[0] == 0 || t.shape[1] == 0) return std::string("empty");
  return std::nullopt;
}

QuantizedMatrix Shapes(int64_t rows, int64_t cols, QuantScheme scheme) {
  QuantizedMatrix m;
  if (scheme == QuantScheme::kInt4Block32) {
    m.q = {.dtype = Dtype::kU8, .shape = {rows, cols / 2}};
  } else {
    m.q = {.dtype = Dtype::kI8, .shape = {rows, cols}};
  }
  if (scheme == QuantScheme::kInt8Row) {
    m.scales = {.dtype = Dtype::kF32, .shape = {rows}};
  } else {
    m.scales = {.dtype = Dtype::kF16, .shape = {rows, cols / kQuantBlock}};
  }
  return m;
}

// Quantises w[0, n) with scale s into q (one int per element).
void RoundToScale(const float* w, int64_t n, float s, int qmax, int8_t* q) {
  for (int64_t i = 0; i < n; ++i) {
    float r = s > 0 ? std::nearbyint(w[i] / s) : 0.0f;  // round half to even
    q[i] = static_cast<int8_t>(std::clamp(r, static_cast<float>(-qmax), static_cast<float>(qmax)));
  }
}

float MaxAbs(const float* w, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(w[i]));
  return m;
}

}  // namespace

std::string_view SchemeName(QuantScheme scheme) {
  switch (scheme) {
    case QuantScheme::kInt8Row:
      return "int8";
    case QuantScheme::kInt8Block32:
      return "int8-block32";
    case QuantScheme::kInt4Block32:
      return "int4-block32";
  }
  return "int8";
}

std::optional<QuantScheme> ParseScheme(std::string_view name) {
  for (QuantScheme s : {QuantScheme::kInt8Row, QuantScheme::kInt8Block32, QuantScheme::kInt4Block32}) {
    if (SchemeName(s) == name) return s;
  }
  return std::nullopt;
}

float HalfToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000) << 16;
  uint32_t exp = (bits >> 10) & 0x1f;
  uint32_t mant = bits & 0x3ff;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -v : v;
  }
  uint32_t f = exp == 31 ? (sign | 0x7f800000 | (mant << 13)) : (sign | ((exp - 15 + 127) << 23) | (mant << 13));
  return std::bit_cast<float>(f);
}

std::vector<float> TensorToFloats(Dtype dtype, std::string_view bytes) {
  std::vector<float> w;
  if (dtype == Dtype::kF32) {
    w.resize(bytes.size() / 4);
    std::memcpy(w.data(), bytes.data(), 4 * w.size());
  } else if (dtype == Dtype::kF16 || dtype == Dtype::kBF16) {
    w.resize(bytes.size() / 2);
    for (size_t i = 0; i < w.size(); ++i) {
      uint16_t b = 0;
      std::memcpy(&b, bytes.data() + 2 * i, 2);
      w[i] = dtype == Dtype::kF16 ? HalfToFloat(b) : BFloat16ToFloat(b);
    }
  }
  return w;
}

std::string FloatsToTensor(Dtype dtype, std::span<const float> values) {
  std::string out;
  if (dtype == Dtype::kF32) return std::string(reinterpret_cast<const char*>(values.data()), 4 * values.size());
  if (dtype != Dtype::kF16 && dtype != Dtype::kBF16) return out;
  out.resize(2 * values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t f = std::bit_cast<uint32_t>(values[i]);
    uint16_t h = 0;
    if (dtype == Dtype::kBF16) {
      h = static_cast<uint16_t>((f + 0x7fff + ((f >> 16) & 1)) >> 16);  // round to nearest even
    } else {
      h = static_cast<uint16_t>(HalfNearest(std::fabs(values[i])) | ((f >> 16) & 0x8000));
    }
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

float BFloat16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

std::optional<uint16_t> HalfAtLeast(float x) {
  if (!(x >= 0) || x > 65504.0f) return std::nullopt;
  uint16_t h = HalfNearest(x);
  if (HalfToFloat(h) < x) ++h;  // the next binary16 up (x <= 65504, so no overflow into infinity)
  return h;
}

absl::StatusOr<QuantizedMatrix> QuantizeMatrix(std::span<const float> w, int64_t rows, int64_t cols,
                                               QuantScheme scheme) {
  if (rows < 0 || cols < 0 || w.size() != static_cast<size_t>(rows * cols)) {
    return absl::InvalidArgumentError(fmt::format("{} values for a {} x {} matrix", w.size(), rows, cols));
  }
  if (scheme != QuantScheme::kInt8Row && cols % kQuantBlock != 0) {
    return absl::InvalidArgumentError(
        fmt::format("{} columns: {} needs a multiple of {}", cols, SchemeName(scheme), kQuantBlock));
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (!std::isfinite(w[i])) {
      return absl::InvalidArgumentError(fmt::format("the value at row {}, column {} is {}", i / cols, i % cols, w[i]));
    }
  }
  QuantizedMatrix m = Shapes(rows, cols, scheme);
  const int qmax = QMax(scheme);
  const int64_t group = scheme == QuantScheme::kInt8Row ? cols : kQuantBlock;
  std::vector<int8_t> q(w.size());
  const int64_t groups = cols == 0 ? 0 : rows * (cols / group);
  m.scale_bytes.resize(groups * DtypeBytes(m.scales.dtype));
  for (int64_t g = 0; g < groups; ++g) {
    const float* in = w.data() + g * group;
    float amax = MaxAbs(in, group);
    float s = amax / static_cast<float>(qmax);
    if (scheme == QuantScheme::kInt8Row) {
      if (s * static_cast<float>(qmax) < amax) s = std::nextafter(s, std::numeric_limits<float>::infinity());
      std::memcpy(m.scale_bytes.data() + 4 * g, &s, 4);
    } else {
      std::optional<uint16_t> h = HalfAtLeast(s);
      if (!h) {
        return absl::InvalidArgumentError(
            fmt::format("row {}: max |w| {} needs a scale over 65504, the largest fp16; use int8 (fp32 scales)",
                        g * group / cols, amax));
      }
      s = HalfToFloat(*h);
      std::memcpy(m.scale_bytes.data() + 2 * g, &*h, 2);
    }
    RoundToScale(in, group, s, qmax, q.data() + g * group);
  }
  if (scheme == QuantScheme::kInt4Block32) {
    m.q_bytes.resize(q.size() / 2);
    for (size_t i = 0; i < m.q_bytes.size(); ++i) {
      auto lo = static_cast<uint8_t>(q[2 * i] + 8);
      auto hi = static_cast<uint8_t>(q[2 * i + 1] + 8);
      m.q_bytes[i] = static_cast<char>(lo | (hi << 4));
    }
  } else {
    m.q_bytes.assign(reinterpret_cast<const char*>(q.data()), q.size());
  }
  return m;
}

namespace {

// Scale number `g` of `m` (F32, or F16 widened exactly).
float ScaleAt(const QuantizedMatrix& m, size_t g) {
  if (m.scales.dtype == Dtype::kF32) {
    float s = 0;
    std::memcpy(&s, m.scale_bytes.data() + 4 * g, 4);
    return s;
  }
  uint16_t h = 0;
  std::memcpy(&h, m.scale_bytes.data() + 2 * g, 2);
  return HalfToFloat(h);
}

}  // namespace

std::vector<float> DequantizeMatrix(const QuantizedMatrix& m, QuantScheme scheme) {
  const int64_t rows = m.q.shape.at(0);
  const int64_t cols = scheme == QuantScheme::kInt4Block32 ? 2 * m.q.shape.at(1) : m.q.shape.at(1);
  const int64_t group = scheme == QuantScheme::kInt8Row ? cols : kQuantBlock;
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < w.size(); ++i) {
    int q = 0;
    if (scheme == QuantScheme::kInt4Block32) {
      auto byte = static_cast<uint8_t>(m.q_bytes[i / 2]);
      q = static_cast<int>(i % 2 == 0 ? (byte & 0x0f) : (byte >> 4)) - 8;
    } else {
      q = static_cast<int8_t>(m.q_bytes[i]);
    }
    w[i] = static_cast<float>(q) * ScaleAt(m, i / static_cast<size_t>(group));
  }
  return w;
}

double QuantizeReport::Reduction() const {
  return bytes_before == 0 ? 0.0 : 1.0 - static_cast<double>(bytes_after) / static_cast<double>(bytes_before);
}

namespace {

void Measure(const std::vector<float>& w, const QuantizedMatrix& m, QuantScheme scheme, TensorReport& r) {
  std::vector<float> back = DequantizeMatrix(m, scheme);
  double signal = 0;
  double noise = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    double e = static_cast<double>(w[i]) - static_cast<double>(back[i]);
    signal += static_cast<double>(w[i]) * w[i];
    noise += e * e;
    r.max_abs_error = std::max(r.max_abs_error, std::fabs(e));
  }
  r.sqnr_db = noise == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(signal / noise);
  size_t scales = m.scale_bytes.size() / DtypeBytes(m.scales.dtype);
  for (size_t g = 0; g < scales; ++g) r.max_scale = std::max(r.max_scale, static_cast<double>(ScaleAt(m, g)));
}

struct Plan {
  std::vector<TensorSpec> specs;                 // what the output holds, in order
  std::vector<std::optional<std::string>> keep;  // per input tensor: why it is kept, or nullopt
  std::map<std::string, std::string> metadata;
};

absl::StatusOr<Plan> PlanFile(const SafetensorsHeader& h, const std::string& in, const QuantizeOptions& options) {
  if (h.metadata.contains(std::string(kQuantMetadataKey))) {
    return absl::FailedPreconditionError(
        fmt::format("{}: already quantised ({} in its metadata); quantise the original", in, kQuantMetadataKey));
  }
  Plan plan{.metadata = h.metadata};
  nlohmann::json quantised = nlohmann::json::object();
  for (const TensorInfo& t : h.tensors) {
    plan.keep.push_back(KeepReason(t, options));
    if (plan.keep.back()) {
      plan.specs.push_back({.name = t.name, .dtype = t.dtype, .shape = t.shape});
      continue;
    }
    std::string scale_name = t.name + std::string(kScaleSuffix);
    if (h.Find(scale_name) != nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("{}: holds both {} and {}; rename {} or --skip {}", in, t.name, scale_name, scale_name, t.name));
    }
    QuantizedMatrix shapes = Shapes(t.shape[0], t.shape[1], options.scheme);
    plan.specs.push_back({.name = t.name, .dtype = shapes.q.dtype, .shape = shapes.q.shape});
    plan.specs.push_back({.name = scale_name, .dtype = shapes.scales.dtype, .shape = shapes.scales.shape});
    quantised[t.name] = {{"scheme", SchemeName(options.scheme)}, {"dtype", DtypeName(t.dtype)}};
  }
  plan.metadata[std::string(kQuantMetadataKey)] = nlohmann::json{{"format", 1}, {"tensors", quantised}}.dump();
  return plan;
}

}  // namespace

absl::StatusOr<QuantizeReport> QuantizeSafetensors(const std::string& in, const std::string& out,
                                                   const QuantizeOptions& options) {
  ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::Open(in));
  const SafetensorsHeader& h = file.header();
  ASSIGN_OR_RETURN(Plan plan, PlanFile(h, in, options));
  ASSIGN_OR_RETURN(SafetensorsWriter writer, SafetensorsWriter::Create(out, std::move(plan.specs), plan.metadata));
  QuantizeReport report{.scheme = std::string(SchemeName(options.scheme))};
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    const TensorInfo& t = h.tensors[i];
    ASSIGN_OR_RETURN(std::string bytes, file.Read(t.name));
    TensorReport r{
        .name = t.name, .shape = t.shape, .dtype = std::string(DtypeName(t.dtype)), .bytes_before = bytes.size()};
    if (plan.keep[i]) {
      r.kept_reason = *plan.keep[i];
      r.bytes_after = bytes.size();
      RETURN_IF_ERROR(writer.Append(bytes));
    } else {
      std::vector<float> w = TensorToFloats(t.dtype, bytes);
      absl::StatusOr<QuantizedMatrix> m = QuantizeMatrix(w, t.shape[0], t.shape[1], options.scheme);
      if (!m.ok())
        return absl::InvalidArgumentError(
            fmt::format("{}: tensor {}: {}", in, t.name, std::string(m.status().message())));
      r.scheme = report.scheme;
      r.bytes_after = m->q_bytes.size() + m->scale_bytes.size();
      Measure(w, *m, options.scheme, r);
      RETURN_IF_ERROR(writer.Append(m->q_bytes));
      RETURN_IF_ERROR(writer.Append(m->scale_bytes));
      report.quantised_bytes_before += r.bytes_before;
      report.quantised_bytes_after += r.bytes_after;
    }
    report.bytes_before += r.bytes_before;
    report.bytes_after += r.bytes_after;
    report.tensors.push_back(std::move(r));
  }
  RETURN_IF_ERROR(writer.Finish());
  return report;
}

absl::StatusOr<std::vector<float>> ReadFloats(const SafetensorsFile& file, std::string_view name) {
  const TensorInfo* t = file.header().Find(name);
  if (t == nullptr) return absl::NotFoundError(fmt::format("{}: no tensor named {}", file.path(), name));
  ASSIGN_OR_RETURN(std::string bytes, file.Read(name));
  auto meta = file.header().metadata.find(std::string(kQuantMetadataKey));
  std::optional<QuantScheme> scheme;
  if (meta != file.header().metadata.end()) {
    absl::StatusOr<nlohmann::json> doc = ParseJsonBounded(meta->second);
    if (doc.ok() && doc->is_object() && (*doc)["tensors"].is_object() &&
        (*doc)["tensors"].contains(std::string(name)) && (*doc)["tensors"][std::string(name)]["scheme"].is_string()) {
      scheme = ParseScheme((*doc)["tensors"][std::string(name)]["scheme"].get<std::string>());
    }
  }
  if (!scheme) {
    if (t->dtype != Dtype::kF32 && t->dtype != Dtype::kF16 && t->dtype != Dtype::kBF16) {
      return absl::InvalidArgumentError(
          fmt::format("{}: tensor {} is {}, not a float or quantised tensor", file.path(), name, DtypeName(t->dtype)));
    }
    return TensorToFloats(t->dtype, bytes);
  }
  std::string scale_name = std::string(name) + std::string(kScaleSuffix);
  const TensorInfo* st = file.header().Find(scale_name);
  if (t->shape.size() != 2 || st == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("{}: quantised tensor {} has no {} or is not 2-D", file.path(), name, scale_name));
  }
  int64_t cols = *scheme == QuantScheme::kInt4Block32 ? 2 * t->shape[1] : t->shape[1];
  QuantizedMatrix want = Shapes(t->shape[0], cols, *scheme);
  if (t->dtype != want.q.dtype || st->dtype != want.scales.dtype || st->shape != want.scales.shape) {
    return absl::InvalidArgumentError(
        fmt::format("{}: {} and {} do not have the layout of {}", file.path(), name, scale_name, SchemeName(*scheme)));
  }
  QuantizedMatrix m = want;
  m.q_bytes = std::move(bytes);
  ASSIGN_OR_RETURN(m.scale_bytes, file.Read(scale_name));
  return DequantizeMatrix(m, *scheme);
}

absl::StatusOr<QuantizeReport> QuantizeShardedSafetensors(const std::string& in, const std::string& out_dir,
                                                          const QuantizeOptions& options) {
  namespace fs = std::filesystem;
  ASSIGN_OR_RETURN(ShardedSafetensors model, OpenShardedSafetensors(in));
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return absl::PermissionDeniedError(fmt::format("{}: cannot create: {}", out_dir, ec.message()));
  if (fs::equivalent(out_dir, model.dir, ec)) {
    return absl::FailedPreconditionError(fmt::format("{}: is the model's own folder; give another --out", out_dir));
  }
  QuantizeReport total{.scheme = std::string(SchemeName(options.scheme))};
  SafetensorsIndex index;
  for (const auto& [shard, file] : model.shards) {
    std::string out = (fs::path(out_dir) / shard).string();
    ASSIGN_OR_RETURN(QuantizeReport r, QuantizeSafetensors(file.path(), out, options));
    ASSIGN_OR_RETURN(SafetensorsFile written, SafetensorsFile::Open(out));
    for (const TensorInfo& t : written.header().tensors) {
      index.weight_map[t.name] = shard;
      index.total_size += t.Bytes();
    }
    total.bytes_before += r.bytes_before;
    total.bytes_after += r.bytes_after;
    total.quantised_bytes_before += r.quantised_bytes_before;
    total.quantised_bytes_after += r.quantised_bytes_after;
    for (TensorReport& t : r.tensors) total.tensors.push_back(std::move(t));
  }
  for (const fs::directory_entry& e : fs::directory_iterator(model.dir, ec)) {
    std::string name = e.path().filename().string();
    if (!e.is_regular_file() || name.ends_with(".safetensors") || name == kIndexFileName) continue;
    fs::copy_file(e.path(), fs::path(out_dir) / name, fs::copy_options::overwrite_existing, ec);
    if (ec)
      return absl::InternalError(fmt::format("{}: cannot copy into {}: {}", e.path().string(), out_dir, ec.message()));
  }
  std::string index_path = (fs::path(out_dir) / kIndexFileName).string();
  {
    std::ofstream f(index_path + ".tmp", std::ios::binary | std::ios::trunc);
    f << SafetensorsIndexJson(index);
    f.close();
    if (!f || std::rename((index_path + ".tmp").c_str(), index_path.c_str()) != 0) {
      return absl::InternalError(fmt::format("{}: cannot write", index_path));
    }
  }
  return total;
}

}  // namespace gpugeek::models
