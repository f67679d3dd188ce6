#include "agent/agent.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <glob.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "agent/agent_metrics.h"
#include "agent/container_command.h"
#include "agent/image_requirements.h"
#include "agent/torch_launcher.h"
#include "api/engines.h"
#include "api/job_spec.h"
#include "api/names.h"
#include "archive/digest.h"
#include "archive/unpack.h"
#include "common/absl_fmt.h"
#include "common/file.h"
#include "common/status_macros.h"
#include "data/version_objects.h"
#include "http/client.h"
#include "models/signing.h"

namespace gpugeek::agent {
namespace {

// Where a container member sees its dataset and model checkouts (read-only).
constexpr char kContainerDatasetDir[] = "/gpugeek/dataset";
constexpr char kContainerModelDir[] = "/gpugeek/model";

// OK when user `who` may pass through every folder from / down to `dir` by their mode bits (ACLs aside).
// A member on the host reads its dataset by absolute path, unlike its working folder (which it starts
// in: the executor changes into it before switching users), so an agent whose data folder lies below one
// that others may not pass (/root/.local/share, a 0700 temporary folder) cannot serve it one.
absl::Status CheckReachable(const std::string& dir, const Identity& who) {
  std::string at;
  for (size_t from = 1; from <= dir.size(); ++from) {
    const size_t slash = std::min(dir.find('/', from), dir.size());
    at = dir.substr(0, slash);
    from = slash;
    struct stat st {};
    if (::stat(at.c_str(), &st) != 0) return absl::InternalError(fmt::format("stat {}: {}", at, std::strerror(errno)));
    const bool in_group =
        st.st_gid == who.gid || std::find(who.groups.begin(), who.groups.end(), st.st_gid) != who.groups.end();
    const mode_t bit = st.st_uid == who.uid ? S_IXUSR : in_group ? S_IXGRP : S_IXOTH;
    if ((st.st_mode & bit) == 0) {
      return absl::FailedPreconditionError(fmt::format(
          "the node's dataset cache {} is out of reach of the member's user (uid {}): {} (mode {:o}, owner uid {}) "
          "does not let it pass; start the agent with a --data-dir below folders others may pass through (mode "
          "0711 or 0755), e.g. /var/lib/gpugeek",
          dir, who.uid, at, st.st_mode & 07777, st.st_uid));
    }
  }
  return absl::OkStatus();
}

constexpr Duration kPollPeriod = std::chrono::milliseconds(100);
// How much later than the agent's own lease each workload's shim lease runs out. A live agent fences
// first (its watchdog checks every kPollPeriod) and SIGTERMs the group; the shim, seeing that, sends no
// second SIGTERM, which could cut a checkpoint short. A frozen agent's shims act alone, this much later:
// their SIGKILL lands by last_ack_sent + lease + kShimLeaseSlack + grace, still before the server
// re-places (receipt + lease + fence grace + its 1 s margin; see agent.h).
constexpr Duration kShimLeaseSlack = std::chrono::milliseconds(200);
constexpr Duration kMinBackoff = std::chrono::milliseconds(500);

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  // A host name may carry a domain; the node name keeps it (dots are allowed).
  return name;
}

EnvMap DefaultBaseEnv() {
  EnvMap env;
  const char* path = std::getenv("PATH");
  env["PATH"] = path != nullptr && *path != '\0' ? path : "/usr/local/bin:/usr/bin:/bin";
  for (const char* name : {"HOME", "LANG"}) {
    if (const char* v = std::getenv(name); v != nullptr) env[name] = v;
  }
  return env;
}

absl::Status MakeDirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return absl::InternalError(fmt::format("cannot create directory {}: {}", path, ec.message()));
  return absl::OkStatus();
}

// Length of the longest prefix of `data` that does not end inside a UTF-8 sequence (so a chunk cut at a
// size cap does not split a character). Returns data.size() when the end is clean or the bytes are not
// UTF-8 at all.
size_t TrimToUtf8Boundary(const std::string& data) {
  const size_t n = data.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(data[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    size_t len = 1;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
    }
    return len > back && n - back > 0 ? n - back : n;
  }
  return n;
}

// `message` cut to the protocol's limit (api::kMaxMessageBytes) at a UTF-8 boundary, so a long error
// text (a path, a driver's message) cannot make the server refuse the whole heartbeat.
std::string BoundMessage(std::string message) {
  if (message.size() <= api::kMaxMessageBytes) return message;
  constexpr std::string_view kEllipsis = "...";
  message.resize(api::kMaxMessageBytes - kEllipsis.size());
  // Drop a character cut in half (its continuation bytes and its lead byte).
  while (!message.empty() && (static_cast<unsigned char>(message.back()) & 0xC0) == 0x80) message.pop_back();
  if (!message.empty() && (static_cast<unsigned char>(message.back()) & 0x80) != 0) message.pop_back();
  return message + std::string(kEllipsis);
}

int64_t Millis(Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

// Reads up to `max` bytes of `path` from `offset`. Returns the bytes and whether more follow them.
struct LogRead {
  std::string data;
  bool more = false;
};
absl::StatusOr<LogRead> ReadLog(const std::string& path, uint64_t offset, uint64_t max) {
  LogRead out;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return out;
    return absl::InternalError(fmt::format("cannot open log {}: {}", path, std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(fmt::format("cannot stat log {}: {}", path, std::strerror(err)));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size <= offset) {
    ::close(fd);
    return out;
  }
  const uint64_t want = std::min(max, size - offset);
  out.data.resize(want);
  size_t got = 0;
  while (got < want) {
    const ssize_t n = ::pread(fd, out.data.data() + got, want - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.data.resize(got);
  out.more = offset + got < size;
  if (out.more) {
    const size_t keep = TrimToUtf8Boundary(out.data);
    out.data.resize(keep);
  }
  return out;
}

// FNV-1a, 64 bits: a stable name for a path too long for a socket address.
uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Claims `group` (the node's cgroup, relative to each hierarchy under `root`) for this process by binding an abstract
// unix socket named after it: the kernel frees the name when the process dies, however it dies, so a restarted agent
// gets it back and a second live agent of the same node is refused (it would reap the first one's workloads). Returns
// the socket, held for the agent's lifetime. Abstract names are per network namespace: agents in
// different namespaces sharing one cgroup tree are not told apart.
absl::StatusOr<int> ClaimNode(const std::string& node, const std::string& root, const std::string& group) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(fmt::format("socket: {}", std::strerror(errno)));
  struct sockaddr_un addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  const std::string name = fmt::format("gpugeek-agent-cgroup-{:016x}", Fnv1a(root + "/" + group));
  std::memcpy(addr.sun_path + 1, name.data(), name.size());  // sun_path[0] = '\0': abstract
  const auto len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + 1 + name.size());
  if (::bind(fd, reinterpret_cast<const struct sockaddr*>(&addr), len) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EADDRINUSE) {
      return absl::FailedPreconditionError(
          fmt::format("another agent named {} is running on this host (it holds the cgroups {} under {}); give "
                      "this one another --name",
                      node, group, root));
    }
    return absl::InternalError(fmt::format("cannot claim the cgroups {}: bind: {}", group, std::strerror(err)));
  }
  return fd;
}

const char* StateName(int state) {
  static constexpr const char* kNames[] = {"preparing", "running",         "stopping",
                                           "exited",    "failed-to-start", "not-started"};
  return kNames[state];
}

// The model checkout in `dir` verified with its model.sig against `signer_pem` (models/signing.h): OK, or
// the verifier's status with each problem on a line of its own.
absl::Status VerifyCheckout(const std::string& dir, const std::string& signer_pem) {
  absl::StatusOr<models::VerifyingKey> key = models::VerifyingKey::FromPem(signer_pem, "weights_signer key");
  if (!key.ok()) return key.status();
  const models::VerifyResult r = models::VerifyModel(dir, *key);
  if (r.status.ok()) return absl::OkStatus();
  std::string message = fmt::format("signature NOT verified with key {}: {}", key->KeyId().substr(0, 16),
                                    std::string(r.status.message()));
  for (const models::Problem& p : r.problems) message += "\n  " + p.message;
  return absl::Status(r.status.code(), message);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Agent>> Agent::Create(AgentOptions options) {
  if (options.server_url.empty()) return absl::InvalidArgumentError("AgentOptions.server_url must be set");
  if (options.discovery == nullptr) return absl::InvalidArgumentError("AgentOptions.discovery must be set");
  if (options.data_dir.empty()) return absl::InvalidArgumentError("AgentOptions.data_dir must be set");
  if (options.clock == nullptr) return absl::InvalidArgumentError("AgentOptions.clock must not be null");
  if (options.node.empty()) options.node = HostName();
  // The protocol's rule (the server refuses other names).
  RETURN_IF_ERROR(api::ValidateName("node name", options.node, api::NameKind::kNode));
  if (options.capacity_type != "on-demand" && options.capacity_type != "spot" && options.capacity_type != "reserved") {
    return absl::InvalidArgumentError(
        fmt::format("capacity type \"{}\" must be one of on-demand, spot, reserved", options.capacity_type));
  }
  if (options.heartbeat_interval <= Duration::zero()) {
    return absl::InvalidArgumentError("heartbeat interval must be positive");
  }
  RETURN_IF_ERROR(api::ValidateEngineRuntimes("engines", options.engines));
  if (options.max_log_bytes_per_workload == 0 || options.max_log_bytes_per_heartbeat == 0) {
    return absl::InvalidArgumentError("log byte caps must be positive");
  }
  if (options.max_log_bytes_per_workload > api::kMaxLogChunkBytes) {
    return absl::InvalidArgumentError(
        fmt::format("max_log_bytes_per_workload {} is over the protocol's {} bytes per chunk",
                    options.max_log_bytes_per_workload, api::kMaxLogChunkBytes));
  }
  if (options.base_env.empty()) options.base_env = DefaultBaseEnv();

  // The node credential kept from an earlier join, else the join token.
  std::string bearer = options.join_token;
  const std::string credential_path = options.data_dir + "/node.credential";
  if (std::filesystem::exists(credential_path)) {
    ASSIGN_OR_RETURN(std::string text, ReadFileBounded(credential_path, 4096, "node credential"));
    bearer = std::string(absl::StripAsciiWhitespace(text));
  }
  if (bearer.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "the agent has no node credential ({}) and no join token: an admin makes one with `gpugeek join-token "
        "create`, and the agent joins with --join-token TOKEN",
        credential_path));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<http::Client> client,
                   http::Client::Create({.base_url = options.server_url,
                                         .connect_timeout = options.connect_timeout,
                                         .read_timeout = options.request_timeout,
                                         .ca_file = options.ca_file,
                                         .bearer_token = bearer}));
  ASSIGN_OR_RETURN(hw::NodeInventory inventory, options.discovery->Discover());
  if (inventory.gpus.size() > api::kMaxGpusPerNode) {
    return absl::InvalidArgumentError(fmt::format("the node has {} GPUs; the protocol carries at most {}",
                                                  inventory.gpus.size(), api::kMaxGpusPerNode));
  }
  ASSIGN_OR_RETURN(std::string instance_id, api::NewInstanceId());
  RETURN_IF_ERROR(MakeDirs(options.data_dir + "/logs"));
  RETURN_IF_ERROR(MakeDirs(options.data_dir + "/work"));
  std::unique_ptr<CgroupManager> cgroups;
  if (options.cgroup_limits) {
    // One group per node under the parent, so agents sharing a host (tests, several emulated nodes)
    // never collide on a workload id.
    CgroupOptions per_node = options.cgroups;
    per_node.parent += "/" + options.node;
    ASSIGN_OR_RETURN(cgroups, CgroupManager::Create(per_node));
  }
  int claim_fd = -1;
  if (cgroups != nullptr && cgroups->mode() != CgroupMode::kNone) {
    ASSIGN_OR_RETURN(claim_fd,
                     ClaimNode(options.node, options.cgroups.root, options.cgroups.parent + "/" + options.node));
    // Whatever is in the node's groups now was started by a previous agent of this node (this one has
    // started nothing) that died without stopping it. The server re-assigns what should run.
    for (const ReapedGroup& r : cgroups->ReapOrphans()) {
      spdlog::warn("agent {}: killed {} process(es) left by a previous agent in cgroup {}", options.node, r.killed,
                   fmt::join(r.dirs, ", "));
      if (!r.status.ok()) spdlog::warn("agent {}: cannot remove the group: {}", options.node, r.status);
    }
  }
  std::unique_ptr<ImageWatcher> images;
  if (!options.podman.empty()) {
    if (absl::Status made = MakeDirs(options.data_dir + "/containers"); !made.ok()) {
      if (claim_fd >= 0) ::close(claim_fd);
      return made;
    }
    // Containers a previous agent of this node left (it was killed while they ran): as with its cgroups,
    // nothing of them is this agent's, and the server re-assigns what should run.
    const std::string prefix = fmt::format("gpugeek-{}-", options.node);
    absl::StatusOr<std::vector<std::string>> left = ListContainers(options.podman, prefix);
    if (!left.ok()) {
      spdlog::warn("agent {}: cannot list leftover containers: {}", options.node, left.status().message());
    } else {
      for (const std::string& name : *left) {
        absl::StatusOr<std::string> rm = RunCapture(ContainerRemoveArgv(options.podman, name));
        spdlog::warn("agent {}: removed container {} left by a previous agent{}", options.node, name,
                     rm.ok() ? "" : fmt::format(" (failed: {})", rm.status().message()));
      }
    }
    // Only images this node's driver and runtime can run are offered (image_requirements.h).
    images = std::make_unique<ImageWatcher>(
        options.podman, std::chrono::duration_cast<std::chrono::milliseconds>(options.image_refresh),
        [inventory](const LocalImage& image) { return WhyImageDoesNotFit(image.labels, inventory); });
    spdlog::info("agent {}: containers run with `{}`; images: [{}]", options.node, fmt::join(options.podman, " "),
                 fmt::join(images->images(), ", "));
  }
  if (options.run_as.map_path.empty()) options.run_as.map_path = options.data_dir + "/uids";
  absl::StatusOr<std::unique_ptr<Executor>> executor = Executor::Create({.log_dir = options.data_dir + "/logs",
                                                                         .clock = options.clock,
                                                                         .cgroups = cgroups.get(),
                                                                         .run_as = options.run_as});
  if (!executor.ok()) {
    if (claim_fd >= 0) ::close(claim_fd);
    return executor.status();
  }
  std::shared_ptr<AgentMetrics> metrics;
  if (options.metrics != nullptr) {
    metrics = AgentMetrics::Create(*options.metrics, options.node);
    metrics->SetInventory(inventory);
  }
  auto agent =
      std::unique_ptr<Agent>(new Agent(std::move(options), std::move(client), std::move(cgroups), std::move(*executor),
                                       std::move(metrics), std::move(inventory), claim_fd, std::move(instance_id)));
  agent->images_ = std::move(images);
  // The fetch threads may outlive the agent and so its borrowed clock, which they use only to time a log
  // line: they get the real one.
  ASSIGN_OR_RETURN(agent->datasets_, DatasetFetcher::Create(agent->options_.data_dir + "/datasets",
                                                            agent->VersionObjectGetter("datasets"), RealClock()));
  agent->model_getter_ = agent->VersionObjectGetter("models");
  agent->shared_bearer_->value = bearer;
  agent->bearer_ = std::move(bearer);
  return agent;
}

Agent::Agent(AgentOptions options, std::unique_ptr<http::Client> client, std::unique_ptr<CgroupManager> cgroups,
             std::unique_ptr<Executor> executor, std::shared_ptr<AgentMetrics> metrics, hw::NodeInventory inventory,
             int node_claim_fd, std::string instance_id)
    : options_(std::move(options)),
      node_(options_.node),
      client_(std::move(client)),
      cgroups_(std::move(cgroups)),
      executor_(std::move(executor)),
      node_claim_fd_(node_claim_fd),
      metrics_(std::move(metrics)),
      instance_id_(std::move(instance_id)),
      inventory_(std::move(inventory)),
      metrics_address_(options_.metrics_address),
      interval_(options_.heartbeat_interval),
      lease_(std::chrono::milliseconds(api::RegistrationReply{}.lease_ms)),
      fence_grace_(std::chrono::milliseconds(api::RegistrationReply{}.fence_grace_ms)) {
  // Downloads run on their own threads with their own client (http::Client is one thread's), presenting
  // the node's current credential.
  http::ClientOptions fetch_client{.base_url = options_.server_url,
                                   .connect_timeout = options_.connect_timeout,
                                   .read_timeout = options_.request_timeout,
                                   .ca_file = options_.ca_file};
  fetcher_ = WorkdirFetcher::Create(
      options_.data_dir + "/archives",
      [fetch_client, node = node_, bearer = shared_bearer_](
          const std::string& digest, const std::function<bool(const std::string&)>& sink) -> absl::Status {
        http::ClientOptions o = fetch_client;
        {
          std::lock_guard<std::mutex> lock(bearer->mu);
          o.bearer_token = bearer->value;
        }
        ASSIGN_OR_RETURN(std::unique_ptr<http::Client> c, http::Client::Create(o));
        return c->GetStream(fmt::format("/v1/agents/{}/archives/{}", node, digest), sink);
      });
}

DatasetFetcher* Agent::ModelCacheFor(const std::string& tenant) const {
  const std::string name = tenant.empty() ? "default" : tenant;  // a validated tenant name: a safe folder name
  std::lock_guard<std::mutex> lock(model_caches_mu_);
  auto it = model_caches_.find(name);
  if (it != model_caches_.end()) return it->second.get();
  // Creating makes three folders; done once per tenant.
  absl::StatusOr<std::shared_ptr<DatasetFetcher>> made =
      DatasetFetcher::Create(options_.data_dir + "/models/" + name, model_getter_, RealClock());
  if (!made.ok()) {
    spdlog::warn("agent {}: model cache of tenant {}: {}", node_, name, made.status());
    return nullptr;
  }
  return model_caches_.emplace(name, *std::move(made)).first->second.get();
}

std::vector<Agent::VersionInput> Agent::VersionInputs(const api::Assignment& a) const {
  std::vector<VersionInput> inputs;
  if (!a.dataset_commit.empty()) {
    inputs.push_back({.what = "dataset",
                      .label = fmt::format("{}@{}", a.dataset, a.dataset_commit.substr(0, 12)),
                      .name = a.dataset,
                      .commit = a.dataset_commit,
                      .cache = datasets_.get(),
                      .env_ref = "GPUGEEK_DATASET",
                      .ref = a.dataset + "@" + a.dataset_commit,
                      .env_dir = "GPUGEEK_DATASET_DIR",
                      .container_dir = kContainerDatasetDir});
  }
  DatasetFetcher* model_cache = a.model_commit.empty() ? nullptr : ModelCacheFor(a.tenant);
  if (model_cache != nullptr) {
    inputs.push_back({.what = "weights",
                      .label = fmt::format("{}/{}@{}", a.model_owner, a.model, a.model_commit.substr(0, 12)),
                      .name = a.model,
                      .commit = a.model_commit,
                      .cache = model_cache,
                      .env_ref = "GPUGEEK_MODEL",
                      .ref = fmt::format("{}/{}@{}", a.model_owner, a.model, a.model_commit),
                      .env_dir = "GPUGEEK_MODEL_DIR",
                      .container_dir = kContainerModelDir,
                      .signer_pem = a.model_signer_pem});
  }
  return inputs;
}

DatasetFetcher::GetObjectFn Agent::VersionObjectGetter(const std::string& collection) const {
  // http::Client is one thread's: each fetch thread takes an idle client presenting the current bearer
  // (or makes one) and puts it back after a whole answer, so a version of a million chunks reuses a few
  // connections instead of opening one per chunk.
  struct Pool {
    std::mutex mu;
    std::vector<std::pair<std::string, std::unique_ptr<http::Client>>> idle;  // (bearer, client)
  };
  const http::ClientOptions base{.base_url = options_.server_url,
                                 .connect_timeout = options_.connect_timeout,
                                 .read_timeout = options_.request_timeout,
                                 .ca_file = options_.ca_file};
  return [base, collection, node = node_, bearer = shared_bearer_, pool = std::make_shared<Pool>()](
             const std::string& commit, const std::string& digest) -> absl::StatusOr<std::string> {
    std::string token;
    {
      std::lock_guard<std::mutex> lock(bearer->mu);
      token = bearer->value;
    }
    std::unique_ptr<http::Client> client;
    {
      std::lock_guard<std::mutex> lock(pool->mu);
      while (client == nullptr && !pool->idle.empty()) {
        auto [with, idle] = std::move(pool->idle.back());
        pool->idle.pop_back();
        if (with == token) client = std::move(idle);  // a client of an old credential is dropped
      }
    }
    if (client == nullptr) {
      http::ClientOptions o = base;
      o.bearer_token = token;
      ASSIGN_OR_RETURN(client, http::Client::Create(o));
    }
    std::string bytes;
    bool too_large = false;
    RETURN_IF_ERROR(client->GetStream(fmt::format("/v1/agents/{}/{}/{}/objects/{}", node, collection, commit, digest),
                                      [&](const std::string& piece) {
                                        // Trees are the largest objects (chunks are at most 4 MiB as
                                        // `gpugeek data push` cuts them); a longer answer is refused.
                                        if (bytes.size() + piece.size() > data::kMaxTreeBytes) {
                                          too_large = true;
                                          return false;
                                        }
                                        bytes += piece;
                                        return true;
                                      }));
    if (too_large) {
      return absl::ResourceExhaustedError(
          fmt::format("the server sent more than {} bytes for object {}", data::kMaxTreeBytes, digest));
    }
    std::lock_guard<std::mutex> lock(pool->mu);
    pool->idle.emplace_back(std::move(token), std::move(client));
    return bytes;
  };
}

Agent::~Agent() {
  // The executor kills and reaps what still runs and removes the workloads' groups; the node's group is
  // then empty (unless a killed process was slow to leave: it stays, and the next agent reaps it).
  executor_.reset();
  if (cgroups_ != nullptr) {
    if (absl::Status s = cgroups_->RemoveParent(); !s.ok()) spdlog::warn("agent {}: {}", node_, s);
  }
  if (node_claim_fd_ >= 0) ::close(node_claim_fd_);
}

Duration Agent::heartbeat_interval() const {
  std::lock_guard<std::mutex> lock(mu_);
  return interval_;
}

void Agent::SetMetricsAddress(std::string address, bool tls) {
  std::lock_guard<std::mutex> lock(mu_);
  metrics_address_ = std::move(address);
  metrics_tls_ = tls;
}

std::string Agent::metrics_address() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_address_;
}

bool Agent::metrics_tls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_tls_;
}

bool Agent::registered() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registered_;
}

bool Agent::fenced() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fenced_;
}

Duration Agent::lease() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lease_;
}

Duration Agent::fence_grace() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fence_grace_;
}

std::string Agent::CgroupDescription() const {
  if (cgroups_ == nullptr) return "none: cgroup limits disabled (--no-cgroups)";
  return cgroups_->Describe();
}

std::vector<WorkloadStatus> Agent::Workloads() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<WorkloadStatus> out;
  for (const auto& [job, m] : members_) {
    out.push_back({.job_id = job,
                   .epoch = m.assignment.epoch,
                   .node_rank = m.assignment.node_rank,
                   .workload_id = m.workload_id,
                   .state = StateName(static_cast<int>(m.state)),
                   .pid = m.pid,
                   .message = m.report.message});
  }
  return out;
}

absl::Status Agent::UseBearer(const std::string& bearer) {
  ASSIGN_OR_RETURN(std::unique_ptr<http::Client> client,
                   http::Client::Create({.base_url = options_.server_url,
                                         .connect_timeout = options_.connect_timeout,
                                         .read_timeout = options_.request_timeout,
                                         .ca_file = options_.ca_file,
                                         .bearer_token = bearer}));
  client_ = std::move(client);
  bearer_ = bearer;
  {
    std::lock_guard<std::mutex> lock(shared_bearer_->mu);
    shared_bearer_->value = bearer;
  }
  return absl::OkStatus();
}

absl::Status Agent::Register() {
  // The version first: a list that changes while this registration travels is sent again next Tick.
  const uint64_t images_version = images_ != nullptr ? images_->version() : 0;
  api::Registration r{.node = node_,
                      .address = options_.address,
                      .inventory = inventory_,
                      .capacity_type = options_.capacity_type,
                      .region = options_.region,
                      .price_micros_per_gpu_hour = options_.price_micros_per_gpu_hour,
                      .min_rental_s = options_.min_rental_s,
                      .labels = options_.labels,
                      .metrics_address = metrics_address(),
                      .metrics_tls = metrics_tls(),
                      .instance_id = instance_id_,
                      .images = images_ != nullptr ? images_->images() : std::vector<std::string>{},
                      .unfit_images = images_ != nullptr ? images_->unfit() : std::map<std::string, std::string>{},
                      .engines = options_.engines};
  absl::StatusOr<nlohmann::json> body = client_->Post("/v1/agents/register", api::ToJson(r));
  if (!body.ok() && body.status().code() == absl::StatusCode::kUnauthenticated && bearer_ != options_.join_token &&
      !options_.join_token.empty()) {
    // The kept credential was refused (the node was removed from the pool): join again with the token.
    spdlog::warn("agent {}: the server refused the node credential in {} ({}); joining with the join token", node_,
                 credential_file(), body.status().message());
    RETURN_IF_ERROR(UseBearer(options_.join_token));
    body = client_->Post("/v1/agents/register", api::ToJson(r));
  }
  if (!body.ok()) return body.status();
  auto reply = api::RegistrationReplyFromJson(*body);
  if (!reply.ok()) {
    return absl::InvalidArgumentError(fmt::format("registration reply: {}", reply.status().message()));
  }
  if (!reply->node_credential.empty()) {
    // Joined: the credential is this node's from now on, kept before it is used so a crash cannot lose
    // it (the join token may have been its last use).
    RETURN_IF_ERROR(WriteFilePrivate(credential_file(), reply->node_credential + "\n"));
    RETURN_IF_ERROR(UseBearer(reply->node_credential));
    spdlog::info("agent {}: joined the pool; node credential kept in {}", node_, credential_file());
  }
  std::lock_guard<std::mutex> lock(mu_);
  registered_ = true;
  registered_images_version_ = images_version;
  if (reply->heartbeat_interval_ms > 0) interval_ = std::chrono::milliseconds(reply->heartbeat_interval_ms);
  lease_ = std::chrono::milliseconds(reply->lease_ms);
  fence_grace_ = std::chrono::milliseconds(reply->fence_grace_ms);
  exec_token_ = reply->exec_token;
  spdlog::info(
      "agent {}: registered with {} as instance {} ({} GPUs; heartbeat every {} ms, lease {} ms, fence grace {} ms)",
      node_, options_.server_url, instance_id_, inventory_.gpus.size(), Millis(interval_), Millis(lease_),
      Millis(fence_grace_));
  return absl::OkStatus();
}

void Agent::UpdateWorkloadsMetricLocked() {
  if (metrics_ != nullptr) metrics_->SetWorkloads(executor_->running_count());
}

void Agent::PollLocked() {
  // First: a workload its shim stopped because the lease ran out while this agent was frozen is then
  // reported as fenced (the agent fences on waking), not as failed.
  CheckLeaseLocked();
  std::vector<WorkloadExit> exits = executor_->Poll();
  if (metrics_ != nullptr) {
    for (const WorkloadExit& e : exits) metrics_->RecordExit(OutcomeOf(e));
    if (!exits.empty()) UpdateWorkloadsMetricLocked();
  }
  for (WorkloadExit& e : exits) {
    for (auto& [job, m] : members_) {
      if (m.workload_id != e.id || (m.state != State::kRunning && m.state != State::kStopping)) continue;
      if (!m.container.empty()) {
        // podman run --rm removed it when it ended by itself; not when podman was killed (a cancel's
        // SIGKILL after the grace, a fence): then the container may still run, outside the cgroup.
        RemoveContainerLater(m.container);
        m.container.clear();
      }
      std::string step_message;
      if (m.in_setup) {
        m.in_setup = false;
        if (e.succeeded() && m.state == State::kRunning && !fenced_) {
          m.setup_done = true;
          LaunchLocked(m);  // the run step, in the same working folder and log
          break;
        }
        if (!e.cancelled && e.exit_code.has_value() && *e.exit_code != 0) {
          step_message = fmt::format("setup failed (exit {})", *e.exit_code);
          // The job's log says why run never started, on its own line after the setup's output.
          if (FILE* f = std::fopen(executor_->LogPath(m.workload_id).c_str(), "a"); f != nullptr) {
            std::fprintf(f, "\n== gpugeek: %s; run not started ==\n", step_message.c_str());
            std::fclose(f);
          }
        } else {
          step_message = "setup " + e.Describe();
        }
      }
      m.state = State::kExited;
      m.pid = 0;
      m.ended_at = options_.clock->Monotonic();
      report_soon_ = true;
      // "fenced: " tells the server the workload did not fail: the agent stopped it on losing contact.
      m.report = {.job_id = job,
                  .epoch = m.assignment.epoch,
                  .phase = api::WorkloadPhase::kExited,
                  .exit_code = e.exit_code,
                  .term_signal = e.term_signal,
                  .message = BoundMessage(m.fenced ? fmt::format("{}the agent lost contact with the server "
                                                                 "for its {} ms lease; {}",
                                                                 api::kFencedPrefix, Millis(lease_), e.Describe())
                                          : !step_message.empty() ? step_message
                                                                  : e.Describe()),
                  .node_rank = m.assignment.node_rank};
      spdlog::info("agent {}: job {} (epoch {}, rank {}) {}", node_, job, m.assignment.epoch, m.assignment.node_rank,
                   m.report.message);
      break;
    }
  }
  AdvancePreparingLocked();
  ForgetDoneMembersLocked();
}

void Agent::AdvancePreparingLocked() {
  for (auto& [job, m] : members_) {
    if (m.state != State::kPreparing) continue;
    if (m.prepared.wait_for(std::chrono::seconds(0)) != std::future_status::ready) continue;
    const absl::Status prepared = m.prepared.get();
    if (!prepared.ok()) {
      FailStartLocked(m, prepared);
      continue;
    }
    if (fenced_) {
      // The server may be placing it elsewhere: nothing starts while fenced.
      m.state = State::kNotStarted;
      m.report = {.job_id = job,
                  .epoch = m.assignment.epoch,
                  .phase = api::WorkloadPhase::kExited,
                  .message = "fenced before it started: the agent lost contact with the server",
                  .node_rank = m.assignment.node_rank};
      report_soon_ = true;
      continue;
    }
    std::string versions;
    for (const VersionInput& v : VersionInputs(m.assignment)) {
      versions += fmt::format("; {} {} in {}", v.what, v.label, v.cache->PathOf(v.commit));
    }
    spdlog::info("agent {}: job {} (epoch {}): workdir and files unpacked into {}{}", node_, job, m.assignment.epoch,
                 options_.data_dir + "/work/" + m.workload_id, versions);
    LaunchLocked(m);
  }
}

void Agent::CheckLeaseLocked() {
  if (fenced_ || !last_ack_sent_.has_value()) return;
  const MonoTime expiry = *last_ack_sent_ + lease_;
  const MonoTime now = options_.clock->Monotonic();
  if (now < expiry) return;
  fenced_ = true;
  if (metrics_ != nullptr) metrics_->RecordFenced();
  int stopping = 0;
  for (auto& [job, m] : members_) {
    if (m.state != State::kRunning && m.state != State::kStopping) continue;
    // The grace counts from the lease's expiry, not from when this noticed it (a frozen or busy agent
    // notices late): the SIGKILL lands by last_ack_sent + lease + fence_grace, before the server re-places.
    const Duration grace =
        std::min<Duration>(std::chrono::milliseconds(std::max<int64_t>(0, m.assignment.grace_ms)), fence_grace_);
    const Duration left = std::max<Duration>(Duration::zero(), expiry + grace - now);
    // A workload already stopping keeps its SIGTERM; its SIGKILL moves earlier when this deadline is sooner.
    if (absl::Status s = executor_->Cancel(m.workload_id, left); !s.ok()) {
      spdlog::debug("agent {}: fence {}: {}", node_, m.workload_id, s);  // NotFound: it just ended
      continue;
    }
    if (m.state == State::kRunning) m.fenced = true;
    m.state = State::kStopping;
    ++stopping;
  }
  spdlog::error(
      "agent {}: fenced: no heartbeat sent in the last {} ms was answered (the lease); stopping {} workload(s) "
      "(SIGTERM now, SIGKILL within {} ms) and starting nothing until the server answers, as it will re-place them",
      node_, Millis(now - *last_ack_sent_), stopping,
      Millis(std::max<Duration>(Duration::zero(), expiry + fence_grace_ - now)));
}

Duration Agent::ShimLeaseLeftLocked() const {
  if (!last_ack_sent_.has_value()) return lease_ + kShimLeaseSlack;
  return *last_ack_sent_ + lease_ + kShimLeaseSlack - options_.clock->Monotonic();
}

void Agent::RenewLeaseLocked(MonoTime sent) {
  if (!last_ack_sent_.has_value() || sent > *last_ack_sent_) last_ack_sent_ = sent;
  if (!fenced_) return;
  const MonoTime now = options_.clock->Monotonic();
  if (now >= *last_ack_sent_ + lease_) return;  // answered, but too late to count: still fenced
  fenced_ = false;
  spdlog::warn("agent {}: the server answers again; no longer fenced (its reply decides what runs)", node_);
}

void Agent::ForgetDoneMembersLocked() {
  for (auto it = members_.begin(); it != members_.end();) {
    const Member& m = it->second;
    const bool ended = m.state != State::kRunning && m.state != State::kStopping && m.state != State::kPreparing;
    if (ended && !m.listed) {
      it = members_.erase(it);
    } else {
      ++it;
    }
  }
}

void Agent::FillEmulatedUtilization(std::vector<hw::GpuSample>& samples) {
  if (samples.size() != inventory_.gpus.size() ||
      std::none_of(inventory_.gpus.begin(), inventory_.gpus.end(),
                   [](const hw::GpuDevice& g) { return g.source == "emulated"; })) {
    return;
  }
  std::vector<GpuHolder> holders;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [job, m] : members_) {
      if (m.state != State::kRunning || m.pid <= 0) continue;
      GpuHolder h{.session = m.pid};
      for (const std::string& uuid : m.assignment.gpu_uuids) {
        for (size_t i = 0; i < inventory_.gpus.size(); ++i) {
          if (inventory_.gpus[i].uuid == uuid && inventory_.gpus[i].source == "emulated")
            h.devices.push_back(static_cast<int>(i));
        }
      }
      holders.push_back(std::move(h));
    }
  }
  // /proc is read without the lock.
  const std::map<int, uint32_t> busy = emulated_utilization_.Sample(holders, options_.clock->Monotonic());
  for (size_t i = 0; i < samples.size(); ++i) {
    if (inventory_.gpus[i].source != "emulated") continue;
    auto it = busy.find(static_cast<int>(i));
    samples[i].telemetry.utilization_percent = it == busy.end() ? 0 : it->second;
  }
}

api::Heartbeat Agent::BuildHeartbeat(std::map<std::string, uint64_t>& new_offsets) {
  api::Heartbeat hb;
  hb.node = node_;
  hb.instance_id = instance_id_;
  if (auto samples = options_.discovery->Sample(); samples.ok()) {
    if (metrics_ != nullptr) metrics_->RecordSamples(*samples);
    hb.samples = std::move(*samples);
  } else {
    spdlog::warn("agent {}: cannot sample GPU telemetry: {}", node_, samples.status());
  }
  FillEmulatedUtilization(hb.samples);
  std::lock_guard<std::mutex> lock(mu_);
  const MonoTime now = options_.clock->Monotonic();
  for (const auto& [job, m] : members_) {
    if (m.state == State::kRunning || m.state == State::kStopping || m.state == State::kPreparing) {
      hb.workloads.push_back({.job_id = job,
                              .epoch = m.assignment.epoch,
                              .phase = api::WorkloadPhase::kRunning,
                              .node_rank = m.assignment.node_rank,
                              .checkpoint_step = m.checkpoint_step});
    } else {
      hb.workloads.push_back(m.report);
      if (m.ended_at) {
        hb.workloads.back().ended_ms_ago = std::clamp<int64_t>(
            std::chrono::duration_cast<std::chrono::milliseconds>(now - *m.ended_at).count(), 0, api::kMaxEndedAgoMs);
      }
      // A checkpoint written on the SIGTERM of a planned stop arrives with the member's end.
      if (!hb.workloads.back().checkpoint_step) hb.workloads.back().checkpoint_step = m.checkpoint_step;
    }
    // Metrics not yet stored travel with every report, the exit's included (stored in the same pass).
    hb.workloads.back().metrics = m.metrics;
  }
  uint64_t budget = options_.max_log_bytes_per_heartbeat;
  for (auto& [id, source] : logs_) {
    if (source.drained || budget == 0) continue;
    if (hb.logs.size() >= api::kMaxReportsPerHeartbeat) break;  // the rest go next time
    auto read = ReadLog(executor_->LogPath(id), source.offset, std::min(budget, options_.max_log_bytes_per_workload));
    if (!read.ok()) {
      spdlog::warn("agent {}: {}", node_, read.status());
      continue;
    }
    if (read->data.empty()) continue;
    budget -= read->data.size();
    new_offsets[id] = source.offset + read->data.size();
    // Bytes from before this placement started (not yet shipped) count as its own from offset 0.
    hb.logs.push_back({.job_id = source.job_id,
                       .node_rank = source.node_rank,
                       .offset = source.offset > source.epoch_start ? source.offset - source.epoch_start : 0,
                       .data = std::move(read->data),
                       .epoch = source.epoch});
  }
  return hb;
}

absl::Status Agent::Tick() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    PollLocked();
    CheckLeaseLocked();
  }
  if (!registered()) RETURN_IF_ERROR(Register());
  if (images_ != nullptr) {
    bool changed = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      changed = images_->version() != registered_images_version_;
    }
    if (changed) {
      spdlog::info("agent {}: the node's images changed to [{}]; registering again", node_,
                   fmt::join(images_->images(), ", "));
      RETURN_IF_ERROR(Register());
    }
  }

  std::map<std::string, uint64_t> new_offsets;
  const api::Heartbeat hb = BuildHeartbeat(new_offsets);
  // Before the request: the server receives it later, so a lease counted from here ends first.
  const MonoTime sent = options_.clock->Monotonic();
  absl::StatusOr<nlohmann::json> body = PostHeartbeat(hb);
  if (!body.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      CheckLeaseLocked();
    }
    if (absl::IsNotFound(body.status())) {
      spdlog::warn("agent {}: the server does not know this node ({}); registering again", node_, body.status());
      {
        std::lock_guard<std::mutex> lock(mu_);
        registered_ = false;
      }
      return Register();
    }
    return body.status();
  }
  absl::StatusOr<api::HeartbeatReply> reply = api::HeartbeatReplyFromJson(*body);

  {
    // The server answered 2xx: it has the log bytes, whatever it thinks of the rest, and it renewed
    // its lease on this node. The shims' leases follow the agent's (plus the slack), counted from the
    // send time too, so the bound on their SIGKILL does not depend on how long the answer took.
    std::lock_guard<std::mutex> lock(mu_);
    RenewLeaseLocked(sent);
    CheckLeaseLocked();
    if (!fenced_) executor_->RenewLeases(ShimLeaseLeftLocked());
    for (const auto& [id, offset] : new_offsets) logs_[id].offset = offset;
    for (auto& [id, source] : logs_) {
      if (source.drained) continue;
      bool used = false;
      for (const auto& [job, m] : members_) used = used || m.workload_id == id;
      if (used) continue;
      struct stat st;
      if (::stat(executor_->LogPath(id).c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) <= source.offset) {
        source.drained = true;
      }
    }
  }
  if (!reply.ok()) {
    return absl::InvalidArgumentError(fmt::format("heartbeat reply: {}", reply.status().message()));
  }
  if (reply->reregister) {
    spdlog::warn("agent {}: the server asks this node to register again", node_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      registered_ = false;
    }
    return Register();
  }
  Reconcile(*reply);
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> Agent::PostHeartbeat(const api::Heartbeat& hb) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<nlohmann::json> body = client_->Post(fmt::format("/v1/agents/{}/heartbeat", node_), api::ToJson(hb));
  if (metrics_ != nullptr) {
    metrics_->RecordHeartbeat(body.ok(), std::chrono::steady_clock::now() - start, options_.clock->Now());
  }
  return body;
}

void Agent::CancelLocked(Member& m, int64_t grace_ms, const char* why) {
  if (m.state == State::kPreparing) {
    // Nothing runs yet; the preparation finishes on its thread and is then ignored.
    m.state = State::kNotStarted;
    m.report = {.job_id = m.assignment.job_id,
                .epoch = m.assignment.epoch,
                .phase = api::WorkloadPhase::kExited,
                .message = "cancelled before it started (while its workdir was prepared)",
                .node_rank = m.assignment.node_rank};
    report_soon_ = true;
    spdlog::info("agent {}: job {} (epoch {}) not started: {}", node_, m.assignment.job_id, m.assignment.epoch, why);
    return;
  }
  if (m.state != State::kRunning) return;
  const Duration grace = std::chrono::milliseconds(std::max<int64_t>(0, grace_ms));
  if (absl::Status s = executor_->Cancel(m.workload_id, grace); !s.ok()) {
    // NotFound: it ended between Poll and now; the next Poll reports it.
    spdlog::debug("agent {}: cancel {}: {}", node_, m.workload_id, s);
    return;
  }
  m.state = State::kStopping;
  spdlog::info("agent {}: stopping job {} (epoch {}): {}; SIGTERM now, SIGKILL after {} ms", node_, m.assignment.job_id,
               m.assignment.epoch, why, std::max<int64_t>(0, grace_ms));
}

void Agent::Reconcile(const api::HeartbeatReply& reply) {
  std::lock_guard<std::mutex> lock(mu_);
  // The desired state after fencing: one assignment per job, the highest epoch listed, none stale.
  std::map<std::string, const api::Assignment*> desired;
  for (const api::Assignment& a : reply.assignments) {
    auto [it, inserted] = desired.emplace(a.job_id, &a);
    if (!inserted && a.epoch > it->second->epoch) it->second = &a;
  }
  for (auto it = desired.begin(); it != desired.end();) {
    const api::Assignment& a = *it->second;
    Fence& fence = fences_[a.job_id];
    if (a.epoch < fence.max_seen) {
      if (fence.stale_logged != a.epoch) {
        spdlog::warn("agent {}: ignoring job {} at epoch {}: epoch {} was already seen (stale assignment)", node_,
                     a.job_id, a.epoch, fence.max_seen);
        fence.stale_logged = a.epoch;
      }
      it = desired.erase(it);
      continue;
    }
    fence.max_seen = a.epoch;
    ++it;
  }

  // What is held but not desired at its epoch stops; what is desired and new starts.
  for (auto& [job, m] : members_) {
    auto d = desired.find(job);
    m.listed = d != desired.end() && d->second->epoch == m.assignment.epoch;
    if (m.listed) {
      m.assignment = *d->second;  // the latest grace, cancel flag, ...
      const int64_t stored = m.assignment.metrics_stored;
      std::erase_if(m.metrics, [stored](const api::MetricPoint& p) { return p.seq < stored; });
      if (m.assignment.cancel) CancelLocked(m, m.assignment.grace_ms, "cancelled by the server");
    } else if (d != desired.end() && d->second->epoch > m.assignment.epoch) {
      CancelLocked(m, m.assignment.grace_ms, fmt::format("replaced by epoch {}", d->second->epoch).c_str());
    } else {
      CancelLocked(m, m.assignment.grace_ms, "no longer assigned to this node");
    }
  }
  ForgetDoneMembersLocked();

  // Fenced (this reply came back after the lease ran out): the server may be re-placing this node's work;
  // the first reply within the lease decides what starts.
  if (fenced_) return;
  for (const auto& [job, a] : desired) {
    if (members_.contains(job)) continue;  // held (same epoch), or the old epoch is still stopping
    Fence& fence = fences_[job];
    if (fence.handled.has_value() && a->epoch <= *fence.handled) continue;  // done that already
    fence.handled = a->epoch;
    if (a->cancel) {
      Member& m = members_[job];
      m.assignment = *a;
      m.workload_id = fmt::format("{}-{}", job, a->node_rank);
      m.state = State::kNotStarted;
      m.report = {.job_id = job,
                  .epoch = a->epoch,
                  .phase = api::WorkloadPhase::kExited,
                  .message = "cancelled before it started",
                  .node_rank = a->node_rank};
      continue;
    }
    StartLocked(*a);
  }
}

absl::StatusOr<LaunchRequest> Agent::MakeLaunchRequestLocked(const api::Assignment& a, const std::string& id,
                                                             const std::string& command,
                                                             const std::string& step) const {
  RETURN_IF_ERROR(ValidateWorkloadId(id));
  WorkloadSpec spec{.job_id = a.job_id,
                    .node_rank = a.node_rank,
                    .num_nodes = a.num_nodes,
                    .master_addr = a.master_addr,
                    .master_port = a.master_port,
                    .checkpoint_dir = a.checkpoint_dir,
                    .restart_count = a.restart_count,
                    .tp = a.tp,
                    .pp = a.pp,
                    .dp = a.dp,
                    .zero_stage = a.zero_stage,
                    .micro_batch = a.micro_batch};
  std::optional<hw::Vendor> vendor;
  std::set<std::string> seen;
  for (const std::string& uuid : a.gpu_uuids) {
    auto found = std::find_if(inventory_.gpus.begin(), inventory_.gpus.end(),
                              [&](const hw::GpuDevice& g) { return g.uuid == uuid; });
    if (found == inventory_.gpus.end()) {
      return absl::InvalidArgumentError(
          fmt::format("GPU {} is not on node {} (it has {} GPUs)", uuid, node_, inventory_.gpus.size()));
    }
    if (!seen.insert(uuid).second) return absl::InvalidArgumentError(fmt::format("GPU {} is assigned twice", uuid));
    const hw::GpuDevice& d = *found;
    if (vendor.has_value() && *vendor != d.vendor) {
      return absl::InvalidArgumentError(
          fmt::format("the assigned GPUs mix vendors ({} and {})", hw::VendorName(*vendor), hw::VendorName(d.vendor)));
    }
    vendor = d.vendor;
    spec.gpu_indices.push_back(d.source_index);  // the vendor library's numbering, as the runtime counts
  }
  if (vendor.has_value()) spec.vendor = *vendor;

  LaunchRequest req{.id = id, .command = command, .working_dir = options_.data_dir + "/work/" + id};
  if (req.command.empty()) return absl::InvalidArgumentError("the run command is empty");
  RETURN_IF_ERROR(MakeDirs(req.working_dir));
  req.env = options_.base_env;
  // The server checked the names at submission; an agent checks again, so a server that did not (or
  // an impostor) cannot steer the loader or the shell of a workload.
  for (const auto& [k, v] : a.env) {
    RETURN_IF_ERROR(api::CheckJobEnvName(k));
    req.env[k] = v;
  }
  req.tenant = a.tenant;
  for (auto& [k, v] : BuildWorkloadEnv(spec)) req.env[k] = std::move(v);
  for (const auto& [k, v] : a.platform_env) {
    RETURN_IF_ERROR(api::CheckPlatformEnv("platform_env", k, v));
    req.env[k] = v;
  }
  if (a.dataset.empty() != a.dataset_commit.empty()) {
    return absl::InvalidArgumentError("dataset: a dataset name and its commit come together");
  }
  if (!a.model_commit.empty() && ModelCacheFor(a.tenant) == nullptr) {
    return absl::UnavailableError(
        fmt::format("weights {}/{}: this node cannot make its model cache under {}/models (see the agent's log)",
                    a.model_owner, a.model, options_.data_dir));
  }
  for (const VersionInput& v : VersionInputs(a)) {
    // The protocol's decoder checked them; the commit becomes a path (and a podman mount), so again here.
    if (!archive::IsSha256Hex(v.commit)) {
      return absl::InvalidArgumentError(
          fmt::format("{} {}: the commit '{}' is not a SHA-256 (64 lower-case hex digits)", v.what, v.name,
                      v.commit.substr(0, 80)));
    }
    RETURN_IF_ERROR(data::ValidateRefName(v.name, v.what));
    req.env[v.env_ref] = v.ref;
    req.env[v.env_dir] = v.cache->PathOf(v.commit);
    if (a.image.empty()) {
      // In a container podman (root) mounts the checkout; on the host the member's user must reach it.
      ASSIGN_OR_RETURN(const Identity who, executor_->IdentityFor(a.tenant));
      if (who.switched) {
        absl::Status reachable =
            CheckReachable(std::filesystem::path(v.cache->PathOf(v.commit)).parent_path().string(), who);
        if (!reachable.ok()) {
          return absl::Status(reachable.code(),
                              fmt::format("{} {}: {}", v.what, v.label, std::string(reachable.message())));
        }
      }
    }
  }
  if (!a.engine.empty()) {
    // The format, and which of its runtimes this node has (the scheduler placed it where one is).
    std::vector<std::string> here;
    for (const std::string& runtime : api::RuntimesFor(a.engine)) {
      if (std::binary_search(options_.engines.begin(), options_.engines.end(), runtime)) here.push_back(runtime);
    }
    req.env["GPUGEEK_ENGINE"] = a.engine;
    req.env["GPUGEEK_ENGINE_RUNTIMES"] = absl::StrJoin(here, ",");
  }
  if (auto m = members_.find(a.job_id);
      m != members_.end() && !m->second.member_token.empty() && !workload_url_.empty()) {
    req.env["GPUGEEK_AGENT_URL"] = workload_url_;
    req.env["GPUGEEK_MEMBER_TOKEN"] = m->second.member_token;
  }
  if (cgroups_ != nullptr && cgroups_->mode() != CgroupMode::kNone) {
    req.limits = {.cpu_millis = static_cast<uint64_t>(std::max<int64_t>(0, a.cpu_milli)),
                  .memory_bytes = a.memory_bytes};
  }
  // If this agent dies or freezes, the shim stops the workload as the fence would: with the fence's grace
  // (min(grace_ms, fence_grace)), once the agent's lease (plus the slack) has run out.
  req.orphan_grace = std::min<Duration>(std::chrono::milliseconds(std::max<int64_t>(0, a.grace_ms)), fence_grace_);
  req.lease = std::max<Duration>(std::chrono::milliseconds(1), ShimLeaseLeftLocked());
  if (!a.image.empty()) {
    RETURN_IF_ERROR(ContainerizeLocked(a, step, vendor, spec.gpu_indices, req));
  }
  return req;
}

absl::Status Agent::ContainerizeLocked(const api::Assignment& a, const std::string& step,
                                       std::optional<hw::Vendor> vendor, const std::vector<int>& gpu_indices,
                                       LaunchRequest& req) const {
  if (options_.podman.empty()) {
    return absl::FailedPreconditionError(
        fmt::format("image {}: node {} runs no containers (start its agent with --podman)", a.image, node_));
  }
  const std::vector<std::string> images = images_->images();
  if (!std::binary_search(images.begin(), images.end(), a.image)) {
    return absl::FailedPreconditionError(
        fmt::format("image {} is not on node {} (podman images lists [{}])", a.image, node_, fmt::join(images, ", ")));
  }
  // The container's processes run as the tenant's user, as a member on the host would; podman itself
  // (rootful) runs as the agent: see LaunchRequest::as_agent.
  ASSIGN_OR_RETURN(const Identity who, executor_->IdentityFor(a.tenant));
  EnvMap inner = req.env;
  if (who.switched) inner["HOME"] = req.working_dir;
  for (const VersionInput& v : VersionInputs(a)) inner[v.env_dir] = v.container_dir;
  ASSIGN_OR_RETURN(const std::string env_text, ContainerEnvFile(inner));
  const std::string name = ContainerName(node_, req.id, a.epoch, step);
  const std::string env_file = options_.data_dir + "/containers/" + name + ".env";
  RETURN_IF_ERROR(WriteFilePrivate(env_file, env_text));
  std::vector<std::string> render_nodes;
  glob_t g{};
  if (::glob("/dev/dri/renderD*", 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) render_nodes.emplace_back(g.gl_pathv[i]);
  }
  ::globfree(&g);
  ContainerCommand c{
      .podman = options_.podman,
      .run_flags = options_.podman_run_flags,
      .name = name,
      .image = a.image,
      .working_dir = req.working_dir,
      .env_file = env_file,
      .devices = GpuDeviceNodes(vendor, gpu_indices, render_nodes,
                                [](const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }),
      .run = req.command,
  };
  for (const VersionInput& v : VersionInputs(a)) {
    c.read_only_mounts.emplace_back(v.cache->PathOf(v.commit), v.container_dir);
  }
  if (who.switched) c.user = std::pair<uint32_t, uint32_t>{who.uid, who.gid};
  req.command = ContainerShellCommand(c);
  // podman runs as root: none of the job's variables may steer it (CONTAINERS_CONF, TMPDIR, ...).
  req.env = {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}};
  req.as_agent = true;
  return absl::OkStatus();
}

void Agent::RemoveContainerLater(const std::string& name) const {
  std::thread([podman = options_.podman, name, env_file = options_.data_dir + "/containers/" + name + ".env"] {
    (void)RunCapture(ContainerRemoveArgv(podman, name));  // "no such container" when --rm removed it
    std::error_code ignored;
    std::filesystem::remove(env_file, ignored);
  }).detach();
}

void Agent::FailStartLocked(Member& m, const absl::Status& status) {
  const api::Assignment& a = m.assignment;
  m.state = State::kFailedToStart;
  m.report = {.job_id = a.job_id,
              .epoch = a.epoch,
              .phase = api::WorkloadPhase::kFailedToStart,
              .message = BoundMessage(std::string(status.message())),
              .node_rank = a.node_rank};
  report_soon_ = true;
  spdlog::warn("agent {}: job {} (epoch {}) failed to start: {}", node_, a.job_id, a.epoch, status.message());
  if (metrics_ != nullptr) metrics_->RecordExit(ExitOutcome::kFailed);
}

std::shared_future<absl::Status> Agent::PrepareWorkdir(const api::Assignment& a, const std::string& dir) {
  // What goes where, in order: the workdir into the folder, then each `files:` archive into its path.
  std::vector<std::tuple<std::string, std::string, std::shared_future<absl::StatusOr<std::string>>>> steps;
  if (!a.workdir_digest.empty()) steps.emplace_back("workdir", dir, fetcher_->Fetch(a.workdir_digest));
  for (const api::FileArchive& f : a.file_archives) {
    steps.emplace_back("files." + (f.path.empty() ? std::string(".") : f.path),
                       f.path.empty() ? dir : dir + "/" + f.path, fetcher_->Fetch(f.digest));
  }
  // The dataset and the model download meanwhile, on their fetchers' threads (at once when this node has
  // the version): (how errors name it, the fetch).
  struct Fetching {
    std::string label;
    std::shared_future<absl::StatusOr<std::string>> checkout;
    std::string signer_pem;
  };
  std::vector<Fetching> versions;
  for (const VersionInput& v : VersionInputs(a)) {
    versions.push_back({fmt::format("{} {}", v.what, v.label), v.cache->Fetch(v.name, v.commit), v.signer_pem});
  }
  // A member running as its tenant's user reads a checkout through its group; other tenants' users
  // cannot enter it. (A model another tenant shared is checked out for each tenant that runs it: a
  // checkout belongs to the last tenant that closed it, so two tenants sharing one version on a node
  // take turns. The dataset is always the job's own tenant's.)
  std::optional<gid_t> version_group;
  if (!versions.empty() && a.image.empty()) {
    if (absl::StatusOr<Identity> who = executor_->IdentityFor(a.tenant); who.ok() && who->switched) {
      version_group = who->gid;
    }
  }
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::shared_future<absl::Status> future = done->get_future().share();
  std::thread([steps = std::move(steps), versions = std::move(versions), version_group, done] {
    for (const auto& [what, into, fetch] : steps) {
      const absl::StatusOr<std::string>& path = fetch.get();
      if (!path.ok()) {
        done->set_value(absl::Status(path.status().code(),
                                     fmt::format("{}: fetching the archive: {}", what, path.status().message())));
        return;
      }
      absl::Status made = MakeDirs(into);
      absl::StatusOr<archive::UnpackStats> unpacked =
          made.ok() ? archive::UnpackWorkdir(*path, into) : absl::StatusOr<archive::UnpackStats>(made);
      if (!unpacked.ok()) {
        done->set_value(
            absl::Status(unpacked.status().code(), fmt::format("{}: {}", what, unpacked.status().message())));
        return;
      }
    }
    for (const Fetching& v : versions) {
      const std::string& label = v.label;
      const absl::StatusOr<std::string>& checkout = v.checkout.get();
      if (!checkout.ok()) {
        done->set_value(absl::Status(checkout.status().code(),
                                     fmt::format("{}: {}", label, std::string(checkout.status().message()))));
        return;
      }
      if (!v.signer_pem.empty()) {
        // Every file of the checkout against the signed manifest, before any member reads it.
        absl::Status verified = VerifyCheckout(*checkout, v.signer_pem);
        if (!verified.ok()) {
          done->set_value(absl::Status(verified.code(), fmt::format("{}: {}", label, verified.message())));
          return;
        }
      }
      if (version_group.has_value() &&
          (::chown(checkout->c_str(), 0, *version_group) != 0 || ::chmod(checkout->c_str(), 0750) != 0)) {
        done->set_value(absl::InternalError(
            fmt::format("{}: closing {} to the tenant's group: {}", label, *checkout, std::strerror(errno))));
        return;
      }
    }
    done->set_value(absl::OkStatus());
  }).detach();
  return future;
}

void Agent::StartLocked(const api::Assignment& a) {
  Member& m = members_[a.job_id];
  m = Member{.assignment = a, .workload_id = fmt::format("{}-{}", a.job_id, a.node_rank)};
  // 128 bits from the OS; without them the member runs without a token (it cannot report checkpoints).
  if (absl::StatusOr<std::string> token = api::NewInstanceId(); token.ok()) {
    m.member_token = std::move(*token);
  } else {
    spdlog::warn("agent {}: job {}: no member token: {}", node_, a.job_id, token.status());
  }
  if (a.workdir_digest.empty() && a.file_archives.empty() && a.dataset_commit.empty() && a.model_commit.empty()) {
    return LaunchLocked(m);
  }
  // A bad assignment (an unknown GPU, a bad id) fails now, before anything is fetched; this also makes
  // the working folder the archive is unpacked into.
  absl::StatusOr<LaunchRequest> req = MakeLaunchRequestLocked(a, m.workload_id, a.run);
  if (!req.ok()) return FailStartLocked(m, req.status());
  m.state = State::kPreparing;
  m.prepared = PrepareWorkdir(a, req->working_dir);
  report_soon_ = true;
  spdlog::info("agent {}: job {} (epoch {}, rank {}): preparing workdir {} and {} files archives in {}; dataset {}",
               node_, a.job_id, a.epoch, a.node_rank,
               a.workdir_digest.empty() ? "(none)" : a.workdir_digest.substr(0, 12), a.file_archives.size(),
               req->working_dir, a.dataset_commit.empty() ? "(none)" : VersionInputs(a).front().label);
}

void Agent::LaunchLocked(Member& m) {
  const api::Assignment& a = m.assignment;
  const bool setup = !a.setup.empty() && !m.setup_done;
  // Each step starts with a marker line, so the job's log shows where setup's output ends and run's begins.
  // `launcher: torch`: one process per local rank (one per GPU unless procs_per_node says).
  const int procs = a.procs_per_node > 0 ? a.procs_per_node : std::max<int>(1, static_cast<int>(a.gpu_uuids.size()));
  const std::string run =
      a.launcher == "torch" ? TorchLauncherCommand(a.run, procs, static_cast<int>((a.grace_ms + 999) / 1000)) : a.run;
  std::string command = run;
  if (setup) {
    command = fmt::format("printf '%s\\n' '== gpugeek: setup (node rank {}) =='\n{}", a.node_rank, a.setup);
  } else if (!a.setup.empty()) {
    command = fmt::format("printf '%s\\n' '== gpugeek: run (node rank {}) =='\n{}", a.node_rank, run);
  }
  absl::StatusOr<LaunchRequest> req = MakeLaunchRequestLocked(a, m.workload_id, command, setup ? "setup" : "run");
  if (!req.ok()) return FailStartLocked(m, req.status());
  const bool wants_limits = a.cpu_milli > 0 || a.memory_bytes > 0;
  if (wants_limits && req->limits.cpu_millis == 0 && req->limits.memory_bytes == 0 &&
      warned_no_limits_.insert(a.job_id).second) {
    spdlog::warn("agent {}: job {}: CPU/memory limits not enforced ({})", node_, a.job_id, CgroupDescription());
  }
  // Where this placement's output will start in the (appended) log file, measured before its first step.
  std::error_code size_error;
  const auto log_size = std::filesystem::file_size(executor_->LogPath(m.workload_id), size_error);
  absl::StatusOr<pid_t> pid = executor_->Start(*req);
  if (!pid.ok()) return FailStartLocked(m, pid.status());
  m.launch = *req;  // what `gpugeek exec` runs beside it with (ExecTargetFor)
  m.state = State::kRunning;
  m.pid = *pid;
  m.in_setup = setup;
  if (!a.image.empty()) m.container = ContainerName(node_, m.workload_id, a.epoch, setup ? "setup" : "run");
  report_soon_ = true;
  UpdateWorkloadsMetricLocked();
  if (!m.log_started) {
    m.log_started = true;
    LogSource& log = logs_[m.workload_id];
    log.job_id = a.job_id;
    log.node_rank = a.node_rank;
    log.drained = false;
    log.epoch = a.epoch;
    log.epoch_start = size_error ? 0 : static_cast<uint64_t>(log_size);
  }
  spdlog::info("agent {}: started {} of job {} (epoch {}, rank {}/{}, GPUs [{}]) as pid {}", node_,
               setup ? "setup" : "run", a.job_id, a.epoch, a.node_rank, a.num_nodes, fmt::join(a.gpu_uuids, ","), *pid);
}

bool Agent::StopRequested() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_requested_;
}

void Agent::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
}

void Agent::WaitFor(Duration d) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, d, [this] { return stop_requested_; });
}

absl::Status Agent::Run(std::stop_token stop) {
  std::stop_callback on_stop(stop, [this] { Stop(); });
  // The lease must be enforced on time even while Tick blocks in an HTTP request (up to request_timeout,
  // or registration retries backing off up to max_backoff): this thread fences and delivers the SIGKILLs.
  std::jthread watchdog([this](std::stop_token done) {
    while (!done.stop_requested()) {
      std::this_thread::sleep_for(kPollPeriod);
      std::lock_guard<std::mutex> lock(mu_);
      CheckLeaseLocked();
      PollLocked();
    }
  });
  // The reclaim notice has a thread of its own: a slow metadata service never delays a heartbeat.
  std::jthread notices;
  if (options_.reclaim_notice != nullptr) {
    notices = std::jthread([this](std::stop_token done) {
      while (!done.stop_requested() && !StopRequested()) {
        if (absl::Status st = PollReclaimNotice(); !st.ok()) spdlog::warn("agent {}: reclaim notice: {}", node_, st);
        WaitFor(options_.reclaim_poll);
      }
    });
  }
  Duration backoff = kMinBackoff;
  std::optional<bool> reachable;  // logged on change only
  while (!StopRequested()) {
    const auto start = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      report_soon_ = false;
    }
    const absl::Status status = Tick();
    if (status.ok()) {
      if (reachable != true) spdlog::info("agent {}: in contact with {}", node_, options_.server_url);
      reachable = true;
      backoff = kMinBackoff;
    } else if (reachable != false) {
      spdlog::warn("agent {}: {} ({}); retrying", node_,
                   registered() ? "heartbeat failed" : "cannot register with " + options_.server_url, status);
      reachable = false;
    }
    Duration wait = heartbeat_interval();
    if (!status.ok() && !registered()) {
      wait = backoff;
      backoff = std::min<Duration>(backoff * 2, options_.max_backoff);
    }
    const auto next = start + wait;
    while (!StopRequested()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= next) break;
      WaitFor(std::min<Duration>(kPollPeriod, next - now));
      std::lock_guard<std::mutex> lock(mu_);
      PollLocked();
      // A workload started or ended: tell the server now rather than at the next interval, so a job
      // turns RUNNING (and its GPUs come free) within a poll period of it happening.
      if (report_soon_ && registered_) break;
    }
  }
  Duration longest = Duration::zero();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [job, m] : members_) {
      if (m.state == State::kRunning || m.state == State::kStopping) {
        longest = std::max<Duration>(longest, std::chrono::milliseconds(std::max<int64_t>(0, m.assignment.grace_ms)));
      }
    }
  }
  spdlog::info("agent {}: stopping; cancelling {} workload(s)", node_, executor_->running_count());
  StopWorkloads(longest + std::chrono::seconds(5));
  return absl::OkStatus();
}

void Agent::StopWorkloads(Duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Workloads stopped because this agent is leaving did not fail: their exits are not reported, so
  // the server treats them as on a lost node (requeued elsewhere, or resumed here when the agent
  // comes back) instead of marking the jobs FAILED.
  std::set<std::string> stopped_by_shutdown;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [job, m] : members_) {
      if (m.state == State::kRunning) stopped_by_shutdown.insert(job);
      CancelLocked(m, m.assignment.grace_ms, "the agent is shutting down");
    }
  }
  while (executor_->running_count() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::lock_guard<std::mutex> lock(mu_);
    PollLocked();
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    PollLocked();
  }
  if (executor_->running_count() > 0) {
    spdlog::warn("agent {}: {} workload(s) still running after {} ms; they are killed now", node_,
                 executor_->running_count(), std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
  }
  if (registered()) {
    // Best effort: ship the last log bytes and the exits of workloads that ended on their own. Its
    // reply is not acted on.
    std::map<std::string, uint64_t> offsets;
    api::Heartbeat hb = BuildHeartbeat(offsets);
    std::erase_if(hb.workloads, [&](const api::WorkloadReport& w) { return stopped_by_shutdown.contains(w.job_id); });
    if (auto r = PostHeartbeat(hb); !r.ok()) {
      spdlog::info("agent {}: last heartbeat not delivered: {}", node_, r.status());
    }
  }
}

absl::StatusOr<const Agent::Member*> Agent::MemberLocked(const std::string& job_id, int node_rank) const {
  auto it = members_.find(job_id);
  if (it == members_.end() || it->second.assignment.node_rank != node_rank) {
    return absl::NotFoundError(fmt::format("node {} holds no member of job {} with rank {}", node_, job_id, node_rank));
  }
  return &it->second;
}

absl::StatusOr<pid_t> Agent::PortRootFor(const std::string& job_id, int node_rank) {
  pid_t pid = 0;
  std::string container;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(const Member* found, MemberLocked(job_id, node_rank));
    const Member& m = *found;
    if (m.state != State::kRunning || m.pid <= 0) {
      return absl::FailedPreconditionError(
          fmt::format("job {} rank {} is not running on node {}", job_id, node_rank, node_));
    }
    pid = m.pid;
    container = m.container;
  }
  if (container.empty()) return pid;
  std::vector<std::string> argv = options_.podman;
  argv.insert(argv.end(), {"inspect", "--format", "{{.State.Pid}}", container});
  ASSIGN_OR_RETURN(const std::string out, RunCapture(argv));
  int64_t container_pid = 0;
  const std::string text(absl::StripAsciiWhitespace(out));
  if (!absl::SimpleAtoi(text, &container_pid) || container_pid <= 0) {
    return absl::UnavailableError(
        fmt::format("container {} of job {} rank {} has no running process (podman said '{}')", container, job_id,
                    node_rank, text));
  }
  return static_cast<pid_t>(container_pid);
}

absl::Status Agent::PollReclaimNotice() {
  if (options_.reclaim_notice == nullptr || reclaim_reported_) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::optional<TimePoint> at, options_.reclaim_notice->Poll());
  if (!at) return absl::OkStatus();
  const int64_t seconds = NoticeSeconds(*at, options_.clock->Now());
  http::ClientOptions o{.base_url = options_.server_url,
                        .connect_timeout = options_.connect_timeout,
                        .read_timeout = options_.request_timeout,
                        .ca_file = options_.ca_file};
  {
    std::lock_guard<std::mutex> lock(shared_bearer_->mu);
    o.bearer_token = shared_bearer_->value;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<http::Client> client, http::Client::Create(o));
  RETURN_IF_ERROR(client->Post(fmt::format("/v1/agents/{}/reclaim", node_), {{"deadline_s", seconds}}).status());
  reclaim_reported_ = true;
  spdlog::warn("agent {}: reclaim notice from {}: the node goes in {} s; the server moves its jobs", node_,
               options_.reclaim_notice->Describe(), seconds);
  return absl::OkStatus();
}

void Agent::SetWorkloadUrl(std::string url) {
  std::lock_guard<std::mutex> lock(mu_);
  workload_url_ = std::move(url);
}

namespace {

// Constant time in `expected`'s bytes (its length is no secret).
bool SecretEquals(std::string_view presented, std::string_view expected) {
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(expected[i] ^ (i < presented.size() ? presented[i] : 0));
  }
  return diff == 0;
}

}  // namespace

absl::StatusOr<Agent::MetricAck> Agent::ReportMetric(std::string_view member_token, int64_t step, double value) {
  if (step < 0 || step > api::kMaxCheckpointStep) {
    return absl::InvalidArgumentError(
        fmt::format("step: {} is out of range; a report's step is 0..{}", step, api::kMaxCheckpointStep));
  }
  if (!std::isfinite(value)) return absl::InvalidArgumentError("value: must be a finite number");
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Member * member, LiveMemberByTokenLocked(member_token, "report"));
  Member& m = *member;
  const std::string who = MemberName(m);
  if (m.metrics.size() >= api::kMaxMetricsPerReport) {
    return absl::ResourceExhaustedError(
        fmt::format("job {}: {} reports wait for the server to store them; report less often (once per "
                    "evaluation) or retry after the next heartbeat",
                    who, m.metrics.size()));
  }
  const int64_t seq = m.next_metric_seq++;
  m.metrics.push_back({.seq = seq, .step = step, .value = value});
  report_soon_ = true;
  return MetricAck{.member = who, .seq = seq, .stop = m.assignment.cancel || m.state == State::kStopping};
}

std::string Agent::MemberName(const Member& m) {
  return fmt::format("{} rank {} epoch {}", m.assignment.job_id, m.assignment.node_rank, m.assignment.epoch);
}

absl::StatusOr<Agent::Member*> Agent::LiveMemberByTokenLocked(std::string_view member_token, std::string_view what) {
  for (auto& [job, m] : members_) {
    if (m.member_token.empty() || !SecretEquals(member_token, m.member_token)) continue;
    if (m.state != State::kRunning && m.state != State::kStopping) {
      return absl::FailedPreconditionError(
          fmt::format("job {} has ended here; its {} is not taken", MemberName(m), what));
    }
    return &m;
  }
  return absl::UnauthenticatedError(
      "no member of this node has that token: send the GPUGEEK_MEMBER_TOKEN of the job's environment "
      "(Authorization: Bearer)");
}

absl::StatusOr<std::string> Agent::ReportCheckpoint(std::string_view member_token, int64_t step) {
  if (step < 0 || step > api::kMaxCheckpointStep) {
    return absl::InvalidArgumentError(
        fmt::format("step: {} is out of range; a checkpoint's step is 0..{}", step, api::kMaxCheckpointStep));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(Member * member, LiveMemberByTokenLocked(member_token, "checkpoint"));
  Member& m = *member;
  const std::string who = MemberName(m);
  // A new step goes out with the next poll's heartbeat (at most one per poll period, however often a
  // workload posts); the same step again changes nothing.
  if (m.checkpoint_step != step) report_soon_ = true;
  m.checkpoint_step = step;
  spdlog::info("agent {}: job {}: checkpoint at step {} complete", node_, who, step);
  return who;
}

bool Agent::ExecTokenMatches(std::string_view presented) const {
  std::string expected;
  {
    std::lock_guard<std::mutex> lock(mu_);
    expected = exec_token_;
  }
  if (expected.empty()) return false;
  return SecretEquals(presented, expected);  // the length is no secret (64 hex digits), its content is
}

absl::StatusOr<ExecTarget> Agent::ExecTargetFor(const std::string& job_id, int node_rank) {
  ExecTarget target;
  std::string tenant;
  std::string container;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(const Member* found, MemberLocked(job_id, node_rank));
    const Member& m = *found;
    if ((m.state != State::kRunning) || m.launch.working_dir.empty()) {
      return absl::FailedPreconditionError(
          fmt::format("job {} rank {} is not running on node {}", job_id, node_rank, node_));
    }
    target = {.workload_id = m.workload_id, .working_dir = m.launch.working_dir, .env = m.launch.env};
    tenant = m.launch.tenant;
    container = m.container;
  }
  if (!container.empty()) {
    // Into the member's container: podman (rootful, as the agent, with the PATH-only environment the
    // member's podman run got) execs the command there as the member's user, in its working folder.
    ASSIGN_OR_RETURN(const Identity who, executor_->IdentityFor(tenant));
    std::optional<std::pair<uint32_t, uint32_t>> user;
    if (who.switched) user = std::pair<uint32_t, uint32_t>{who.uid, who.gid};
    target.wrap = ContainerExecArgv(options_.podman, container, user, target.working_dir, {});
    return target;
  }
  // The member's user: recorded when it started, so this reads the executor's table (no file written).
  ASSIGN_OR_RETURN(target.identity, executor_->IdentityFor(tenant));
  if (target.identity.switched) target.env["HOME"] = target.working_dir;  // as Executor::Start gives the member
  return target;
}

}  // namespace gpugeek::agent
