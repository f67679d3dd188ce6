#include "data/version_objects.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "archive/digest.h"
#include "common/json_parse.h"
#include "common/utf8.h"

namespace gpugeek::data {
namespace {

using nlohmann::json;

absl::Status Bad(std::string_view where, std::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", where, what));
}

// The value at `key` of object `j` as T, or InvalidArgument naming `where`.`key`.
template <typename T>
absl::StatusOr<T> Field(const json& j, const char* key, std::string_view where) {
  auto it = j.find(key);
  if (it == j.end()) return Bad(where, fmt::format("missing field {:?}", std::string_view(key)));
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return Bad(where, fmt::format("field {:?} is not a string", std::string_view(key)));
    return it->get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) return Bad(where, fmt::format("field {:?} is not true or false", std::string_view(key)));
    return it->get<bool>();
  } else if constexpr (std::is_same_v<T, uint64_t>) {
    if (!it->is_number_unsigned())
      return Bad(where, fmt::format("field {:?} is not a whole number >= 0", std::string_view(key)));
    return it->get<uint64_t>();
  } else {
    static_assert(std::is_same_v<T, int64_t>);
    if (!it->is_number_integer())
      return Bad(where, fmt::format("field {:?} is not a whole number", std::string_view(key)));
    return it->get<int64_t>();
  }
}

absl::StatusOr<std::string> DigestField(const json& j, const char* key, std::string_view where) {
  absl::StatusOr<std::string> d = Field<std::string>(j, key, where);
  if (d.ok() && !archive::IsSha256Hex(*d))
    return Bad(where, fmt::format("field {:?} is not a SHA-256 digest", std::string_view(key)));
  return d;
}

absl::StatusOr<json> ParseObject(std::string_view bytes, uint64_t max_bytes, const char* type) {
  absl::StatusOr<json> j = ParseJsonBounded(bytes, JsonLimits{.max_bytes = max_bytes, .max_depth = 8});
  if (!j.ok()) return j.status();
  if (!j->is_object()) return Bad(type, "not a JSON object");
  auto t = j->find("type");
  if (t == j->end() || !t->is_string() || t->get<std::string>() != type) {
    return Bad(type, fmt::format("the object is not a {}", type));
  }
  return j;
}

}  // namespace

bool IsValidEntryName(std::string_view name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == std::string_view::npos && name.find('\0') == std::string_view::npos && IsUtf8(name);
}

bool IsInterruptedWrite(std::string_view file_name) {
  constexpr std::string_view kTmp = ".tmp.";
  constexpr size_t kHex = 16;  // crypto/durable_file.cc WriteTemp: 8 random bytes
  if (file_name.size() <= kTmp.size() + kHex) return false;
  const std::string_view tail = file_name.substr(file_name.size() - kHex);
  return file_name.substr(file_name.size() - kHex - kTmp.size(), kTmp.size()) == kTmp &&
         tail.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

absl::Status ValidateRefName(std::string_view name, std::string_view what) {
  if (IsInterruptedWrite(name)) {
    return absl::InvalidArgumentError(fmt::format(
        "{} name {:?} is reserved: a name ending in .tmp. and 16 hex digits is an interrupted write's; choose another",
        what, std::string(name)));
  }
  bool ok = !name.empty() && name.size() <= 64 && name[0] != '.' && name[0] != '-';
  for (char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
                c == '-');
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{} name {:?} is not valid: use 1 to 64 of A-Z a-z 0-9 . _ -, not starting with . or -", what,
                  std::string(name.substr(0, 80))));
}

std::string EncodeTree(const Tree& tree) {
  json entries = json::array();
  for (const TreeEntry& e : tree.entries) {
    json j = {{"name", e.name}, {"bytes", e.bytes}};
    if (e.is_dir) {
      j["tree"] = e.tree;
      j["files"] = e.files;
    } else {
      json chunks = json::array();
      for (const ChunkRef& c : e.chunks) chunks.push_back(json::array({c.digest, c.bytes}));
      j["chunks"] = std::move(chunks);
      j["executable"] = e.executable;
    }
    entries.push_back(std::move(j));
  }
  // Names are checked UTF-8 (IsValidEntryName); `replace` only keeps the encoder from ever throwing.
  return json{{"type", "tree"}, {"entries", std::move(entries)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string EncodeCommit(const Commit& c) {
  return json{{"type", "commit"},      {"tree", c.tree},       {"parents", c.parents},
              {"dataset", c.dataset},  {"message", c.message}, {"author", c.author},
              {"time", c.time_unix_s}, {"files", c.files},     {"bytes", c.bytes}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<Tree> DecodeTree(std::string_view bytes) {
  absl::StatusOr<json> j = ParseObject(bytes, kMaxTreeBytes, "tree");
  if (!j.ok()) return j.status();
  auto entries = j->find("entries");
  if (entries == j->end() || !entries->is_array()) return Bad("tree", "field \"entries\" is not an array");
  Tree tree;
  tree.entries.reserve(entries->size());
  for (size_t i = 0; i < entries->size(); ++i) {
    const json& je = (*entries)[i];
    const std::string where = fmt::format("tree entry {}", i);
    if (!je.is_object()) return Bad(where, "not an object");
    TreeEntry e;
    absl::StatusOr<std::string> name = Field<std::string>(je, "name", where);
    if (!name.ok()) return name.status();
    if (!IsValidEntryName(*name)) return Bad(where, "name is empty, too long, not UTF-8, or holds '/' or NUL");
    e.name = *name;
    if (!tree.entries.empty() && !(tree.entries.back().name < e.name)) {
      return Bad(where, fmt::format("name {:?} is out of order or repeated", e.name));
    }
    absl::StatusOr<uint64_t> size = Field<uint64_t>(je, "bytes", where);
    if (!size.ok()) return size.status();
    e.bytes = *size;
    if (je.contains("tree")) {
      e.is_dir = true;
      absl::StatusOr<std::string> sub = DigestField(je, "tree", where);
      absl::StatusOr<uint64_t> files = Field<uint64_t>(je, "files", where);
      if (!sub.ok()) return sub.status();
      if (!files.ok()) return files.status();
      e.tree = *sub;
      e.files = *files;
    } else {
      absl::StatusOr<bool> exec = Field<bool>(je, "executable", where);
      if (!exec.ok()) return exec.status();
      e.executable = *exec;
      auto chunks = je.find("chunks");
      if (chunks == je.end() || !chunks->is_array()) return Bad(where, "field \"chunks\" is not an array");
      uint64_t total = 0;
      for (const json& jc : *chunks) {
        if (!jc.is_array() || jc.size() != 2 || !jc[0].is_string() || !jc[1].is_number_unsigned() ||
            !archive::IsSha256Hex(jc[0].get<std::string>())) {
          return Bad(where, "a chunk is not [\"<sha256>\", bytes]");
        }
        ChunkRef c{jc[0].get<std::string>(), jc[1].get<uint64_t>()};
        if (c.bytes == 0 || c.bytes > (uint64_t{1} << 30)) return Bad(where, "a chunk's size is 0 or over 1 GiB");
        total += c.bytes;
        e.chunks.push_back(std::move(c));
      }
      if (total != e.bytes) {
        return Bad(where, fmt::format("chunks hold {} bytes but the file has {}", total, e.bytes));
      }
    }
    tree.entries.push_back(std::move(e));
  }
  return tree;
}

absl::StatusOr<Commit> DecodeCommit(std::string_view bytes) {
  absl::StatusOr<json> j = ParseObject(bytes, kMaxCommitBytes, "commit");
  if (!j.ok()) return j.status();
  Commit c;
  absl::StatusOr<std::string> tree = DigestField(*j, "tree", "commit");
  if (!tree.ok()) return tree.status();
  c.tree = *tree;
  auto parents = j->find("parents");
  if (parents == j->end() || !parents->is_array() || parents->size() > 16) {
    return Bad("commit", "field \"parents\" is not an array of at most 16 digests");
  }
  for (const json& p : *parents) {
    if (!p.is_string() || !archive::IsSha256Hex(p.get<std::string>())) {
      return Bad("commit", "a parent is not a SHA-256 digest");
    }
    c.parents.push_back(p.get<std::string>());
  }
  absl::StatusOr<std::string> dataset = Field<std::string>(*j, "dataset", "commit");
  absl::StatusOr<std::string> message = Field<std::string>(*j, "message", "commit");
  absl::StatusOr<std::string> author = Field<std::string>(*j, "author", "commit");
  absl::StatusOr<int64_t> time = Field<int64_t>(*j, "time", "commit");
  absl::StatusOr<uint64_t> files = Field<uint64_t>(*j, "files", "commit");
  absl::StatusOr<uint64_t> size = Field<uint64_t>(*j, "bytes", "commit");
  for (const absl::Status& s :
       {dataset.status(), message.status(), author.status(), time.status(), files.status(), size.status()}) {
    if (!s.ok()) return s;
  }
  if (absl::Status s = ValidateRefName(*dataset, "dataset"); !s.ok()) return s;
  c.dataset = *dataset;
  c.message = *message;
  c.author = *author;
  c.time_unix_s = *time;
  c.files = *files;
  c.bytes = *size;
  return c;
}

}  // namespace gpugeek::data
