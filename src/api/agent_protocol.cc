#include "api/agent_protocol.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cmath>

#include <fmt/format.h>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

#include "api/engines.h"
#include "api/image_ref.h"
#include "api/json_reader.h"
#include "api/names.h"
#include "common/absl_fmt.h"
#include "common/file.h"
#include "common/status_macros.h"
#include "hw/inventory_json.h"

namespace gpugeek::api {
namespace {

constexpr int64_t kMaxEpoch = int64_t{1} << 53;  // exact in JSON doubles, for clients that use them

// The node-name rule (api/names.h): 1-128 of [A-Za-z0-9._-], the first a letter or digit.
absl::Status CheckNodeName(const JsonReader& r, const std::string& key, const std::string& name) {
  return ValidateName(r.Path(key), name, NameKind::kNode);
}

// An optional instance id: at most kMaxUuidBytes hex digits (NewInstanceId draws 32).
absl::StatusOr<std::string> ReadInstanceId(const JsonReader& r) {
  ASSIGN_OR_RETURN(std::string id, r.String("instance_id", std::string()));
  if (id.size() > kMaxUuidBytes) return r.Error("instance_id", fmt::format("must be at most {} bytes", kMaxUuidBytes));
  for (char c : id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      return r.Error("instance_id", "must hold only hex digits");
    }
  }
  return id;
}

absl::StatusOr<std::string> BoundedString(const JsonReader& r, const std::string& key, size_t max,
                                          std::optional<std::string> fallback = std::nullopt) {
  ASSIGN_OR_RETURN(std::string s, r.String(key, std::move(fallback)));
  if (s.size() > max) return r.Error(key, fmt::format("is {} bytes; at most {} are allowed", s.size(), max));
  return s;
}

// The array of strings under `key` (absent = empty), at most `max_items` of 1..`max_len` bytes each.
absl::StatusOr<std::vector<std::string>> StringList(const JsonReader& r, const std::string& key, size_t max_items,
                                                    size_t max_len) {
  std::vector<std::string> out;
  if (!r.Has(key)) return out;
  const nlohmann::json& list = r.json().at(key);
  if (!list.is_array()) return r.Error(key, "must be an array of strings");
  if (list.size() > max_items) {
    return r.Error(key, fmt::format("has {} entries; at most {} are allowed", list.size(), max_items));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = fmt::format("{}[{}]", key, i);
    if (!list[i].is_string()) return r.Error(path, "must be a string");
    std::string s = list[i].get<std::string>();
    if (s.empty() || s.size() > max_len) return r.Error(path, fmt::format("must be 1-{} bytes", max_len));
    out.push_back(std::move(s));
  }
  return out;
}

// The objects under `key`, refusing more than `max` before any is decoded.
absl::StatusOr<std::vector<JsonReader>> BoundedObjects(const JsonReader& r, const std::string& key, size_t max) {
  ASSIGN_OR_RETURN(std::vector<JsonReader> list, r.Objects(key));
  if (list.size() > max) return r.Error(key, fmt::format("has {} entries; at most {} are allowed", list.size(), max));
  return list;
}

// Base64 of at most kMaxLogChunkBytes decoded bytes.
absl::StatusOr<std::string> ReadBase64(const JsonReader& r, const std::string& key) {
  ASSIGN_OR_RETURN(std::string encoded, r.String(key));
  // 4 characters per 3 bytes, padded: anything longer cannot decode to at most the limit (checked
  // before decoding, so an oversized value is refused without allocating its decoding).
  constexpr size_t kMaxEncoded = (kMaxLogChunkBytes + 2) / 3 * 4;
  if (encoded.size() > kMaxEncoded) {
    return r.Error(key, fmt::format("decodes to more than {} bytes", kMaxLogChunkBytes));
  }
  std::string data;
  if (!absl::Base64Unescape(absl::string_view(encoded.data(), encoded.size()), &data)) {
    return r.Error(key, "is not valid base64");
  }
  if (data.size() > kMaxLogChunkBytes) {
    return r.Error(key, fmt::format("decodes to {} bytes; at most {} are allowed", data.size(), kMaxLogChunkBytes));
  }
  return data;
}

}  // namespace

absl::StatusOr<std::string> NewInstanceId() {
  std::array<unsigned char, 16> bytes{};
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  if (got < bytes.size()) {
    // getrandom(2) missing (ENOSYS on an old kernel or seccomp filter): the same source through the file.
    const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && got < bytes.size()) {
      const ssize_t n = ::read(fd, bytes.data() + got, bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (fd >= 0) ::close(fd);
  }
  if (got < bytes.size()) {
    return absl::InternalError("no random source (getrandom(2) and /dev/urandom failed) for an agent instance id");
  }
  std::string hex;
  hex.reserve(2 * bytes.size());
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

std::string_view WorkloadPhaseName(WorkloadPhase p) {
  switch (p) {
    case WorkloadPhase::kRunning:
      return "running";
    case WorkloadPhase::kExited:
      return "exited";
    case WorkloadPhase::kFailedToStart:
      return "failed-to-start";
  }
  return "running";
}

nlohmann::json ToJson(const Registration& r) {
  nlohmann::json j = {{"node", r.node},
                      {"address", r.address},
                      {"inventory", hw::InventoryToJson(r.inventory)},
                      {"capacity_type", r.capacity_type},
                      {"region", r.region},
                      {"labels", r.labels},
                      {"metrics_address", r.metrics_address},
                      {"instance_id", r.instance_id},
                      {"images", r.images}};
  if (r.metrics_tls) j["metrics_tls"] = true;
  if (!r.unfit_images.empty()) j["unfit_images"] = r.unfit_images;
  if (!r.engines.empty()) j["engines"] = r.engines;
  if (r.price_micros_per_gpu_hour != 0) j["price_micros_per_gpu_hour"] = r.price_micros_per_gpu_hour;
  if (r.min_rental_s != 0) j["min_rental_s"] = r.min_rental_s;
  return j;
}

nlohmann::json ToJson(const RegistrationReply& r) {
  nlohmann::json j = {{"heartbeat_interval_ms", r.heartbeat_interval_ms},
                      {"lease_ms", r.lease_ms},
                      {"fence_grace_ms", r.fence_grace_ms}};
  if (!r.node_credential.empty()) j["node_credential"] = r.node_credential;
  if (!r.exec_token.empty()) j["exec_token"] = r.exec_token;
  return j;
}

nlohmann::json ToJson(const Assignment& a) {
  nlohmann::json files = nlohmann::json::array();
  for (const FileArchive& f : a.file_archives) files.push_back({{"path", f.path}, {"digest", f.digest}});
  return {{"job_id", a.job_id},
          {"epoch", a.epoch},
          {"node_rank", a.node_rank},
          {"num_nodes", a.num_nodes},
          {"gpu_uuids", a.gpu_uuids},
          {"gpu_milli", a.gpu_milli},
          {"cpu_milli", a.cpu_milli},
          {"memory_bytes", a.memory_bytes},
          {"master_addr", a.master_addr},
          {"master_port", a.master_port},
          {"run", a.run},
          {"env", a.env},
          {"checkpoint_dir", a.checkpoint_dir},
          {"grace_ms", a.grace_ms},
          {"restart_count", a.restart_count},
          {"cancel", a.cancel},
          {"tenant", a.tenant},
          {"setup", a.setup},
          {"workdir_digest", a.workdir_digest},
          {"file_archives", files},
          {"dataset", a.dataset},
          {"dataset_commit", a.dataset_commit},
          {"model_owner", a.model_owner},
          {"model", a.model},
          {"model_commit", a.model_commit},
          {"model_signer_pem", a.model_signer_pem},
          {"launcher", a.launcher},
          {"procs_per_node", a.procs_per_node},
          {"tp", a.tp},
          {"pp", a.pp},
          {"dp", a.dp},
          {"zero_stage", a.zero_stage},
          {"micro_batch", a.micro_batch},
          {"image", a.image},
          {"engine", a.engine},
          {"metrics_stored", a.metrics_stored},
          {"platform_env", a.platform_env}};
}

absl::Status CheckPlatformEnv(const std::string& field, const std::string& name, const std::string& value) {
  bool known = false;
  for (const char* allowed : kPlatformEnvNames) known = known || name == allowed;
  if (!known) {
    return absl::InvalidArgumentError(fmt::format(
        "{}.{}: not a platform variable (GPUGEEK_EXPERIMENT, GPUGEEK_TRIAL_ID, GPUGEEK_PARAMS, PORT, GPUGEEK_SERVICE, "
        "GPUGEEK_SERVICE_VERSION)",
        field, name.substr(0, 64)));
  }
  if (value.size() > kMaxPlatformEnvValueBytes) {
    return absl::InvalidArgumentError(
        fmt::format("{}.{}: {} bytes; at most {}", field, name, value.size(), kMaxPlatformEnvValueBytes));
  }
  return absl::OkStatus();
}

nlohmann::json ToJson(const WorkloadReport& w) {
  nlohmann::json j = {{"job_id", w.job_id},           {"epoch", w.epoch},     {"phase", WorkloadPhaseName(w.phase)},
                      {"term_signal", w.term_signal}, {"message", w.message}, {"node_rank", w.node_rank}};
  if (w.exit_code) j["exit_code"] = *w.exit_code;
  if (w.checkpoint_step) j["checkpoint_step"] = *w.checkpoint_step;
  if (w.ended_ms_ago != 0) j["ended_ms_ago"] = w.ended_ms_ago;
  if (!w.metrics.empty()) {
    nlohmann::json metrics = nlohmann::json::array();
    for (const MetricPoint& m : w.metrics) metrics.push_back({{"seq", m.seq}, {"step", m.step}, {"value", m.value}});
    j["metrics"] = std::move(metrics);
  }
  return j;
}

nlohmann::json ToJson(const Heartbeat& h) {
  nlohmann::json samples = nlohmann::json::array();
  for (const auto& s : h.samples) samples.push_back(hw::SampleToJson(s));
  nlohmann::json workloads = nlohmann::json::array();
  for (const auto& w : h.workloads) workloads.push_back(ToJson(w));
  nlohmann::json logs = nlohmann::json::array();
  for (const auto& l : h.logs) {
    // Base64: log bytes may be anything, and a JSON string can carry only valid UTF-8.
    logs.push_back({{"job_id", l.job_id},
                    {"node_rank", l.node_rank},
                    {"offset", l.offset},
                    {"data_b64", absl::Base64Escape(absl::string_view(l.data.data(), l.data.size()))},
                    {"epoch", l.epoch}});
  }
  return {
      {"node", h.node}, {"instance_id", h.instance_id}, {"samples", samples}, {"workloads", workloads}, {"logs", logs}};
}

nlohmann::json ToJson(const HeartbeatReply& r) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& x : r.assignments) a.push_back(ToJson(x));
  return {{"assignments", a}, {"reregister", r.reregister}};
}

absl::StatusOr<Registration> RegistrationFromJson(const nlohmann::json& j) {
  JsonReader r(j, "registration");
  RETURN_IF_ERROR(r.CheckObject({"node", "address", "inventory", "capacity_type", "region", "labels", "metrics_address",
                                 "instance_id", "images", "metrics_tls", "unfit_images", "price_micros_per_gpu_hour",
                                 "min_rental_s", "engines"}));
  Registration out;
  ASSIGN_OR_RETURN(out.node, r.String("node"));
  RETURN_IF_ERROR(CheckNodeName(r, "node", out.node));
  ASSIGN_OR_RETURN(out.instance_id, ReadInstanceId(r));
  ASSIGN_OR_RETURN(out.address, r.String("address", std::string()));
  if (!out.address.empty()) {  // a host, checked by the host:port rule (IPv6 literals bracketed)
    const bool v6 = out.address.find(':') != std::string::npos && !out.address.starts_with("[");
    RETURN_IF_ERROR(ValidateHostPort("registration.address", (v6 ? "[" + out.address + "]" : out.address) + ":1"));
  }
  ASSIGN_OR_RETURN(out.capacity_type, r.String("capacity_type", std::string("on-demand")));
  if (out.capacity_type != "on-demand" && out.capacity_type != "spot" && out.capacity_type != "reserved") {
    return r.Error("capacity_type", "must be one of on-demand, spot, reserved");
  }
  ASSIGN_OR_RETURN(out.region, r.String("region", std::string()));
  ASSIGN_OR_RETURN(out.price_micros_per_gpu_hour, r.Int("price_micros_per_gpu_hour", 0, 0, kMaxPriceMicrosPerGpuHour));
  ASSIGN_OR_RETURN(out.min_rental_s, r.Int("min_rental_s", 0, 0, kMaxMinRentalS));
  ASSIGN_OR_RETURN(out.labels, r.StringMap("labels"));
  ASSIGN_OR_RETURN(out.images, StringList(r, "images", kMaxImagesPerNode, kMaxImageRefBytes));
  for (size_t i = 0; i < out.images.size(); ++i) {
    const std::string field = fmt::format("{}[{}]", r.Path("images"), i);
    ASSIGN_OR_RETURN(std::string canonical, CanonicalImageRef(field, out.images[i]));
    if (canonical != out.images[i]) {
      return absl::InvalidArgumentError(
          fmt::format("{}: '{}' is not canonical; send {}", field, out.images[i], canonical));
    }
    if (i > 0 && out.images[i - 1] >= out.images[i]) {
      return absl::InvalidArgumentError(fmt::format("{}: images must be sorted, without duplicates", field));
    }
  }
  ASSIGN_OR_RETURN(out.unfit_images, r.StringMap("unfit_images"));
  if (out.unfit_images.size() > kMaxImagesPerNode) {
    return r.Error("unfit_images", fmt::format("at most {} entries", kMaxImagesPerNode));
  }
  for (const auto& [image, why] : out.unfit_images) {
    const std::string field = fmt::format("{}[{}]", r.Path("unfit_images"), image.substr(0, 64));
    ASSIGN_OR_RETURN(std::string canonical, CanonicalImageRef(field, image));
    if (canonical != image) {
      return absl::InvalidArgumentError(fmt::format("{}: '{}' is not canonical; send {}", field, image, canonical));
    }
    if (why.size() > kMaxUnfitReasonBytes) {
      return absl::InvalidArgumentError(fmt::format("{}: the reason is over {} bytes", field, kMaxUnfitReasonBytes));
    }
  }
  ASSIGN_OR_RETURN(out.engines, StringList(r, "engines", kMaxEngineRuntimesPerNode, kMaxEngineRuntimeNameBytes));
  RETURN_IF_ERROR(ValidateEngineRuntimes(r.Path("engines"), out.engines));
  ASSIGN_OR_RETURN(out.metrics_address, r.String("metrics_address", std::string()));
  ASSIGN_OR_RETURN(out.metrics_tls, r.Bool("metrics_tls", false));
  if (!out.metrics_address.empty()) {
    RETURN_IF_ERROR(ValidateHostPort("registration.metrics_address", out.metrics_address));
    // Prometheus scrapes it, so it must be the node itself: its address (or loopback on a loopback node).
    const std::string host = out.metrics_address.substr(0, out.metrics_address.rfind(':'));
    const std::string address = out.address.empty() ? "127.0.0.1" : out.address;
    const bool loopback = address == "127.0.0.1" || address == "localhost" || address == "[::1]" || address == "::1";
    if (host != address && !(loopback && (host == "127.0.0.1" || host == "localhost" || host == "[::1]"))) {
      return r.Error("metrics_address",
                     fmt::format("host '{}' is not this node's address '{}'; serve the agent's metrics on the node "
                                 "itself (gpugeek agent --metrics-listen {}:PORT)",
                                 host.substr(0, 64), address.substr(0, 64), address.substr(0, 64)));
    }
  }
  ASSIGN_OR_RETURN(const nlohmann::json* inv, r.Raw("inventory"));
  if (inv->is_object() && inv->contains("gpus") && inv->at("gpus").is_array() &&
      inv->at("gpus").size() > kMaxGpusPerNode) {
    return r.Error("inventory.gpus",
                   fmt::format("has {} entries; at most {} are allowed", inv->at("gpus").size(), kMaxGpusPerNode));
  }
  auto inventory = hw::InventoryFromJson(*inv);
  if (!inventory.ok()) return r.Error("inventory", std::string(inventory.status().message()));
  out.inventory = std::move(*inventory);
  return out;
}

absl::StatusOr<RegistrationReply> RegistrationReplyFromJson(const nlohmann::json& j) {
  JsonReader r(j, "registration_reply");
  RETURN_IF_ERROR(
      r.CheckObject({"heartbeat_interval_ms", "lease_ms", "fence_grace_ms", "node_credential", "exec_token"}));
  RegistrationReply out;
  ASSIGN_OR_RETURN(out.heartbeat_interval_ms, r.Int("heartbeat_interval_ms", 1000, 10, 600'000));
  ASSIGN_OR_RETURN(out.lease_ms, r.Int("lease_ms", 3000, 100, 3'600'000));
  ASSIGN_OR_RETURN(out.fence_grace_ms, r.Int("fence_grace_ms", 2000, 0, 3'600'000));
  ASSIGN_OR_RETURN(out.node_credential, r.String("node_credential", std::string()));
  if (out.node_credential.size() > 1024) return r.Error("node_credential", "is longer than 1024 bytes");
  ASSIGN_OR_RETURN(out.exec_token, r.String("exec_token", std::string()));
  if (out.exec_token.size() > 256) return r.Error("exec_token", "is longer than 256 bytes");
  return out;
}

absl::StatusOr<Assignment> AssignmentFromJson(const nlohmann::json& j, const std::string& path) {
  JsonReader r(j, path);
  RETURN_IF_ERROR(r.CheckObject({"job_id",
                                 "epoch",
                                 "node_rank",
                                 "num_nodes",
                                 "gpu_uuids",
                                 "gpu_milli",
                                 "cpu_milli",
                                 "memory_bytes",
                                 "master_addr",
                                 "master_port",
                                 "run",
                                 "env",
                                 "checkpoint_dir",
                                 "grace_ms",
                                 "restart_count",
                                 "cancel",
                                 "tenant",
                                 "setup",
                                 "workdir_digest",
                                 "launcher",
                                 "procs_per_node",
                                 "tp",
                                 "pp",
                                 "dp",
                                 "file_archives",
                                 "zero_stage",
                                 "micro_batch",
                                 "image",
                                 "dataset",
                                 "dataset_commit",
                                 "model_owner",
                                 "model",
                                 "model_commit",
                                 "model_signer_pem",
                                 "engine",
                                 "metrics_stored",
                                 "platform_env"}));
  Assignment a;
  ASSIGN_OR_RETURN(a.job_id, r.String("job_id"));
  ASSIGN_OR_RETURN(a.epoch, r.Int("epoch", std::nullopt, 0, kMaxEpoch));
  ASSIGN_OR_RETURN(int64_t nodes, r.Int("num_nodes", 1, 1, 1024));
  ASSIGN_OR_RETURN(int64_t rank, r.Int("node_rank", 0, 0, nodes - 1));
  a.num_nodes = static_cast<int>(nodes);
  a.node_rank = static_cast<int>(rank);
  ASSIGN_OR_RETURN(a.gpu_uuids, StringList(r, "gpu_uuids", kMaxGpusPerNode, kMaxUuidBytes));
  ASSIGN_OR_RETURN(a.gpu_milli, r.Int("gpu_milli", 0, 0, 1000));
  ASSIGN_OR_RETURN(a.cpu_milli, r.Int("cpu_milli", 0, 0, int64_t{1} << 40));
  ASSIGN_OR_RETURN(int64_t mem, r.Int("memory_bytes", 0, 0, INT64_MAX));
  a.memory_bytes = static_cast<uint64_t>(mem);
  ASSIGN_OR_RETURN(a.master_addr, r.String("master_addr", std::string()));
  ASSIGN_OR_RETURN(int64_t port, r.Int("master_port", 0, 0, 65535));
  a.master_port = static_cast<int>(port);
  ASSIGN_OR_RETURN(a.run, r.String("run"));
  ASSIGN_OR_RETURN(a.env, r.StringMap("env"));
  ASSIGN_OR_RETURN(a.checkpoint_dir, r.String("checkpoint_dir", std::string()));
  ASSIGN_OR_RETURN(a.grace_ms, r.Int("grace_ms", 30000, 0, 3'600'000));
  ASSIGN_OR_RETURN(int64_t restarts, r.Int("restart_count", 0, 0, 1'000'000));
  a.restart_count = static_cast<int>(restarts);
  ASSIGN_OR_RETURN(a.cancel, r.Bool("cancel", false));
  ASSIGN_OR_RETURN(a.tenant, r.String("tenant", std::string()));
  if (!a.tenant.empty()) RETURN_IF_ERROR(ValidateName(r.Path("tenant"), a.tenant, NameKind::kTenant));
  ASSIGN_OR_RETURN(a.setup, r.String("setup", std::string()));
  ASSIGN_OR_RETURN(a.launcher, r.String("launcher", std::string()));
  if (!a.launcher.empty() && a.launcher != "torch") return r.Error("launcher", "must be torch or empty");
  ASSIGN_OR_RETURN(a.image, r.String("image", std::string()));
  if (!a.image.empty()) {
    ASSIGN_OR_RETURN(std::string canonical, CanonicalImageRef(r.Path("image"), a.image));
    if (canonical != a.image) return r.Error("image", "must be a canonical image reference (NAME:TAG with a domain)");
  }
  ASSIGN_OR_RETURN(int64_t procs, r.Int("procs_per_node", 0, 0, 64));
  a.procs_per_node = static_cast<int>(procs);
  for (auto [name, field] : {std::pair{"tp", &a.tp}, std::pair{"pp", &a.pp}, std::pair{"dp", &a.dp}}) {
    ASSIGN_OR_RETURN(int64_t degree, r.Int(name, 0, 0, 1 << 20));
    *field = static_cast<int>(degree);
  }
  ASSIGN_OR_RETURN(int64_t zero, r.Int("zero_stage", 0, 0, 3));
  a.zero_stage = static_cast<int>(zero);
  ASSIGN_OR_RETURN(a.micro_batch, r.Int("micro_batch", 0, 0, 1 << 20));
  ASSIGN_OR_RETURN(a.workdir_digest, r.String("workdir_digest", std::string()));
  if (!a.workdir_digest.empty() &&
      (a.workdir_digest.size() != 64 || a.workdir_digest.find_first_not_of("0123456789abcdef") != std::string::npos)) {
    return r.Error("workdir_digest", "must be a SHA-256, 64 lower-case hex digits");
  }
  ASSIGN_OR_RETURN(a.dataset, r.String("dataset", std::string()));
  ASSIGN_OR_RETURN(a.dataset_commit, r.String("dataset_commit", std::string()));
  if (a.dataset.empty() != a.dataset_commit.empty()) {
    return r.Error("dataset_commit", "dataset and dataset_commit come together (both empty: no dataset)");
  }
  if (!a.dataset.empty() &&
      (a.dataset.size() > 64 ||
       a.dataset.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
           std::string::npos)) {
    return r.Error("dataset", "must be a dataset name: 1-64 of A-Z a-z 0-9 . _ -");
  }
  if (!a.dataset_commit.empty() &&
      (a.dataset_commit.size() != 64 || a.dataset_commit.find_first_not_of("0123456789abcdef") != std::string::npos)) {
    return r.Error("dataset_commit", "must be a SHA-256, 64 lower-case hex digits");
  }
  ASSIGN_OR_RETURN(a.model_owner, r.String("model_owner", std::string()));
  ASSIGN_OR_RETURN(a.model, r.String("model", std::string()));
  ASSIGN_OR_RETURN(a.model_commit, r.String("model_commit", std::string()));
  ASSIGN_OR_RETURN(a.model_signer_pem, r.String("model_signer_pem", std::string()));
  if (a.model_signer_pem.size() > kMaxSignerPemBytes || (!a.model_signer_pem.empty() && a.model.empty())) {
    return r.Error("model_signer_pem", "a PEM public key of at most 16 KiB, with a model");
  }
  if (a.model.empty() != a.model_commit.empty() || a.model.empty() != a.model_owner.empty()) {
    return r.Error("model_commit", "model_owner, model and model_commit come together (all empty: no model)");
  }
  if (!a.model.empty()) {
    RETURN_IF_ERROR(ValidateName(r.Path("model_owner"), a.model_owner, NameKind::kTenant));
    if (a.model.size() > 64 ||
        a.model.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
            std::string::npos ||
        a.model[0] == '.' || a.model[0] == '-') {
      return r.Error("model", "must be a model name: 1-64 of A-Z a-z 0-9 . _ -");
    }
    if (a.model_commit.size() != 64 || a.model_commit.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return r.Error("model_commit", "must be a SHA-256, 64 lower-case hex digits");
    }
  }
  ASSIGN_OR_RETURN(a.engine, r.String("engine", std::string()));
  ASSIGN_OR_RETURN(a.metrics_stored, r.Int("metrics_stored", 0, 0, kMaxMetricSeq));
  ASSIGN_OR_RETURN(a.platform_env, r.StringMap("platform_env"));
  for (const auto& [name, value] : a.platform_env)
    RETURN_IF_ERROR(CheckPlatformEnv(r.Path("platform_env"), name, value));
  if (!a.engine.empty()) RETURN_IF_ERROR(ParseEngineFormat(r.Path("engine"), a.engine).status());
  ASSIGN_OR_RETURN(std::vector<JsonReader> files, r.Objects("file_archives"));
  if (files.size() > kMaxFiles) return r.Error("file_archives", fmt::format("at most {} archives", kMaxFiles));
  for (const JsonReader& f : files) {
    RETURN_IF_ERROR(f.CheckObject({"path", "digest"}));
    FileArchive archive;
    ASSIGN_OR_RETURN(archive.path, f.String("path", std::string()));
    if (!archive.path.empty() && !IsSafeRelativePath(archive.path)) {
      return f.Error("path", "must be a relative path inside the working folder, or empty");
    }
    ASSIGN_OR_RETURN(archive.digest, f.String("digest"));
    if (archive.digest.size() != 64 || archive.digest.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return f.Error("digest", "must be a SHA-256, 64 lower-case hex digits");
    }
    a.file_archives.push_back(std::move(archive));
  }
  return a;
}

absl::StatusOr<Heartbeat> HeartbeatFromJson(const nlohmann::json& j) {
  JsonReader r(j, "heartbeat");
  RETURN_IF_ERROR(r.CheckObject({"node", "instance_id", "samples", "workloads", "logs"}));
  Heartbeat h;
  ASSIGN_OR_RETURN(h.node, r.String("node"));
  RETURN_IF_ERROR(CheckNodeName(r, "node", h.node));
  ASSIGN_OR_RETURN(h.instance_id, ReadInstanceId(r));
  ASSIGN_OR_RETURN(auto samples, BoundedObjects(r, "samples", kMaxGpusPerNode));
  for (size_t i = 0; i < samples.size(); ++i) {
    auto s = hw::SampleFromJson(samples[i].json());
    if (!s.ok()) return absl::InvalidArgumentError(fmt::format("heartbeat.samples[{}]: {}", i, s.status().message()));
    h.samples.push_back(std::move(*s));
  }
  ASSIGN_OR_RETURN(auto workloads, BoundedObjects(r, "workloads", kMaxReportsPerHeartbeat));
  for (const JsonReader& w : workloads) {
    RETURN_IF_ERROR(w.CheckObject({"job_id", "epoch", "phase", "exit_code", "term_signal", "message", "node_rank",
                                   "checkpoint_step", "ended_ms_ago", "metrics"}));
    WorkloadReport report;
    ASSIGN_OR_RETURN(report.job_id, w.String("job_id"));
    ASSIGN_OR_RETURN(report.epoch, w.Int("epoch", std::nullopt, 0, kMaxEpoch));
    ASSIGN_OR_RETURN(std::string phase, w.String("phase"));
    bool known = false;
    for (WorkloadPhase p : {WorkloadPhase::kRunning, WorkloadPhase::kExited, WorkloadPhase::kFailedToStart}) {
      if (phase == WorkloadPhaseName(p)) report.phase = p, known = true;
    }
    if (!known) return w.Error("phase", "must be one of running, exited, failed-to-start");
    if (w.Has("exit_code")) {
      ASSIGN_OR_RETURN(int64_t code, w.Int("exit_code", std::nullopt, -1, 255));
      report.exit_code = static_cast<int>(code);
    }
    ASSIGN_OR_RETURN(int64_t sig, w.Int("term_signal", 0, 0, 128));
    report.term_signal = static_cast<int>(sig);
    ASSIGN_OR_RETURN(report.message, BoundedString(w, "message", kMaxMessageBytes, std::string()));
    ASSIGN_OR_RETURN(int64_t rank, w.Int("node_rank", 0, 0, 1023));
    report.node_rank = static_cast<int>(rank);
    if (w.Has("checkpoint_step")) {
      ASSIGN_OR_RETURN(report.checkpoint_step, w.Int("checkpoint_step", std::nullopt, 0, kMaxCheckpointStep));
    }
    ASSIGN_OR_RETURN(report.ended_ms_ago, w.Int("ended_ms_ago", 0, 0, kMaxEndedAgoMs));
    ASSIGN_OR_RETURN(std::vector<JsonReader> metrics, BoundedObjects(w, "metrics", kMaxMetricsPerReport));
    for (const JsonReader& m : metrics) {
      RETURN_IF_ERROR(m.CheckObject({"seq", "step", "value"}));
      MetricPoint point;
      ASSIGN_OR_RETURN(point.seq, m.Int("seq", std::nullopt, 0, kMaxMetricSeq));
      if (!report.metrics.empty() && point.seq != report.metrics.back().seq + 1) {
        return m.Error("seq", fmt::format("must follow {} (reports are consecutive)", report.metrics.back().seq));
      }
      ASSIGN_OR_RETURN(point.step, m.Int("step", std::nullopt, 0, kMaxCheckpointStep));
      ASSIGN_OR_RETURN(const nlohmann::json* value, m.Raw("value"));
      if (value == nullptr || !value->is_number() || !std::isfinite(value->get<double>())) {
        return m.Error("value", "must be a finite number");
      }
      point.value = value->get<double>();
      report.metrics.push_back(point);
    }
    h.workloads.push_back(std::move(report));
  }
  ASSIGN_OR_RETURN(auto logs, BoundedObjects(r, "logs", kMaxReportsPerHeartbeat));
  for (const JsonReader& l : logs) {
    RETURN_IF_ERROR(l.CheckObject({"job_id", "node_rank", "offset", "data_b64", "epoch"}));
    LogChunk chunk;
    ASSIGN_OR_RETURN(chunk.job_id, l.String("job_id"));
    ASSIGN_OR_RETURN(int64_t rank, l.Int("node_rank", 0, 0, 1023));
    chunk.node_rank = static_cast<int>(rank);
    ASSIGN_OR_RETURN(int64_t offset, l.Int("offset", 0, 0, INT64_MAX));
    chunk.offset = static_cast<uint64_t>(offset);
    ASSIGN_OR_RETURN(chunk.data, ReadBase64(l, "data_b64"));
    ASSIGN_OR_RETURN(chunk.epoch, l.Int("epoch", 0, 0, kMaxEpoch));
    h.logs.push_back(std::move(chunk));
  }
  return h;
}

absl::StatusOr<HeartbeatReply> HeartbeatReplyFromJson(const nlohmann::json& j) {
  JsonReader r(j, "heartbeat_reply");
  RETURN_IF_ERROR(r.CheckObject({"assignments", "reregister"}));
  HeartbeatReply out;
  ASSIGN_OR_RETURN(auto list, BoundedObjects(r, "assignments", kMaxReportsPerHeartbeat));
  for (size_t i = 0; i < list.size(); ++i) {
    ASSIGN_OR_RETURN(Assignment a,
                     AssignmentFromJson(list[i].json(), fmt::format("heartbeat_reply.assignments[{}]", i)));
    out.assignments.push_back(std::move(a));
  }
  ASSIGN_OR_RETURN(out.reregister, r.Bool("reregister", false));
  return out;
}

}  // namespace gpugeek::api
