#pragma once
// ControlPlane: the controllers of `gpugeek server` over one committed state, without HTTP.
//
// It turns submissions into durable jobs (admission, with the planner when the spec names a model
// and a task but no accelerators), places pending jobs with the SAME sched code the simulator runs
// (sched::SchedulingQueue and sched::Framework; only the clock and the binder differ: here the binder
// writes the placement to the store), tracks nodes by their heartbeat leases, and drives each job
// through the state machine of api/job_state.h from its agents' reports:
//
//   submit -> PENDING -> (placed) SCHEDULED -> (every member running) RUNNING
//          -> (every member exited 0) SUCCEEDED | (a member failed) FAILED | (cancel) CANCELLED
//   a node whose lease lapsed past the fencing deadline is down: its jobs go back to PENDING
//   (restarts + 1) and are placed again once every member has stopped.
//
// Who does what (docs/architecture.md, "Control plane"):
//   - Writers: the controllers (controllers/: node_lifecycle, job_lifecycle, scheduling, gc) and the
//     API's write operations run one at a time under the writer token (`writer_mu_`). They own State
//     (state/state.h), commit every change to the store first (compare-and-set + event in one
//     transaction), then publish an immutable Snapshot (state/snapshot.h).
//   - Readers (API views, metrics, `top`, heartbeat replies) read the latest Snapshot: no lock the
//     writer holds, so they never wait behind a store write, the planner or a scheduling cycle.
//   - Liveness: a heartbeat renews its node's lease in the LeaseTable (state/lease_table.h; monotonic
//     clock, no fsync, no writer token), appends its log bytes to the LogStore (per-file locks), queues
//     its workload reports for the job lifecycle controller, and answers from the snapshot.
//   - Submissions are committed in groups (one fsync for all that arrive together) without the writer
//     token, then handed to the scheduling controller.
//
// Fencing timeline (defaults; the agent gets lease and fence_grace at registration):
//   t = 0      the server receives the node's last heartbeat (the agent sent it at t <= 0).
//   t = 2 s    lease: the node is suspect (no new placements): two 1 s beats missed. The agent, 2 s
//              after SENDING its last answered heartbeat, fences itself: SIGTERM to every member (its
//              per-member shims do the same if the agent itself is dead or frozen).
//   t = 2.5 s  lease + fence_grace: the agent's SIGKILL.
//   t = 3 s    lease + fence_grace + fence_margin: the node is down; its members are presumed stopped,
//              their GPUs released, and the jobs requeued. Only now may they run elsewhere.
// GPUs held by a member are released only when its agent confirms the exit, or at that deadline. A
// requeued gang is placed again only after every surviving member has stopped, so no member ever
// runs in two places and no GPU is ever held by two jobs.
//
// Durable before acknowledged: every state change is committed to the Store before the call that
// caused it returns, and before any agent hears of it. Create() rebuilds everything from the store.
//
// Time: wall time (Clock::Now) for what users see; monotonic time (Clock::Monotonic) for leases,
// deadlines and backoff, so a clock step never marks a node down or fires a deadline early.
// Reconcile() is one pass of the controllers; the server calls it every 100 ms and whenever reports
// arrive; tests call it with a FakeClock. Thread-safety: every public method may be called
// concurrently.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "api/agent_protocol.h"
#include "api/job_spec.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "controlplane/admission_fit.h"
#include "controlplane/allocation.h"
#include "controlplane/billing.h"
#include "controlplane/controllers/context.h"
#include "controlplane/controllers/serving_meter.h"
#include "controlplane/log_routes.h"
#include "controlplane/log_store.h"
#include "controlplane/options.h"
#include "controlplane/quote.h"
#include "controlplane/secrets.h"
#include "controlplane/state/lease_table.h"
#include "controlplane/state/log_grant_table.h"
#include "controlplane/state/snapshot.h"
#include "controlplane/state/state.h"
#include "controlplane/usage.h"
#include "hw/gpu_catalog.h"
#include "metrics/registry.h"
#include "store/store.h"
#include "workload/planner.h"

namespace gpugeek::controlplane {

class ControlPlaneMetrics;
class NodeLifecycleController;
class GpuHealthController;
class JobLifecycleController;
class SchedulingController;
class GcController;
class BudgetController;
class ReservationController;

struct SubmitRequest {
  std::string spec_yaml;
  std::string model_config_json;  // the config.json the spec's `model` names; "" when none
  std::string tenant;
  std::string user;  // who submits (for the model registry's pull log); "" for internal callers
  // Internal submitters only (the experiment controller): GPUGEEK_* variables every member gets beside
  // the spec's env (store::JobRecord::platform_env). Never filled from a request's body.
  std::map<std::string, std::string> platform_env;
};

// What a job would take and cost (`gpugeek submit --dry-run`; quote.h), and what its tenant has to spend.
struct JobQuote {
  std::string spec_yaml;  // as it would be stored
  std::string plan_json;  // the planner's output ("" when the spec is not planned)
  std::vector<QuoteLine> lines;
  int64_t available_micros = 0;  // the tenant's credit + cash now (billing.h)
  bool enforced = false;         // whether budgets are enforced (BillingOptions::enforce)
};

// A job as the API shows it.
struct JobView {
  store::JobRecord record;
  std::optional<Allocation> allocation;
  std::string pending_reason;  // why a PENDING job is not placed yet ("" when unknown)
  Usage usage;                 // metered so far, open segments up to now included (usage.h)
};

struct NodeView {
  api::Registration registration;
  std::string state;         // ready | suspect | cordoned | blocked | down
  bool cordoned = false;     // also while down
  TimePoint last_heartbeat;  // wall clock, for display
  Duration heartbeat_age{};  // since the last renewal, monotonic
  std::vector<hw::GpuSample> samples;
  int64_t gpu_milli_allocated = 0;
  // GPUs nothing is placed on (controllers/gpu_health.h): UUID -> why.
  std::map<std::string, std::string> unhealthy_gpus;
  std::vector<std::string> jobs;         // live jobs with a member here
  std::vector<std::string> job_tenants;  // the tenant of jobs[i]
};

struct PoolRow {
  std::string gpu_model;
  std::string capacity_type;
  int nodes = 0;
  int gpus = 0;
  int64_t gpu_milli_total = 0;
  int64_t gpu_milli_allocated = 0;
  int gpus_fully_free = 0;
  int gpus_allocated = 0;      // GPUs with any allocation (gpus - gpus_fully_free)
  double frag_gpu_milli = 0;   // FGD fragmentation measure (expected unusable milli-GPU), sched/frag.h
  int unallocatable_gpus = 0;  // GPUs with free milli no typical pod fits (sched::NodeUnallocatableGpus)
};

struct PoolView {
  std::vector<PoolRow> rows;  // by model, then capacity type
  int64_t gpu_milli_total = 0;
  int64_t gpu_milli_allocated = 0;
  double frag_gpu_milli = 0;
  double frag_rate = 0;  // frag / idle milli-GPU (0 when nothing is idle)
  std::string policy;    // the policy placing now
  int pending_jobs = 0;
};

// One tenant's quota as the API shows it: use against limit (sched::TenantUsage) and its jobs waiting
// over quota (id, reason).
struct TenantQuotaView {
  sched::TenantUsage usage;
  std::vector<std::pair<std::string, std::string>> over_quota_jobs;
};

class ControlPlane {
 public:
  // Rebuilds nodes and jobs from the store. InvalidArgument for missing or inconsistent options,
  // NotFound for an unknown policy.
  static absl::StatusOr<std::unique_ptr<ControlPlane>> Create(const ControlPlaneOptions& options);
  ~ControlPlane();

  // Admission: validates the spec (InvalidArgument naming the field), runs the planner when the
  // spec has model + task and no accelerators (FailedPrecondition when nothing in the pool fits,
  // saying why), then stores the job PENDING. Returns the stored job.
  absl::StatusOr<JobView> Submit(const SubmitRequest& request);
  // The same checks as Submit (but not of what only running needs: the spec's folders, files, dataset and
  // weights, nor the tenant's balance), then which offers the job would take and what it would cost; nothing
  // is stored.
  absl::StatusOr<JobQuote> Quote(const SubmitRequest& request);
  absl::StatusOr<JobView> GetJob(const std::string& id);
  absl::StatusOr<std::vector<JobView>> ListJobs(const store::JobFilter& filter);
  // PENDING jobs end at once; placed ones end CANCELLED and their members are stopped (SIGTERM,
  // the spec's grace, SIGKILL). FailedPrecondition for a job already ended.
  absl::StatusOr<JobView> Cancel(const std::string& id, const std::string& reason);
  absl::StatusOr<std::vector<store::EventRecord>> Events(const store::EventFilter& filter);

  // Job logs: byte-exact per (job, rank, epoch), appended from heartbeats.
  LogStore& logs() { return *logs_; }
  // What the log route needs to know of a job (log_routes.h). NotFound for an unknown job.
  absl::StatusOr<LogJobInfo> LogState(const std::string& job_id);
  // Tenants' secrets (secrets.h): the routes' CRUD; the control plane checks a spec's references at
  // admission, puts values into the assignments of the job's own members, and redacts them from its
  // logs and report messages.
  Secrets& secrets() { return *secrets_; }
  // Ends log long-polls at once so a graceful stop never waits on them. Thread-safe.
  void BeginShutdown();

  // Agents. Register commits the node and grants its lease; a registration from another agent
  // process than the one holding the lease (the agent restarted) restarts that node's members: their
  // jobs are requeued with restarts + 1 and an event saying so. In a pool of more than 256 nodes the
  // new node appears in Nodes() and Pool() after the next pass. A registration without a price gets the
  // provider's (ControlPlaneOptions::gpu_hour_prices) for its GPU model and capacity type.
  absl::StatusOr<api::RegistrationReply> Register(const api::Registration& as_sent);
  // Renews the lease, stores telemetry and log bytes, queues the reports; never takes the writer
  // token. The reply lists the node's assignments from the latest snapshot.
  absl::StatusOr<api::HeartbeatReply> Heartbeat(const api::Heartbeat& heartbeat);

  // Nodes and pool, from the latest snapshot. Nodes: by name, those after `after` ("" = from the
  // first), at most `limit`.
  std::vector<NodeView> Nodes(const std::string& after = "", size_t limit = SIZE_MAX);
  absl::StatusOr<NodeView> Node(const std::string& name);
  // cordon: no new placements; uncordon: undo. NotFound for an unknown node.
  absl::Status SetCordoned(const std::string& name, bool cordoned);
  // At start: sets the provider label (api::kProviderLabel) of each node in `providers` (node -> provider,
  // "" = none: NodeAuthority::NodeProviders) on its loaded registration, so a node stored before its agent
  // last registered is paid as its credential says, never as a label it sent. In memory; registrations set
  // it again as they come.
  void SetNodeProviders(const std::map<std::string, std::string>& providers);
  // Cordons the node and sends its jobs back to PENDING (restarts + 1) to run elsewhere once their
  // members there have stopped.
  absl::Status Drain(const std::string& name);
  // A reclaim notice (a spot node the provider takes back at now + `notice`): the node is cordoned, its
  // region avoided for options.reclaim_avoid, and its jobs sent back to PENDING like a drain, their
  // members stopped with a grace that ends before the deadline (min(checkpoint.grace, notice - one
  // heartbeat - 500 ms)): SIGTERM asks for the just-in-time checkpoint (docs/checkpointing.md).
  // NotFound for an unknown node; InvalidArgument for a notice outside 1 s..1 h.
  absl::Status Reclaim(const std::string& name, Duration notice);
  // Removes a decommissioned node from the pool: from the store and from memory, so it leaves Nodes(),
  // Pool(), the Prometheus targets and the node metrics at once. NotFound for an unknown node;
  // FailedPrecondition, saying why and what to do, unless the node is down (its lease lapsed past the
  // fencing deadline; its jobs were requeued then) or cordoned, and no live job has a member on it.
  // Returns the node as it was. An agent that comes back later registers again as a new node.
  absl::StatusOr<NodeView> RemoveNode(const std::string& name);
  // The schedulable pool (nodes ready and not cordoned) by GPU model and capacity type.
  PoolView Pool();
  // Jobs per (state, priority): one aggregate store query (Store::CountJobs).
  absl::StatusOr<std::vector<store::JobCount>> CountJobs() { return store_.CountJobs(); }

  // The latest published snapshot (never null after Create).
  std::shared_ptr<const Snapshot> snapshot() const;
  // The tenant of a job with workdir_digest `digest` that has a member assigned to `node` (in the latest
  // snapshot), or nullopt: what lets a node fetch that archive (archive_routes.h).
  std::optional<std::string> ArchiveTenantFor(const std::string& node, const std::string& digest) const;
  // The tenant of a job whose dataset version is commit `commit` and that has a member assigned to `node`
  // (in the latest snapshot); nullopt when none: the node may not read that version.
  std::optional<std::string> DatasetTenantFor(const std::string& node, const std::string& commit) const;
  // The tenant owning model commit `commit` (Assignment::model_owner) when a live assignment of `node`
  // names it; nullopt otherwise.
  std::optional<std::string> ModelOwnerFor(const std::string& node, const std::string& commit) const;

  // The injected clock (metrics read ages with it).
  Clock& clock() { return clock_; }
  const ControlPlaneOptions& options() const { return options_; }
  // Credits, charges and budgets (billing.h).
  Billing& billing() { return *billing_; }
  // Serverless metering (controllers/serving_meter.h): gateways' request and token counters, stored and
  // charged on the writer's pass. Report from any thread.
  ServingMeterController& serving_meter() { return *serving_meter_; }
  // The instruments when ControlPlaneOptions::metrics was given, else nullptr.
  ControlPlaneMetrics* metrics() { return metrics_.get(); }

  // Plans a task without submitting it, over the GPU models registered in the pool (or `pool`
  // when given).
  absl::StatusOr<workload::Plan> DryRunPlan(const std::string& model_config_json, const workload::Task& task,
                                            const std::vector<workload::PoolEntry>& pool,
                                            const workload::PlannerOptions& options);

  // Tenants' quotas and fair share (sched/quota.h). SetTenantQuota stores the tenant's weight and caps
  // (replacing what it had), then applies them: jobs of it waiting over quota are attempted again in
  // the next pass; jobs already placed stay. InvalidArgument naming the field for an empty tenant, a
  // weight not finite and > 0, a negative cap or a GPU model not in the catalog; the store's errors.
  // The caller checks that the tenant exists (accounts). Returns the tenant's row after the change.
  absl::StatusOr<TenantQuotaView> SetTenantQuota(const std::string& tenant, const sched::TenantConfig& config);
  // Use against limit of one tenant, from the latest snapshot (a tenant never configured nor seen:
  // weight 1, no caps, nothing held, fair-share factor 1).
  TenantQuotaView TenantQuota(const std::string& tenant) const;
  // Every tenant configured, holding GPUs or with usage, by name; and the usage half-life.
  std::vector<TenantQuotaView> TenantQuotas() const;
  Duration fair_share_half_life() const { return options_.fair_share_half_life; }

  // One pass of the controllers under the writer token: queued reports and submissions, node
  // lifecycle, job lifecycle (drain deadlines), scheduling, all in one store transaction (with the
  // submissions queued when it ends) committed at once; then gc, and a snapshot if anything changed.
  // When the commit fails, nothing of the pass is published and memory is reloaded from the store.
  void Reconcile();
  // Blocks until reports or submissions are queued, or `timeout` passes (the server's loop).
  void WaitForWork(Duration timeout);

 private:
  // What `pick` makes of the first live (not cancelled) assignment of `node` it names something for.
  std::optional<std::string> FirstAssigned(
      const std::string& node, const std::function<std::optional<std::string>(const api::Assignment&)>& pick) const;
  struct PendingSubmit {
    store::JobRecord record;
    absl::StatusOr<store::JobRecord> result = absl::UnknownError("not committed");
    bool taken = false;  // guarded by commit_mu_: a committer (a submitter or the writer) holds it
    bool done = false;   // guarded by commit_mu_
  };
  struct QueuedReport {
    std::string node;
    api::WorkloadReport report;
  };

  explicit ControlPlane(const ControlPlaneOptions& options);
  ControllerContext ContextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  // What admission makes of a request: the spec as it will be stored, the planner's output, the scheduling
  // requests. `quote`: for Quote (see there).
  struct Admission {
    api::JobSpec spec;
    std::string spec_yaml;
    std::string plan_json;
    std::optional<workload::ResourceRequest> planned;
    std::vector<sched::Request> requests;
  };
  absl::StatusOr<Admission> Check(const SubmitRequest& request, bool quote);
  // PaymentRequired (402) with the numbers when `tenant`'s monthly budget, or `user`'s, is spent (budgets.h).
  absl::Status CheckBudgets(const std::string& tenant, const std::string& user) const;
  absl::StatusOr<JobView> Admit(const SubmitRequest& request);
  absl::StatusOr<store::JobRecord> CommitGrouped(store::JobRecord record);
  // Takes every queued submission, issuing their ids in queue order. Call with commit_mu_ held.
  std::vector<PendingSubmit*> TakeSubmissionsLocked();
  // Stores `batch` (CreateJobs) and hands each submitter its result; `commit` runs after the writes
  // (the writer's batch commit; also for an empty batch) and its error, if any, becomes every
  // submission's result. Returns what `commit` returned.
  absl::Status CommitSubmissions(const std::vector<PendingSubmit*>& batch, const std::function<absl::Status()>& commit);
  absl::Status Load() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  // Drops memory and loads it again from the store (a pass whose commit failed).
  void ReloadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  void DrainInboxLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  // Writes every tenant's decayed usage to the store (errors are logged: the next save retries).
  void SaveUsageLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(writer_mu_);
  // Appends a heartbeat's log chunks the node is entitled to (its own members).
  void AppendLogs(const std::string& node, const std::vector<api::LogChunk>& chunks, const Snapshot& snap);
  // The names and current values of a job's secrets, for redaction; empty when it refers to none.
  std::vector<LogRedactor::Secret> SecretsOf(const std::string& job_id, const Snapshot& snap);
  // Stores a chunk of a job that has secrets, redacted (LogRedactor); `end`: the member exited, so
  // what is held back is stored as it is.
  void AppendRedacted(const std::string& tenant, const api::LogChunk& chunk,
                      const std::vector<LogRedactor::Secret>& secrets, bool end);
  JobView ViewOf(const store::JobRecord& record, const Snapshot& snap) const;
  std::vector<workload::PoolEntry> PoolEntries(const Snapshot& snap) const;

  // Constant after construction.
  const ControlPlaneOptions options_;
  store::Store& store_;
  Clock& clock_;
  const hw::GpuCatalog& catalog_;
  std::unique_ptr<ControlPlaneMetrics> metrics_;  // set by Create after Load; nullptr = no metrics
  std::unique_ptr<Billing> billing_;              // set by Create before Load
  std::unique_ptr<LogStore> logs_;
  std::unique_ptr<Secrets> secrets_;
  AdmissionFit admission_fit_;  // refuses at submission what no registered node could ever host
  LeaseTable leases_;
  LogGrantTable log_grants_;

  std::atomic<bool> shutting_down_{false};

  // Group commit of submissions. Lock order: writer_mu_ before commit_mu_ (a pass takes the queued
  // submissions into its batch); nothing that holds commit_mu_ takes writer_mu_ or waits for the store.
  std::mutex commit_mu_;
  std::condition_variable commit_cv_;
  std::vector<PendingSubmit*> commit_queue_;  // guarded by commit_mu_
  bool committing_ = false;                   // guarded by commit_mu_
  std::atomic<int64_t> next_job_number_{1};

  // What heartbeats and submissions hand to the writer.
  Mutex inbox_mu_;
  std::vector<QueuedReport> reports_ ABSL_GUARDED_BY(inbox_mu_);
  std::vector<store::JobRecord> submitted_ ABSL_GUARDED_BY(inbox_mu_);
  bool work_ ABSL_GUARDED_BY(inbox_mu_) = false;

  // The redaction state of each log stream (job, rank, epoch) of jobs with secrets: the next byte of
  // the agent's stream not yet taken (agent offsets differ from stored ones once a value is replaced),
  // where the stored file ends, and the held-back tail. In memory only: after a restart a stream
  // continues from the first chunk it receives. Dropped when the member's exit report arrives.
  struct RedactStream {
    uint64_t agent_next = 0;
    uint64_t stored_next = 0;
    std::string held;
  };
  Mutex redact_mu_;  // held across the append of a redacted chunk (jobs with secrets only)
  std::map<std::tuple<std::string, int, int64_t>, RedactStream> redact_ ABSL_GUARDED_BY(redact_mu_);

  // The latest snapshot; the mutex is held only to swap or copy the pointer.
  mutable Mutex snapshot_mu_;
  std::shared_ptr<const Snapshot> snapshot_ ABSL_GUARDED_BY(snapshot_mu_);

  // The writer token: held by one writer at a time, across its store commits. Readers and heartbeats
  // never take it.
  Mutex writer_mu_;
  State state_ ABSL_GUARDED_BY(writer_mu_);
  std::unique_ptr<NodeLifecycleController> node_lifecycle_ ABSL_GUARDED_BY(writer_mu_);
  // Kept across reloads: what the GPUs did is not in the store.
  std::unique_ptr<GpuHealthController> gpu_health_ ABSL_GUARDED_BY(writer_mu_);
  std::unique_ptr<JobLifecycleController> job_lifecycle_ ABSL_GUARDED_BY(writer_mu_);
  std::unique_ptr<SchedulingController> scheduling_ ABSL_GUARDED_BY(writer_mu_);
  std::unique_ptr<GcController> gc_ ABSL_GUARDED_BY(writer_mu_);
  std::unique_ptr<BudgetController> budget_ ABSL_GUARDED_BY(writer_mu_);
  std::unique_ptr<ReservationController> reservation_ ABSL_GUARDED_BY(writer_mu_);
  // Kept across reloads (its inbox: gateways' reports); Reconcile and Forget under writer_mu_.
  const std::unique_ptr<ServingMeterController> serving_meter_ = std::make_unique<ServingMeterController>();
  uint64_t published_version_ ABSL_GUARDED_BY(writer_mu_) = 0;
  std::optional<MonoTime> usage_saved_ ABSL_GUARDED_BY(writer_mu_);  // the last SaveUsageLocked
};

}  // namespace gpugeek::controlplane
