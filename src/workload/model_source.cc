#include "workload/model_source.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "absl/status/status.h"
#include "common/file.h"
#include "common/json_parse.h"
#include "common/status_macros.h"
#include "workload/param_count.h"

namespace gpugeek::workload {
namespace {

namespace fs = std::filesystem;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The first integer field of `keys` in config.json (the text_config's when there is one), or 0.
int64_t Field(const nlohmann::json& j, std::initializer_list<const char*> keys) {
  for (const nlohmann::json* o : {&j, j.contains("text_config") ? &j["text_config"] : nullptr}) {
    if (o == nullptr || !o->is_object()) continue;
    for (const char* k : keys) {
      auto it = o->find(k);
      if (it != o->end() && it->is_number_integer() && it->get<int64_t>() > 0 &&
          it->get<int64_t>() < (int64_t{1} << 40)) {
        return it->get<int64_t>();
      }
    }
  }
  return 0;
}

// A decoder-shaped ModelConfig whose tensors are the headers' and whose geometry is estimated.
ModelConfig FromHeaders(const WeightsSummary& w, const nlohmann::json& cfg, std::string& estimated) {
  ModelConfig c;
  c.kind = ArchitectureKind::kDecoder;
  c.model_type = cfg.is_object() && cfg.contains("model_type") && cfg["model_type"].is_string()
                     ? cfg["model_type"].get<std::string>()
                     : "unknown";
  c.header_tensors = w.groups;
  if (cfg.is_object()) {
    c.hidden_size = Field(cfg, {"hidden_size", "n_embd", "d_model", "dim"});
    c.num_layers = Field(cfg, {"num_hidden_layers", "n_layer", "num_layers", "n_layers"});
    c.num_heads = Field(cfg, {"num_attention_heads", "n_head", "num_heads", "n_heads"});
    c.num_kv_heads = Field(cfg, {"num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num"});
    c.head_dim = Field(cfg, {"head_dim", "kv_channels"});
    c.vocab_size = Field(cfg, {"vocab_size", "padded_vocab_size"});
    c.intermediate_size = Field(cfg, {"intermediate_size", "ffn_hidden_size", "n_inner", "d_ff"});
    c.max_position_embeddings = Field(cfg, {"max_position_embeddings", "n_positions", "seq_length", "max_seq_len"});
    for (const char* k : {"torch_dtype", "dtype"}) {
      auto it = cfg.find(k);
      if (c.torch_dtype.empty() && it != cfg.end() && it->is_string()) c.torch_dtype = it->get<std::string>();
    }
  }
  // Fill what the config does not say from the tensors: the widest embedding gives vocab x hidden.
  for (const HeaderTensorGroup& g : w.groups) {
    if (g.role != HeaderTensorRole::kEmbedding) continue;
    if (c.vocab_size == 0 || g.rows > c.vocab_size) {
      if (c.vocab_size == 0) c.vocab_size = g.rows;
      if (c.hidden_size == 0) c.hidden_size = g.cols;
    }
  }
  if (c.num_layers == 0) c.num_layers = std::max<int64_t>(w.layers, 1);
  if (c.hidden_size == 0) {
    for (const HeaderTensorGroup& g : w.groups) c.hidden_size = std::max(c.hidden_size, g.cols);
  }
  if (c.num_heads == 0) {
    estimated += " heads (hidden / 128),";
    c.num_heads = std::max<int64_t>(1, c.hidden_size / 128);
  }
  if (c.num_kv_heads == 0 || c.num_heads % c.num_kv_heads != 0) c.num_kv_heads = c.num_heads;
  if (c.head_dim == 0) c.head_dim = std::max<int64_t>(1, c.hidden_size / c.num_heads);
  if (c.intermediate_size == 0) {
    estimated += " MLP width (4 x hidden),";
    c.intermediate_size = 4 * c.hidden_size;
  }
  c.mlp = MlpKind::kPlain;
  // The headers list an untied head; a tied one is the embedding (FLOPs count it as the head).
  c.tie_word_embeddings = std::none_of(w.groups.begin(), w.groups.end(),
                                       [](const HeaderTensorGroup& g) { return g.role == HeaderTensorRole::kLmHead; });
  c.final_norm = false;
  return c;
}

}  // namespace

absl::StatusOr<LoadedModel> LoadModelForPlan(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return absl::NotFoundError(fmt::format("{}: no such file or directory", path));
  std::string config_path, weights_path;
  if (fs::is_directory(path, ec)) {
    config_path = (fs::path(path) / "config.json").string();
    weights_path = path;
  } else if (EndsWith(path, ".safetensors") || EndsWith(path, ".safetensors.index.json")) {
    const fs::path dir = fs::path(path).parent_path();
    config_path = ((dir.empty() ? fs::path(".") : dir) / "config.json").string();
    weights_path = path;
  } else {
    config_path = path;  // a config.json: its safetensors, if any, sit beside it
    const fs::path dir = fs::path(path).parent_path();
    const fs::path beside = dir.empty() ? fs::path(".") : dir;
    if (fs::is_regular_file(beside / "model.safetensors.index.json", ec) ||
        fs::is_regular_file(beside / "model.safetensors", ec)) {
      weights_path = beside.string();
    }
  }
  const bool have_config = fs::is_regular_file(config_path, ec);
  LoadedModel m;
  absl::Status config_error = absl::NotFoundError(fmt::format("{}: no config.json", config_path));
  if (have_config) {
    auto native = LoadModelConfig(config_path);
    if (native.ok()) {
      m.config = *std::move(native);
      config_error = absl::OkStatus();
    } else {
      config_error = native.status();
    }
  }
  if (!weights_path.empty()) {
    auto w = SummarizeSafetensors(weights_path);
    if (w.ok()) {
      m.weights = *std::move(w);
    } else if (!config_error.ok() || weights_path == path) {
      return w.status();
    }
  }
  if (config_error.ok()) {
    if (m.weights) {
      const int64_t counted = CountParameters(m.config).total;
      m.note = fmt::format("parameters: {} from config.json; the safetensors headers hold {}{}", counted,
                           DescribeWeights(*m.weights),
                           m.weights->exact && m.weights->parameters != counted
                               ? " (they differ: the checkpoint holds tensors the config does not describe, "
                                 "e.g. MTP heads or a vision tower, or the config is not this checkpoint's)"
                               : "");
    }
    return m;
  }
  // An architecture the reader does not know (or no config.json): the generic path.
  if (!m.weights) return config_error;
  if (m.weights->groups.empty() && m.weights->parameters > 0) {
    // Only an index: tensor names without shapes cannot be planned tensor by tensor.
    return absl::FailedPreconditionError(fmt::format(
        "{}: {}; put the shard files beside the index (only their headers are read) to plan this model_type", path,
        m.weights->source));
  }
  if (m.weights->parameters <= 0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: the safetensors hold no parameter tensors ({})", path, DescribeWeights(*m.weights)));
  }
  if (config_error.code() != absl::StatusCode::kInvalidArgument && config_error.code() != absl::StatusCode::kNotFound) {
    return config_error;
  }
  nlohmann::json cfg;
  if (have_config) {
    auto text = ReadFileBounded(config_path, uint64_t{4} << 20, "model config");
    if (text.ok()) {
      auto j = ParseJsonBounded(*text, {.max_bytes = uint64_t{4} << 20, .max_depth = 64});
      if (j.ok()) cfg = *std::move(j);
    }
  }
  std::string estimated;
  m.config = FromHeaders(*m.weights, cfg, estimated);
  m.from_headers = true;
  m.note = fmt::format(
      "model_type '{}' is read generically: parameters and weight bytes from safetensors headers: {}. "
      "Activations, KV cache and FLOPs are estimates from config fields (hidden {}, layers {}, heads {}/{} KV, "
      "head_dim {}, vocab {}{}): check them against the model's modelling code",
      m.config.model_type, DescribeWeights(*m.weights), m.config.hidden_size, m.config.num_layers, m.config.num_heads,
      m.config.num_kv_heads, m.config.head_dim, m.config.vocab_size,
      estimated.empty() ? "" : ";" + estimated.substr(0, estimated.size() - 1) + " guessed");
  return m;
}

}  // namespace gpugeek::workload
