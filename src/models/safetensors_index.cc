#include "models/safetensors_index.h"

#include <filesystem>
#include <set>
#include <utility>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "common/file.h"
#include "common/json_parse.h"
#include "common/status_macros.h"

namespace gpugeek::models {
namespace {

constexpr uint64_t kMaxIndexBytes = uint64_t{64} << 20;

absl::Status Bad(std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("safetensors index: {}", what));
}

absl::Status CheckShardName(const std::string& tensor, const std::string& shard) {
  if (shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos ||
      !shard.ends_with(".safetensors")) {
    return Bad(
        fmt::format("weight_map.{}: shard \"{}\" must be a *.safetensors file name beside the index", tensor, shard));
  }
  return absl::OkStatus();
}

// Every tensor of every shard sits where the weight map says, and the map names nothing more.
absl::Status CheckAgainstShards(const ShardedSafetensors& m) {
  uint64_t bytes = 0;
  size_t tensors = 0;
  for (const auto& [name, file] : m.shards) {
    for (const TensorInfo& t : file.header().tensors) {
      auto it = m.index.weight_map.find(t.name);
      if (it == m.index.weight_map.end()) {
        return Bad(fmt::format("{} holds {}, which weight_map does not list", name, t.name));
      }
      if (it->second != name) {
        return Bad(fmt::format("{} holds {}, which weight_map puts in {}", name, t.name, it->second));
      }
      bytes += t.Bytes();
      ++tensors;
    }
  }
  if (tensors != m.index.weight_map.size()) {
    for (const auto& [tensor, shard] : m.index.weight_map) {
      if (m.shards.at(shard).header().Find(tensor) == nullptr) {
        return Bad(fmt::format("weight_map puts {} in {}, which does not hold it", tensor, shard));
      }
    }
  }
  if (bytes != m.index.total_size) {
    return Bad(
        fmt::format("metadata.total_size is {} but the shards' tensors hold {} bytes", m.index.total_size, bytes));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::string> SafetensorsIndex::Shards() const {
  std::set<std::string> names;
  for (const auto& [tensor, shard] : weight_map) names.insert(shard);
  return {names.begin(), names.end()};
}

absl::StatusOr<SafetensorsIndex> ParseSafetensorsIndex(std::string_view text) {
  absl::StatusOr<nlohmann::json> doc = ParseJsonBounded(text, JsonLimits{.max_bytes = kMaxIndexBytes, .max_depth = 4});
  if (!doc.ok()) return Bad(std::string(doc.status().message()));
  if (!doc->is_object()) return Bad("must be a JSON object with metadata and weight_map");
  SafetensorsIndex index;
  auto meta = doc->find("metadata");
  if (meta == doc->end() || !meta->is_object() || !meta->contains("total_size") ||
      !(*meta)["total_size"].is_number_unsigned()) {
    return Bad("metadata.total_size: missing or not a byte count (an integer >= 0)");
  }
  index.total_size = (*meta)["total_size"].get<uint64_t>();
  auto map = doc->find("weight_map");
  if (map == doc->end() || !map->is_object()) return Bad("weight_map: missing or not an object of tensor -> shard");
  for (const auto& [tensor, shard] : map->items()) {
    if (!shard.is_string()) return Bad(fmt::format("weight_map.{}: must be a shard file name", tensor));
    RETURN_IF_ERROR(CheckShardName(tensor, shard.get<std::string>()));
    index.weight_map[tensor] = shard.get<std::string>();
  }
  return index;
}

std::string SafetensorsIndexJson(const SafetensorsIndex& index) {
  nlohmann::json doc = {{"metadata", {{"total_size", index.total_size}}}, {"weight_map", index.weight_map}};
  return doc.dump(2) + "\n";
}

absl::StatusOr<ShardedSafetensors> OpenShardedSafetensors(const std::string& path) {
  std::string file =
      std::filesystem::is_directory(path) ? (std::filesystem::path(path) / kIndexFileName).string() : path;
  ASSIGN_OR_RETURN(std::string text, ReadFileBounded(file, kMaxIndexBytes, "safetensors index"));
  absl::StatusOr<SafetensorsIndex> index = ParseSafetensorsIndex(text);
  if (!index.ok())
    return absl::InvalidArgumentError(fmt::format("{}: {}", file, std::string(index.status().message())));
  std::filesystem::path dir = std::filesystem::path(file).parent_path();
  ShardedSafetensors m{.dir = (dir.empty() ? std::filesystem::path(".") : dir).string(), .index = *std::move(index)};
  for (const std::string& shard : m.index.Shards()) {
    ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open((std::filesystem::path(m.dir) / shard).string()));
    m.shards.emplace(shard, std::move(f));
  }
  absl::Status checked = CheckAgainstShards(m);
  if (!checked.ok()) return absl::InvalidArgumentError(fmt::format("{}: {}", file, std::string(checked.message())));
  return m;
}

}  // namespace gpugeek::models
