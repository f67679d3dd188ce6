#include "workload/model_weights.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <set>

#include "absl/status/status.h"
#include "common/file.h"
#include "common/status_macros.h"
#include "models/safetensors.h"
#include "models/safetensors_index.h"

namespace gpugeek::workload {
namespace {

namespace fs = std::filesystem;
using models::TensorInfo;

// An index lists one entry per tensor: a few MB for the largest models.
constexpr uint64_t kMaxIndexBytes = uint64_t{64} << 20;
constexpr size_t kMaxShards = 4096;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool Contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

// Why a tensor is not a parameter, or nullopt when it is one.
std::optional<std::string> ExclusionReason(const TensorInfo& t) {
  const std::string& n = t.name;
  if (EndsWith(n, "inv_freq")) return "rotary inv_freq buffer";
  if (EndsWith(n, "position_ids")) return "position_ids buffer";
  if ((EndsWith(n, "attn.bias") && t.shape.size() >= 3) || EndsWith(n, "masked_bias")) return "causal-mask buffer";
  for (const char* s : {"scale_inv", "weight_scale", "input_scale", "output_scale", "k_scale", "v_scale"}) {
    if (EndsWith(n, s)) return "fp8 / int8 quantization scale";
  }
  for (const char* s : {".scales", ".qzeros", ".g_idx"}) {
    if (EndsWith(n, s)) return "GPTQ / AWQ scale, zero point or group index";
  }
  for (const char* s : {".absmax", "quant_map", "quant_state"}) {
    if (Contains(n, s)) return "bitsandbytes quantization state";
  }
  return std::nullopt;
}

// Name pattern (every all-digit dotted segment replaced by '*') and the first such index.
std::pair<std::string, std::optional<int64_t>> Pattern(const std::string& name) {
  std::string out;
  std::optional<int64_t> layer;
  size_t start = 0;
  while (start <= name.size()) {
    size_t dot = name.find('.', start);
    if (dot == std::string::npos) dot = name.size();
    const std::string_view seg(name.data() + start, dot - start);
    const bool digits = !seg.empty() && seg.size() <= 9 &&
                        std::all_of(seg.begin(), seg.end(), [](char ch) { return std::isdigit(ch) != 0; });
    if (!out.empty()) out += '.';
    if (digits) {
      out += '*';
      if (!layer) layer = std::stoll(std::string(seg));
    } else {
      out += seg;
    }
    start = dot + 1;
  }
  return {out, layer};
}

HeaderTensorRole RoleOf(const std::string& name, size_t rank) {
  if (rank >= 2) {
    if (Contains(name, "lm_head") || Contains(name, "embed_out") || Contains(name, "output_layer") ||
        name == "output.weight") {
      return HeaderTensorRole::kLmHead;
    }
    if (Contains(name, "embed") || Contains(name, "wte") || Contains(name, "wpe") || Contains(name, "tok_embeddings")) {
      return HeaderTensorRole::kEmbedding;
    }
    return HeaderTensorRole::kLinear;
  }
  if (Contains(name, "norm") || Contains(name, "ln_") || Contains(name, ".ln") || Contains(name, "_ln.") ||
      Contains(name, "LayerNorm")) {
    return HeaderTensorRole::kNorm;
  }
  if (EndsWith(name, "bias")) return HeaderTensorRole::kBias;
  return HeaderTensorRole::kOther;
}

class Accumulator {
 public:
  void Add(const TensorInfo& t) {
    const uint64_t bytes = t.Bytes();
    if (auto why = ExclusionReason(t)) {
      ++excluded_[*why];
      w_.excluded_tensors += 1;
      w_.excluded_bytes += bytes;
      return;
    }
    if (EndsWith(t.name, ".qweight")) packed_ = true;
    const int64_t n = static_cast<int64_t>(t.Elements());  // the header check bounds it
    const std::string dtype(models::DtypeName(t.dtype));
    w_.tensors += 1;
    w_.parameters += n;
    w_.bytes += bytes;
    w_.parameters_by_dtype[dtype] += n;
    w_.bytes_by_dtype[dtype] += bytes;
    auto [pattern, layer] = Pattern(t.name);
    if (layer) layers_.insert(*layer);
    const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
    if (rows <= 0 || n <= 0) return;
    const int64_t cols = n / rows;
    auto& g = groups_[{pattern, rows, cols}];
    g.name = pattern;
    g.role = RoleOf(t.name, t.shape.size());
    g.rows = rows;
    g.cols = cols;
    g.copies += 1;
    g.in_layers = layer.has_value();
  }

  WeightsSummary Finish(std::string source, int64_t files) && {
    w_.source = std::move(source);
    w_.files = files;
    w_.exact = !packed_;
    w_.layers = static_cast<int64_t>(layers_.size());
    for (auto& [key, g] : groups_) w_.groups.push_back(g);
    for (const auto& [why, count] : excluded_) w_.exclusions.push_back(fmt::format("{} x {}", count, why));
    if (packed_) {
      w_.exclusions.push_back(
          "packed quantized weights (qweight) counted as stored elements: the parameter count is a lower bound");
    }
    return std::move(w_);
  }

 private:
  WeightsSummary w_;
  bool packed_ = false;
  std::set<int64_t> layers_;
  std::map<std::string, int64_t> excluded_;
  std::map<std::tuple<std::string, int64_t, int64_t>, HeaderTensorGroup> groups_;
};

absl::StatusOr<WeightsSummary> FromShards(const std::vector<std::string>& files, const std::string& source) {
  Accumulator acc;
  for (const std::string& f : files) {
    ASSIGN_OR_RETURN(const models::SafetensorsFile file, models::SafetensorsFile::Open(f));  // the header only
    for (const TensorInfo& t : file.header().tensors) acc.Add(t);
  }
  return std::move(acc).Finish(source, static_cast<int64_t>(files.size()));
}

absl::StatusOr<WeightsSummary> FromIndex(const std::string& index_path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFileBounded(index_path, kMaxIndexBytes, "safetensors index"));
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(fmt::format("{}: {}", index_path, what));
  };
  // Shard names are plain file names beside the index (models/safetensors_index.h refuses paths).
  absl::StatusOr<models::SafetensorsIndex> index = models::ParseSafetensorsIndex(text);
  if (!index.ok()) return bad(std::string(index.status().message()));
  if (index->weight_map.empty()) return bad("empty 'weight_map' (tensor name -> shard file)");
  const uint64_t total_size = index->total_size;
  const std::vector<std::string> shards = index->Shards();
  if (shards.size() > kMaxShards)
    return bad(fmt::format("{} shard files: over the limit of {}", shards.size(), kMaxShards));
  const fs::path dir = fs::path(index_path).parent_path();
  std::vector<std::string> files, missing;
  for (const std::string& s : shards) {
    const fs::path p = dir / s;
    std::error_code ec;
    (fs::is_regular_file(p, ec) ? files : missing).push_back(p.string());
  }
  if (missing.empty()) {
    ASSIGN_OR_RETURN(WeightsSummary w, FromShards(files, fmt::format("safetensors headers of {} files listed by {}",
                                                                     files.size(), index_path)));
    w.index_total_size = total_size;
    return w;
  }
  // Only the index: names but no shapes. total_size counts every tensor's bytes, buffers and
  // quantization scales included, so the count is an estimate.
  WeightsSummary w;
  w.source = fmt::format("{} only ({} of {} shard files absent, e.g. {}): metadata.total_size / 2 bytes, an estimate",
                         index_path, missing.size(), shards.size(), missing.front());
  w.exact = false;
  w.index_total_size = total_size;
  w.bytes = total_size;
  w.parameters = static_cast<int64_t>(total_size / 2);
  w.tensors = static_cast<int64_t>(index->weight_map.size());
  w.files = 0;
  return w;
}

}  // namespace

absl::StatusOr<WeightsSummary> SummarizeSafetensors(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path index = fs::path(path) / "model.safetensors.index.json";
    if (fs::is_regular_file(index, ec)) return FromIndex(index.string());
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(path, ec)) {
      if (entry.is_regular_file(ec) && entry.path().extension() == ".safetensors")
        files.push_back(entry.path().string());
      if (files.size() > kMaxShards)
        return absl::InvalidArgumentError(fmt::format("{}: over {} files", path, kMaxShards));
    }
    if (files.empty()) {
      return absl::NotFoundError(fmt::format("{}: no model.safetensors.index.json and no *.safetensors file", path));
    }
    std::sort(files.begin(), files.end());
    return FromShards(files, fmt::format("safetensors headers of {} files in {}", files.size(), path));
  }
  if (!fs::is_regular_file(path, ec)) return absl::NotFoundError(fmt::format("{}: no such file or directory", path));
  if (EndsWith(path, ".json")) return FromIndex(path);
  return FromShards({path}, fmt::format("safetensors header of {}", path));
}

std::string DescribeWeights(const WeightsSummary& w) {
  std::string dtypes;
  for (const auto& [dtype, n] : w.parameters_by_dtype) {
    dtypes += fmt::format("{}{} {}", dtypes.empty() ? "" : ", ", dtype, n);
  }
  std::string out = fmt::format("{} parameters{} ({}; {} tensors, {} bytes) from {}", w.parameters,
                                w.exact ? " (exact)" : " (estimate)", dtypes.empty() ? "dtypes unknown" : dtypes,
                                w.tensors, w.bytes, w.source);
  if (!w.exclusions.empty()) {
    out += "; left out:";
    for (const std::string& e : w.exclusions) out += " " + e + ";";
    out.pop_back();
  }
  return out;
}

}  // namespace gpugeek::workload
