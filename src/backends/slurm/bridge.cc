#include "backends/slurm/bridge.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

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
  bool live = false;                         // beating this pass
  MonoTime last_answered{};                  // send time of the last heartbeat answered 2xx
  Duration lease = std::chrono::seconds(3);  // from the registration reply
  std::vector<api::Assignment> assignments;  // the last reply's
};

struct SlurmBridge::Gang {
  std::string job_id;
  int64_t epoch = 0;
  int num_nodes = 1;
  std::map<int, std::string> members;  // node_rank -> pool node
  std::map<int, api::Assignment> assignments;
  MonoTime first_seen{};
  int64_t slurm_id = 0;  // 0 = not submitted
  std::string state;     // Slurm's, once submitted
  int64_t exit_code = 0;
  std::string refused;     // why it could not start ("" = it did)
  bool ended = false;      // Slurm ended it (or it never started)
  bool cancelled = false;  // we asked Slurm to cancel it
  std::string workdir;
  uint64_t log_offset = 0;
  bool wanted = false;  // some node's last reply still lists it
};

namespace {

bool IsClusterName(const std::string& s) {
  if (s.empty() || s.size() > 32) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; });
}

bool Active(const std::string& state) {
  return state == "PENDING" || state == "CONFIGURING" || state == "RUNNING" || state == "COMPLETING" ||
         state == "SUSPENDED" || state == "RESIZING" || state == "REQUEUED" || state.empty();
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

}  // namespace

SlurmBridge::SlurmBridge(const BridgeOptions& options)
    : options_(options), clock_(options.clock != nullptr ? options.clock : &RealClock()) {}
SlurmBridge::~SlurmBridge() = default;

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
      return absl::InvalidArgumentError(fmt::format(
          "gpu_models: {} is not a GPU model of the catalog (`gpugeek devices --catalog`)", QuoteForMessage(model)));
    }
  }
  if (options.job_root.empty() || options.job_root[0] != '/') {
    return absl::InvalidArgumentError("job_root: an absolute folder shared by every Slurm node");
  }
  auto bridge = std::unique_ptr<SlurmBridge>(new SlurmBridge(options));
  ASSIGN_OR_RETURN(bridge->slurm_, SlurmRest::Create(options.slurm));
  std::error_code ec;
  fs::create_directories(options.state_dir, ec);
  fs::create_directories(options.job_root, ec);
  return bridge;
}

std::vector<std::string> SlurmBridge::LiveNodes() const {
  std::vector<std::string> out;
  for (const auto& [name, node] : nodes_) {
    if (node->live) out.push_back(name);
  }
  return out;
}

absl::Status SlurmBridge::RegisterNode(Node& node) {
  const std::string credential_file = (fs::path(options_.state_dir) / (node.name + ".credential")).string();
  if (node.bearer.empty()) {
    auto kept = ReadFileBounded(credential_file, 4096, "node credential");
    node.bearer = kept.ok() ? std::string(absl::StripAsciiWhitespace(*kept)) : options_.join_token;
  }
  if (node.bearer.empty()) {
    return absl::FailedPreconditionError(fmt::format("{}: no credential kept and no join token", node.name));
  }
  http::ClientOptions o;
  o.base_url = options_.server_url;
  o.ca_file = options_.ca_file;
  o.bearer_token = node.bearer;
  ASSIGN_OR_RETURN(node.client, http::Client::Create(o));
  if (node.instance_id.empty()) {
    ASSIGN_OR_RETURN(node.instance_id, api::NewInstanceId());
  }
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
      if (!g.refused.empty()) {
        w.phase = api::WorkloadPhase::kFailedToStart;
        w.message = g.refused.substr(0, api::kMaxMessageBytes);
      } else if (g.slurm_id == 0) {
        continue;  // waiting for the rest of its gang
      } else if (!g.ended) {
        w.phase = api::WorkloadPhase::kRunning;
      } else {
        w.phase = api::WorkloadPhase::kExited;
        if (g.state == "NODE_FAIL") {
          w.message = std::string(api::kFencedPrefix) + "Slurm node failure (NODE_FAIL)";
          w.term_signal = 9;
        } else if (g.state == "COMPLETED") {
          w.exit_code = static_cast<int>(g.exit_code);
        } else {
          w.exit_code = g.exit_code != 0 ? static_cast<int>(std::min<int64_t>(g.exit_code, 255)) : 1;
          w.message = fmt::format("Slurm job {} ended {}", g.slurm_id, g.state);
        }
      }
      out.push_back(std::move(w));
    }
  }
  return out;
}

std::vector<api::LogChunk> SlurmBridge::LogsFor(const Node& node) {
  std::vector<api::LogChunk> out;
  for (auto& [key, g] : gangs_) {
    if (g.slurm_id == 0 || g.members.empty() || g.members.begin()->second != node.name) continue;
    const std::string file = fmt::format("{}/slurm-{}.out", g.workdir, g.slurm_id);
    std::ifstream in(file, std::ios::binary);
    if (!in) continue;
    in.seekg(static_cast<std::streamoff>(g.log_offset));
    std::string data(64 * 1024, '\0');
    in.read(data.data(), static_cast<std::streamsize>(data.size()));
    data.resize(static_cast<size_t>(in.gcount()));
    if (data.empty()) continue;
    out.push_back(
        api::LogChunk{.job_id = g.job_id, .node_rank = 0, .offset = g.log_offset, .data = data, .epoch = g.epoch});
    g.log_offset += data.size();  // a lost heartbeat loses these bytes from the log, never the job
  }
  return out;
}

void SlurmBridge::BeatNode(Node& node) {
  if (!node.registered) {
    if (auto st = RegisterNode(node); !st.ok()) {
      spdlog::warn("slurm bridge: {} cannot register: {}", node.name, std::string(st.message()));
      return;
    }
  }
  api::Heartbeat hb{.node = node.name, .instance_id = node.instance_id};
  for (const hw::GpuDevice& g : node.inventory.gpus) hb.samples.push_back(hw::GpuSample{g.telemetry, g.health});
  hb.workloads = ReportsFor(node);
  hb.logs = LogsFor(node);
  const MonoTime sent = clock_->Monotonic();
  auto body = node.client->Post(fmt::format("/v1/agents/{}/heartbeat", node.name), api::ToJson(hb));
  if (!body.ok()) {
    spdlog::warn("slurm bridge: heartbeat of {}: {}", node.name, std::string(body.status().message()));
    if (body.status().code() == absl::StatusCode::kUnauthenticated ||
        body.status().code() == absl::StatusCode::kNotFound) {
      node.registered = false;
    }
    return;
  }
  auto reply = api::HeartbeatReplyFromJson(*body);
  if (!reply.ok()) {
    spdlog::warn("slurm bridge: heartbeat reply of {}: {}", node.name, std::string(reply.status().message()));
    return;
  }
  node.last_answered = sent;
  if (reply->reregister) {
    node.registered = false;
    return;
  }
  node.assignments = reply->assignments;
}

void SlurmBridge::SubmitGangs() {
  for (auto& [key, g] : gangs_) g.wanted = false;
  const MonoTime now = clock_->Monotonic();
  for (const auto& [name, node] : nodes_) {
    if (!node->live) continue;
    for (const api::Assignment& a : node->assignments) {
      if (a.cancel) continue;
      Gang& g = gangs_[{a.job_id, a.epoch}];
      if (g.job_id.empty()) {
        g.job_id = a.job_id;
        g.epoch = a.epoch;
        g.num_nodes = a.num_nodes;
        g.first_seen = now;
      }
      g.wanted = true;
      g.members[a.node_rank] = name;
      g.assignments[a.node_rank] = a;
    }
  }
  for (auto& [key, g] : gangs_) {
    if (!g.wanted || g.slurm_id != 0 || !g.refused.empty()) continue;
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
    const api::Assignment& first = g.assignments.begin()->second;
    if (const std::string what = Unsupported(first); !what.empty()) {
      g.refused = fmt::format("Slurm nodes cannot fetch {} (an agent node can)", what);
      continue;
    }
    GangJob job;
    job.job_id = g.job_id;
    job.epoch = g.epoch;
    for (const auto& [rank, n] : g.members) {
      job.nodes.push_back(nodes_.at(n)->slurm_name);
      job.gpus_per_node = std::max(job.gpus_per_node, static_cast<int>(g.assignments[rank].gpu_uuids.size()));
    }
    job.master_address = nodes_.at(g.members.begin()->second)->address;
    job.master_port = first.master_port > 0 ? first.master_port : 29500;
    job.gpu_type = "";
    for (const auto& [type, model] : options_.gpu_models) {
      const Node& n0 = *nodes_.at(g.members.begin()->second);
      if (!n0.inventory.gpus.empty() && n0.inventory.gpus[0].model_id == model) job.gpu_type = type;
    }
    job.tasks_per_node = first.launcher == "torch"
                             ? std::max(1, first.procs_per_node > 0 ? first.procs_per_node : job.gpus_per_node)
                             : 1;
    job.partition = options_.partition;
    job.workdir = fmt::format("{}/{}/e{}", options_.job_root, g.job_id, g.epoch);
    std::error_code ec;
    fs::create_directories(job.workdir, ec);
    std::string run = first.run;
    if (!first.setup.empty()) run = "set -e\n" + first.setup + "\nexec /bin/sh -c " + ShellQuote(first.run);
    job.command = {"/bin/sh", "-c", run};
    for (const auto& [k, v] : first.env) job.env.emplace_back(k, v);
    for (const auto& [k, v] : first.platform_env) job.platform_env.emplace_back(k, v);
    if (first.cpu_milli > 0) job.cpus_per_task = static_cast<int>((first.cpu_milli + 999) / 1000);
    job.memory_per_node_bytes = static_cast<int64_t>(first.memory_bytes);
    g.workdir = job.workdir;
    auto id = slurm_->Submit(job);
    if (!id.ok()) {
      g.refused = std::string(id.status().message());
      spdlog::warn("slurm bridge: {} epoch {}: {}", g.job_id, g.epoch, g.refused);
      continue;
    }
    g.slurm_id = *id;
    spdlog::info("slurm bridge: {} epoch {} is Slurm job {} on {}", g.job_id, g.epoch, g.slurm_id,
                 fmt::join(job.nodes, ","));
  }
}

void SlurmBridge::FollowGangs() {
  for (auto it = gangs_.begin(); it != gangs_.end();) {
    Gang& g = it->second;
    if (g.slurm_id != 0 && !g.ended) {
      if (!g.wanted && !g.cancelled) {
        // The control plane no longer lists it (cancelled, re-placed, or its node fenced): stop it.
        if (auto st = slurm_->Cancel(g.slurm_id); st.ok()) g.cancelled = true;
      }
      auto job = slurm_->Job(g.slurm_id);
      if (job.ok()) {
        g.state = job->state;
        g.exit_code = job->exit_code;
        g.ended = !Active(job->state);
      } else if (job.status().code() == absl::StatusCode::kNotFound) {
        g.ended = true;
        if (g.state.empty() || Active(g.state)) g.state = "NODE_FAIL";  // purged before we saw its end
      }
    }
    // Forget a gang once nobody lists it and Slurm is done with it.
    if (!g.wanted && (g.slurm_id == 0 || g.ended)) {
      it = gangs_.erase(it);
    } else {
      ++it;
    }
  }
}

void SlurmBridge::FenceExpired() {
  const MonoTime now = clock_->Monotonic();
  for (auto& [key, g] : gangs_) {
    if (g.slurm_id == 0 || g.ended || g.cancelled) continue;
    for (const auto& [rank, n] : g.members) {
      const Node& node = *nodes_.at(n);
      if (node.live && now - node.last_answered <= node.lease) continue;
      // As an agent fences itself: the control plane re-places this member after the lease.
      spdlog::warn("slurm bridge: {} lost contact with the control plane (or Slurm lost it); cancelling Slurm job {}",
                   n, g.slurm_id);
      if (slurm_->Cancel(g.slurm_id).ok()) g.cancelled = true;
      break;
    }
  }
}

void SlurmBridge::StopAll() {
  for (auto& [key, g] : gangs_) {
    if (g.slurm_id == 0 || g.ended || g.cancelled) continue;
    if (slurm_->Cancel(g.slurm_id).ok()) g.cancelled = true;
  }
}

absl::Status SlurmBridge::Tick() {
  auto nodes = slurm_->Nodes();
  if (!nodes.ok()) {
    for (auto& [name, node] : nodes_) node->live = false;
    FenceExpired();
    return nodes.status();
  }
  std::set<std::string> seen;
  for (const SlurmNode& s : *nodes) {
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
    seen.insert(name);
    auto& node = nodes_[name];
    if (node == nullptr) {
      node = std::make_unique<Node>();
      node->name = name;
      node->slurm_name = s.name;
      auto spec = hw::ParseEmulateSpec(fmt::format("{}x{}", TotalGpus(s.gpus), model->second));
      if (!spec.ok()) return spec.status();
      hw::HostInfo host{.hostname = s.name,
                        .cpu_cores = static_cast<int>(s.cpus),
                        .memory_bytes = static_cast<uint64_t>(s.memory_bytes)};
      node->inventory = hw::BuildEmulatedInventory(*spec, name, host);
      for (hw::GpuDevice& g : node->inventory.gpus) g.source = "slurm";
    }
    node->address = s.address.empty() ? s.name : s.address;
    node->partition = s.partitions.empty() ? "" : s.partitions[0];
    node->live = s.Condition() != NodeCondition::kDown;
  }
  for (auto& [name, node] : nodes_) {
    if (!seen.count(name)) node->live = false;
  }
  for (auto& [name, node] : nodes_) {
    if (node->live) BeatNode(*node);
  }
  SubmitGangs();
  FollowGangs();
  FenceExpired();
  return absl::OkStatus();
}

}  // namespace gpugeek::backends::slurm
