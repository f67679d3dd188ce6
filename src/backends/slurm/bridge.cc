#include "backends/slurm/bridge.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "absl/strings/strip.h"
#include "common/file.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"

namespace gpugeek::backends::slurm {

namespace fs = std::filesystem;

struct SlurmBridge::Node {
  std::string name;        // pool node name
  std::string slurm_name;  // Slurm's
  std::string address;
  std::string partition;
  hw::NodeInventory inventory;
  std::unique_ptr<http::Client> client;
  std::string bearer;
  std::string instance_id;
  bool registered = false;
  bool live = false;                         // Slurm has it up: it beats
  MonoTime last_answered{};                  // send time of the last heartbeat answered 2xx
  Duration lease = std::chrono::seconds(3);  // from the registration reply
  std::vector<api::Assignment> assignments;  // the last answered reply's; cleared when a beat fails
};

struct SlurmBridge::Gang {
  std::string job_id;
  int64_t epoch = 0;
  int num_nodes = 1;
  std::map<int, std::string> members;  // node_rank -> pool node
  std::map<int, api::Assignment> assignments;
  MonoTime first_seen{};
  int64_t slurm_id = 0;  // 0 = not submitted
  MonoTime submitted_at{};
  SlurmJob slurm;                         // as last read
  std::string refused;                    // why it could not start ("" = it did)
  bool ended = false;                     // Slurm ended it
  bool wanted = false;                    // a live node's last reply lists it
  bool stop_wanted = false;               // listed with cancel
  std::optional<MonoTime> terminated_at;  // SIGTERM sent
  bool killed = false;                    // SIGKILL sent
  bool fenced = false;                    // killed because a member's node lost its lease
  int64_t grace_ms = 30000;
  std::string workdir;
  uint64_t log_offset = 0;
};

namespace {

bool IsClusterName(const std::string& s) {
  if (s.empty() || s.size() > 32) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; });
}

// Slurm states in which the job's processes may run (or are about to).
bool Active(const std::string& state) {
  return state == "PENDING" || state == "CONFIGURING" || state == "RUNNING" || state == "COMPLETING" ||
         state == "SUSPENDED" || state == "RESIZING" || state == "REQUEUED" || state == "SIGNALING" ||
         state == "STAGE_OUT" || state.empty();
}

bool Started(const std::string& state) {
  return state == "RUNNING" || state == "COMPLETING" || state == "SUSPENDED" || state == "SIGNALING" ||
         state == "STAGE_OUT";
}

// What a gang member needs that only an agent provides.
std::string Unsupported(const api::Assignment& a) {
  if (!a.workdir_digest.empty()) return "a workdir archive";
  if (!a.file_archives.empty()) return "files archives";
  if (!a.dataset.empty()) return "a dataset";
  if (!a.model.empty()) return "model weights";
  if (!a.image.empty()) return "a container image";
  return "";
}

// "gpugeek:<job>:<epoch>" (batch.cc's --comment) -> {job, epoch}; {"", -1} otherwise.
std::pair<std::string, int64_t> ParseComment(const std::string& comment) {
  if (comment.rfind("gpugeek:", 0) != 0) return {"", -1};
  const size_t colon = comment.rfind(':');
  if (colon <= 8) return {"", -1};
  int64_t epoch = -1;
  try {
    epoch = std::stoll(comment.substr(colon + 1));
  } catch (...) {
    return {"", -1};
  }
  return {comment.substr(8, colon - 8), epoch};
}

}  // namespace

SlurmBridge::SlurmBridge(const BridgeOptions& options)
    : options_(options), clock_(options.clock != nullptr ? options.clock : &RealClock()) {}

SlurmBridge::~SlurmBridge() {
  if (lock_fd_ >= 0) close(lock_fd_);
}

absl::StatusOr<std::unique_ptr<SlurmBridge>> SlurmBridge::Create(const BridgeOptions& options) {
  if (!IsClusterName(options.cluster)) {
    return absl::InvalidArgumentError("cluster: 1 to 32 letters, digits or '-' (it names the region and the nodes)");
  }
  if (options.server_url.empty()) return absl::InvalidArgumentError("server_url: the control plane's agent URL");
  if (options.state_dir.empty()) return absl::InvalidArgumentError("state_dir: where node credentials are kept");
  if (options.gpu_models.empty()) {
    return absl::InvalidArgumentError("gpu_models: map each Slurm GRES type to a GPU model (e.g. a100=A100-SXM-80GB)");
  }
  for (const auto& [type, model] : options.gpu_models) {
    if (!hw::ParseEmulateSpec("1x" + model).ok()) {
      return absl::InvalidArgumentError(
          fmt::format("gpu_models: {} is not a GPU model of the catalog (`gpugeek catalog`)", QuoteForMessage(model)));
    }
  }
  if (options.job_root.empty() || options.job_root[0] != '/') {
    return absl::InvalidArgumentError("job_root: an absolute folder shared by every Slurm node");
  }
  std::error_code ec;
  fs::create_directories(options.state_dir, ec);
  fs::create_directories(options.job_root, ec);
  const fs::path state = fs::weakly_canonical(options.state_dir, ec);
  const fs::path root = fs::weakly_canonical(options.job_root, ec);
  if (state.string().rfind(root.string() + "/", 0) == 0 || state == root) {
    return absl::InvalidArgumentError(
        "state_dir: keep it out of job_root (jobs run there and could read the nodes' credentials)");
  }
  auto bridge = std::unique_ptr<SlurmBridge>(new SlurmBridge(options));
  fs::permissions(options.state_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  const std::string lock = (fs::path(options.state_dir) / "lock").string();
  bridge->lock_fd_ = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (bridge->lock_fd_ < 0 || flock(bridge->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(fmt::format(
        "state_dir {}: another slurm-bridge holds it (one bridge per cluster and state dir)", options.state_dir));
  }
  ASSIGN_OR_RETURN(bridge->slurm_, SlurmRest::Create(options.slurm));
  return bridge;
}

bool SlurmBridge::LeaseHeld(const Node& node) const {
  return node.registered && clock_->Monotonic() - node.last_answered <= node.lease;
}

absl::Status SlurmBridge::RegisterNode(Node& node) {
  const fs::path dir(options_.state_dir);
  const std::string credential_file = (dir / (node.name + ".credential")).string();
  const std::string instance_file = (dir / (node.name + ".instance")).string();
  if (node.bearer.empty()) {
    auto kept = ReadFileBounded(credential_file, 4096, "node credential");
    node.bearer = kept.ok() ? std::string(absl::StripAsciiWhitespace(*kept)) : options_.join_token;
  }
  if (node.bearer.empty()) {
    return absl::FailedPreconditionError(fmt::format("{}: no credential kept and no join token", node.name));
  }
  if (node.instance_id.empty()) {
    // Kept: a restarted bridge is the same agent reconnecting (its Slurm jobs still run), not a new one.
    auto kept = ReadFileBounded(instance_file, 256, "instance id");
    if (kept.ok() && !absl::StripAsciiWhitespace(*kept).empty()) {
      node.instance_id = std::string(absl::StripAsciiWhitespace(*kept));
    } else {
      ASSIGN_OR_RETURN(node.instance_id, api::NewInstanceId());
      RETURN_IF_ERROR(WriteFilePrivate(instance_file, node.instance_id + "\n"));
    }
  }
  http::ClientOptions o;
  o.base_url = options_.server_url;
  o.ca_file = options_.ca_file;
  o.bearer_token = node.bearer;
  o.read_timeout = std::chrono::seconds(2);  // below the lease: a stuck call must not hold the others
  ASSIGN_OR_RETURN(node.client, http::Client::Create(o));
  api::Registration r{.node = node.name,
                      .address = node.address,
                      .inventory = node.inventory,
                      .capacity_type = options_.capacity_type,
                      .region = "slurm-" + options_.cluster,
                      .price_micros_per_gpu_hour = options_.price_micros_per_gpu_hour,
                      .labels = {{"slurm-cluster", options_.cluster}, {"slurm-partition", node.partition}},
                      .instance_id = node.instance_id};
  auto body = node.client->Post("/v1/agents/register", api::ToJson(r));
  if (!body.ok() && body.status().code() == absl::StatusCode::kUnauthenticated && node.bearer != options_.join_token &&
      !options_.join_token.empty()) {
    node.bearer = options_.join_token;  // the kept credential was refused: join again
    return RegisterNode(node);
  }
  if (!body.ok()) return body.status();
  ASSIGN_OR_RETURN(const api::RegistrationReply reply, api::RegistrationReplyFromJson(*body));
  if (!reply.node_credential.empty()) {
    RETURN_IF_ERROR(WriteFilePrivate(credential_file, reply.node_credential + "\n"));
    node.bearer = reply.node_credential;
    o.bearer_token = node.bearer;
    ASSIGN_OR_RETURN(node.client, http::Client::Create(o));
  }
  node.registered = true;
  node.lease = std::chrono::milliseconds(reply.lease_ms);
  if (reply.heartbeat_interval_ms > 0) interval_ = std::chrono::milliseconds(reply.heartbeat_interval_ms);
  node.last_answered = clock_->Monotonic();
  spdlog::info("slurm bridge: {} registered ({} GPUs, Slurm node {})", node.name, node.inventory.gpus.size(),
               node.slurm_name);
  return absl::OkStatus();
}

std::vector<api::WorkloadReport> SlurmBridge::ReportsFor(const Node& node) const {
  std::vector<api::WorkloadReport> out;
  for (const auto& [key, g] : gangs_) {
    for (const auto& [rank, member_node] : g.members) {
      if (member_node != node.name) continue;
      api::WorkloadReport w{.job_id = g.job_id, .epoch = g.epoch, .node_rank = rank};
      const std::string& state = g.slurm.state;
      if (!g.refused.empty()) {
        w.phase = api::WorkloadPhase::kFailedToStart;
        w.message = g.refused.substr(0, api::kMaxMessageBytes);
      } else if (g.slurm_id == 0 || (!g.ended && !Started(state))) {
        continue;  // waiting for its gang, or for Slurm to start it: the member stays SCHEDULED
      } else if (!g.ended) {
        w.phase = api::WorkloadPhase::kRunning;
      } else {
        w.phase = api::WorkloadPhase::kExited;
        if (g.fenced || state == "NODE_FAIL" || state == "BOOT_FAIL" || state == "PREEMPTED" || state == "LOST") {
          // The platform ended it, not the workload: the control plane counts a node failure and places it again.
          w.message = fmt::format("{}Slurm job {} {}", api::kFencedPrefix, g.slurm_id,
                                  g.fenced ? "killed: the node lost its lease" : "ended " + state);
          w.term_signal = 9;
        } else if (g.slurm.ExitStatus() >= 0) {
          w.exit_code = g.slurm.ExitStatus();
          if (state != "COMPLETED") w.message = fmt::format("Slurm job {} ended {}", g.slurm_id, state);
        } else {
          w.term_signal = g.slurm.TermSignal();
          w.message = fmt::format("Slurm job {} ended {}", g.slurm_id, state);
        }
      }
      out.push_back(std::move(w));
    }
  }
  return out;
}

std::vector<api::LogChunk> SlurmBridge::LogsFor(const Node& node, std::vector<std::pair<Gang*, uint64_t>>& advance) {
  std::vector<api::LogChunk> out;
  for (auto& [key, g] : gangs_) {
    if (g.slurm_id == 0 || g.members.empty() || g.members.begin()->second != node.name) continue;
    const std::string file = fmt::format("{}/slurm-{}.out", g.workdir, g.slurm_id);
    // The job owns its folder: never follow a link it left there (to the bridge's credentials, say).
    const int fd = open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st {};
    std::string data;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > g.log_offset) {
      data.resize(static_cast<size_t>(std::min<uint64_t>(st.st_size - g.log_offset, 256 * 1024)));
      const ssize_t n = pread(fd, data.data(), data.size(), static_cast<off_t>(g.log_offset));
      data.resize(n > 0 ? static_cast<size_t>(n) : 0);
    }
    close(fd);
    if (data.empty()) continue;
    advance.emplace_back(&g, g.log_offset + data.size());
    out.push_back(
        api::LogChunk{.job_id = g.job_id, .node_rank = 0, .offset = g.log_offset, .data = data, .epoch = g.epoch});
  }
  return out;
}

void SlurmBridge::BeatNode(Node& node) {
  if (!node.registered) {
    if (auto st = RegisterNode(node); !st.ok()) {
      spdlog::warn("slurm bridge: {} cannot register: {}", node.name, std::string(st.message()));
      node.assignments.clear();
      return;
    }
  }
  api::Heartbeat hb{.node = node.name, .instance_id = node.instance_id};
  // Health only: the bridge cannot see the GPUs' utilisation (unknown, not idle).
  for (const hw::GpuDevice& g : node.inventory.gpus) hb.samples.push_back(hw::GpuSample{hw::GpuTelemetry{}, g.health});
  hb.workloads = ReportsFor(node);
  std::vector<std::pair<Gang*, uint64_t>> advance;
  hb.logs = LogsFor(node, advance);
  const MonoTime sent = clock_->Monotonic();
  auto body = node.client->Post(fmt::format("/v1/agents/{}/heartbeat", node.name), api::ToJson(hb));
  auto reply = body.ok() ? api::HeartbeatReplyFromJson(*body) : absl::StatusOr<api::HeartbeatReply>(body.status());
  if (!reply.ok()) {
    spdlog::warn("slurm bridge: heartbeat of {}: {}", node.name, std::string(reply.status().message()));
    const absl::StatusCode code = reply.status().code();
    if (code == absl::StatusCode::kUnauthenticated || code == absl::StatusCode::kNotFound) node.registered = false;
    node.assignments.clear();
    return;
  }
  node.last_answered = sent;
  for (const auto& [g, offset] : advance) g->log_offset = offset;  // the control plane has these bytes
  if (reply->reregister) {
    node.registered = false;
    node.assignments.clear();
    return;
  }
  node.assignments = reply->assignments;
}

void SlurmBridge::UpdateNodes(const std::vector<SlurmNode>& nodes) {
  std::set<std::string> seen;
  for (const SlurmNode& s : nodes) {
    if (s.gpus.empty()) continue;
    const auto model = options_.gpu_models.find(s.gpus[0].type);
    if (model == options_.gpu_models.end()) {
      if (unmapped_logged_.insert(s.name).second) {
        spdlog::warn("slurm bridge: Slurm node {} has GRES type '{}', not in gpu_models: left out of the pool", s.name,
                     s.gpus[0].type);
      }
      continue;
    }
    const std::string name = options_.cluster + "-" + s.name;
    auto it = nodes_.find(name);
    if (it == nodes_.end()) {
      auto spec = hw::ParseEmulateSpec(fmt::format("{}x{}", TotalGpus(s.gpus), model->second));
      if (!spec.ok()) {
        if (unmapped_logged_.insert(s.name).second) {
          spdlog::warn("slurm bridge: Slurm node {}: {}", s.name, std::string(spec.status().message()));
        }
        continue;
      }
      auto node = std::make_unique<Node>();
      node->name = name;
      node->slurm_name = s.name;
      hw::HostInfo host{.hostname = s.name,
                        .cpu_cores = static_cast<int>(std::min<int64_t>(s.cpus, 1 << 20)),
                        .memory_bytes = static_cast<uint64_t>(s.memory_bytes)};
      node->inventory = hw::BuildEmulatedInventory(*spec, name, host);
      for (hw::GpuDevice& g : node->inventory.gpus) g.source = "slurm";
      it = nodes_.emplace(name, std::move(node)).first;
    }
    seen.insert(name);
    Node& node = *it->second;
    node.address = s.address.empty() ? s.name : s.address;
    node.partition = s.partitions.empty() ? "" : s.partitions[0];
    node.live = s.Condition() != NodeCondition::kDown;
    if (!node.live) node.assignments.clear();
  }
  for (auto& [name, node] : nodes_) {
    if (!seen.count(name)) {
      node->live = false;
      node->assignments.clear();
    }
  }
}

void SlurmBridge::Adopt() {
  auto jobs = slurm_->Jobs();
  if (!jobs.ok()) return;
  for (const SlurmJob& j : *jobs) {
    const auto [job_id, epoch] = ParseComment(j.comment);
    if (job_id.empty() || !Active(j.state)) continue;
    Gang& g = gangs_[{job_id, epoch}];
    if (g.slurm_id != 0) continue;
    g.job_id = job_id;
    g.epoch = epoch;
    g.slurm_id = j.id;
    g.slurm = j;
    g.first_seen = g.submitted_at = clock_->Monotonic();
    g.workdir = fmt::format("{}/{}/e{}", options_.job_root, job_id, epoch);
    newest_epoch_[job_id] = std::max(newest_epoch_[job_id], epoch);
    spdlog::info("slurm bridge: adopted Slurm job {} ({} epoch {}) from an earlier run", j.id, job_id, epoch);
  }
  adopted_ = true;
}

void SlurmBridge::CollectAssignments() {
  for (auto& [key, g] : gangs_) {
    g.wanted = false;
    g.stop_wanted = false;
  }
  const MonoTime now = clock_->Monotonic();
  for (const auto& [name, node] : nodes_) {
    if (!node->live || !LeaseHeld(*node)) continue;
    for (const api::Assignment& a : node->assignments) {
      int64_t& newest = newest_epoch_[a.job_id];
      if (a.epoch < newest) continue;  // fenced: a newer placement of the job exists
      newest = a.epoch;
      Gang& g = gangs_[{a.job_id, a.epoch}];
      if (g.job_id.empty()) {
        g.job_id = a.job_id;
        g.epoch = a.epoch;
        g.first_seen = now;
      }
      g.num_nodes = a.num_nodes;
      g.wanted = true;
      g.stop_wanted |= a.cancel;
      g.grace_ms = a.grace_ms;
      g.members[a.node_rank] = name;
      g.assignments[a.node_rank] = a;
    }
  }
}

bool SlurmBridge::SubmitGang(Gang& g) {
  const api::Assignment& first = g.assignments.begin()->second;
  if (const std::string what = Unsupported(first); !what.empty()) {
    g.refused = fmt::format("Slurm nodes cannot fetch {} (an agent node can)", what);
    return false;
  }
  GangJob job;
  job.job_id = g.job_id;
  job.epoch = g.epoch;
  const Node& n0 = *nodes_.at(g.members.begin()->second);
  for (const auto& [rank, n] : g.members) {
    job.nodes.push_back(nodes_.at(n)->slurm_name);
    job.gpus_per_node = std::max(job.gpus_per_node, static_cast<int>(g.assignments[rank].gpu_uuids.size()));
  }
  job.master_address = n0.address;
  job.master_port = first.master_port > 0 ? first.master_port : 29500;
  for (const auto& [type, model] : options_.gpu_models) {
    if (!n0.inventory.gpus.empty() && n0.inventory.gpus[0].model_id == model) job.gpu_type = type;
  }
  job.tasks_per_node =
      first.launcher == "torch" ? std::max(1, first.procs_per_node > 0 ? first.procs_per_node : job.gpus_per_node) : 1;
  job.partition = options_.partition;
  job.workdir = fmt::format("{}/{}/e{}", options_.job_root, g.job_id, g.epoch);
  // `setup` once per node: its first task runs it, the others wait for it (srun --kill-on-bad-exit ends them
  // if it fails).
  std::string run = first.run;
  if (!first.setup.empty()) {
    const std::string done = "\"$PWD/.gpugeek-setup-$SLURMD_NODENAME\"";
    run = fmt::format(
        "if [ \"${{SLURM_LOCALID:-0}}\" = 0 ]; then (set -e\n{}\n) && touch {} || exit 1; else while [ ! -e {} ]; "
        "do sleep 0.2; done; fi\nexec /bin/sh -c {}",
        first.setup, done, done, ShellQuote(first.run));
  }
  job.command = {"/bin/sh", "-c", run};
  for (const auto& [k, v] : first.env) job.env.emplace_back(k, v);
  for (const auto& [k, v] : first.platform_env) job.platform_env.emplace_back(k, v);
  if (first.cpu_milli > 0) {
    job.cpus_per_task = static_cast<int>(
        std::min<int64_t>((first.cpu_milli + 1000 * job.tasks_per_node - 1) / (1000 * job.tasks_per_node), 1024));
  }
  job.memory_per_node_bytes = static_cast<int64_t>(std::min<uint64_t>(first.memory_bytes, uint64_t{1} << 50));
  if (auto st = Validate(job); !st.ok()) {
    g.refused = std::string(st.message());
    return false;
  }
  std::error_code ec;
  fs::create_directories(job.workdir, ec);
  g.workdir = job.workdir;
  auto id = slurm_->Submit(job);
  if (!id.ok() && (id.status().code() == absl::StatusCode::kInternal ||
                   id.status().code() == absl::StatusCode::kDeadlineExceeded)) {
    // The outcome is unclear: the job may exist. Look it up by its comment before anything else.
    if (auto jobs = slurm_->Jobs(); jobs.ok()) {
      for (const SlurmJob& j : *jobs) {
        if (ParseComment(j.comment) == std::make_pair(g.job_id, g.epoch)) id = j.id;
      }
    }
  }
  if (!id.ok()) {
    g.refused = std::string(id.status().message());
    spdlog::warn("slurm bridge: {} epoch {}: {}", g.job_id, g.epoch, g.refused);
    return false;
  }
  g.slurm_id = *id;
  g.submitted_at = clock_->Monotonic();
  spdlog::info("slurm bridge: {} epoch {} is Slurm job {} on {}", g.job_id, g.epoch, g.slurm_id,
               fmt::join(job.nodes, ","));
  return true;
}

void SlurmBridge::SubmitGangs() {
  const MonoTime now = clock_->Monotonic();
  for (auto& [key, g] : gangs_) {
    if (!g.wanted || g.stop_wanted || g.slurm_id != 0 || !g.refused.empty()) continue;
    std::set<std::string> distinct;
    for (const auto& [rank, n] : g.members) distinct.insert(n);
    if (static_cast<int>(g.members.size()) < g.num_nodes || distinct.size() < g.members.size()) {
      if (now - g.first_seen > options_.gang_wait) {
        g.refused =
            distinct.size() < g.members.size()
                ? "two members of this gang on one Slurm node: Slurm runs one task set per node"
                : fmt::format("only {} of {} members on Slurm cluster {}: a gang cannot span it and other nodes",
                              g.members.size(), g.num_nodes, options_.cluster);
      }
      continue;
    }
    // An older placement of the job must have ended in Slurm first (FollowGangs stops it).
    bool older_running = false;
    for (const auto& [other_key, other] : gangs_) {
      older_running |= other_key.first == g.job_id && other_key.second < g.epoch && other.slurm_id != 0 && !other.ended;
    }
    if (!older_running) SubmitGang(g);
  }
}

void SlurmBridge::FollowGangs() {
  const MonoTime now = clock_->Monotonic();
  for (auto it = gangs_.begin(); it != gangs_.end();) {
    Gang& g = it->second;
    if (g.slurm_id != 0 && !g.ended) {
      if ((!g.wanted || g.stop_wanted) && !g.terminated_at) {
        // Cancelled, re-placed or no longer listed: SIGTERM (its checkpoint chance), SIGKILL after the grace.
        if (slurm_->Terminate(g.slurm_id).ok()) g.terminated_at = now;
      } else if (g.terminated_at && !g.killed && now - *g.terminated_at > std::chrono::milliseconds(g.grace_ms)) {
        if (slurm_->Cancel(g.slurm_id).ok()) g.killed = true;
      }
      auto job = slurm_->Job(g.slurm_id);
      if (job.ok()) {
        g.slurm = *job;
        g.ended = !Active(job->state);
        if (job->state == "PENDING" && !g.killed && now - g.submitted_at > options_.pending_timeout) {
          if (slurm_->Cancel(g.slurm_id).ok()) g.killed = true;
          g.refused = fmt::format("Slurm held job {} PENDING ({}) for {} s", g.slurm_id, job->reason,
                                  std::chrono::duration_cast<std::chrono::seconds>(options_.pending_timeout).count());
        }
      } else if (job.status().code() == absl::StatusCode::kNotFound) {
        g.ended = true;
        g.slurm.state = "LOST";  // Slurm forgot it before we saw its end
      }
    }
    // Forget a gang once no node lists it and Slurm is done with it.
    if (!g.wanted && (g.slurm_id == 0 || g.ended)) {
      it = gangs_.erase(it);
    } else {
      ++it;
    }
  }
}

void SlurmBridge::FenceExpired() {
  for (auto& [key, g] : gangs_) {
    if (g.slurm_id == 0 || g.ended || g.killed) continue;
    for (const auto& [rank, n] : g.members) {
      if (LeaseHeld(*nodes_.at(n))) continue;
      // As an agent fences itself: the control plane re-places this member after the lease.
      spdlog::warn("slurm bridge: {} lost its lease; killing Slurm job {}", n, g.slurm_id);
      if (slurm_->Cancel(g.slurm_id).ok()) {
        g.killed = true;
        g.fenced = true;
      }
      break;
    }
  }
}

void SlurmBridge::StopAll() {
  for (auto& [key, g] : gangs_) {
    if (g.slurm_id == 0 || g.ended || g.killed) continue;
    if (slurm_->Cancel(g.slurm_id).ok()) g.killed = true;
  }
}

absl::Status SlurmBridge::Tick() {
  absl::Status result = absl::OkStatus();
  auto nodes = slurm_->Nodes();
  if (nodes.ok()) {
    slurm_down_since_.reset();
    UpdateNodes(*nodes);
    if (!adopted_) Adopt();
  } else {
    // Slurm may still run everything: keep beating with the last state for a while.
    const MonoTime now = clock_->Monotonic();
    if (!slurm_down_since_) slurm_down_since_ = now;
    if (now - *slurm_down_since_ > options_.slurm_outage_grace) {
      for (auto& [name, node] : nodes_) node->live = false;
    }
    result = nodes.status();
  }
  for (auto& [name, node] : nodes_) {
    if (node->live) BeatNode(*node);
  }
  FenceExpired();
  if (nodes.ok()) {
    CollectAssignments();
    SubmitGangs();
    FollowGangs();
  }
  return result;
}

}  // namespace gpugeek::backends::slurm
