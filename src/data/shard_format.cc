#include "data/shard_format.h"

#include <algorithm>
#include <set>
#include <string>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "archive/digest.h"
#include "common/json_parse.h"

namespace gpugeek::data {
namespace {

void PutU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetU64(std::string_view bytes) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[i]);
  return v;
}

constexpr std::string_view kRewrite = "; rewrite the dataset with gpugeek data shard";

absl::Status Bad(std::string_view field, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("index.json: {}: {}{}", field, what, kRewrite));
}

// The unsigned integer at j[key], or InvalidArgument naming `where`.key.
absl::StatusOr<uint64_t> U64Field(const nlohmann::json& j, const char* key, const std::string& where) {
  const std::string field = where.empty() ? key : fmt::format("{}.{}", where, key);
  auto it = j.find(key);
  if (it == j.end()) return Bad(field, "missing");
  if (!it->is_number_unsigned()) return Bad(field, fmt::format("{} is not a non-negative integer", it->dump()));
  return it->get<uint64_t>();
}

absl::StatusOr<std::string> StringField(const nlohmann::json& j, const char* key, const std::string& where) {
  const std::string field = where.empty() ? key : fmt::format("{}.{}", where, key);
  auto it = j.find(key);
  if (it == j.end()) return Bad(field, "missing");
  if (!it->is_string()) return Bad(field, fmt::format("{} is not a string", it->dump()));
  return it->get<std::string>();
}

absl::Status OnlyKeys(const nlohmann::json& j, const std::set<std::string>& keys, const std::string& where) {
  for (const auto& [key, value] : j.items()) {
    if (!keys.contains(key)) {
      return Bad(where.empty() ? key : fmt::format("{}.{}", where, key), "unknown key (a newer format?)");
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string ShardFileName(uint64_t shard) { return fmt::format("shard-{:05d}.bin", shard); }

std::string EncodeShardFooter(const std::vector<uint64_t>& record_sizes) {
  std::string out;
  out.reserve(8 * (record_sizes.size() + 1) + kShardTrailerBytes);
  uint64_t at = 0;
  PutU64(out, at);
  for (uint64_t size : record_sizes) PutU64(out, at += size);
  PutU64(out, record_sizes.size());
  out += kShardMagic;
  return out;
}

absl::StatusOr<uint64_t> DecodeShardTrailer(std::string_view trailer, uint64_t file_bytes, std::string_view file) {
  if (trailer.size() != kShardTrailerBytes || file_bytes < kShardTrailerBytes) {
    return absl::DataLossError(
        fmt::format("{}: {} bytes, too short for a shard (truncated?){}", file, file_bytes, kRewrite));
  }
  if (trailer.substr(8) != kShardMagic) {
    return absl::DataLossError(fmt::format("{}: no {} trailer: not a gpugeek shard, or truncated, or a newer version{}",
                                           file, kShardMagic, kRewrite));
  }
  const uint64_t n = GetU64(trailer.substr(0, 8));
  // n + 1 offsets must fit before the trailer; written so that a huge n cannot overflow.
  if (n >= (file_bytes - kShardTrailerBytes) / 8) {
    return absl::DataLossError(
        fmt::format("{}: the trailer counts {} records, more than a {}-byte file can hold "
                    "(truncated or corrupt){}",
                    file, n, file_bytes, kRewrite));
  }
  return n;
}

absl::StatusOr<std::vector<uint64_t>> ParseShardFile(std::string_view bytes, std::string_view file) {
  const std::string_view trailer =
      bytes.size() >= kShardTrailerBytes ? bytes.substr(bytes.size() - kShardTrailerBytes) : bytes;
  absl::StatusOr<uint64_t> n = DecodeShardTrailer(trailer, bytes.size(), file);
  if (!n.ok()) return n.status();
  const uint64_t offsets_at = bytes.size() - kShardTrailerBytes - 8 * (*n + 1);
  std::vector<uint64_t> offsets(*n + 1);
  for (uint64_t i = 0; i <= *n; ++i) offsets[i] = GetU64(bytes.substr(offsets_at + 8 * i, 8));
  if (offsets[0] != 0 || offsets[*n] != offsets_at) {
    return absl::DataLossError(fmt::format("{}: the record offsets run from {} to {}, expected 0 to {} (corrupt){}",
                                           file, offsets[0], offsets[*n], offsets_at, kRewrite));
  }
  for (uint64_t i = 0; i < *n; ++i) {
    if (offsets[i] > offsets[i + 1]) {
      return absl::DataLossError(fmt::format("{}: record {} ends at {}, before it starts at {} (corrupt){}", file, i,
                                             offsets[i + 1], offsets[i], kRewrite));
    }
  }
  return offsets;
}

std::vector<uint64_t> ShardIndex::RecordCounts() const {
  std::vector<uint64_t> counts;
  counts.reserve(shards.size());
  for (const ShardInfo& s : shards) counts.push_back(s.records);
  return counts;
}

size_t ShardIndex::ShardOf(uint64_t record) const {
  auto it = std::upper_bound(shards.begin(), shards.end(), record,
                             [](uint64_t r, const ShardInfo& s) { return r < s.first_record; });
  return static_cast<size_t>(it - shards.begin()) - 1;
}

std::string EncodeShardIndex(const ShardIndex& index) {
  nlohmann::json shards = nlohmann::json::array();
  for (const ShardInfo& s : index.shards) {
    shards.push_back({{"file", s.file},
                      {"bytes", s.bytes},
                      {"records", s.records},
                      {"first_record", s.first_record},
                      {"sha256", s.sha256}});
  }
  const nlohmann::json j = {{"format", kShardIndexFormat},          {"version", kShardIndexVersion},
                            {"total_records", index.total_records}, {"total_bytes", index.total_bytes},
                            {"shard_bytes", index.shard_bytes},     {"shards", shards}};
  return j.dump(1) + "\n";
}

absl::StatusOr<ShardIndex> ParseShardIndex(std::string_view text) {
  absl::StatusOr<nlohmann::json> parsed = ParseJsonBounded(text, {.max_bytes = size_t{64} << 20, .max_depth = 8});
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("index.json: {}{}", std::string(parsed.status().message()), kRewrite));
  }
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return Bad("(top level)", "not a JSON object");
  if (absl::Status st = OnlyKeys(j, {"format", "version", "total_records", "total_bytes", "shard_bytes", "shards"}, "");
      !st.ok()) {
    return st;
  }
  absl::StatusOr<std::string> format = StringField(j, "format", "");
  if (!format.ok()) return format.status();
  if (*format != kShardIndexFormat)
    return Bad("format", fmt::format("\"{}\", expected \"{}\"", *format, kShardIndexFormat));
  absl::StatusOr<uint64_t> version = U64Field(j, "version", "");
  if (!version.ok()) return version.status();
  if (*version != kShardIndexVersion) {
    return Bad("version", fmt::format("{}, this gpugeek reads version {}", *version, kShardIndexVersion));
  }
  ShardIndex index;
  for (auto [key, field] :
       {std::pair{"total_records", &index.total_records}, std::pair{"total_bytes", &index.total_bytes},
        std::pair{"shard_bytes", &index.shard_bytes}}) {
    absl::StatusOr<uint64_t> v = U64Field(j, key, "");
    if (!v.ok()) return v.status();
    *field = *v;
  }
  if (index.shard_bytes < kMinShardBytes) {
    return Bad("shard_bytes", fmt::format("{}, below the minimum of {}", index.shard_bytes, kMinShardBytes));
  }
  auto shards = j.find("shards");
  if (shards == j.end()) return Bad("shards", "missing");
  if (!shards->is_array()) return Bad("shards", "not an array");
  uint64_t records = 0, bytes = 0;
  for (size_t i = 0; i < shards->size(); ++i) {
    const nlohmann::json& s = (*shards)[i];
    const std::string where = fmt::format("shards[{}]", i);
    if (!s.is_object()) return Bad(where, "not an object");
    if (absl::Status st = OnlyKeys(s, {"file", "bytes", "records", "first_record", "sha256"}, where); !st.ok()) {
      return st;
    }
    ShardInfo info;
    absl::StatusOr<std::string> file = StringField(s, "file", where);
    if (!file.ok()) return file.status();
    info.file = *file;
    if (info.file != ShardFileName(i)) {
      return Bad(where + ".file", fmt::format("\"{}\", expected \"{}\"", info.file, ShardFileName(i)));
    }
    for (auto [key, field] : {std::pair{"bytes", &info.bytes}, std::pair{"records", &info.records},
                              std::pair{"first_record", &info.first_record}}) {
      absl::StatusOr<uint64_t> v = U64Field(s, key, where);
      if (!v.ok()) return v.status();
      *field = *v;
    }
    if (info.records == 0) return Bad(where + ".records", "0; a shard holds at least one record");
    // The offsets of `records` records need 8 (records + 1) + 16 bytes; checked by division so that a
    // huge count cannot overflow.
    if (info.bytes < kShardTrailerBytes || (info.bytes - kShardTrailerBytes) / 8 <= info.records) {
      return Bad(where + ".bytes", fmt::format("{}, too small for the footer of {} records", info.bytes, info.records));
    }
    if (info.first_record != records) {
      return Bad(where + ".first_record",
                 fmt::format("{}, expected {} (the records of the shards before it)", info.first_record, records));
    }
    absl::StatusOr<std::string> sha = StringField(s, "sha256", where);
    if (!sha.ok()) return sha.status();
    if (!archive::IsSha256Hex(*sha)) return Bad(where + ".sha256", "not 64 lower-case hex digits");
    info.sha256 = *sha;
    if (info.records > UINT64_MAX - records || info.bytes > UINT64_MAX - bytes) {
      return Bad(where, "the totals overflow 64 bits");
    }
    records += info.records;
    bytes += info.bytes;
    index.shards.push_back(std::move(info));
  }
  if (index.total_records != records) {
    return Bad("total_records", fmt::format("{}, but the shards hold {}", index.total_records, records));
  }
  if (index.total_bytes != bytes) {
    return Bad("total_bytes", fmt::format("{}, but the shards' bytes add up to {}", index.total_bytes, bytes));
  }
  return index;
}

}  // namespace gpugeek::data
