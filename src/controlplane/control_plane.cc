#include "controlplane/control_plane.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "api/job_state.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/job_request.h"
#include "controlplane/metrics.h"
#include "sched/frag.h"
#include "sched/registry.h"
#include "workload/model_config.h"

namespace gpugeek::controlplane {
namespace {

namespace fs = std::filesystem;
using api::JobState;

constexpr int kPageSize = 1000;
// FGD's typical-pod popularity threshold (Weng et al., ATC'23; sched/frag.h).
constexpr double kTypicalPodPopularityPct = 95;
constexpr int kFirstMasterPort = 29500;  // torchrun's default MASTER_PORT, then a per-job offset

std::string JobId(int64_t n) { return fmt::format("j-{:08d}", n); }

absl::StatusOr<workload::Task> ToPlannerTask(const api::TaskSpec& t) {
  workload::Task task;
  task.kind = t.kind;
  if (t.seq_len > 0) task.seq = t.seq_len;
  if (t.global_batch > 0) {
    task.batch = t.global_batch;
  } else if (t.micro_batch > 0) {
    task.batch = t.micro_batch;
  }
  task.tokens = static_cast<double>(t.tokens);
  return task;
}

// Reads every job, in id order.
absl::StatusOr<std::vector<store::JobRecord>> AllJobs(store::Store& store, std::optional<JobState> state) {
  std::vector<store::JobRecord> all;
  store::JobFilter filter{.state = state, .limit = kPageSize};
  for (;;) {
    ASSIGN_OR_RETURN(auto page, store.ListJobs(filter));
    if (page.empty()) break;
    filter.after_id = page.back().id;
    for (auto& j : page) all.push_back(std::move(j));
    if (static_cast<int>(page.size()) < kPageSize) break;
  }
  return all;
}

// The scheduler requests of a stored job: from its spec, or from the plan admission kept.
absl::StatusOr<std::vector<sched::Request>> RequestsFor(const store::JobRecord& job, const api::JobSpec& spec) {
  std::optional<workload::ResourceRequest> plan;
  if (!job.plan_json.empty()) {
    ASSIGN_OR_RETURN(plan, PlanFromJson(job.plan_json));
  }
  return BuildRequests(job.id, spec, plan ? &*plan : nullptr);
}

// Everything of a job's requests that decides where it fits (not its id or priority), as text.
std::string ShapeKey(const std::vector<sched::Request>& requests) {
  std::string key;
  for (const sched::Request& r : requests) {
    key += fmt::format("gang={} distinct={} capacity={} selector=", r.gang_size, r.distinct_nodes,
                       r.capacity_type ? static_cast<int>(*r.capacity_type) : -1);
    for (const auto& [label, values] : r.node_selector) key += fmt::format("{}:{};", label, fmt::join(values, ","));
    for (const sched::ResourceShape& a : r.alternatives) {
      key += fmt::format("|{},{},{},{},{}", a.cpu_milli, a.memory_bytes, a.num_gpus, a.gpu_milli,
                         fmt::join(a.allowed_models, ","));
    }
    key += '\n';
  }
  return key;
}

std::string NodeStateName(bool down, bool cordoned) { return down ? "down" : cordoned ? "cordoned" : "ready"; }

}  // namespace

// Writes a permitted gang's placement to the store (the control plane's sched::Binder).
class StoreBinder final : public sched::Binder {
 public:
  StoreBinder(store::Store& store, Clock& clock, const std::vector<const SchedNode*>& sched_nodes,
              const std::map<std::string, api::Registration>& registrations, store::JobRecord record)
      : store_(store),
        clock_(clock),
        sched_nodes_(sched_nodes),
        registrations_(registrations),
        record_(std::move(record)) {}

  absl::Status Bind(const sched::Request&, std::span<const sched::Placement> placements) override {
    Allocation a;
    for (size_t rank = 0; rank < placements.size(); ++rank) {
      const sched::Placement& p = placements[rank];
      const SchedNode& sn = *sched_nodes_[p.node];
      AllocationMember m;
      m.rank = static_cast<int>(rank);
      m.node = sn.node;
      m.sched_node = sn.spec.name;
      for (int i = 0; i < p.num_gpus; ++i) m.gpus.push_back(sn.device_index[p.gpus[i]]);
      m.gpu_milli = p.num_gpus > 0 ? p.gpu_milli : 0;
      m.cpu_milli = p.cpu_milli;
      m.memory_bytes = p.memory_bytes;
      a.members.push_back(std::move(m));
      if (rank == 0) {
        a.gpu_model = sn.spec.gpu_model;
        auto reg = registrations_.find(sn.node);
        a.master_addr = reg != registrations_.end() && !reg->second.address.empty() ? reg->second.address : sn.node;
      }
    }
    a.master_port = kFirstMasterPort + static_cast<int>(std::hash<std::string>()(record_.id) % 1000);
    store::JobRecord next = record_;
    next.state = JobState::kScheduled;
    next.epoch = record_.epoch + 1;
    next.allocation_json = ToJson(a).dump();
    next.reason = "placed on " + Describe(a);
    next.updated_at = clock_.Now();
    ASSIGN_OR_RETURN(stored_, store_.UpdateJob(next));
    allocation_ = std::move(a);
    return absl::OkStatus();
  }

  const store::JobRecord& stored() const { return stored_; }
  const Allocation& allocation() const { return allocation_; }

 private:
  store::Store& store_;
  Clock& clock_;
  const std::vector<const SchedNode*>& sched_nodes_;
  const std::map<std::string, api::Registration>& registrations_;
  store::JobRecord record_;
  store::JobRecord stored_;
  Allocation allocation_;
};

ControlPlane::ControlPlane(const ControlPlaneOptions& options)
    : options_(options),
      store_(*options.store),
      clock_(options.clock ? *options.clock : RealClock()),
      catalog_(options.catalog ? *options.catalog : hw::GpuCatalog::Builtin()) {}

absl::StatusOr<std::unique_ptr<ControlPlane>> ControlPlane::Create(const ControlPlaneOptions& options) {
  if (options.store == nullptr) return absl::InvalidArgumentError("control plane: a store is required");
  if (options.data_dir.empty()) return absl::InvalidArgumentError("control plane: data_dir is required");
  if (sched::Registry::Builtin().FindPolicy(options.policy) == nullptr) {
    return absl::NotFoundError(fmt::format("control plane: unknown placement policy '{}'", options.policy));
  }
  std::error_code ec;
  fs::create_directories(fs::path(options.data_dir) / "logs", ec);
  if (ec)
    return absl::UnavailableError(fmt::format("control plane: cannot create {}: {}", options.data_dir, ec.message()));
  auto cp = std::unique_ptr<ControlPlane>(new ControlPlane(options));
  RETURN_IF_ERROR(cp->Load());
  if (options.metrics != nullptr) {
    cp->metrics_ = std::make_unique<ControlPlaneMetrics>(*options.metrics);
    cp->metrics_->RegisterCollectors(*cp);
    cp->metrics_->DeclarePolicy(options.policy);
    cp->metrics_->DeclarePolicy("BestFit");  // places until there are typical pods
  }
  return cp;
}

ControlPlane::~ControlPlane() = default;

absl::Status ControlPlane::Load() {
  std::lock_guard<std::mutex> lock(mu_);
  const TimePoint now = clock_.Now();
  ASSIGN_OR_RETURN(auto nodes, store_.ListNodes());
  for (const store::NodeRecord& n : nodes) {
    nlohmann::json j = nlohmann::json::parse(n.inventory_json, nullptr, /*allow_exceptions=*/false);
    auto reg = api::RegistrationFromJson(j);
    if (!reg.ok()) {
      spdlog::warn("control plane: skipping stored node {}: {}", n.id, reg.status());
      continue;
    }
    NodeState& s = nodes_[n.id];
    s.registration = *reg;
    s.cordoned = n.state == "cordoned";
    // A restarted server gives every node one timeout to say it is still there.
    s.last_heartbeat = now;
    s.sched_nodes = ToSchedNodes(s.registration);
  }
  ASSIGN_OR_RETURN(auto jobs, AllJobs(store_, std::nullopt));
  for (store::JobRecord& j : jobs) {
    int64_t number = 0;
    if (j.id.size() > 2 && j.id.starts_with("j-")) number = std::strtoll(j.id.c_str() + 2, nullptr, 10);
    next_job_number_ = std::max(next_job_number_, number + 1);
    if (options_.metrics != nullptr && j.state == JobState::kPending && j.restarts > 0) {
      requeued_at_.try_emplace(j.id, j.updated_at);  // a PENDING job's last update is its requeue
    }
    if (j.allocation_json.empty()) continue;
    auto a = ParseAllocation(j.allocation_json);
    auto spec = api::ParseJobSpec(j.spec_yaml, catalog_);
    if (!a.ok() || !spec.ok()) {
      spdlog::error("control plane: job {} has an unreadable allocation or spec; leaving it alone", j.id);
      continue;
    }
    if (a->released) continue;
    LiveJob live{j, *spec, *a, std::vector<MemberStatus>(a->members.size())};
    live_.emplace(j.id, std::move(live));
  }
  spdlog::info("control plane: loaded {} nodes, {} jobs ({} holding GPUs) from the store", nodes_.size(), jobs.size(),
               live_.size());
  CapacityChangedLocked();
  return absl::OkStatus();
}

std::string ControlPlane::LogDir(const std::string& job_id) const {
  return (fs::path(options_.data_dir) / "logs" / job_id).string();
}

// ---------------------------------------------------------------------------------------------
// Jobs

absl::StatusOr<JobView> ControlPlane::Submit(const SubmitRequest& request) {
  absl::StatusOr<JobView> job = Admit(request);
  if (metrics_) metrics_->Submission(job.ok());
  return job;
}

absl::StatusOr<JobView> ControlPlane::Admit(const SubmitRequest& request) {
  ASSIGN_OR_RETURN(api::JobSpec spec, api::ParseJobSpec(request.spec_yaml, catalog_));
  std::unique_lock<std::mutex> lock(mu_);
  std::string plan_json;
  if (!spec.model.empty() && spec.task && spec.resources.any_of.empty()) {
    if (request.model_config_json.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("model_config: the spec names model '{}' for the planner; send that config.json's content "
                      "(gpugeek submit does)",
                      spec.model));
    }
    auto config = workload::ParseModelConfig(request.model_config_json);
    if (!config.ok())
      return absl::InvalidArgumentError(fmt::format("model ({}): {}", spec.model, config.status().message()));
    ASSIGN_OR_RETURN(workload::Task task, ToPlannerTask(*spec.task));
    std::vector<workload::PoolEntry> pool = PoolEntriesLocked();
    if (pool.empty()) {
      return absl::FailedPreconditionError("no GPUs of a known model are registered in the pool; start an agent first");
    }
    workload::PlannerOptions planner;
    planner.top_k = 8;
    ASSIGN_OR_RETURN(workload::Plan plan, workload::MakePlan(*config, task, pool, planner));
    if (plan.candidates.empty()) {
      std::string why;
      for (const auto& r : plan.rejected) why += (why.empty() ? "" : "; ") + r;
      return absl::FailedPreconditionError(
          fmt::format("no GPU in the pool fits {} for {}: {}", spec.model, api::TaskKindName(spec.task->kind), why));
    }
    plan_json = PlanToJson(workload::ToResourceRequest(plan), plan.candidates[0].Summary()).dump();
  }
  lock.unlock();
  store::JobRecord record;
  record.tenant = request.tenant;
  record.name = spec.name;
  record.spec_yaml = request.spec_yaml;
  record.state = JobState::kPending;
  record.priority = spec.priority;
  record.plan_json = plan_json;
  record.reason = plan_json.empty()
                      ? "submitted"
                      : "submitted; planned " + nlohmann::json::parse(plan_json)["best"].get<std::string>();
  record.created_at = record.updated_at = clock_.Now();
  ASSIGN_OR_RETURN(store::JobRecord stored, CommitGrouped(std::move(record)));
  lock.lock();
  cluster_dirty_ = true;  // the typical pods change with the workload (capacity does not)
  return ViewLocked(stored);
}

// Group commit (leader/follower): a submitter that finds no commit in flight becomes the leader,
// takes every queued submission, and stores them in one transaction (one fsync); the others wait
// for their result. Under load a batch holds every submission that arrived during the previous
// fsync, so durable submissions/s grow with concurrency instead of being capped at 1/fsync.
absl::StatusOr<store::JobRecord> ControlPlane::CommitGrouped(store::JobRecord record) {
  PendingSubmit mine;
  mine.record = std::move(record);
  std::unique_lock<std::mutex> lock(commit_mu_);
  commit_queue_.push_back(&mine);
  while (!mine.done) {
    if (committing_) {
      commit_cv_.wait(lock);
      continue;
    }
    committing_ = true;
    std::vector<PendingSubmit*> batch;
    batch.swap(commit_queue_);
    lock.unlock();
    std::vector<store::JobRecord> records;
    {
      // Ids in commit order, so listing by id lists by submission.
      std::lock_guard<std::mutex> state_lock(mu_);
      for (PendingSubmit* p : batch) {
        p->record.id = JobId(next_job_number_++);
        records.push_back(p->record);
      }
    }
    auto results = store_.CreateJobs(records);
    lock.lock();
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i]->result = results.ok() ? std::move((*results)[i]) : absl::StatusOr<store::JobRecord>(results.status());
      batch[i]->done = true;
    }
    committing_ = false;
    commit_cv_.notify_all();
  }
  return std::move(mine.result);
}

absl::StatusOr<JobView> ControlPlane::ViewLocked(const store::JobRecord& record) {
  JobView v;
  v.record = record;
  if (!record.allocation_json.empty()) {
    auto a = ParseAllocation(record.allocation_json);
    if (a.ok()) v.allocation = *a;
  }
  if (auto it = pending_reason_.find(record.id); it != pending_reason_.end() && record.state == JobState::kPending) {
    v.pending_reason = it->second;
  }
  return v;
}

absl::StatusOr<JobView> ControlPlane::GetJob(const std::string& id) {
  ASSIGN_OR_RETURN(store::JobRecord record, store_.GetJob(id));
  std::lock_guard<std::mutex> lock(mu_);
  return ViewLocked(record);
}

absl::StatusOr<std::vector<JobView>> ControlPlane::ListJobs(const store::JobFilter& filter) {
  ASSIGN_OR_RETURN(auto records, store_.ListJobs(filter));
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<JobView> out;
  for (const auto& r : records) {
    ASSIGN_OR_RETURN(JobView v, ViewLocked(r));
    out.push_back(std::move(v));
  }
  return out;
}

absl::StatusOr<JobView> ControlPlane::Cancel(const std::string& id, const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  ASSIGN_OR_RETURN(store::JobRecord record, store_.GetJob(id));
  if (api::IsTerminal(record.state)) {
    return absl::FailedPreconditionError(
        fmt::format("job {} already ended {}; there is nothing to cancel", id, api::JobStateName(record.state)));
  }
  const JobState from = record.state;
  record.state = JobState::kCancelled;
  record.reason = reason.empty() ? "cancelled" : reason;
  record.updated_at = clock_.Now();
  ASSIGN_OR_RETURN(store::JobRecord stored, store_.UpdateJob(record));
  CommittedLocked(id, from, JobState::kCancelled);
  if (auto it = live_.find(id); it != live_.end()) it->second.record = stored;
  return ViewLocked(stored);
}

absl::StatusOr<std::vector<store::EventRecord>> ControlPlane::Events(const std::string& job_id, int64_t after_seq,
                                                                     int limit) {
  return store_.ListEvents(job_id, after_seq, limit);
}

absl::StatusOr<std::string> ControlPlane::ReadLog(const std::string& job_id, int rank) {
  RETURN_IF_ERROR(store_.GetJob(job_id).status());
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<int64_t, fs::path>> files;
  std::error_code ec;
  const std::string prefix = fmt::format("rank-{}.epoch-", rank);
  for (const auto& entry : fs::directory_iterator(LogDir(job_id), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(prefix) && name.ends_with(".log")) {
      files.emplace_back(std::strtoll(name.c_str() + prefix.size(), nullptr, 10), entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::string out;
  for (size_t i = 0; i < files.size(); ++i) {
    const auto& [epoch, path] = files[i];
    if (files.size() > 1) out += fmt::format("== attempt {} (epoch {}) ==\n", i + 1, epoch);
    std::ifstream in(path, std::ios::binary);
    out.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return out;
}

bool ControlPlane::LogComplete(const std::string& job_id) {
  if (shutting_down_) return true;
  auto record = store_.GetJob(job_id);
  std::lock_guard<std::mutex> lock(mu_);
  return !record.ok() || (api::IsTerminal(record->state) && !live_.count(job_id));
}

// ---------------------------------------------------------------------------------------------
// Agents

absl::StatusOr<api::RegistrationReply> ControlPlane::Register(const api::Registration& registration) {
  std::lock_guard<std::mutex> lock(mu_);
  NodeState& s = nodes_[registration.node];
  const bool known = !s.registration.node.empty();
  s.registration = registration;
  s.down = false;
  s.last_heartbeat = clock_.Now();
  s.sched_nodes = ToSchedNodes(registration);
  store::NodeRecord record;
  record.id = registration.node;
  record.inventory_json = api::ToJson(registration).dump();
  record.state = NodeStateName(false, s.cordoned);
  record.last_heartbeat = s.last_heartbeat;
  record.registered_at = s.last_heartbeat;
  RETURN_IF_ERROR(store_.PutNode(record));
  CapacityChangedLocked();
  spdlog::info("control plane: node {} {} with {} GPUs", registration.node, known ? "re-registered" : "registered",
               registration.inventory.gpus.size());
  api::RegistrationReply reply;
  reply.heartbeat_interval_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.heartbeat_interval).count();
  return reply;
}

absl::StatusOr<api::HeartbeatReply> ControlPlane::Heartbeat(const api::Heartbeat& heartbeat) {
  std::lock_guard<std::mutex> lock(mu_);
  api::HeartbeatReply reply;
  auto it = nodes_.find(heartbeat.node);
  if (it == nodes_.end()) {
    reply.reregister = true;
    return reply;
  }
  NodeState& s = it->second;
  s.last_heartbeat = clock_.Now();
  if (s.down) {
    s.down = false;
    CapacityChangedLocked();
    spdlog::info("control plane: node {} is back", heartbeat.node);
  }
  s.samples = heartbeat.samples;
  // Logs first: a member's last bytes travel with its exit report, which may release the job.
  for (const api::LogChunk& chunk : heartbeat.logs) AppendLogLocked(chunk);
  for (const api::WorkloadReport& report : heartbeat.workloads) {
    if (absl::Status st = ApplyReportLocked(heartbeat.node, report); !st.ok()) {
      // Not acknowledged: the agent reports again next heartbeat.
      spdlog::warn("control plane: report for {} from {}: {}", report.job_id, heartbeat.node, st);
    }
  }
  reply.assignments = AssignmentsForLocked(heartbeat.node);
  return reply;
}

absl::Status ControlPlane::ApplyReportLocked(const std::string& node, const api::WorkloadReport& report) {
  auto it = live_.find(report.job_id);
  if (it == live_.end()) return absl::OkStatus();  // not holding resources: the agent stops it
  LiveJob& live = it->second;
  if (report.epoch != live.record.epoch) return absl::OkStatus();  // a stale placement (fencing)
  if (report.node_rank < 0 || report.node_rank >= static_cast<int>(live.members.size()) ||
      live.allocation.members[report.node_rank].node != node) {
    return absl::InvalidArgumentError(
        fmt::format("rank {} of {} is not on node {}", report.node_rank, report.job_id, node));
  }
  MemberStatus& member = live.members[report.node_rank];
  const TimePoint now = clock_.Now();
  if (report.phase == api::WorkloadPhase::kRunning) {
    member.running = true;
  } else {
    member.exited = true;
    member.failed = report.phase == api::WorkloadPhase::kFailedToStart || report.term_signal != 0 ||
                    report.exit_code.value_or(1) != 0;
    member.detail = report.phase == api::WorkloadPhase::kFailedToStart ? "failed to start: " + report.message
                    : report.term_signal != 0 ? fmt::format("killed by signal {}", report.term_signal)
                                              : fmt::format("exit code {}", report.exit_code.value_or(-1));
    if (!report.message.empty() && report.phase != api::WorkloadPhase::kFailedToStart) {
      member.detail += " (" + report.message + ")";
    }
  }
  auto update = [&](JobState to, std::string reason, std::optional<int> exit_code) -> absl::Status {
    store::JobRecord next = live.record;
    next.state = to;
    next.reason = std::move(reason);
    next.updated_at = now;
    if (exit_code) next.exit_code = exit_code;
    const JobState from = live.record.state;
    ASSIGN_OR_RETURN(live.record, store_.UpdateJob(next));
    CommittedLocked(live.record.id, from, to);
    return absl::OkStatus();
  };
  const bool all_running = std::all_of(live.members.begin(), live.members.end(),
                                       [](const MemberStatus& m) { return m.running || m.exited; });
  const bool all_exited =
      std::all_of(live.members.begin(), live.members.end(), [](const MemberStatus& m) { return m.exited; });
  if (!api::IsTerminal(live.record.state)) {
    if (member.exited && member.failed) {
      if (live.record.state == JobState::kPending) return absl::OkStatus();
      const int code = report.exit_code.value_or(report.term_signal ? 128 + report.term_signal : 1);
      RETURN_IF_ERROR(
          update(JobState::kFailed, fmt::format("rank {} on {}: {}", report.node_rank, node, member.detail), code));
    } else if (all_running && live.record.state == JobState::kScheduled) {
      RETURN_IF_ERROR(update(JobState::kRunning, fmt::format("all {} members started", live.members.size()), {}));
    }
    if (all_exited && !api::IsTerminal(live.record.state)) {
      if (live.record.state == JobState::kScheduled) {
        RETURN_IF_ERROR(update(JobState::kRunning, "started", {}));
      }
      RETURN_IF_ERROR(update(JobState::kSucceeded, fmt::format("all {} members exited 0", live.members.size()), 0));
    }
  }
  if (api::IsTerminal(live.record.state) && all_exited) return ReleaseLocked(live);
  return absl::OkStatus();
}

void ControlPlane::AppendLogLocked(const api::LogChunk& chunk) {
  // Any stored job: an agent ships a long log over several heartbeats, some after the exit that
  // released the job. Ids never hold '/' (they are issued here), which keeps paths inside LogDir.
  if (chunk.data.empty() || chunk.job_id.find('/') != std::string::npos || !store_.GetJob(chunk.job_id).ok()) return;
  const fs::path dir = LogDir(chunk.job_id);
  std::error_code ec;
  fs::create_directories(dir, ec);
  const fs::path file = dir / fmt::format("rank-{}.epoch-{}.log", chunk.node_rank, chunk.epoch);
  const uint64_t size = fs::exists(file, ec) ? fs::file_size(file, ec) : 0;
  if (chunk.offset + chunk.data.size() <= size) return;  // a resend of what we have
  const size_t skip = chunk.offset < size ? static_cast<size_t>(size - chunk.offset) : 0;
  std::ofstream out(file, std::ios::binary | std::ios::app);
  out.write(chunk.data.data() + skip, static_cast<std::streamsize>(chunk.data.size() - skip));
}

std::vector<api::Assignment> ControlPlane::AssignmentsForLocked(const std::string& node) {
  std::vector<api::Assignment> out;
  for (const auto& [id, live] : live_) {
    for (const AllocationMember& m : live.allocation.members) {
      if (m.node != node || live.members[m.rank].exited) continue;
      api::Assignment a;
      a.job_id = id;
      a.epoch = live.record.epoch;
      a.node_rank = m.rank;
      a.num_nodes = static_cast<int>(live.allocation.members.size());
      a.gpu_indices = m.gpus;
      a.gpu_milli = m.gpu_milli;
      a.cpu_milli = m.cpu_milli;
      a.memory_bytes = m.memory_bytes;
      a.master_addr = live.allocation.master_addr;
      a.master_port = live.allocation.master_port;
      a.run = live.spec.run;
      a.env = live.spec.env;
      a.checkpoint_dir = live.spec.checkpoint.dir;
      a.grace_ms = std::chrono::duration_cast<std::chrono::milliseconds>(live.spec.checkpoint.grace).count();
      a.restart_count = live.record.restarts;
      a.cancel = api::IsTerminal(live.record.state);
      out.push_back(std::move(a));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Controllers

void ControlPlane::Reconcile() {
  std::lock_guard<std::mutex> lock(mu_);
  CheckNodesLocked();
  if (cluster_dirty_) RebuildClusterLocked();
  const TimePoint start = clock_.Now();
  ScheduleLocked();
  if (metrics_) metrics_->SchedulingCycle(clock_.Now() - start);
}

std::vector<std::string> ControlPlane::JobsOnNodeLocked(const std::string& node) const {
  std::vector<std::string> ids;
  for (const auto& [id, live] : live_) {
    for (const auto& m : live.allocation.members) {
      if (m.node == node) {
        ids.push_back(id);
        break;
      }
    }
  }
  return ids;
}

void ControlPlane::CheckNodesLocked() {
  const TimePoint now = clock_.Now();
  for (auto& [name, s] : nodes_) {
    if (s.down || now - s.last_heartbeat <= options_.node_timeout) continue;
    s.down = true;
    CapacityChangedLocked();
    spdlog::warn("control plane: node {} is down (no heartbeat for {} ms)", name,
                 std::chrono::duration_cast<std::chrono::milliseconds>(now - s.last_heartbeat).count());
    for (const std::string& id : JobsOnNodeLocked(name)) {
      LiveJob& live = live_.at(id);
      absl::Status st = api::IsTerminal(live.record.state)
                            ? ReleaseLocked(live)
                            : RequeueLocked(live, fmt::format("node {} stopped heartbeating; requeued", name));
      if (!st.ok()) spdlog::error("control plane: job {} on lost node {}: {}", id, name, st);
    }
  }
}

absl::Status ControlPlane::RequeueLocked(LiveJob& live, const std::string& reason) {
  store::JobRecord next = live.record;
  Allocation released = live.allocation;
  released.released = true;
  next.allocation_json = ToJson(released).dump();
  next.state = JobState::kPending;
  next.restarts = live.record.restarts + 1;
  next.reason = reason;
  next.updated_at = clock_.Now();
  RETURN_IF_ERROR(store_.UpdateJob(next).status());
  CommittedLocked(next.id, live.record.state, JobState::kPending);
  live_.erase(next.id);
  CapacityChangedLocked();
  return absl::OkStatus();
}

void ControlPlane::CommittedLocked(const std::string& id, JobState from, JobState to) {
  if (!metrics_ || from == to) return;
  metrics_->Transition(from, to);
  if (to == JobState::kPending) {
    // From the first loss: a job requeued again before it ran has been recovering all along.
    requeued_at_.try_emplace(id, clock_.Now());
    return;
  }
  if (to != JobState::kRunning && !api::IsTerminal(to)) return;
  auto it = requeued_at_.find(id);
  if (it == requeued_at_.end()) return;
  if (to == JobState::kRunning) metrics_->Recovered(clock_.Now() - it->second);
  requeued_at_.erase(it);
}

absl::Status ControlPlane::ReleaseLocked(LiveJob& live) {
  store::JobRecord next = live.record;
  Allocation released = live.allocation;
  released.released = true;
  next.allocation_json = ToJson(released).dump();
  next.updated_at = clock_.Now();
  RETURN_IF_ERROR(store_.UpdateJob(next).status());
  live_.erase(next.id);
  CapacityChangedLocked();
  return absl::OkStatus();
}

void ControlPlane::RebuildClusterLocked() {
  framework_.reset();
  cluster_.reset();
  sched_index_.clear();
  sched_nodes_.clear();
  std::vector<sched::NodeSpec> specs;
  for (const auto& [name, s] : nodes_) {
    if (s.down || s.cordoned) continue;
    for (const SchedNode& sn : s.sched_nodes) {
      sched_index_[sn.spec.name] = static_cast<sched::NodeIndex>(specs.size());
      sched_nodes_.push_back(&sn);
      specs.push_back(sn.spec);
    }
  }
  auto cluster = sched::Cluster::Create(std::move(specs));
  if (!cluster.ok()) {
    spdlog::error("control plane: cannot build the scheduler's cluster: {}", cluster.status());
    return;
  }
  cluster_.emplace(std::move(*cluster));
  // Resources held by live jobs.
  std::vector<sched::ResourceShape> shapes;
  for (const auto& [id, live] : live_) {
    for (const AllocationMember& m : live.allocation.members) {
      auto idx = sched_index_.find(m.sched_node);
      if (idx == sched_index_.end()) continue;  // node cordoned or down: nothing else lands there
      const SchedNode& sn = *sched_nodes_[idx->second];
      sched::Placement p;
      p.node = idx->second;
      p.cpu_milli = m.cpu_milli;
      p.memory_bytes = m.memory_bytes;
      p.gpu_milli = static_cast<int32_t>(m.gpu_milli);
      p.num_gpus = static_cast<int32_t>(m.gpus.size());
      for (size_t i = 0; i < m.gpus.size(); ++i) {
        auto pos = std::find(sn.device_index.begin(), sn.device_index.end(), m.gpus[i]);
        p.gpus[i] = static_cast<uint8_t>(pos - sn.device_index.begin());
      }
      if (cluster_->CanBind(p)) {
        cluster_->Bind(p);
      } else {
        spdlog::error("control plane: job {} rank {} no longer fits {}; not counted", id, m.rank, m.sched_node);
      }
      shapes.push_back({m.cpu_milli, m.memory_bytes, p.num_gpus, p.gpu_milli, {live.allocation.gpu_model}});
    }
  }
  // The workload's typical pods: what the jobs seen so far asked for (FGD's measure, sched/frag.h).
  if (auto pending = AllJobs(store_, JobState::kPending); pending.ok()) {
    for (const auto& j : *pending) {
      const ParsedJob& parsed = ParsedLocked(j);
      if (parsed.requests.ok()) shapes.push_back(parsed.requests->front().alternatives.front());
    }
  }
  typical_ = sched::ComputeTypicalPods(shapes, kTypicalPodPopularityPct, *cluster_);
  const sched::PolicySpec* policy = sched::Registry::Builtin().FindPolicy(options_.policy);
  active_policy_ = policy->needs_typical_pods && typical_.empty() ? "BestFit" : policy->name;
  sched::FrameworkOptions fo;
  fo.policy = active_policy_;
  fo.seed = options_.seed;
  fo.topology_weight = options_.topology_weight;
  fo.context.typical_pods = typical_;
  auto framework = sched::Framework::Create(fo, &*cluster_);
  if (!framework.ok()) {
    spdlog::error("control plane: cannot build the scheduler: {}", framework.status());
    return;
  }
  framework_ = std::move(*framework);
  cluster_dirty_ = false;
}

void ControlPlane::CapacityChangedLocked() {
  cluster_dirty_ = true;
  ++capacity_generation_;
}

ControlPlane::ParsedJob& ControlPlane::ParsedLocked(const store::JobRecord& job) {
  auto [it, inserted] = parsed_.try_emplace(job.id);
  if (inserted) {
    it->second.spec = api::ParseJobSpec(job.spec_yaml, catalog_);
    it->second.requests = it->second.spec.ok() ? RequestsFor(job, *it->second.spec) : it->second.spec.status();
    if (it->second.requests.ok()) it->second.shape_key = ShapeKey(*it->second.requests);
  }
  return it->second;
}

void ControlPlane::ScheduleLocked() {
  if (!framework_) return;
  auto pending = AllJobs(store_, JobState::kPending);
  if (!pending.ok()) {
    spdlog::error("control plane: cannot list pending jobs: {}", pending.status());
    return;
  }
  // Higher priority first, then submission order (ids are issued in order).
  std::stable_sort(pending->begin(), pending->end(),
                   [](const store::JobRecord& a, const store::JobRecord& b) { return a.priority > b.priority; });
  std::map<std::string, api::Registration> registrations;
  for (const auto& [name, s] : nodes_) registrations[name] = s.registration;
  std::map<std::string, ParsedJob> still_pending;
  for (const store::JobRecord& job : *pending) {
    if (auto it = parsed_.find(job.id); it != parsed_.end()) still_pending.insert(parsed_.extract(it));
  }
  parsed_ = std::move(still_pending);                   // jobs placed or ended since the last pass drop out
  std::map<std::string, std::string> failed_this_pass;  // shape_key -> why
  for (const store::JobRecord& job : *pending) {
    ParsedJob& parsed = ParsedLocked(job);
    if (!parsed.spec.ok()) continue;  // admission checked it; a catalog change could break it
    // It did not fit, and no capacity came back since: it still does not (placements made since
    // only took capacity away). Kubernetes' scheduler parks such pods the same way.
    if (parsed.unschedulable_at == capacity_generation_) continue;
    const absl::StatusOr<api::JobSpec>& spec = parsed.spec;
    const absl::StatusOr<std::vector<sched::Request>>& requests = parsed.requests;
    if (!requests.ok()) {
      pending_reason_[job.id] = std::string(requests.status().message());
      continue;
    }
    // A job asking exactly what one that just failed asked cannot fit either: same reason, no search.
    if (auto it = failed_this_pass.find(parsed.shape_key); it != failed_this_pass.end()) {
      pending_reason_[job.id] = it->second;
      parsed.unschedulable_at = capacity_generation_;
      continue;
    }
    std::string why;
    for (const sched::Request& request : *requests) {
      StoreBinder binder(store_, clock_, sched_nodes_, registrations, job);
      auto decision = framework_->Schedule(request, binder);
      if (!decision.ok()) {
        why = std::string(decision.status().message());
        break;
      }
      if (decision->scheduled) {
        LiveJob live{binder.stored(), *spec, binder.allocation(),
                     std::vector<MemberStatus>(binder.allocation().members.size())};
        spdlog::info("control plane: {} ({}) {}", job.id, job.name, binder.stored().reason);
        live_.insert_or_assign(job.id, std::move(live));
        pending_reason_.erase(job.id);
        CommittedLocked(job.id, JobState::kPending, JobState::kScheduled);
        if (metrics_) metrics_->Placed(active_policy_);
        why.clear();
        break;
      }
      std::map<std::string, int> counts;
      for (const auto& r : decision->reasons) ++counts[r.reason];
      why = request.gang_size > 1 ? fmt::format("no node fits member {} of the gang of {} ({} nodes)",
                                                decision->members_placed + 1, request.gang_size, cluster_->size())
                                  : fmt::format("no node fits ({} nodes)", cluster_->size());
      for (const auto& [reason, n] : counts) why += fmt::format("; {}: {}", n, reason);
    }
    if (!why.empty()) {
      pending_reason_[job.id] = why;
      parsed.unschedulable_at = capacity_generation_;
      failed_this_pass.emplace(parsed.shape_key, why);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Nodes and pool

std::vector<NodeView> ControlPlane::Nodes() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<NodeView> out;
  for (const auto& [name, s] : nodes_) {
    NodeView v;
    v.registration = s.registration;
    v.state = NodeStateName(s.down, s.cordoned);
    v.cordoned = s.cordoned;
    v.last_heartbeat = s.last_heartbeat;
    v.samples = s.samples;
    for (const auto& [id, live] : live_) {
      bool here = false;
      for (const auto& m : live.allocation.members) {
        if (m.node != name) continue;
        v.gpu_milli_allocated += static_cast<int64_t>(m.gpus.size()) * m.gpu_milli;
        here = true;
      }
      if (here) v.jobs.push_back(id);
    }
    out.push_back(std::move(v));
  }
  return out;
}

absl::StatusOr<NodeView> ControlPlane::Node(const std::string& name) {
  for (NodeView& v : Nodes()) {
    if (v.registration.node == name) return std::move(v);
  }
  return absl::NotFoundError(fmt::format("no node '{}'", name));
}

absl::Status ControlPlane::SetCordoned(const std::string& name, bool cordoned) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(fmt::format("no node '{}'", name));
  ASSIGN_OR_RETURN(store::NodeRecord record, store_.GetNode(name));
  record.state = NodeStateName(false, cordoned);
  RETURN_IF_ERROR(store_.PutNode(record));
  it->second.cordoned = cordoned;
  CapacityChangedLocked();
  return absl::OkStatus();
}

absl::Status ControlPlane::Drain(const std::string& name) {
  RETURN_IF_ERROR(SetCordoned(name, true));
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& id : JobsOnNodeLocked(name)) {
    if (api::IsTerminal(live_.at(id).record.state)) continue;  // ended; its members are stopping
    RETURN_IF_ERROR(RequeueLocked(live_.at(id), fmt::format("node {} drained; requeued", name)));
  }
  return absl::OkStatus();
}

absl::StatusOr<NodeView> ControlPlane::RemoveNode(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  // A node silent past the timeout is down now, with its jobs requeued, even between two passes.
  CheckNodesLocked();
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return absl::NotFoundError(fmt::format("no node '{}'", name));
  const NodeState& s = it->second;
  if (!s.down && !s.cordoned) {
    return absl::FailedPreconditionError(
        fmt::format("node {} is up: drain it and stop its agent first (gpugeek drain {}), then remove it once it "
                    "is down",
                    name, name));
  }
  if (const std::vector<std::string> jobs = JobsOnNodeLocked(name); !jobs.empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "node {} still holds jobs: {}; drain it (gpugeek drain {}) and wait for them to leave, or stop its agent "
        "and wait until it is down",
        name, fmt::join(jobs, ", "), name));
  }
  NodeView removed;
  removed.registration = s.registration;
  removed.state = NodeStateName(s.down, s.cordoned);
  removed.cordoned = s.cordoned;
  removed.last_heartbeat = s.last_heartbeat;
  removed.samples = s.samples;
  // NotFound: the row is gone already; memory follows the store.
  if (absl::Status st = store_.DeleteNode(name); !st.ok() && !absl::IsNotFound(st)) return st;
  nodes_.erase(it);
  CapacityChangedLocked();
  spdlog::info("control plane: node {} removed ({})", name, removed.state);
  return removed;
}

PoolView ControlPlane::Pool() {
  PoolView view;
  if (auto counts = store_.CountJobs(); counts.ok()) {
    for (const store::JobCount& c : *counts) {
      if (c.state == JobState::kPending) view.pending_jobs += static_cast<int>(c.count);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (cluster_dirty_) RebuildClusterLocked();
  view.policy = active_policy_;
  if (!cluster_) return view;
  std::map<std::pair<std::string, std::string>, PoolRow> rows;
  int64_t idle = 0;
  for (sched::NodeIndex n = 0; n < static_cast<sched::NodeIndex>(cluster_->size()); ++n) {
    const sched::NodeSpec& spec = cluster_->spec(n);
    if (spec.gpu_count == 0) continue;
    PoolRow& row = rows[{spec.gpu_model, std::string(sched::CapacityTypeName(spec.capacity_type))}];
    row.gpu_model = spec.gpu_model;
    row.capacity_type = std::string(sched::CapacityTypeName(spec.capacity_type));
    row.nodes += 1;
    row.gpus += spec.gpu_count;
    row.gpu_milli_total += int64_t{spec.gpu_count} * sched::kMilliPerGpu;
    row.gpu_milli_allocated += int64_t{spec.gpu_count} * sched::kMilliPerGpu - cluster_->gpu_free_total(n);
    row.gpus_fully_free += cluster_->full_free_gpus(n);
    row.gpus_allocated += spec.gpu_count - cluster_->full_free_gpus(n);
    row.frag_gpu_milli += sched::NodeFragMilli(*cluster_, n, typical_);
    row.unallocatable_gpus += sched::NodeUnallocatableGpus(*cluster_, n, typical_);
    idle += cluster_->gpu_free_total(n);
  }
  for (auto& [key, row] : rows) {
    view.gpu_milli_total += row.gpu_milli_total;
    view.gpu_milli_allocated += row.gpu_milli_allocated;
    view.frag_gpu_milli += row.frag_gpu_milli;
    view.rows.push_back(row);
  }
  view.frag_rate = idle > 0 ? view.frag_gpu_milli / static_cast<double>(idle) : 0;
  return view;
}

std::vector<workload::PoolEntry> ControlPlane::PoolEntriesLocked() {
  std::map<std::string, int> counts;
  for (const auto& [name, s] : nodes_) {
    if (s.down || s.cordoned) continue;
    for (const hw::GpuDevice& d : s.registration.inventory.gpus) {
      if (!d.model_id.empty()) ++counts[d.model_id];
    }
  }
  std::vector<workload::PoolEntry> pool;
  for (const auto& [model, count] : counts) {
    const hw::GpuModel* m = catalog_.FindById(model);
    if (m != nullptr && m->disclosed) pool.push_back({m, count, 0});
  }
  return pool;
}

absl::StatusOr<workload::Plan> ControlPlane::DryRunPlan(const std::string& model_config_json,
                                                        const workload::Task& task,
                                                        const std::vector<workload::PoolEntry>& pool,
                                                        const workload::PlannerOptions& options) {
  auto config = workload::ParseModelConfig(model_config_json);
  if (!config.ok()) return absl::InvalidArgumentError(fmt::format("model_config: {}", config.status().message()));
  std::vector<workload::PoolEntry> entries = pool;
  if (entries.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    entries = PoolEntriesLocked();
  }
  if (entries.empty()) return absl::FailedPreconditionError("no GPUs of a known model are registered in the pool");
  return workload::MakePlan(*config, task, entries, options);
}

}  // namespace gpugeek::controlplane
