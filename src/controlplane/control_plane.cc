#include "controlplane/control_plane.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "api/job_state.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/controllers/budget.h"
#include "controlplane/controllers/gc.h"
#include "controlplane/controllers/gpu_health.h"
#include "controlplane/controllers/job_lifecycle.h"
#include "controlplane/controllers/metering.h"
#include "controlplane/controllers/node_lifecycle.h"
#include "controlplane/controllers/reservation.h"
#include "controlplane/controllers/scheduling.h"
#include "controlplane/controllers/transitions.h"
#include "controlplane/job_request.h"
#include "controlplane/metrics.h"
#include "http/status_http.h"
#include "sched/frag.h"
#include "sched/registry.h"
#include "workload/model_config.h"

namespace gpugeek::controlplane {
namespace {

namespace fs = std::filesystem;
using api::JobState;

constexpr int kPageSize = 1000;
// Up to this many nodes, each registration publishes a snapshot at once (see Register).
constexpr size_t kPublishEachRegistrationUpTo = 256;
// Log followers that may long-poll at once (LogStore::WaitForBytes); more are answered at once.
constexpr int kMaxLogWaiters = 128;

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
absl::StatusOr<std::vector<store::JobRecord>> AllJobs(store::Store& store) {
  std::vector<store::JobRecord> all;
  store::JobFilter filter{.limit = kPageSize};
  for (;;) {
    ASSIGN_OR_RETURN(auto page, store.ListJobs(filter));
    if (page.empty()) break;
    filter.after_id = page.back().id;
    for (auto& j : page) all.push_back(std::move(j));
    if (static_cast<int>(page.size()) < kPageSize) break;
  }
  return all;
}

std::string NodeStateName(const NodeState& s) {
  return s.down ? "down" : s.suspect ? "suspect" : s.cordoned ? "cordoned" : s.blocked_until ? "blocked" : "ready";
}

}  // namespace

ControlPlane::ControlPlane(const ControlPlaneOptions& options)
    : options_(options),
      store_(*options.store),
      clock_(options.clock ? *options.clock : RealClock()),
      catalog_(options.catalog ? *options.catalog : hw::GpuCatalog::Builtin()),
      logs_(std::make_unique<LogStore>((fs::path(options.data_dir) / "logs").string(),
                                       LogStoreOptions{.max_bytes_per_job = options.log_quota_bytes,
                                                       .max_waiters = kMaxLogWaiters,
                                                       .keyring = options.keyring})),
      secrets_(std::make_unique<Secrets>(*options.store, options.clock ? *options.clock : RealClock())),
      node_lifecycle_(std::make_unique<NodeLifecycleController>()),
      gpu_health_(std::make_unique<GpuHealthController>()),
      job_lifecycle_(std::make_unique<JobLifecycleController>()),
      scheduling_(std::make_unique<SchedulingController>(options.fair_share_half_life)),
      gc_(std::make_unique<GcController>()),
      budget_(std::make_unique<BudgetController>()),
      reservation_(std::make_unique<ReservationController>()) {}

absl::StatusOr<std::unique_ptr<ControlPlane>> ControlPlane::Create(const ControlPlaneOptions& options) {
  if (options.store == nullptr) return absl::InvalidArgumentError("control plane: a store is required");
  if (options.data_dir.empty()) return absl::InvalidArgumentError("control plane: data_dir is required");
  if (sched::Registry::Builtin().FindPolicy(options.policy) == nullptr) {
    return absl::NotFoundError(fmt::format("control plane: unknown placement policy '{}'", options.policy));
  }
  if (options.heartbeat_interval <= Duration::zero() || options.lease <= options.heartbeat_interval ||
      options.fence_grace < Duration::zero() || options.fence_margin < Duration::zero()) {
    return absl::InvalidArgumentError(
        "control plane: the lease must be longer than the heartbeat interval (at least two beats), and the fence "
        "grace and margin must not be negative");
  }
  if (options.fair_share_half_life < Duration::zero() || options.usage_save_interval < Duration::zero()) {
    return absl::InvalidArgumentError(
        "control plane: the fair-share half-life and the usage save interval must not be negative");
  }
  if (options.billing.platform_fee_bps < 0 || options.billing.platform_fee_bps > 10'000 ||
      options.billing.trial_credit_micros < 0 || options.billing.trial_credit_micros > ledger::kMaxPostingMicros ||
      options.billing.trial_credit_ttl < Duration::zero()) {
    return absl::InvalidArgumentError(
        "control plane: the platform fee must be 0..10000 basis points, the trial credit 0..1000000000 units and its "
        "lifetime not negative");
  }
  std::error_code ec;
  fs::create_directories(fs::path(options.data_dir) / "logs", ec);
  if (ec)
    return absl::UnavailableError(fmt::format("control plane: cannot create {}: {}", options.data_dir, ec.message()));
  auto cp = std::unique_ptr<ControlPlane>(new ControlPlane(options));
  if (options.metrics != nullptr) cp->metrics_ = std::make_unique<ControlPlaneMetrics>(*options.metrics);
  ASSIGN_OR_RETURN(cp->billing_, Billing::Open(*options.store, cp->clock_, options.billing));
  {
    MutexLock lock(&cp->writer_mu_);
    RETURN_IF_ERROR(cp->Load());
    cp->PublishLocked();
  }
  if (cp->metrics_) {
    cp->metrics_->RegisterCollectors(*cp);
    cp->metrics_->DeclarePolicy(options.policy);
    cp->metrics_->DeclarePolicy("BestFit");  // places until there are typical pods
  }
  return cp;
}

ControlPlane::~ControlPlane() {
  logs_->Shutdown();
  MutexLock lock(&writer_mu_);
  SaveUsageLocked();  // a graceful stop keeps the usage accrued since the last save
}

void ControlPlane::BeginShutdown() {
  shutting_down_ = true;
  logs_->Shutdown();
}

ControllerContext ControlPlane::ContextLocked() {
  return ControllerContext{state_,  store_,      clock_, options_,       catalog_,
                           leases_, log_grants_, *logs_, metrics_.get(), billing_.get()};
}

absl::Status ControlPlane::Load() {
  ControllerContext ctx = ContextLocked();
  const MonoTime now = clock_.Monotonic();
  const TimePoint wall = clock_.Now();
  ASSIGN_OR_RETURN(auto nodes, store_.ListNodes());
  for (const store::NodeRecord& n : nodes) {
    nlohmann::json j = nlohmann::json::parse(n.inventory_json, nullptr, /*allow_exceptions=*/false);
    auto reg = api::RegistrationFromJson(j);
    if (!reg.ok()) {
      spdlog::warn("control plane: skipping stored node {}: {}", n.id, reg.status());
      continue;
    }
    NodeState& s = state_.nodes[n.id];
    s.registration = *reg;
    s.shared_registration = std::make_shared<const api::Registration>(*reg);
    s.instance_id = reg->instance_id;
    s.cordoned = n.state == "cordoned";
    s.sched_nodes = ToSchedNodes(s.registration);
    // A restarted server gives every node a fresh lease to say it is still there (a reload keeps them).
    if (!leases_.Get(n.id)) leases_.Grant(n.id, reg->instance_id, now, wall);
  }
  // The nodes reservations hold, before the first pass prices a segment (controllers/reservation.h).
  state_.reserved = HeldNodes(billing_->reservations(), wall);
  ASSIGN_OR_RETURN(auto jobs, AllJobs(store_));
  int64_t next = 1;
  for (store::JobRecord& j : jobs) {
    int64_t number = 0;
    if (j.id.size() > 2 && j.id.starts_with("j-")) number = std::strtoll(j.id.c_str() + 2, nullptr, 10);
    next = std::max(next, number + 1);
    if (j.state == JobState::kPending && j.restarts > 0) {
      // A PENDING job's last update is its requeue; carried over to the monotonic clock.
      const MonoTime requeued = now - std::max(Duration::zero(), wall - j.updated_at);
      state_.recovery.try_emplace(j.id, State::Recovery{.failed_at = requeued, .requeued_at = requeued});
    }
    std::optional<Allocation> allocation;
    if (!j.allocation_json.empty()) {
      auto a = ParseAllocation(j.allocation_json);
      if (!a.ok()) {
        spdlog::error("control plane: job {} has an unreadable allocation; leaving it alone: {}", j.id, a.status());
        continue;
      }
      if (!a->released) allocation = *a;
    }
    if (!allocation) {
      if (j.state == JobState::kPending) AddPending(ctx, j);
      continue;
    }
    auto spec = api::ParseJobSpec(j.spec_yaml, catalog_);
    if (!spec.ok()) {
      spdlog::error("control plane: job {} has an unreadable spec; leaving it alone: {}", j.id, spec.status());
      continue;
    }
    LiveJob live{j, *spec, *allocation, std::vector<MemberStatus>(allocation->members.size())};
    live.placed_at = now;  // max_duration counts from the restart: a restart never ends a job early
    SetLayout(live);
    // Requeued or ended with members still stopping: they have until the drain deadline.
    live.draining = j.state == JobState::kPending;
    // An elastic gang stopping its survivors: it goes on re-forming (controllers/elastic_reform.cc).
    live.reform = allocation->reforming && !live.draining && !api::IsTerminal(j.state);
    if (live.reform) {
      live.reform_reason = j.reason.starts_with(kReformingPrefix) ? j.reason.substr(kReformingPrefix.size()) : j.reason;
    }
    if (live.draining || live.reform || api::IsTerminal(j.state)) live.drain_deadline = DrainDeadline(ctx, live, now);
    ResumeOpenSegments(live, now, wall);  // metering goes on from where it began (usage.h OpenSegment)
    if (!allocation->members.empty()) state_.ports[allocation->master_addr].insert(allocation->master_port);
    log_grants_.Place(j.id, j.tenant, j.epoch, MemberNodes(*allocation));
    state_.live.emplace(j.id, std::move(live));
  }
  next_job_number_ = next;
  // Tenants: quotas, then their decayed usage, decayed further over the time the server was away.
  // The live jobs' holdings are counted by the scheduler's first rebuild.
  ASSIGN_OR_RETURN(auto quotas, store_.ListTenantQuotas());
  for (const store::TenantQuotaRecord& q : quotas) {
    sched::TenantConfig config{
        .weight = q.weight,
        .quota = {.max_gpus_by_model = q.max_gpus_by_model, .max_gpu_milli = q.max_gpu_milli, .max_jobs = q.max_jobs}};
    if (absl::Status st = scheduling_->ConfigureTenant(q.tenant, config); !st.ok()) {
      spdlog::error("control plane: ignoring the stored quota of tenant '{}': {}", q.tenant, st);
    }
  }
  ASSIGN_OR_RETURN(auto usage, store_.ListTenantUsage());
  const Duration half_life = options_.fair_share_half_life;
  for (const store::TenantUsageRecord& u : usage) {
    double value = u.usage;
    if (half_life > Duration::zero() && wall > u.as_of) {
      value *= std::exp2(-std::chrono::duration<double>(wall - u.as_of) / std::chrono::duration<double>(half_life));
    }
    if (absl::Status st = scheduling_->RestoreUsage(u.tenant, value); !st.ok()) {
      spdlog::error("control plane: ignoring the stored usage of tenant '{}': {}", u.tenant, st);
    }
  }
  spdlog::info("control plane: loaded {} nodes, {} jobs ({} holding GPUs, {} pending) from the store",
               state_.nodes.size(), jobs.size(), state_.live.size(), state_.pending.size());
  state_.CapacityChanged();
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// The writer's pass and the snapshot

void ControlPlane::Reconcile() {
  MutexLock lock(&writer_mu_);
  ControllerContext ctx = ContextLocked();
  // One pass, one transaction: the pass's writes reach the disk together (one fsync, not one per
  // transition), and only then does the snapshot show them. Without a batch each write commits alone.
  const absl::Status batch = store_.BeginWriteBatch();
  if (!batch.ok()) spdlog::warn("control plane: writing this pass without a batch: {}", batch);
  DrainInboxLocked();
  const MonoTime now = clock_.Monotonic();
  node_lifecycle_->Reconcile(ctx, now);
  gpu_health_->Reconcile(ctx, now);
  job_lifecycle_->Reconcile(ctx, now);
  budget_->Reconcile(ctx, now);
  reservation_->Reconcile(ctx, now);
  serving_meter_->Reconcile(ctx);
  scheduling_->Reconcile(ctx, now);
  if (!usage_saved_ || now - *usage_saved_ >= options_.usage_save_interval) {
    SaveUsageLocked();
    state_.dirty = true;  // and `gpugeek quota` shows usage at most that old
  }
  if (batch.ok()) {
    std::vector<PendingSubmit*> riders;
    {
      std::lock_guard<std::mutex> queue_lock(commit_mu_);
      riders = TakeSubmissionsLocked();
    }
    const absl::Status committed = CommitSubmissions(riders, [this] { return store_.CommitWriteBatch(); });
    if (!committed.ok()) {
      // Nothing of the pass is stored, so what memory derived from it is wrong: start again from the
      // store. Agents report again what was not acknowledged; the riding submitters get the error.
      spdlog::error("control plane: committing the pass failed, reloading from the store: {}", committed);
      ReloadLocked();
    }
  }
  // After the commit: gc writes nothing to the store, and its log sweep (file deletions, a scan of the
  // ended jobs every 10 minutes) must not hold the batch open while submitters wait for it.
  gc_->Reconcile(ctx, clock_.Monotonic());
  PublishLocked();
}

void ControlPlane::ReloadLocked() {
  // Usage lives in memory between saves: keep it rather than fall back to the last save.
  const std::vector<sched::TenantUsage> usage = scheduling_->ledger().AllUsage();
  state_ = State{};
  log_grants_.Clear();
  node_lifecycle_ = std::make_unique<NodeLifecycleController>();
  job_lifecycle_ = std::make_unique<JobLifecycleController>();
  scheduling_ = std::make_unique<SchedulingController>(options_.fair_share_half_life);
  gc_ = std::make_unique<GcController>();
  budget_ = std::make_unique<BudgetController>();
  reservation_ = std::make_unique<ReservationController>();
  serving_meter_->Forget();
  if (absl::Status st = billing_->Reload(); !st.ok()) spdlog::error("control plane: reloading the ledger: {}", st);
  if (absl::Status st = Load(); !st.ok()) spdlog::error("control plane: reloading from the store: {}", st);
  for (const sched::TenantUsage& u : usage) (void)scheduling_->RestoreUsage(u.tenant, u.usage);
}

void ControlPlane::SaveUsageLocked() {
  usage_saved_ = clock_.Monotonic();
  std::vector<store::TenantUsageRecord> records;
  const TimePoint wall = clock_.Now();
  for (const sched::TenantUsage& u : scheduling_->ledger().AllUsage()) records.push_back({u.tenant, u.usage, wall});
  if (records.empty()) return;
  if (absl::Status st = store_.PutTenantUsage(records); !st.ok()) {
    spdlog::warn("control plane: saving the tenants' usage (retried at the next save): {}", st);
  }
}

void ControlPlane::DrainInboxLocked() {
  std::vector<QueuedReport> reports;
  std::vector<store::JobRecord> submitted;
  {
    MutexLock lock(&inbox_mu_);
    reports.swap(reports_);
    submitted.swap(submitted_);
    work_ = false;
  }
  ControllerContext ctx = ContextLocked();
  for (const store::JobRecord& r : submitted) AddPending(ctx, r);
  for (const QueuedReport& q : reports) {
    if (absl::Status st = job_lifecycle_->Apply(ctx, q.node, q.report); !st.ok()) {
      // Not acknowledged: the agent reports again next heartbeat.
      spdlog::warn("control plane: report for {} from {}: {}", q.report.job_id, q.node, st);
    }
  }
}

void ControlPlane::WaitForWork(Duration timeout) {
  MutexLock lock(&inbox_mu_);
  inbox_mu_.AwaitWithTimeout([this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return work_; }, timeout);
}

void ControlPlane::PublishLocked() {
  if (!state_.dirty && published_version_ > 0) return;
  auto snap = std::make_shared<Snapshot>();
  snap->version = ++published_version_;
  for (const auto& [name, s] : state_.nodes) {
    NodeSnapshot& n = snap->nodes[name];
    n.registration = s.shared_registration;
    n.state = NodeStateName(s);
    n.cordoned = s.cordoned;
    n.unhealthy_gpus = s.unhealthy_gpus;
  }
  for (const auto& [id, live] : state_.live) {
    std::set<std::string> here;
    for (const AllocationMember& m : live.allocation.members) {
      auto it = snap->nodes.find(m.node);
      if (it == snap->nodes.end()) continue;
      if (live.Holds(m.rank)) {
        it->second.gpu_milli_allocated += static_cast<int64_t>(m.gpus.size()) * m.gpu_milli;
      }
      if (here.insert(m.node).second) {
        it->second.jobs.push_back(id);
        it->second.job_tenants.push_back(live.record.tenant);
      }
    }
  }
  snap->assignments = BuildAssignments(state_);
  for (const auto& [id, live] : state_.live) {
    if (!live.spec.secret_env.empty()) {
      snap->job_secrets[id] = {SecretTenant(live.record.tenant), live.spec.secret_env};
    }
  }
  snap->pending_reasons.insert(state_.pending_reason.begin(), state_.pending_reason.end());
  const std::map<std::string, int64_t> on_demand = OnDemandPrices(state_);
  for (const auto& [id, live] : state_.live) {
    auto reference = on_demand.find(live.allocation.gpu_model);
    for (const AllocationMember& m : live.allocation.members) {
      const MemberStatus& status = live.members[m.rank];
      if (!status.running_since || status.exited) continue;
      const OpenSegment terms = SegmentTerms(state_, live, m.rank);
      snap->metering[id].push_back({.capacity_type = terms.capacity_type,
                                    .gpu_model = live.allocation.gpu_model,
                                    .milli = static_cast<int64_t>(m.gpu_uuids.size()) * m.gpu_milli,
                                    .price = terms.price,
                                    .on_demand_price = reference != on_demand.end() ? reference->second : terms.price,
                                    .since = *status.running_since,
                                    .idle = status.idle});
    }
  }
  // A write between passes (register, cordon, drain, remove, cancel) may have changed the pool:
  // Pool() must show it with this snapshot, not after the next pass.
  if (state_.cluster_dirty || !state_.released.empty()) {
    ControllerContext ctx = ContextLocked();
    scheduling_->RefreshCluster(ctx);
  }
  snap->cluster = scheduling_->ClusterCopy();
  snap->typical = scheduling_->typical();
  snap->policy = scheduling_->active_policy().empty() ? options_.policy : scheduling_->active_policy();
  snap->pending_jobs = static_cast<int>(state_.pending.size());
  snap->quota = scheduling_->QuotaCopy(ContextLocked());
  state_.dirty = false;
  MutexLock lock(&snapshot_mu_);
  snapshot_ = std::move(snap);
}

std::shared_ptr<const Snapshot> ControlPlane::snapshot() const {
  MutexLock lock(&snapshot_mu_);
  return snapshot_;
}

// ---------------------------------------------------------------------------------------------
// Jobs

std::optional<std::string> ControlPlane::ArchiveTenantFor(const std::string& node, const std::string& digest) const {
  if (digest.empty()) return std::nullopt;
  const std::shared_ptr<const Snapshot> snap = snapshot();
  auto it = snap->assignments.find(node);
  if (it == snap->assignments.end()) return std::nullopt;
  for (const api::Assignment& a : it->second) {
    if (a.cancel) continue;
    if (a.workdir_digest == digest) return a.tenant;
    for (const api::FileArchive& f : a.file_archives) {
      if (f.digest == digest) return a.tenant;
    }
  }
  return std::nullopt;
}

std::optional<std::string> ControlPlane::FirstAssigned(
    const std::string& node, const std::function<std::optional<std::string>(const api::Assignment&)>& pick) const {
  const std::shared_ptr<const Snapshot> snap = snapshot();
  auto it = snap->assignments.find(node);
  if (it == snap->assignments.end()) return std::nullopt;
  for (const api::Assignment& a : it->second) {
    if (a.cancel) continue;
    if (std::optional<std::string> picked = pick(a)) return picked;
  }
  return std::nullopt;
}

std::optional<std::string> ControlPlane::DatasetTenantFor(const std::string& node, const std::string& commit) const {
  if (commit.empty()) return std::nullopt;
  return FirstAssigned(node, [&](const api::Assignment& a) {
    return a.dataset_commit == commit ? std::optional<std::string>(a.tenant) : std::nullopt;
  });
}

std::optional<std::string> ControlPlane::ModelOwnerFor(const std::string& node, const std::string& commit) const {
  if (commit.empty()) return std::nullopt;
  return FirstAssigned(node, [&](const api::Assignment& a) {
    return a.model_commit == commit ? std::optional<std::string>(a.model_owner) : std::nullopt;
  });
}

absl::StatusOr<JobView> ControlPlane::Submit(const SubmitRequest& request) {
  absl::StatusOr<JobView> job = Admit(request);
  if (metrics_) metrics_->Submission(job.ok());
  return job;
}

absl::StatusOr<ControlPlane::Admission> ControlPlane::Check(const SubmitRequest& request, bool quote) {
  ASSIGN_OR_RETURN(api::JobSpec spec, api::ParseJobSpec(request.spec_yaml, catalog_));
  RETURN_IF_ERROR(secrets_->CheckRefs(SecretTenant(request.tenant), spec.secret_env));
  if (!quote) RETURN_IF_ERROR(CheckBudgets(SecretTenant(request.tenant), request.user));
  if (options_.billing.enforce && !quote) {
    // Budgets (billing.h): a tenant with nothing left to spend is refused before anything is stored.
    const std::string tenant = SecretTenant(request.tenant);
    const ledger::TenantBalance balance = billing_->Balance(tenant);
    if (balance.available() <= ledger::Money{}) {
      return http::PaymentRequiredError(fmt::format(
          "tenant '{}' has {} to spend (credit {}, cash {}); an operator tops it up with `gpugeek top-up {} AMOUNT`",
          tenant, balance.available().ToString(), balance.credit.ToString(), balance.cash.ToString(), tenant));
    }
  }
  // A quote needs none of what runs the job: its folders, files, dataset and weights.
  if (quote) {
    spec.workdir.clear();
    spec.files.clear();
    spec.file_archives.clear();
    spec.workdir_digest.clear();
    spec.dataset.clear();
    spec.weights.clear();
    spec.weights_signer.clear();
  }
  if (!spec.workdir.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "workdir: '{}' is a folder on the submitting machine; `gpugeek submit` packs and uploads it and sends "
        "workdir_digest instead",
        spec.workdir.substr(0, 200)));
  }
  if (!spec.weights_signer.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("weights_signer: '{}' is a file on the submitting machine; `gpugeek submit` reads it and sends "
                    "weights_signer_pem instead",
                    spec.weights_signer.substr(0, 200)));
  }
  if (!spec.files.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("files.{}: names a path on the submitting machine; `gpugeek submit` uploads each entry and "
                    "sends file_archives instead",
                    spec.files.begin()->first));
  }
  auto has_archive = [&](const std::string& field, const std::string& digest) -> absl::Status {
    if (options_.has_archive && options_.has_archive(request.tenant, digest)) return absl::OkStatus();
    return absl::InvalidArgumentError(
        fmt::format("{}: tenant '{}' has no archive {}; upload it first (PUT /v1/archives/{{digest}}, as "
                    "`gpugeek submit` does)",
                    field, SecretTenant(request.tenant), digest));
  };
  if (!spec.workdir_digest.empty()) RETURN_IF_ERROR(has_archive("workdir_digest", spec.workdir_digest));
  for (size_t i = 0; i < spec.file_archives.size(); ++i) {
    RETURN_IF_ERROR(has_archive(fmt::format("file_archives[{}].digest", i), spec.file_archives[i].digest));
  }
  // The dataset's revision is resolved now and the spec stored with the commit's digest, so every
  // placement and retry of the job reads the same version.
  std::string spec_yaml = request.spec_yaml;
  if (!spec.dataset.empty()) {
    if (!options_.resolve_dataset) {
      return absl::FailedPreconditionError("dataset: this server keeps no datasets; leave the field out");
    }
    absl::StatusOr<std::string> commit = options_.resolve_dataset(request.tenant, spec.dataset, spec.dataset_rev);
    if (!commit.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("dataset: {}@{}: {}", spec.dataset, spec.dataset_rev, std::string(commit.status().message())));
    }
    if (*commit != spec.dataset_rev) {
      spec.dataset_rev = *commit;
      spec_yaml = api::JobSpecToYaml(spec);
    }
  }
  // The same for `weights:`, which also needs a right on another tenant's model: a training task
  // fine-tunes it, anything else deploys it.
  if (!spec.weights.empty()) {
    if (!options_.resolve_weights) {
      return absl::FailedPreconditionError("weights: this server keeps no model registry; leave the field out");
    }
    const bool finetune = spec.task.has_value() && spec.task->kind != api::TaskKind::kInference;
    absl::StatusOr<std::string> commit = options_.resolve_weights(
        request.tenant, request.user, spec.weights_owner, spec.weights, spec.weights_rev, finetune, spec.engine);
    if (!commit.ok()) {
      return absl::Status(
          commit.status().code(),
          fmt::format("weights: {}{}@{}: {}", spec.weights_owner.empty() ? "" : spec.weights_owner + "/", spec.weights,
                      spec.weights_rev, std::string(commit.status().message())));
    }
    spec.weights_rev = *commit;
    if (spec.weights_owner.empty()) spec.weights_owner = SecretTenant(request.tenant);
    spec_yaml = api::JobSpecToYaml(spec);
  }
  std::string plan_json;
  std::optional<workload::ResourceRequest> planned;
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
    std::vector<workload::PoolEntry> pool = PoolEntries(*snapshot());
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
    planned = workload::ToResourceRequest(plan);
    plan_json = PlanToJson(*planned, plan.candidates[0].Summary()).dump();
  }
  // Fail fast: a job no registered node could ever host is refused now, naming what is missing.
  absl::StatusOr<std::vector<sched::Request>> requests =
      BuildRequests("admission", spec, planned ? &*planned : nullptr);
  if (!requests.ok()) return requests.status();
  for (sched::Request& r : *requests) r.tenant = request.tenant;
  RETURN_IF_ERROR(admission_fit_.Check(*requests, *snapshot()));
  return Admission{.spec = std::move(spec),
                   .spec_yaml = std::move(spec_yaml),
                   .plan_json = std::move(plan_json),
                   .planned = std::move(planned),
                   .requests = *std::move(requests)};
}

absl::Status ControlPlane::CheckBudgets(const std::string& tenant, const std::string& user) const {
  const std::string period = Billing::Period(clock_.Now());
  std::vector<std::string> scopes = {""};  // the tenant's own, then the user's
  if (!user.empty()) scopes.push_back(user);
  for (const std::string& who : scopes) {
    const std::optional<store::BudgetRecord> budget = billing_->budgets().Find(tenant, who);
    if (!budget) continue;
    const ledger::Money spent = billing_->MonthSpend(tenant, who, period);
    if (spent.micros < budget->monthly_limit_micros) continue;
    const std::string whose = who.empty() ? fmt::format("tenant '{}'", tenant) : fmt::format("user '{}'", who);
    return http::PaymentRequiredError(fmt::format(
        "budget: {} has spent {} of its monthly budget of {} in {}; an operator raises it with `gpugeek budget set "
        "{} {} --monthly AMOUNT`, or wait for next month",
        whose, spent.ToString(), ledger::Money::Micros(budget->monthly_limit_micros).ToString(), period,
        who.empty() ? "--tenant" : "--user", who.empty() ? tenant : who));
  }
  return absl::OkStatus();
}

absl::StatusOr<JobView> ControlPlane::Admit(const SubmitRequest& request) {
  ASSIGN_OR_RETURN(Admission admitted, Check(request, /*quote=*/false));
  const api::JobSpec& spec = admitted.spec;
  std::string& spec_yaml = admitted.spec_yaml;
  const std::string& plan_json = admitted.plan_json;
  store::JobRecord record;
  record.tenant = request.tenant;
  record.submitted_by = request.user;
  record.name = spec.name;
  record.spec_yaml = std::move(spec_yaml);
  record.state = JobState::kPending;
  record.priority = spec.priority;
  record.plan_json = plan_json;
  for (const auto& [var, value] : request.platform_env) {
    if (absl::Status s = api::CheckPlatformEnv("platform_env", var, value); !s.ok()) {
      return absl::InternalError(s.message());  // internal callers only
    }
  }
  record.platform_env = request.platform_env;
  record.reason = plan_json.empty()
                      ? "submitted"
                      : "submitted; planned " + nlohmann::json::parse(plan_json)["best"].get<std::string>();
  record.created_at = record.updated_at = clock_.Now();
  ASSIGN_OR_RETURN(store::JobRecord stored, CommitGrouped(std::move(record)));
  {
    MutexLock lock(&inbox_mu_);
    submitted_.push_back(stored);
    work_ = true;
    inbox_mu_.NotifyAll();
  }
  JobView v;
  v.record = std::move(stored);
  return v;
}

absl::StatusOr<JobQuote> ControlPlane::Quote(const SubmitRequest& request) {
  ASSIGN_OR_RETURN(Admission admitted, Check(request, /*quote=*/true));
  JobQuote q;
  q.spec_yaml = admitted.spec_yaml;
  q.plan_json = admitted.plan_json;
  q.lines = QuoteFor(admitted.requests, admitted.planned ? &*admitted.planned : nullptr, admitted.spec.max_duration,
                     *snapshot(), SecretTenant(request.tenant));
  const ledger::TenantBalance balance = billing_->Balance(SecretTenant(request.tenant));
  q.available_micros = balance.available().micros;
  q.enforced = options_.billing.enforce;
  return q;
}

// Group commit (leader/follower): a submitter that finds no commit in flight becomes the leader,
// takes every queued submission, and stores them in one transaction (one fsync); the others wait
// for their result. Under load a batch holds every submission that arrived during the previous
// fsync, so durable submissions/s grow with concurrency instead of being capped at 1/fsync. A pass
// of the writer also takes what is queued when it ends, into its own transaction (Reconcile), so
// submissions that arrive during a pass share its fsync instead of waiting for it and paying their own.
absl::StatusOr<store::JobRecord> ControlPlane::CommitGrouped(store::JobRecord record) {
  PendingSubmit mine;
  mine.record = std::move(record);
  std::unique_lock<std::mutex> lock(commit_mu_);
  commit_queue_.push_back(&mine);
  while (!mine.done) {
    if (committing_ || mine.taken) {
      commit_cv_.wait(lock);
      continue;
    }
    committing_ = true;
    std::vector<PendingSubmit*> batch = TakeSubmissionsLocked();
    lock.unlock();
    (void)CommitSubmissions(batch, [] { return absl::OkStatus(); });  // each submitter gets its result
    lock.lock();
    committing_ = false;
    commit_cv_.notify_all();
  }
  return std::move(mine.result);
}

std::vector<ControlPlane::PendingSubmit*> ControlPlane::TakeSubmissionsLocked() {
  std::vector<PendingSubmit*> batch;
  batch.swap(commit_queue_);
  // Ids in queue order, so listing by id lists by submission.
  for (PendingSubmit* p : batch) {
    p->taken = true;
    p->record.id = JobId(next_job_number_++);
  }
  return batch;
}

absl::Status ControlPlane::CommitSubmissions(const std::vector<PendingSubmit*>& batch,
                                             const std::function<absl::Status()>& commit) {
  if (batch.empty()) return commit();
  std::vector<store::JobRecord> records;
  records.reserve(batch.size());
  for (const PendingSubmit* p : batch) records.push_back(p->record);
  auto results = store_.CreateJobs(records);
  const absl::Status committed = commit();
  std::lock_guard<std::mutex> lock(commit_mu_);
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i]->result = !committed.ok() ? absl::StatusOr<store::JobRecord>(committed)
                       : results.ok()  ? std::move((*results)[i])
                                       : absl::StatusOr<store::JobRecord>(results.status());
    batch[i]->done = true;
  }
  commit_cv_.notify_all();
  return committed;
}

JobView ControlPlane::ViewOf(const store::JobRecord& record, const Snapshot& snap) const {
  JobView v;
  v.record = record;
  if (!record.allocation_json.empty()) {
    auto a = ParseAllocation(record.allocation_json);
    if (a.ok()) v.allocation = *a;
  }
  if (record.state == JobState::kPending) {
    if (auto it = snap.pending_reasons.find(record.id); it != snap.pending_reasons.end()) v.pending_reason = it->second;
  }
  if (absl::StatusOr<Usage> usage = UsageFromText(record.usage_json); usage.ok()) v.usage = std::move(*usage);
  if (auto open = snap.metering.find(record.id); open != snap.metering.end()) {
    const MonoTime now = clock_.Monotonic();
    for (const Snapshot::OpenSegment& s : open->second) {
      Accrue(v.usage, s.capacity_type, s.gpu_model, s.milli, now - s.since, s.price, s.on_demand_price, s.idle);
    }
  }
  return v;
}

absl::StatusOr<JobView> ControlPlane::GetJob(const std::string& id) {
  ASSIGN_OR_RETURN(store::JobRecord record, store_.GetJob(id));
  return ViewOf(record, *snapshot());
}

absl::StatusOr<std::vector<JobView>> ControlPlane::ListJobs(const store::JobFilter& filter) {
  ASSIGN_OR_RETURN(auto records, store_.ListJobs(filter));
  const std::shared_ptr<const Snapshot> snap = snapshot();
  std::vector<JobView> out;
  out.reserve(records.size());
  for (const auto& r : records) out.push_back(ViewOf(r, *snap));
  return out;
}

absl::StatusOr<JobView> ControlPlane::Cancel(const std::string& id, const std::string& reason) {
  MutexLock lock(&writer_mu_);
  DrainInboxLocked();  // a job submitted a moment ago is known before it is cancelled
  ControllerContext ctx = ContextLocked();
  ASSIGN_OR_RETURN(store::JobRecord record, store_.GetJob(id));
  if (api::IsTerminal(record.state)) {
    return absl::FailedPreconditionError(
        fmt::format("job {} already ended {}; there is nothing to cancel", id, api::JobStateName(record.state)));
  }
  const std::string why = reason.empty() ? "cancelled" : reason;
  store::JobRecord stored;
  if (auto it = state_.live.find(id); it != state_.live.end()) {
    RETURN_IF_ERROR(CommitJobState(ctx, it->second, JobState::kCancelled, why));
    stored = it->second.record;
    RETURN_IF_ERROR(ReleaseIfDone(ctx, id));
  } else {
    const JobState from = record.state;
    record.state = JobState::kCancelled;
    record.reason = why;
    record.updated_at = clock_.Now();
    ASSIGN_OR_RETURN(stored, store_.UpdateJob(record));
    CountTransition(ctx, id, from, JobState::kCancelled);
    state_.pending.erase(id);
    state_.pending_reason.erase(id);
    scheduling_->Forget(id);
    logs_->Wake(id);
  }
  state_.dirty = true;
  PublishLocked();
  return ViewOf(stored, *snapshot());
}

absl::StatusOr<std::vector<store::EventRecord>> ControlPlane::Events(const store::EventFilter& filter) {
  return store_.ListEvents(filter);
}

absl::StatusOr<LogJobInfo> ControlPlane::LogState(const std::string& job_id) {
  ASSIGN_OR_RETURN(store::JobRecord record, store_.GetJob(job_id));
  const std::shared_ptr<const Snapshot> snap = snapshot();
  LogJobInfo info;
  info.tenant = record.tenant;
  info.state = std::string(api::JobStateName(record.state));
  info.terminal = api::IsTerminal(record.state);
  info.exit_code = record.exit_code;
  const std::optional<LogGrant> grant = log_grants_.Get(job_id);
  if (grant) {
    info.num_ranks = grant->ranks;
    for (const auto& [member, node] : grant->members) {
      int64_t& latest = info.latest_epoch[member.second];
      latest = std::max(latest, member.first);
    }
  }
  // Ended, and no member holds resources (every exit reported, so every last byte was shipped with it).
  info.logs_complete = shutting_down_ || (info.terminal && (!grant || !grant->live));
  return info;
}

// ---------------------------------------------------------------------------------------------
// Agents

absl::StatusOr<api::RegistrationReply> ControlPlane::Register(const api::Registration& as_sent) {
  api::Registration registration = as_sent;
  if (registration.price_micros_per_gpu_hour == 0 && !registration.inventory.gpus.empty()) {
    // Unpriced by its agent: the provider's price list, by the node's GPU model and capacity type.
    const hw::GpuDevice& gpu = registration.inventory.gpus.front();
    const auto price =
        options_.gpu_hour_prices.find({gpu.model_id.empty() ? gpu.name : gpu.model_id, registration.capacity_type});
    if (price != options_.gpu_hour_prices.end()) registration.price_micros_per_gpu_hour = price->second;
  }
  MutexLock lock(&writer_mu_);
  ControllerContext ctx = ContextLocked();
  NodeState& s = state_.nodes[registration.node];
  const bool known = !s.registration.node.empty();
  const bool restarted = known && !s.instance_id.empty() && s.instance_id != registration.instance_id;
  store::NodeRecord record;
  record.id = registration.node;
  record.inventory_json = api::ToJson(registration).dump();
  record.state = s.cordoned ? "cordoned" : "ready";
  record.last_heartbeat = clock_.Now();
  record.registered_at = record.last_heartbeat;
  if (absl::Status st = store_.PutNode(record); !st.ok()) {
    if (!known) state_.nodes.erase(registration.node);
    return st;
  }
  s.registration = registration;
  s.shared_registration = std::make_shared<const api::Registration>(registration);
  s.instance_id = registration.instance_id;
  s.down = false;
  s.suspect = false;
  s.sched_nodes = ToSchedNodes(registration);
  leases_.Grant(registration.node, registration.instance_id, clock_.Monotonic(), clock_.Now());
  state_.CapacityChanged();
  spdlog::info("control plane: node {} {} with {} GPUs", registration.node,
               restarted ? "registered again by a restarted agent"
               : known   ? "re-registered"
                         : "registered",
               registration.inventory.gpus.size());
  if (restarted) {
    // A new agent process ended what its predecessor ran (it reaps leftovers before registering), so
    // those members are stopped: their jobs restart, counted and with an event.
    for (const std::string& id : state_.JobsOn(registration.node)) {
      LiveJob& live = state_.live.at(id);
      for (const AllocationMember& m : live.allocation.members) {
        MemberStatus& status = live.members[m.rank];
        if (m.node != registration.node || status.exited) continue;
        status.exited = true;
        status.failed = true;
        status.detail = "its agent restarted";
      }
      absl::Status st = api::IsTerminal(live.record.state)
                            ? ReleaseIfDone(ctx, id)
                            : Requeue(ctx, id,
                                      fmt::format("the agent on {} restarted and ended the member there; restarting",
                                                  registration.node));
      if (!st.ok()) spdlog::error("control plane: job {} on restarted node {}: {}", id, registration.node, st);
    }
  }
  // A registration flood (a cluster starting) must not rebuild the snapshot per node: a small pool
  // sees the node at once; a large one in the next pass (<= reconcile interval), published once.
  if (state_.nodes.size() <= kPublishEachRegistrationUpTo) PublishLocked();
  api::RegistrationReply reply;
  reply.heartbeat_interval_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(options_.heartbeat_interval).count();
  reply.lease_ms = std::chrono::duration_cast<std::chrono::milliseconds>(options_.lease).count();
  reply.fence_grace_ms = std::chrono::duration_cast<std::chrono::milliseconds>(options_.fence_grace).count();
  return reply;
}

absl::StatusOr<api::HeartbeatReply> ControlPlane::Heartbeat(const api::Heartbeat& heartbeat) {
  api::HeartbeatReply reply;
  const RenewResult renewed =
      leases_.Renew(heartbeat.node, heartbeat.instance_id, clock_.Monotonic(), clock_.Now(), heartbeat.samples);
  if (renewed != RenewResult::kRenewed) {
    reply.reregister = true;
    return reply;
  }
  const std::shared_ptr<const Snapshot> snap = snapshot();
  // Logs first: a member's last bytes travel with its exit report, which may release the job.
  AppendLogs(heartbeat.node, heartbeat.logs, *snap);
  if (!heartbeat.workloads.empty()) {
    std::vector<api::WorkloadReport> reports = heartbeat.workloads;
    for (api::WorkloadReport& report : reports) {
      const std::vector<LogRedactor::Secret> secrets = SecretsOf(report.job_id, *snap);
      if (secrets.empty()) continue;
      // A report's message becomes an event's reason: redact it like the log.
      std::string none;
      report.message = LogRedactor::Redact(secrets, none, report.message, /*end=*/true);
      if (report.phase == api::WorkloadPhase::kRunning) continue;
      if (std::optional<std::string> tenant =
              log_grants_.WriterTenant(report.job_id, report.epoch, report.node_rank, heartbeat.node)) {
        // The member's end: what its log held back is stored now.
        AppendRedacted(*tenant, {.job_id = report.job_id, .node_rank = report.node_rank, .epoch = report.epoch},
                       secrets, /*end=*/true);
      }
    }
    MutexLock lock(&inbox_mu_);
    for (api::WorkloadReport& report : reports) reports_.push_back({heartbeat.node, std::move(report)});
    work_ = true;
    inbox_mu_.NotifyAll();
  }
  if (auto it = snap->assignments.find(heartbeat.node); it != snap->assignments.end()) reply.assignments = it->second;
  // Secret values go into the assignments of this node's own members only, and only here.
  for (api::Assignment& a : reply.assignments) {
    auto refs = snap->job_secrets.find(a.job_id);
    if (refs == snap->job_secrets.end() || a.cancel) continue;
    for (const auto& [var, name] : refs->second.env) {
      absl::StatusOr<std::string> value = secrets_->Value(refs->second.tenant, name);
      if (!value.ok()) {
        // Deleted (or unreadable) since admission: the variable stays unset, and the member sees that.
        spdlog::warn("control plane: job {} env.{}: secret '{}' of tenant '{}': {}", a.job_id, var, name,
                     refs->second.tenant, value.status());
        continue;
      }
      a.env[var] = std::move(*value);
    }
  }
  return reply;
}

std::vector<LogRedactor::Secret> ControlPlane::SecretsOf(const std::string& job_id, const Snapshot& snap) {
  std::vector<LogRedactor::Secret> out;
  auto refs = snap.job_secrets.find(job_id);
  if (refs == snap.job_secrets.end()) return out;
  for (const auto& [var, name] : refs->second.env) {
    absl::StatusOr<std::string> value = secrets_->Value(refs->second.tenant, name);
    if (value.ok()) out.push_back({name, std::move(*value)});
  }
  return out;
}

void ControlPlane::AppendRedacted(const std::string& tenant, const api::LogChunk& chunk,
                                  const std::vector<LogRedactor::Secret>& secrets, bool end) {
  MutexLock lock(&redact_mu_);
  const auto key = std::make_tuple(chunk.job_id, chunk.node_rank, chunk.epoch);
  auto it = redact_.find(key);
  if (it == redact_.end()) {
    if (end && chunk.data.empty()) return;  // nothing held for a stream never seen
    RedactStream fresh;
    fresh.agent_next = chunk.offset;  // a new stream starts at 0; after a restart, where the agent is
    for (const LogAttempt& a : logs_->Attempts(chunk.job_id, chunk.node_rank)) {
      if (a.epoch == chunk.epoch) fresh.stored_next = a.size;
    }
    it = redact_.emplace(key, std::move(fresh)).first;
  }
  RedactStream& st = it->second;
  std::string_view data = chunk.data;
  if (chunk.offset > st.agent_next) {
    spdlog::warn("control plane: log of {} rank {}: gap at {} (expected {}); dropped", chunk.job_id, chunk.node_rank,
                 chunk.offset, st.agent_next);
    return;
  }
  const uint64_t skip = st.agent_next - chunk.offset;  // a resend: those bytes were taken already
  data.remove_prefix(std::min<uint64_t>(skip, data.size()));
  st.agent_next = std::max(st.agent_next, chunk.offset + chunk.data.size());
  const std::string out = LogRedactor::Redact(secrets, st.held, data, end);
  if (!out.empty()) {
    auto size = logs_->Append(tenant, chunk.job_id, chunk.node_rank, chunk.epoch, st.stored_next, out);
    if (size.ok()) {
      st.stored_next = *size;
    } else if (!absl::IsResourceExhausted(size.status())) {
      spdlog::warn("control plane: log of {} rank {}: {}", chunk.job_id, chunk.node_rank, size.status());
    }
  }
  if (end) redact_.erase(it);
}

void ControlPlane::AppendLogs(const std::string& node, const std::vector<api::LogChunk>& chunks, const Snapshot& snap) {
  for (const api::LogChunk& chunk : chunks) {
    if (chunk.data.empty()) continue;
    // Only the node that runs (or ran) that member, at that epoch, may write its log.
    const std::optional<std::string> tenant =
        log_grants_.WriterTenant(chunk.job_id, chunk.epoch, chunk.node_rank, node);
    if (!tenant) {
      spdlog::warn("control plane: dropping log bytes for {} rank {} epoch {} from {}: not its member", chunk.job_id,
                   chunk.node_rank, chunk.epoch, node);
      continue;
    }
    if (std::vector<LogRedactor::Secret> secrets = SecretsOf(chunk.job_id, snap); !secrets.empty()) {
      AppendRedacted(*tenant, chunk, secrets, /*end=*/false);
      continue;
    }
    auto st = logs_->Append(*tenant, chunk.job_id, chunk.node_rank, chunk.epoch, chunk.offset, chunk.data);
    if (!st.ok() && !absl::IsResourceExhausted(st.status())) {
      spdlog::warn("control plane: log of {} rank {} from {}: {}", chunk.job_id, chunk.node_rank, node, st.status());
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Tenants' quotas

absl::StatusOr<TenantQuotaView> ControlPlane::SetTenantQuota(const std::string& tenant,
                                                             const sched::TenantConfig& config) {
  if (tenant.empty()) return absl::InvalidArgumentError("tenant: must not be empty");
  for (const auto& [model, n] : config.quota.max_gpus_by_model) {
    if (catalog_.FindById(model) == nullptr) {
      return absl::InvalidArgumentError(
          fmt::format("max_gpus_by_model: '{}' is not a GPU model of the catalog (gpugeek catalog)", model));
    }
  }
  // Checked before it is stored: the ledger refuses what it would refuse at load.
  RETURN_IF_ERROR(sched::TenantLedger().SetTenant(tenant, config));
  {
    MutexLock lock(&writer_mu_);
    RETURN_IF_ERROR(store_.PutTenantQuota({.tenant = tenant,
                                           .weight = config.weight,
                                           .max_gpus_by_model = config.quota.max_gpus_by_model,
                                           .max_gpu_milli = config.quota.max_gpu_milli,
                                           .max_jobs = config.quota.max_jobs,
                                           .updated_at = clock_.Now()}));
    RETURN_IF_ERROR(scheduling_->ConfigureTenant(tenant, config));
    state_.dirty = true;
    PublishLocked();
  }
  {
    // Parked jobs of the tenant are attempted again by the next pass.
    MutexLock lock(&inbox_mu_);
    work_ = true;
    inbox_mu_.NotifyAll();
  }
  return TenantQuota(tenant);
}

namespace {

TenantQuotaView QuotaViewOf(const QuotaTable& table, sched::TenantUsage usage) {
  TenantQuotaView v;
  if (auto it = table.over_quota.find(usage.tenant); it != table.over_quota.end()) v.over_quota_jobs = it->second;
  v.usage = std::move(usage);
  return v;
}

}  // namespace

TenantQuotaView ControlPlane::TenantQuota(const std::string& tenant) const {
  const std::shared_ptr<const Snapshot> snap = snapshot();
  for (const sched::TenantUsage& u : snap->quota->tenants) {
    if (u.tenant == tenant) return QuotaViewOf(*snap->quota, u);
  }
  return QuotaViewOf(*snap->quota, sched::TenantUsage{.tenant = tenant});
}

std::vector<TenantQuotaView> ControlPlane::TenantQuotas() const {
  const std::shared_ptr<const Snapshot> snap = snapshot();
  std::vector<TenantQuotaView> out;
  for (const sched::TenantUsage& u : snap->quota->tenants) out.push_back(QuotaViewOf(*snap->quota, u));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Nodes and pool

std::vector<NodeView> ControlPlane::Nodes(const std::string& after, size_t limit) {
  const std::shared_ptr<const Snapshot> snap = snapshot();
  const MonoTime now = clock_.Monotonic();
  std::vector<NodeView> out;
  for (auto it = after.empty() ? snap->nodes.begin() : snap->nodes.upper_bound(after);
       it != snap->nodes.end() && out.size() < limit; ++it) {
    const auto& [name, n] = *it;
    NodeView v;
    v.registration = *n.registration;
    v.state = n.state;
    v.cordoned = n.cordoned;
    v.gpu_milli_allocated = n.gpu_milli_allocated;
    v.unhealthy_gpus = n.unhealthy_gpus;
    v.jobs = n.jobs;
    v.job_tenants = n.job_tenants;
    if (std::optional<Lease> lease = leases_.Get(name)) {
      v.last_heartbeat = lease->renewed_wall;
      v.heartbeat_age = now - lease->renewed;
      v.samples = std::move(lease->samples);
    }
    out.push_back(std::move(v));
  }
  return out;
}

absl::StatusOr<NodeView> ControlPlane::Node(const std::string& name) {
  // The first node after the one just before `name`: `name` itself when it exists.
  const std::shared_ptr<const Snapshot> snap = snapshot();
  auto it = snap->nodes.find(name);
  if (it == snap->nodes.end()) return absl::NotFoundError(fmt::format("no node '{}'", name));
  std::vector<NodeView> one = Nodes(it == snap->nodes.begin() ? "" : std::prev(it)->first, 1);
  if (one.empty() || one[0].registration.node != name) return absl::NotFoundError(fmt::format("no node '{}'", name));
  return std::move(one[0]);
}

void ControlPlane::SetNodeProviders(const std::map<std::string, std::string>& providers) {
  MutexLock lock(&writer_mu_);
  for (auto& [name, node] : state_.nodes) {
    auto p = providers.find(name);
    if (p == providers.end()) continue;
    std::map<std::string, std::string>& labels = node.registration.labels;
    labels.erase(std::string(api::kProviderLabel));
    if (!p->second.empty()) labels[std::string(api::kProviderLabel)] = p->second;
  }
  state_.CapacityChanged();
  PublishLocked();
}

absl::Status ControlPlane::SetCordoned(const std::string& name, bool cordoned) {
  MutexLock lock(&writer_mu_);
  auto it = state_.nodes.find(name);
  if (it == state_.nodes.end()) return absl::NotFoundError(fmt::format("no node '{}'", name));
  ASSIGN_OR_RETURN(store::NodeRecord record, store_.GetNode(name));
  record.state = cordoned ? "cordoned" : "ready";
  RETURN_IF_ERROR(store_.PutNode(record));
  it->second.cordoned = cordoned;
  state_.CapacityChanged();
  PublishLocked();
  return absl::OkStatus();
}

absl::Status ControlPlane::Drain(const std::string& name) {
  RETURN_IF_ERROR(SetCordoned(name, true));
  MutexLock lock(&writer_mu_);
  ControllerContext ctx = ContextLocked();
  for (const std::string& id : state_.JobsOn(name)) {
    RETURN_IF_ERROR(Requeue(ctx, id, fmt::format("node {} drained; requeued", name)));
  }
  PublishLocked();
  return absl::OkStatus();
}

absl::Status ControlPlane::Reclaim(const std::string& name, Duration notice) {
  if (notice < std::chrono::seconds(1) || notice > std::chrono::hours(1)) {
    return absl::InvalidArgumentError(
        "deadline_s: the notice must be 1..3600 seconds (AWS gives 120, GCP and Azure 30)");
  }
  RETURN_IF_ERROR(SetCordoned(name, true));
  MutexLock lock(&writer_mu_);
  ControllerContext ctx = ContextLocked();
  auto node = state_.nodes.find(name);
  if (node == state_.nodes.end()) return absl::NotFoundError(fmt::format("no node '{}'", name));
  if (!node->second.registration.region.empty()) {
    state_.reclaimed_regions[node->second.registration.region] = clock_.Monotonic();
  }
  // The agent hears of the stop within a heartbeat; its SIGKILL must land before the provider's.
  const Duration window =
      std::max<Duration>(Duration::zero(), notice - options_.heartbeat_interval - std::chrono::milliseconds(500));
  const auto notice_s = std::chrono::duration_cast<std::chrono::seconds>(notice).count();
  spdlog::info("control plane: reclaim notice for node {} ({} s): moving {} job(s)", name, notice_s,
               state_.JobsOn(name).size());
  for (const std::string& id : state_.JobsOn(name)) {
    auto live = state_.live.find(id);
    if (live == state_.live.end() || live->second.draining) continue;
    live->second.stop_grace = std::min<Duration>(live->second.spec.checkpoint.grace, window);
    live->second.platform_loss = fmt::format("{} reclaimed", name);
    RETURN_IF_ERROR(
        Requeue(ctx, id, fmt::format("node {} reclaimed ({} s notice); checkpointing and moving", name, notice_s)));
  }
  PublishLocked();
  return absl::OkStatus();
}

absl::StatusOr<NodeView> ControlPlane::RemoveNode(const std::string& name) {
  MutexLock lock(&writer_mu_);
  ControllerContext ctx = ContextLocked();
  // A node silent past the fencing deadline is down now, with its jobs requeued, even between passes.
  node_lifecycle_->Reconcile(ctx, clock_.Monotonic());
  auto it = state_.nodes.find(name);
  if (it == state_.nodes.end()) return absl::NotFoundError(fmt::format("no node '{}'", name));
  const NodeState& s = it->second;
  if (!s.down && !s.cordoned) {
    return absl::FailedPreconditionError(
        fmt::format("node {} is up: drain it and stop its agent first (gpugeek drain {}), then remove it once it "
                    "is down",
                    name, name));
  }
  if (const std::vector<std::string> jobs = state_.JobsOn(name); !jobs.empty()) {
    return absl::FailedPreconditionError(fmt::format(
        "node {} still holds jobs: {}; drain it (gpugeek drain {}) and wait for them to leave, or stop its agent "
        "and wait until it is down",
        name, fmt::join(jobs, ", "), name));
  }
  NodeView removed;
  removed.registration = s.registration;
  removed.state = NodeStateName(s);
  removed.cordoned = s.cordoned;
  if (std::optional<Lease> lease = leases_.Get(name)) {
    removed.last_heartbeat = lease->renewed_wall;
    removed.heartbeat_age = clock_.Monotonic() - lease->renewed;
    removed.samples = lease->samples;
  }
  // NotFound: the row is gone already; memory follows the store.
  if (absl::Status st = store_.DeleteNode(name); !st.ok() && !absl::IsNotFound(st)) return st;
  state_.nodes.erase(it);
  leases_.Remove(name);
  state_.CapacityChanged();
  PublishLocked();
  spdlog::info("control plane: node {} removed ({})", name, removed.state);
  return removed;
}

PoolView ControlPlane::Pool() {
  const std::shared_ptr<const Snapshot> snap = snapshot();
  PoolView view;
  view.pending_jobs = snap->pending_jobs;
  view.policy = snap->policy;
  if (!snap->cluster) return view;
  const sched::Cluster& cluster = *snap->cluster;
  std::map<std::pair<std::string, std::string>, PoolRow> rows;
  int64_t idle = 0;
  for (sched::NodeIndex n = 0; n < static_cast<sched::NodeIndex>(cluster.size()); ++n) {
    const sched::NodeSpec& spec = cluster.spec(n);
    if (spec.gpu_count == 0) continue;
    PoolRow& row = rows[{spec.gpu_model, std::string(sched::CapacityTypeName(spec.capacity_type))}];
    row.gpu_model = spec.gpu_model;
    row.capacity_type = std::string(sched::CapacityTypeName(spec.capacity_type));
    row.nodes += 1;
    row.gpus += spec.gpu_count;
    row.gpu_milli_total += int64_t{spec.gpu_count} * sched::kMilliPerGpu;
    row.gpu_milli_allocated += int64_t{spec.gpu_count} * sched::kMilliPerGpu - cluster.gpu_free_total(n);
    row.gpus_fully_free += cluster.full_free_gpus(n);
    row.gpus_allocated += spec.gpu_count - cluster.full_free_gpus(n);
    row.frag_gpu_milli += sched::NodeFragMilli(cluster, n, snap->typical);
    row.unallocatable_gpus += sched::NodeUnallocatableGpus(cluster, n, snap->typical);
    idle += cluster.gpu_free_total(n);
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

std::vector<workload::PoolEntry> ControlPlane::PoolEntries(const Snapshot& snap) const {
  std::map<std::string, int> counts;
  for (const auto& [name, n] : snap.nodes) {
    if (n.state != "ready") continue;
    for (const hw::GpuDevice& d : n.registration->inventory.gpus) {
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
  std::vector<workload::PoolEntry> entries = pool.empty() ? PoolEntries(*snapshot()) : pool;
  if (entries.empty()) return absl::FailedPreconditionError("no GPUs of a known model are registered in the pool");
  return workload::MakePlan(*config, task, entries, options);
}

}  // namespace gpugeek::controlplane
