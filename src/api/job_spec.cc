#include "api/job_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <map>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/core.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"

#include "common/absl_fmt.h"

#include "api/bounded_yaml.h"
#include "api/engines.h"
#include "api/image_ref.h"
#include "api/quantity.h"
#include "common/file.h"
#include "common/quote.h"
#include "common/status_macros.h"

namespace gpugeek::api {
namespace {

constexpr int kMaxNodes = 1024;
constexpr int kMaxGpusPerNode = 64;
constexpr int kMaxPriority = 1000;

absl::Status FieldError(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(fmt::format("{}: {}", path, what));
}

std::string KindName(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "a scalar";
    default:
      return "empty";
  }
}

absl::Status CheckKeys(const YAML::Node& map, const std::string& path,
                       std::initializer_list<std::string_view> allowed) {
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) return FieldError(path, "keys must be plain strings");
    const std::string& key = kv.first.Scalar();
    bool known = false;
    for (auto a : allowed) known |= (a == key);
    if (!known) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      return FieldError(path.empty() ? key : path + "." + key, fmt::format("unknown field; allowed here: {}", list));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Scalar(const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) return FieldError(path, fmt::format("must be a single value, not {}", KindName(n)));
  return n.Scalar();
}

absl::StatusOr<int64_t> Integer(const YAML::Node& n, const std::string& path, int64_t lo, int64_t hi) {
  ASSIGN_OR_RETURN(std::string s, Scalar(n, path));
  bool negative = !s.empty() && s[0] == '-';
  auto v = ParseCount(negative ? std::string_view(s).substr(1) : std::string_view(s));
  if (!v.ok()) return FieldError(path, v.status().message());
  const int64_t value = negative ? -*v : *v;
  if (value < lo || value > hi) return FieldError(path, fmt::format("= {} must be between {} and {}", value, lo, hi));
  return value;
}

absl::StatusOr<bool> Bool(const YAML::Node& n, const std::string& path) {
  ASSIGN_OR_RETURN(std::string s, Scalar(n, path));
  if (s == "true" || s == "yes") return true;
  if (s == "false" || s == "no") return false;
  return FieldError(path, fmt::format("= '{}' must be true or false", s));
}

absl::Status CheckName(const std::string& name) {
  auto alnum = [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c));
  };
  bool ok = !name.empty() && name.size() <= 63 && alnum(name.front()) && alnum(name.back());
  for (char c : name) ok = ok && (alnum(c) || c == '-');
  if (!ok) {
    return FieldError("name", fmt::format("= {} must be 1-63 lower-case letters, digits or '-', starting and ending "
                                          "with a letter or digit (e.g. llama2-70b-lora)",
                                          QuoteForMessage(name)));
  }
  return absl::OkStatus();
}

absl::StatusOr<TaskSpec> ParseTask(const YAML::Node& n) {
  if (!n.IsMap()) return FieldError("task", "must be a mapping like {kind: lora, seq_len: 4096}");
  RETURN_IF_ERROR(CheckKeys(n, "task", {"kind", "seq_len", "micro_batch", "global_batch", "tokens"}));
  TaskSpec t;
  if (!n["kind"]) return FieldError("task.kind", "is required: one of inference, lora, qlora, full, pretrain");
  ASSIGN_OR_RETURN(std::string kind, Scalar(n["kind"], "task.kind"));
  bool found = false;
  for (TaskKind k : {TaskKind::kInference, TaskKind::kLora, TaskKind::kQlora, TaskKind::kFull, TaskKind::kPretrain}) {
    if (kind == TaskKindName(k)) t.kind = k, found = true;
  }
  if (!found)
    return FieldError("task.kind", fmt::format("= '{}' must be one of inference, lora, qlora, full, pretrain", kind));
  if (n["seq_len"]) {
    ASSIGN_OR_RETURN(t.seq_len, Integer(n["seq_len"], "task.seq_len", 1, 10'000'000));
  }
  if (n["micro_batch"]) {
    ASSIGN_OR_RETURN(t.micro_batch, Integer(n["micro_batch"], "task.micro_batch", 1, 1'000'000));
  }
  if (n["global_batch"]) {
    ASSIGN_OR_RETURN(t.global_batch, Integer(n["global_batch"], "task.global_batch", 1, 100'000'000));
  }
  if (n["tokens"]) {
    ASSIGN_OR_RETURN(t.tokens, Integer(n["tokens"], "task.tokens", 1, int64_t{1} << 62));
  }
  return t;
}

absl::StatusOr<CapacityType> ParseCapacity(const std::string& s, const std::string& path) {
  for (CapacityType c : {CapacityType::kOnDemand, CapacityType::kSpot, CapacityType::kReserved}) {
    if (s == CapacityTypeName(c)) return c;
  }
  return FieldError(path, fmt::format("= '{}' must be one of on-demand, spot, reserved", s));
}

absl::StatusOr<Resources> ParseResources(const YAML::Node& n, const hw::GpuCatalog& catalog) {
  if (!n.IsMap()) return FieldError("resources", "must be a mapping");
  RETURN_IF_ERROR(
      CheckKeys(n, "resources",
                {"accelerators", "spot", "capacity", "cpus", "memory", "regions", "span_regions", "data_region"}));
  Resources r;
  if (const YAML::Node acc = n["accelerators"]) {
    std::vector<std::pair<YAML::Node, std::string>> items;
    if (acc.IsScalar()) {
      items.emplace_back(acc, "resources.accelerators");
    } else if (acc.IsSequence() && acc.size() > 0) {
      for (size_t i = 0; i < acc.size(); ++i) items.emplace_back(acc[i], fmt::format("resources.accelerators[{}]", i));
    } else {
      return FieldError("resources.accelerators", "must be 'MODEL:COUNT' or a non-empty list of them");
    }
    for (const auto& [item, path] : items) {
      ASSIGN_OR_RETURN(std::string text, Scalar(item, path));
      auto req = ParseAcceleratorRequest(text, catalog);
      if (!req.ok()) return FieldError(path, req.status().message());
      r.any_of.push_back(*req);
    }
  }
  if (n["spot"]) {
    ASSIGN_OR_RETURN(bool spot, Bool(n["spot"], "resources.spot"));
    r.capacity = {spot ? CapacityType::kSpot : CapacityType::kOnDemand};
  }
  if (const YAML::Node cap = n["capacity"]) {
    std::vector<CapacityType> types;
    if (cap.IsSequence()) {
      if (cap.size() == 0 || cap.size() > 3) {
        return FieldError("resources.capacity", "a preference list names 1 to 3 of spot, on-demand, reserved");
      }
      for (size_t i = 0; i < cap.size(); ++i) {
        const std::string path = fmt::format("resources.capacity[{}]", i);
        ASSIGN_OR_RETURN(std::string s, Scalar(cap[i], path));
        ASSIGN_OR_RETURN(CapacityType c, ParseCapacity(s, path));
        if (std::find(types.begin(), types.end(), c) != types.end()) {
          return FieldError(path, fmt::format("{} is listed twice; list each type once, most preferred first", s));
        }
        types.push_back(c);
      }
    } else {
      ASSIGN_OR_RETURN(std::string s, Scalar(cap, "resources.capacity"));
      ASSIGN_OR_RETURN(CapacityType c, ParseCapacity(s, "resources.capacity"));
      types = {c};
    }
    if (!r.capacity.empty() && r.capacity != types) {
      return FieldError("resources.capacity", "contradicts resources.spot; give only one of them");
    }
    r.capacity = std::move(types);
  }
  if (n["cpus"]) {
    ASSIGN_OR_RETURN(std::string s, Scalar(n["cpus"], "resources.cpus"));
    auto v = ParseMilliCpu(s);
    if (!v.ok()) return FieldError("resources.cpus", v.status().message());
    r.cpu_milli = *v;
  }
  if (n["memory"]) {
    ASSIGN_OR_RETURN(std::string s, Scalar(n["memory"], "resources.memory"));
    auto v = ParseBytes(s);
    if (!v.ok()) return FieldError("resources.memory", v.status().message());
    r.memory_bytes = *v;
  }
  if (const YAML::Node regions = n["regions"]) {
    if (!regions.IsSequence()) return FieldError("resources.regions", "must be a list like [us-east-1]");
    for (size_t i = 0; i < regions.size(); ++i) {
      ASSIGN_OR_RETURN(std::string region, Scalar(regions[i], fmt::format("resources.regions[{}]", i)));
      if (region.empty()) {
        return FieldError(fmt::format("resources.regions[{}]", i), "is empty: name a region, e.g. us-east-1");
      }
      r.regions.push_back(region);
    }
  }
  if (n["span_regions"]) {
    ASSIGN_OR_RETURN(r.span_regions, Bool(n["span_regions"], "resources.span_regions"));
  }
  if (n["data_region"]) {
    ASSIGN_OR_RETURN(r.data_region, Scalar(n["data_region"], "resources.data_region"));
    if (r.data_region.empty()) {
      return FieldError("resources.data_region", "is empty: name the region of the job's data, e.g. us-east-1");
    }
  }
  return r;
}

bool IsSha256Hex(std::string_view d) {
  return d.size() == 64 &&
         std::all_of(d.begin(), d.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// `NAME[@REV]` -> (NAME, REV), REV "main" when not given, for `field` (dataset:, weights:) whose values look
// like `example`. The rules are data/version_store.h's: names 1..64 of [A-Za-z0-9._-] not starting with '.'
// or '-'; a revision adds '~' (main~2).
bool ValidRefText(const std::string& s, std::string_view extra) {
  if (s.empty() || s.size() > 80 || s[0] == '.' || s[0] == '-') return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        extra.find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

absl::StatusOr<std::pair<std::string, std::string>> ParseVersionRef(const std::string& text, const std::string& field,
                                                                    const std::string& noun,
                                                                    const std::string& name_example,
                                                                    const std::string& rev_example) {
  const size_t at = text.find('@');
  std::string name = text.substr(0, at);
  std::string rev = at == std::string::npos ? std::string("main") : text.substr(at + 1);
  if (!ValidRefText(name, "") || name.size() > 64) {
    return FieldError(field, fmt::format("'{}': the {} name must be 1-64 of A-Z a-z 0-9 . _ - (not starting "
                                         "with '.' or '-'), as in {}: {}",
                                         text.substr(0, 100), noun, field, name_example));
  }
  if (!ValidRefText(rev, "~")) {
    return FieldError(field, fmt::format("'{}': after '@' comes a branch, tag or commit digest (optionally ~N), "
                                         "as in {}: {}",
                                         text.substr(0, 100), field, rev_example));
  }
  return std::make_pair(std::move(name), std::move(rev));
}

absl::StatusOr<CheckpointSpec> ParseCheckpoint(const YAML::Node& n) {
  if (!n.IsMap()) return FieldError("checkpoint", "must be a mapping like {dir: /ckpt/run1, grace: 30s}");
  RETURN_IF_ERROR(CheckKeys(n, "checkpoint", {"dir", "grace"}));
  CheckpointSpec c;
  if (n["dir"]) {
    ASSIGN_OR_RETURN(c.dir, Scalar(n["dir"], "checkpoint.dir"));
  }
  if (n["grace"]) {
    ASSIGN_OR_RETURN(std::string s, Scalar(n["grace"], "checkpoint.grace"));
    auto d = ParseDuration(s);
    if (!d.ok()) return FieldError("checkpoint.grace", d.status().message());
    if (*d > std::chrono::hours(1)) return FieldError("checkpoint.grace", "must be at most 1h");
    c.grace = *d;
  }
  return c;
}

// `backoff: 10s..10m` (exponential between the two) or `backoff: 30s` (fixed).
absl::Status ParseBackoff(const std::string& text, RetrySpec& r) {
  const size_t dots = text.find("..");
  const std::string lo = dots == std::string::npos ? text : text.substr(0, dots);
  const std::string hi = dots == std::string::npos ? text : text.substr(dots + 2);
  auto min = ParseDuration(lo);
  auto max = ParseDuration(hi);
  if (!min.ok() || !max.ok()) {
    return FieldError("retry.backoff", "must be a duration like 30s, or a range like 10s..10m (doubling per retry)");
  }
  if (*min < Duration::zero() || *max < *min || *max > std::chrono::hours(24)) {
    return FieldError("retry.backoff", "needs 0 <= first <= second <= 24h, as in 10s..10m");
  }
  r.backoff_min = *min;
  r.backoff_max = *max;
  return absl::OkStatus();
}

absl::StatusOr<RetrySpec> ParseRetry(const YAML::Node& n) {
  if (!n.IsMap()) return FieldError("retry", "must be a mapping like {on: [error, node-failure], limit: 3}");
  RETURN_IF_ERROR(CheckKeys(n, "retry", {"on", "limit", "backoff"}));
  RetrySpec r;
  if (!n["on"]) return FieldError("retry.on", "is required: a list of causes among error, node-failure, preemption");
  const YAML::Node on = n["on"];
  if (!on.IsSequence() || on.size() == 0 || on.size() > 3) {
    return FieldError("retry.on", "must be a list of one to three causes among error, node-failure, preemption");
  }
  std::set<RetryCause> causes;
  for (size_t i = 0; i < on.size(); ++i) {
    const std::string field = fmt::format("retry.on[{}]", i);
    ASSIGN_OR_RETURN(const std::string name, Scalar(on[i], field));
    bool found = false;
    for (RetryCause c : kRetryCauses) {
      if (name == RetryCauseName(c)) causes.insert(c), found = true;
    }
    if (!found)
      return FieldError(field, fmt::format("'{}' is not a cause: use error, node-failure or preemption", name));
  }
  for (RetryCause c : kRetryCauses) {
    if (causes.contains(c)) r.on.push_back(c);
  }
  if (n["limit"]) {
    ASSIGN_OR_RETURN(int64_t limit, Integer(n["limit"], "retry.limit", 1, 1000));
    r.limit = static_cast<int>(limit);
  }
  if (n["backoff"]) {
    ASSIGN_OR_RETURN(const std::string backoff, Scalar(n["backoff"], "retry.backoff"));
    RETURN_IF_ERROR(ParseBackoff(backoff, r));
  }
  return r;
}

absl::StatusOr<JobSpec> ParseDocument(const YAML::Node& doc, const hw::GpuCatalog& catalog) {
  if (!doc.IsMap()) return FieldError("(document)", "a job spec must be a YAML mapping with at least name and run");
  RETURN_IF_ERROR(CheckKeys(
      doc, "",
      {"name",    "model",        "task",           "resources",      "num_nodes",          "priority", "checkpoint",
       "env",     "workdir",      "workdir_digest", "files",          "file_archives",      "setup",    "run",
       "retry",   "max_duration", "idle_timeout",   "launcher",       "procs_per_node",     "image",    "engine",
       "elastic", "dataset",      "weights",        "weights_signer", "weights_signer_pem", "max_cost", "max_price"}));
  JobSpec spec;
  if (!doc["name"]) return FieldError("name", "is required");
  ASSIGN_OR_RETURN(spec.name, Scalar(doc["name"], "name"));
  RETURN_IF_ERROR(CheckName(spec.name));
  if (!doc["run"]) return FieldError("run", "is required: the command to run on every node");
  ASSIGN_OR_RETURN(spec.run, Scalar(doc["run"], "run"));
  if (spec.run.find_first_not_of(" \t\n") == std::string::npos) return FieldError("run", "must not be empty");
  if (doc["model"]) {
    ASSIGN_OR_RETURN(spec.model, Scalar(doc["model"], "model"));
  }
  if (doc["workdir"]) {
    ASSIGN_OR_RETURN(spec.workdir, Scalar(doc["workdir"], "workdir"));
    if (spec.workdir.empty()) return FieldError("workdir", "must be a folder path (e.g. workdir: .)");
  }
  if (doc["workdir_digest"]) {
    ASSIGN_OR_RETURN(spec.workdir_digest, Scalar(doc["workdir_digest"], "workdir_digest"));
    if (!IsSha256Hex(spec.workdir_digest)) {
      return FieldError("workdir_digest",
                        "must be the workdir archive's SHA-256, 64 lower-case hex digits (gpugeek submit sets it)");
    }
  }
  if (doc["dataset"]) {
    ASSIGN_OR_RETURN(const std::string text, Scalar(doc["dataset"], "dataset"));
    ASSIGN_OR_RETURN(std::tie(spec.dataset, spec.dataset_rev),
                     ParseVersionRef(text, "dataset", "dataset", "corpus@main", "corpus@v2"));
  }
  if (doc["weights"]) {
    ASSIGN_OR_RETURN(const std::string text, Scalar(doc["weights"], "weights"));
    ASSIGN_OR_RETURN(ModelRef ref, ParseModelRef(text, "weights"));
    spec.weights_owner = std::move(ref.owner);
    spec.weights = std::move(ref.name);
    spec.weights_rev = std::move(ref.rev);
  }
  if (doc["weights_signer"]) {
    ASSIGN_OR_RETURN(spec.weights_signer, Scalar(doc["weights_signer"], "weights_signer"));
    if (spec.weights_signer.empty()) return FieldError("weights_signer", "must name a public key file (PEM)");
  }
  if (doc["weights_signer_pem"]) {
    ASSIGN_OR_RETURN(spec.weights_signer_pem, Scalar(doc["weights_signer_pem"], "weights_signer_pem"));
    if (spec.weights_signer_pem.size() > kMaxSignerPemBytes ||
        spec.weights_signer_pem.find("-----BEGIN PUBLIC KEY-----") == std::string::npos) {
      return FieldError("weights_signer_pem",
                        fmt::format("must be a public key in PEM (-----BEGIN PUBLIC KEY-----), at most {} bytes",
                                    kMaxSignerPemBytes));
    }
  }
  if ((!spec.weights_signer.empty() || !spec.weights_signer_pem.empty()) && spec.weights.empty()) {
    return FieldError("weights_signer", "verifies the model `weights:` names; add weights: or leave it out");
  }
  if (!spec.weights_signer.empty() && !spec.weights_signer_pem.empty()) {
    return FieldError("weights_signer", "give the key file or its PEM (weights_signer_pem), not both");
  }
  if (const YAML::Node files = doc["files"]) {
    if (!files.IsMap() || files.size() == 0 || files.size() > kMaxFiles) {
      return FieldError(
          "files", fmt::format("must be a mapping of 1 to {} entries, DEST: SRC (e.g. data: ../corpus)", kMaxFiles));
    }
    for (const auto& kv : files) {
      ASSIGN_OR_RETURN(std::string dest, Scalar(kv.first, "files"));
      const std::string field = "files." + dest.substr(0, 200);
      if (!IsSafeRelativePath(dest)) {
        return FieldError(field,
                          "the destination must be a path inside the working folder, like data/train.bin "
                          "(relative, no '..' or empty parts)");
      }
      ASSIGN_OR_RETURN(std::string src, Scalar(kv.second, field));
      if (src.empty()) return FieldError(field, "must name a file, folder or archive on this machine");
      spec.files[dest] = std::move(src);
    }
  }
  if (const YAML::Node archives = doc["file_archives"]) {
    if (!archives.IsSequence() || archives.size() > kMaxFiles) {
      return FieldError("file_archives", fmt::format("must be a list of at most {} {{path, digest}}", kMaxFiles));
    }
    for (size_t i = 0; i < archives.size(); ++i) {
      const std::string field = fmt::format("file_archives[{}]", i);
      if (!archives[i].IsMap()) return FieldError(field, "must be a mapping {path: data, digest: <sha-256>}");
      RETURN_IF_ERROR(CheckKeys(archives[i], field, {"path", "digest"}));
      FileArchive f;
      if (archives[i]["path"]) {
        ASSIGN_OR_RETURN(f.path, Scalar(archives[i]["path"], field + ".path"));
      }
      if (!f.path.empty() && !IsSafeRelativePath(f.path)) {
        return FieldError(field + ".path", "must be a folder inside the working folder (relative, no '..'), or empty");
      }
      if (!archives[i]["digest"]) return FieldError(field + ".digest", "is required");
      ASSIGN_OR_RETURN(f.digest, Scalar(archives[i]["digest"], field + ".digest"));
      if (!IsSha256Hex(f.digest)) {
        return FieldError(field + ".digest", "must be an uploaded archive's SHA-256, 64 lower-case hex digits");
      }
      spec.file_archives.push_back(std::move(f));
    }
  }
  if (doc["setup"]) {
    ASSIGN_OR_RETURN(spec.setup, Scalar(doc["setup"], "setup"));
    if (spec.setup.find_first_not_of(" \t\n") == std::string::npos) {
      return FieldError("setup", "must not be empty: leave the field out when there is nothing to set up");
    }
  }
  if (doc["image"]) {
    ASSIGN_OR_RETURN(const std::string image, Scalar(doc["image"], "image"));
    ASSIGN_OR_RETURN(spec.image, CanonicalImageRef("image", image));
  }
  if (doc["engine"]) {
    ASSIGN_OR_RETURN(const std::string engine, Scalar(doc["engine"], "engine"));
    ASSIGN_OR_RETURN(spec.engine, ParseEngineFormat("engine", engine));
  }
  if (doc["task"]) {
    ASSIGN_OR_RETURN(spec.task, ParseTask(doc["task"]));
  }
  if (doc["resources"]) {
    ASSIGN_OR_RETURN(spec.resources, ParseResources(doc["resources"], catalog));
  }
  if (doc["num_nodes"]) {
    ASSIGN_OR_RETURN(int64_t n, Integer(doc["num_nodes"], "num_nodes", 1, kMaxNodes));
    spec.num_nodes = static_cast<int>(n);
  }
  if (doc["priority"]) {
    ASSIGN_OR_RETURN(int64_t p, Integer(doc["priority"], "priority", -kMaxPriority, kMaxPriority));
    spec.priority = static_cast<int>(p);
  }
  if (doc["checkpoint"]) {
    ASSIGN_OR_RETURN(spec.checkpoint, ParseCheckpoint(doc["checkpoint"]));
  }
  if (doc["retry"]) {
    ASSIGN_OR_RETURN(spec.retry, ParseRetry(doc["retry"]));
  }
  if (doc["max_duration"]) {
    ASSIGN_OR_RETURN(const std::string text, Scalar(doc["max_duration"], "max_duration"));
    auto d = ParseDuration(text);
    if (!d.ok()) return FieldError("max_duration", "must be a duration like 90m or 2h");
    if (*d < std::chrono::seconds(1) || *d > std::chrono::hours(24 * 365)) {
      return FieldError("max_duration", "must be between 1s and 365 days");
    }
    spec.max_duration = *d;
  }
  for (const auto& [key, field] :
       {std::pair{"max_cost", &spec.max_cost_micros}, std::pair{"max_price", &spec.max_price_micros}}) {
    if (!doc[key]) continue;
    ASSIGN_OR_RETURN(const std::string text, Scalar(doc[key], key));
    absl::StatusOr<int64_t> micros = ParseMoneyMicros(text);
    if (!micros.ok() || *micros == 0 || *micros > 1'000'000'000'000'000) {
      return FieldError(key, "must be an amount of the pool's currency above 0, with up to six decimals, e.g. 5.00");
    }
    *field = *micros;
  }
  if (doc["idle_timeout"]) {
    ASSIGN_OR_RETURN(const std::string text, Scalar(doc["idle_timeout"], "idle_timeout"));
    auto d = ParseDuration(text);
    if (!d.ok()) return FieldError("idle_timeout", "must be a duration like 30m or 1h");
    if (*d < std::chrono::seconds(1) || *d > std::chrono::hours(24 * 365)) {
      return FieldError("idle_timeout", "must be between 1s and 365 days");
    }
    spec.idle_timeout = *d;
  }
  if (doc["launcher"]) {
    ASSIGN_OR_RETURN(spec.launcher, Scalar(doc["launcher"], "launcher"));
    if (spec.launcher != "torch") {
      return FieldError("launcher", "must be torch (one process per GPU with the env:// variables), or absent");
    }
  }
  if (doc["procs_per_node"]) {
    if (spec.launcher.empty()) return FieldError("procs_per_node", "needs a launcher: add launcher: torch");
    ASSIGN_OR_RETURN(int64_t n, Integer(doc["procs_per_node"], "procs_per_node", 1, 64));
    spec.procs_per_node = static_cast<int>(n);
  }
  if (const YAML::Node env = doc["env"]) {
    if (!env.IsMap()) return FieldError("env", "must be a mapping of NAME: value");
    for (const auto& kv : env) {
      ASSIGN_OR_RETURN(std::string key, Scalar(kv.first, "env"));
      RETURN_IF_ERROR(CheckJobEnvName(key));
      if (kv.second.IsMap()) {
        // A secret reference: exactly {secret: NAME}.
        const std::string field = "env." + key;
        if (kv.second.size() != 1 || !kv.second["secret"]) {
          return FieldError(field, "must be a value or {secret: NAME}, the name of one of your tenant's secrets");
        }
        ASSIGN_OR_RETURN(std::string name, Scalar(kv.second["secret"], field + ".secret"));
        RETURN_IF_ERROR(ValidateSecretName(field + ".secret", name));
        spec.secret_env[key] = std::move(name);
        continue;
      }
      ASSIGN_OR_RETURN(spec.env[key], Scalar(kv.second, "env." + key));
    }
  }
  const bool planned = !spec.model.empty() && spec.task.has_value();
  if (const YAML::Node elastic = doc["elastic"]) {
    if (!elastic.IsMap()) return FieldError("elastic", "must be a mapping: elastic: {min_nodes: N}");
    RETURN_IF_ERROR(CheckKeys(elastic, "elastic", {"min_nodes"}));
    if (!elastic["min_nodes"]) return FieldError("elastic.min_nodes", "is required: the fewest nodes the job runs on");
    ASSIGN_OR_RETURN(int64_t min_nodes, Integer(elastic["min_nodes"], "elastic.min_nodes", 1, kMaxNodes));
    // A planned job's gang size comes from the plan: min_nodes is checked against it when nodes are lost.
    if (!planned && spec.num_nodes < 2) {
      return FieldError("elastic", "needs num_nodes >= 2: a one-node job has no survivors to keep");
    }
    if (!planned && min_nodes > spec.num_nodes) {
      return FieldError("elastic.min_nodes", fmt::format("must be at most num_nodes ({})", spec.num_nodes));
    }
    spec.elastic = ElasticSpec{.min_nodes = static_cast<int>(min_nodes)};
  }
  if (spec.resources.any_of.empty() && !planned) {
    return FieldError("resources.accelerators",
                      "is required unless both model and task are given (then the planner chooses the GPUs)");
  }
  if (spec.task && spec.model.empty()) return FieldError("model", "is required when task is given");
  return spec;
}

void EmitScalarOrQuoted(YAML::Emitter& out, const std::string& s) { out << YAML::DoubleQuoted << s; }

}  // namespace

absl::StatusOr<ModelRef> ParseModelRef(const std::string& text, const std::string& field) {
  ModelRef ref;
  std::string rest = text;
  const size_t slash = text.find('/');
  if (slash != std::string::npos && slash < text.find('@')) {
    ref.owner = text.substr(0, slash);
    rest = text.substr(slash + 1);
    if (!ValidRefText(ref.owner, "") || ref.owner.size() > 64) {
      return FieldError(field, fmt::format("'{}': before '/' comes the tenant that owns the model, as in {}: "
                                           "team-a/llama-ft@v1",
                                           text.substr(0, 100), field));
    }
  }
  ASSIGN_OR_RETURN(std::tie(ref.name, ref.rev),
                   ParseVersionRef(rest, field, "model", "team-a/llama-ft@v1", "team-a/llama-ft@v1"));
  return ref;
}

std::string_view TaskKindName(TaskKind k) {
  switch (k) {
    case TaskKind::kInference:
      return "inference";
    case TaskKind::kLora:
      return "lora";
    case TaskKind::kQlora:
      return "qlora";
    case TaskKind::kFull:
      return "full";
    case TaskKind::kPretrain:
      return "pretrain";
  }
  return "inference";
}

std::string_view RetryCauseName(RetryCause c) {
  switch (c) {
    case RetryCause::kError:
      return "error";
    case RetryCause::kNodeFailure:
      return "node-failure";
    case RetryCause::kPreemption:
      return "preemption";
  }
  return "error";
}

std::string_view CapacityTypeName(CapacityType c) {
  switch (c) {
    case CapacityType::kOnDemand:
      return "on-demand";
    case CapacityType::kSpot:
      return "spot";
    case CapacityType::kReserved:
      return "reserved";
  }
  return "on-demand";
}

absl::Status CheckJobEnvName(std::string_view name) {
  const std::string path =
      "env." + (name.size() <= 64 ? EscapeForMessage(name) : EscapeForMessage(name.substr(0, 64)) + "...");
  bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!ok) return FieldError(path, "names must be letters, digits and '_', not starting with a digit");
  // Each entry: what reads the variable, and why a job spec must not choose it. The spec's env reaches
  // every process of the job from the first one on, and the first ones are gpugeek's: the launcher shell
  // (`/bin/sh -c RUN`) and whatever the platform runs before the user's command. Variables that make the
  // dynamic loader, libc or the shell load code or files of the spec's choosing in those processes are
  // refused; `run` can still export them for the user's own programs, after the launcher has started.
  // Refused:
  //   LD_*            glibc's dynamic loader: LD_PRELOAD / LD_AUDIT load any shared object into every
  //                   dynamically linked program, LD_LIBRARY_PATH redirects every library lookup, LD_DEBUG_OUTPUT
  //                   writes files. All of them, as the loader adds more over time.
  //   GLIBC_TUNABLES  parsed by the loader itself before main (CVE-2023-4911 overflowed its parser).
  //   GCONV_PATH      iconv loads shared objects from it (the pkexec escape, CVE-2021-4034).
  //   NLSPATH, LOCPATH  libc loads message catalogs and locale data from there into every program. glibc
  //                   drops all of the above for setuid programs for the same reason (unsecvars.h).
  //   DYLD_*          macOS's loader hooks: meaningless on Linux, refused so a spec means the same anywhere.
  //   BASH_ENV, ENV   a non-interactive bash (BASH_ENV) or an interactive POSIX sh (ENV) runs that file
  //                   before its command: code in the launcher shell.
  //   IFS             changes how the launcher shell splits words, so `run` would not mean what it says.
  //   GPUGEEK_*       set by gpugeek (job id, rank, world size, rendezvous, checkpoint dir).
  //   CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER, HIP_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES
  //                   set by gpugeek from the allocation: a spec could otherwise reach GPUs it was not given.
  //   HOME            set by gpugeek to the job's own working directory, owned by the job's user.
  // Allowed on purpose:
  //   PYTHONPATH, PYTHON*  read only by Python, which gpugeek never runs on the job's behalf; ML code needs
  //                   PYTHONPATH, PYTHONUNBUFFERED, PYTHONHASHSEED. (PYTHONSTARTUP is read only by an
  //                   interactive interpreter, and the job has no terminal.)
  //   MALLOC_*        glibc malloc settings read inside the process they tune; they load no code, and
  //                   MALLOC_ARENA_MAX is a common memory setting for Python data loaders.
  //   PATH            the job picks its own programs; the launcher itself is started by absolute path.
  const auto refuse = [&](std::string_view why, std::string_view fix) {
    return FieldError(path, fmt::format("{}, so a job spec cannot set it; {}", why, fix));
  };
  constexpr std::string_view kExportInRun =
      "if your program needs it, export it in run (run: export NAME=value; python train.py), which reaches your "
      "own programs only";
  if (name.starts_with("LD_")) {
    return refuse("LD_* variables steer the dynamic loader of every program of the job, gpugeek's launcher included",
                  kExportInRun);
  }
  if (name == "GLIBC_TUNABLES" || name == "GCONV_PATH" || name == "NLSPATH" || name == "LOCPATH") {
    return refuse(fmt::format("{} makes libc load code or data of the spec's choosing into every program of the job, "
                              "gpugeek's launcher included",
                              name),
                  kExportInRun);
  }
  if (name.starts_with("DYLD_")) {
    return refuse("DYLD_* variables are macOS loader hooks", "remove it (it has no effect on Linux)");
  }
  if (name == "BASH_ENV" || name == "ENV" || name == "IFS") {
    return refuse(fmt::format("{} changes what gpugeek's launcher shell runs before or instead of your command", name),
                  "put the setup in run itself (run: source setup.sh; python train.py)");
  }
  if (name.starts_with("GPUGEEK_")) {
    return refuse("GPUGEEK_* variables are set by gpugeek", "pick another name");
  }
  if (name == "CUDA_VISIBLE_DEVICES" || name == "CUDA_DEVICE_ORDER" || name == "HIP_VISIBLE_DEVICES" ||
      name == "ROCR_VISIBLE_DEVICES") {
    return refuse(fmt::format("{} is set by gpugeek from the GPUs the job was given", name),
                  "ask for GPUs in resources.accelerators instead");
  }
  if (name == "HOME") {
    return refuse("HOME is set by gpugeek to the job's own working directory",
                  "point caches elsewhere with their own variables (HF_HOME, XDG_CACHE_HOME, TORCH_HOME)");
  }
  return absl::OkStatus();
}

namespace {

// A family name that several catalog models of different memory sizes share ("A100": 40 and 80 GB;
// "V100": 16 and 32 GB; "H100": 80 and 94 GB) is refused rather than read as one of them: a job sized
// for 80 GB would fail with out-of-memory on a 40 GB GPU. The family of `name` is the models whose id
// starts with its words ('-'-separated, case-insensitive). A catalog id, or a name whose family holds
// one memory size ("A100-80GB", "T4"), is fine.
absl::Status CheckUnambiguous(std::string_view name, const hw::GpuCatalog& catalog) {
  if (catalog.FindById(name) != nullptr) return absl::OkStatus();
  const std::string prefix = absl::AsciiStrToLower(std::string(name)) + "-";
  std::vector<const hw::GpuModel*> family;
  std::set<uint64_t> sizes;
  for (const hw::GpuModel& m : catalog.models()) {
    if (!absl::StartsWith(absl::AsciiStrToLower(m.id), prefix)) continue;
    family.push_back(&m);
    sizes.insert(m.memory_bytes);
  }
  if (sizes.size() < 2) return absl::OkStatus();
  std::vector<std::string> ids;
  for (const hw::GpuModel* m : family) ids.push_back(fmt::format("{} ({} GiB)", m->id, m->memory_bytes >> 30));
  return absl::InvalidArgumentError(
      fmt::format("GPU model '{}' is ambiguous: it may mean {}; name one of them (`gpugeek catalog`), e.g. {}:1", name,
                  absl::StrJoin(ids, ", "), family.back()->id));
}

}  // namespace

absl::StatusOr<AcceleratorRequest> ParseAcceleratorRequest(std::string_view text, const hw::GpuCatalog& catalog) {
  const size_t colon = text.rfind(':');
  const std::string_view name = colon == std::string_view::npos ? text : text.substr(0, colon);
  if (name.empty())
    return absl::InvalidArgumentError(fmt::format("'{}' names no GPU model; write MODEL:COUNT like A100-80GB:4", text));
  AcceleratorRequest req;
  const hw::GpuModel* model = catalog.Resolve(name);
  if (model == nullptr) {
    return absl::InvalidArgumentError(
        fmt::format("unknown GPU model '{}'; `gpugeek catalog` lists the known ids and names", name));
  }
  RETURN_IF_ERROR(CheckUnambiguous(name, catalog));
  req.model = model->id;
  req.count = 1;
  if (colon != std::string_view::npos) {
    const std::string_view count = text.substr(colon + 1);
    if (count.find('.') != std::string_view::npos) {
      // A fraction of one GPU: "T4:0.5" = 500 milli-GPU on one shared GPU.
      auto milli = ParseMilliCpu(count);  // same notation: 0.5 -> 500
      if (!milli.ok() || *milli <= 0 || *milli >= 1000) {
        return absl::InvalidArgumentError(
            fmt::format("'{}': a fractional count must be between 0.001 and 0.999 of one GPU", text));
      }
      req.milli_per_gpu = *milli;
    } else {
      auto n = ParseCount(count);
      if (!n.ok() || *n < 1 || *n > kMaxGpusPerNode) {
        return absl::InvalidArgumentError(fmt::format(
            "'{}': the count after ':' must be a whole number of GPUs per node, 1..{}", text, kMaxGpusPerNode));
      }
      req.count = static_cast<int>(*n);
    }
  }
  return req;
}

absl::StatusOr<JobSpec> ParseJobSpec(std::string_view yaml_text, const hw::GpuCatalog& catalog) {
  ASSIGN_OR_RETURN(const YAML::Node doc, LoadBoundedYaml(yaml_text, "job spec", "job"));
  try {
    return ParseDocument(doc, catalog);
  } catch (const YAML::Exception& e) {
    // yaml-cpp throws on some malformed shapes (e.g. aliases to missing anchors) while reading.
    return absl::InvalidArgumentError(fmt::format("job spec: {}", e.what()));
  }
}

std::string JobSpecToYaml(const JobSpec& spec) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << spec.name;
  if (!spec.model.empty()) out << YAML::Key << "model" << YAML::Value, EmitScalarOrQuoted(out, spec.model);
  if (spec.task) {
    out << YAML::Key << "task" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "kind" << YAML::Value << std::string(TaskKindName(spec.task->kind));
    if (spec.task->seq_len) out << YAML::Key << "seq_len" << YAML::Value << spec.task->seq_len;
    if (spec.task->micro_batch) out << YAML::Key << "micro_batch" << YAML::Value << spec.task->micro_batch;
    if (spec.task->global_batch) out << YAML::Key << "global_batch" << YAML::Value << spec.task->global_batch;
    if (spec.task->tokens) out << YAML::Key << "tokens" << YAML::Value << spec.task->tokens;
    out << YAML::EndMap;
  }
  const Resources& r = spec.resources;
  out << YAML::Key << "resources" << YAML::Value << YAML::BeginMap;
  if (!r.any_of.empty()) {
    out << YAML::Key << "accelerators" << YAML::Value << YAML::BeginSeq;
    for (const auto& a : r.any_of) {
      out << (a.milli_per_gpu < 1000 ? fmt::format("{}:0.{:03d}", a.model, a.milli_per_gpu)
                                     : fmt::format("{}:{}", a.model, a.count));
    }
    out << YAML::EndSeq;
  }
  if (r.capacity.size() == 1) {
    out << YAML::Key << "capacity" << YAML::Value << std::string(CapacityTypeName(r.capacity[0]));
  } else if (!r.capacity.empty()) {
    out << YAML::Key << "capacity" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (CapacityType c : r.capacity) out << std::string(CapacityTypeName(c));
    out << YAML::EndSeq;
  }
  if (r.cpu_milli) out << YAML::Key << "cpus" << YAML::Value << fmt::format("{}m", r.cpu_milli);
  if (r.memory_bytes) out << YAML::Key << "memory" << YAML::Value << std::to_string(r.memory_bytes);
  if (!r.regions.empty()) out << YAML::Key << "regions" << YAML::Value << YAML::Flow << r.regions;
  if (r.span_regions) out << YAML::Key << "span_regions" << YAML::Value << true;
  if (!r.data_region.empty()) out << YAML::Key << "data_region" << YAML::Value << r.data_region;
  out << YAML::EndMap;
  out << YAML::Key << "num_nodes" << YAML::Value << spec.num_nodes;
  out << YAML::Key << "priority" << YAML::Value << spec.priority;
  out << YAML::Key << "checkpoint" << YAML::Value << YAML::BeginMap;
  if (!spec.checkpoint.dir.empty())
    out << YAML::Key << "dir" << YAML::Value, EmitScalarOrQuoted(out, spec.checkpoint.dir);
  out << YAML::Key << "grace" << YAML::Value << FormatDuration(spec.checkpoint.grace);
  out << YAML::EndMap;
  if (!spec.env.empty() || !spec.secret_env.empty()) {
    out << YAML::Key << "env" << YAML::Value << YAML::BeginMap;
    for (const auto& [k, v] : spec.env) out << YAML::Key << k << YAML::Value, EmitScalarOrQuoted(out, v);
    for (const auto& [k, name] : spec.secret_env) {
      out << YAML::Key << k << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "secret" << YAML::Value;
      EmitScalarOrQuoted(out, name);
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }
  if (!spec.workdir.empty()) out << YAML::Key << "workdir" << YAML::Value, EmitScalarOrQuoted(out, spec.workdir);
  if (!spec.workdir_digest.empty()) out << YAML::Key << "workdir_digest" << YAML::Value << spec.workdir_digest;
  if (!spec.dataset.empty()) {
    out << YAML::Key << "dataset" << YAML::Value, EmitScalarOrQuoted(out, spec.dataset + "@" + spec.dataset_rev);
  }
  if (!spec.weights.empty()) {
    out << YAML::Key << "weights" << YAML::Value,
        EmitScalarOrQuoted(
            out, (spec.weights_owner.empty() ? "" : spec.weights_owner + "/") + spec.weights + "@" + spec.weights_rev);
  }
  if (!spec.weights_signer.empty()) {
    out << YAML::Key << "weights_signer" << YAML::Value, EmitScalarOrQuoted(out, spec.weights_signer);
  }
  if (!spec.weights_signer_pem.empty()) {
    out << YAML::Key << "weights_signer_pem" << YAML::Value << YAML::Literal << spec.weights_signer_pem;
  }
  if (!spec.files.empty()) {
    out << YAML::Key << "files" << YAML::Value << YAML::BeginMap;
    for (const auto& [dest, src] : spec.files) {
      out << YAML::Key, EmitScalarOrQuoted(out, dest);
      out << YAML::Value, EmitScalarOrQuoted(out, src);
    }
    out << YAML::EndMap;
  }
  if (!spec.file_archives.empty()) {
    out << YAML::Key << "file_archives" << YAML::Value << YAML::BeginSeq;
    for (const FileArchive& f : spec.file_archives) {
      out << YAML::BeginMap << YAML::Key << "path" << YAML::Value, EmitScalarOrQuoted(out, f.path);
      out << YAML::Key << "digest" << YAML::Value << f.digest << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  if (!spec.setup.empty()) out << YAML::Key << "setup" << YAML::Value, EmitScalarOrQuoted(out, spec.setup);
  if (spec.retry) {
    out << YAML::Key << "retry" << YAML::Value << YAML::BeginMap << YAML::Key << "on" << YAML::Value << YAML::Flow
        << YAML::BeginSeq;
    for (RetryCause c : spec.retry->on) out << std::string(RetryCauseName(c));
    out << YAML::EndSeq << YAML::Key << "limit" << YAML::Value << spec.retry->limit << YAML::Key << "backoff"
        << YAML::Value << FormatDuration(spec.retry->backoff_min) + ".." + FormatDuration(spec.retry->backoff_max)
        << YAML::EndMap;
  }
  if (spec.elastic) {
    out << YAML::Key << "elastic" << YAML::Value << YAML::Flow << YAML::BeginMap << YAML::Key << "min_nodes"
        << YAML::Value << spec.elastic->min_nodes << YAML::EndMap;
  }
  if (spec.max_duration) out << YAML::Key << "max_duration" << YAML::Value << FormatDuration(*spec.max_duration);
  if (spec.idle_timeout) out << YAML::Key << "idle_timeout" << YAML::Value << FormatDuration(*spec.idle_timeout);
  // Money exactly, as ParseMoneyMicros reads it back: "2.5", "0.000001".
  const auto money = [](int64_t micros) {
    std::string text = fmt::format("{}.{:06d}", micros / 1'000'000, micros % 1'000'000);
    while (text.back() == '0') text.pop_back();
    if (text.back() == '.') text.pop_back();
    return text;
  };
  if (spec.max_cost_micros) out << YAML::Key << "max_cost" << YAML::Value << money(*spec.max_cost_micros);
  if (spec.max_price_micros) out << YAML::Key << "max_price" << YAML::Value << money(*spec.max_price_micros);
  if (!spec.launcher.empty()) out << YAML::Key << "launcher" << YAML::Value << spec.launcher;
  if (spec.procs_per_node > 0) out << YAML::Key << "procs_per_node" << YAML::Value << spec.procs_per_node;
  if (!spec.image.empty()) out << YAML::Key << "image" << YAML::Value << spec.image;
  if (!spec.engine.empty()) out << YAML::Key << "engine" << YAML::Value << spec.engine;
  out << YAML::Key << "run" << YAML::Value, EmitScalarOrQuoted(out, spec.run);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

absl::Status ValidateSecretName(std::string_view field, std::string_view name) {
  const auto ok_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  };
  if (name.empty() || name.size() > 128 || !std::isalnum(static_cast<unsigned char>(name.front())) ||
      !std::all_of(name.begin(), name.end(), ok_char)) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: {} is not a secret name: 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit "
        "(e.g. hf-token)",
        field, QuoteForMessage(name)));
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::api
