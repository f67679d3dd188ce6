#pragma once
// ControlPlane: the controllers of `gpugeek server`, without HTTP.
//
// It turns submissions into durable jobs (admission, with the planner when the spec names a model
// and a task but no accelerators), places pending jobs with the SAME sched::Framework the simulator
// runs (only the clock and the binder differ: here the binder writes the placement to the store),
// tracks nodes from their heartbeats, and drives each job through the state machine of
// api/job_state.h from its agents' reports:
//
//   submit -> PENDING -> (placed) SCHEDULED -> (every member running) RUNNING
//          -> (every member exited 0) SUCCEEDED | (a member failed) FAILED | (cancel) CANCELLED
//   a node silent for `node_timeout` is down: its jobs go back to PENDING (restarts + 1).
//
// Durable before acknowledged: every state change is committed to the Store before the call that
// caused it returns, and before any agent hears of it (assignments are computed from committed
// records). Create() rebuilds everything from the store, so a restarted server carries on.
//
// Time comes from the injected Clock; Reconcile() is one pass of the controllers (node lifecycle,
// releases, scheduling). The server calls it periodically; tests call it with a FakeClock.
// Thread-safety: all methods may be called concurrently (one mutex).

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "api/agent_protocol.h"
#include "api/job_spec.h"
#include "common/clock.h"
#include "controlplane/allocation.h"
#include "controlplane/node_model.h"
#include "hw/gpu_catalog.h"
#include "metrics/registry.h"
#include "sched/framework.h"
#include "store/store.h"
#include "workload/planner.h"

namespace gpugeek::controlplane {

class ControlPlaneMetrics;

struct ControlPlaneOptions {
  store::Store* store = nullptr;  // borrowed; must outlive the control plane
  Clock* clock = nullptr;         // nullptr = RealClock()
  std::string data_dir;           // job logs under <data_dir>/logs
  // Placement policy of sched's Registry. FGD-style policies use the typical pods of the jobs seen
  // so far; until there are any, BestFit places.
  std::string policy = "FGDFit";
  uint64_t seed = 42;
  int64_t topology_weight = 10;  // prefer one NVLink domain for multi-GPU members
  Duration heartbeat_interval = std::chrono::seconds(1);
  Duration node_timeout = std::chrono::seconds(5);  // silent this long = down
  const hw::GpuCatalog* catalog = nullptr;          // nullptr = GpuCatalog::Builtin()
  // Where the server metrics of docs/metrics.md go (controlplane/metrics.h); nullptr = none. Borrowed;
  // one control plane per registry, and no Render() after the control plane is destroyed (its
  // collectors read it).
  metrics::Registry* metrics = nullptr;
};

struct SubmitRequest {
  std::string spec_yaml;
  std::string model_config_json;  // the config.json the spec's `model` names; "" when none
  std::string tenant;
};

// A job as the API shows it.
struct JobView {
  store::JobRecord record;
  std::optional<Allocation> allocation;
  std::string pending_reason;  // why a PENDING job is not placed yet ("" when unknown)
};

struct NodeView {
  api::Registration registration;
  std::string state;      // ready | cordoned | down
  bool cordoned = false;  // also while down
  TimePoint last_heartbeat;
  std::vector<hw::GpuSample> samples;
  int64_t gpu_milli_allocated = 0;
  std::vector<std::string> jobs;  // live jobs with a member here
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

class ControlPlane {
 public:
  // Rebuilds nodes and jobs from the store. InvalidArgument for missing options, NotFound for an
  // unknown policy.
  static absl::StatusOr<std::unique_ptr<ControlPlane>> Create(const ControlPlaneOptions& options);
  ~ControlPlane();

  // Admission: validates the spec (InvalidArgument naming the field), runs the planner when the
  // spec has model + task and no accelerators (FailedPrecondition when nothing in the pool fits,
  // saying why), then stores the job PENDING. Returns the stored job.
  absl::StatusOr<JobView> Submit(const SubmitRequest& request);
  absl::StatusOr<JobView> GetJob(const std::string& id);
  absl::StatusOr<std::vector<JobView>> ListJobs(const store::JobFilter& filter);
  // PENDING jobs end at once; placed ones end CANCELLED and their members are stopped (SIGTERM,
  // the spec's grace, SIGKILL). FailedPrecondition for a job already ended.
  absl::StatusOr<JobView> Cancel(const std::string& id, const std::string& reason);
  absl::StatusOr<std::vector<store::EventRecord>> Events(const std::string& job_id, int64_t after_seq, int limit);

  // The log of one member, all placements in order (each preceded by a "== attempt" line).
  // NotFound for an unknown job; "" when nothing was logged yet.
  absl::StatusOr<std::string> ReadLog(const std::string& job_id, int rank);
  // True when the job ended and every member's log is complete, or the server is shutting down
  // (log followers stop).
  bool LogComplete(const std::string& job_id);
  // Ends log follows at their next poll so a graceful stop never waits on them. Thread-safe.
  void BeginShutdown() { shutting_down_ = true; }

  // Agents.
  absl::StatusOr<api::RegistrationReply> Register(const api::Registration& registration);
  absl::StatusOr<api::HeartbeatReply> Heartbeat(const api::Heartbeat& heartbeat);

  // Nodes and pool.
  std::vector<NodeView> Nodes();
  absl::StatusOr<NodeView> Node(const std::string& name);
  // cordon: no new placements; uncordon: undo. NotFound for an unknown node.
  absl::Status SetCordoned(const std::string& name, bool cordoned);
  // Cordons the node and sends its jobs back to PENDING (restarts + 1) to run elsewhere.
  absl::Status Drain(const std::string& name);
  // Removes a decommissioned node from the pool: from the store and from memory, so it leaves Nodes(),
  // Pool(), the Prometheus targets and the node metrics at once. NotFound for an unknown node;
  // FailedPrecondition, saying why and what to do, unless the node is down (silent past the node
  // timeout; its jobs were requeued then) or cordoned, and no live job has a member on it. Returns the
  // node as it was. An agent that comes back later registers again as a new node (ready, uncordoned),
  // so stop the agent of a cordoned node before removing it.
  absl::StatusOr<NodeView> RemoveNode(const std::string& name);
  // The schedulable pool (nodes up and not cordoned) by GPU model and capacity type.
  PoolView Pool();
  // Jobs per (state, priority): one aggregate store query (Store::CountJobs).
  absl::StatusOr<std::vector<store::JobCount>> CountJobs() { return store_.CountJobs(); }

  // The injected clock (metrics read ages with it).
  Clock& clock() { return clock_; }
  // The instruments when ControlPlaneOptions::metrics was given, else nullptr.
  ControlPlaneMetrics* metrics() { return metrics_.get(); }

  // Plans a task without submitting it, over the GPU models registered in the pool (or `pool`
  // when given).
  absl::StatusOr<workload::Plan> DryRunPlan(const std::string& model_config_json, const workload::Task& task,
                                            const std::vector<workload::PoolEntry>& pool,
                                            const workload::PlannerOptions& options);

  // One pass of the controllers: node lifecycle, then scheduling of pending jobs.
  void Reconcile();

 private:
  struct MemberStatus {
    bool running = false;
    bool exited = false;
    bool failed = false;
    std::string detail;
  };
  struct LiveJob {  // a job whose allocation holds resources
    store::JobRecord record;
    api::JobSpec spec;
    Allocation allocation;
    std::vector<MemberStatus> members;  // by rank
  };
  struct NodeState {
    api::Registration registration;
    bool down = false;      // silent for longer than node_timeout
    bool cordoned = false;  // durable: no new placements
    TimePoint last_heartbeat;
    std::vector<hw::GpuSample> samples;
    std::vector<SchedNode> sched_nodes;
  };

  // A pending job's parsed spec and scheduler requests. Both derive from the spec and plan stored at
  // submission, which never change, so a scheduling pass parses each job once, not every 100 ms.
  struct ParsedJob {
    absl::StatusOr<api::JobSpec> spec = absl::UnknownError("not parsed");
    absl::StatusOr<std::vector<sched::Request>> requests = absl::UnknownError("not built");
    // capacity_generation_ when it last failed to fit; a pass skips it until capacity changes.
    std::optional<uint64_t> unschedulable_at;
    std::string shape_key;  // what decides where it fits; equal keys fit or fail alike
  };

  struct PendingSubmit {
    store::JobRecord record;
    absl::StatusOr<store::JobRecord> result = absl::UnknownError("not committed");
    bool done = false;  // guarded by commit_mu_
  };

  explicit ControlPlane(const ControlPlaneOptions& options);
  absl::StatusOr<JobView> Admit(const SubmitRequest& request);
  absl::StatusOr<store::JobRecord> CommitGrouped(store::JobRecord record);
  absl::Status Load();
  // All *Locked methods require mu_.
  void RebuildClusterLocked();
  void ScheduleLocked();
  void CheckNodesLocked();
  // Live jobs (holding an allocation) with a member on `node`, by id.
  std::vector<std::string> JobsOnNodeLocked(const std::string& node) const;
  absl::Status RequeueLocked(LiveJob& live, const std::string& reason);
  // Counts a committed state change of job `id` (metrics; recovery timing). No-op without metrics.
  void CommittedLocked(const std::string& id, api::JobState from, api::JobState to);
  absl::Status ReleaseLocked(LiveJob& live);
  absl::Status ApplyReportLocked(const std::string& node, const api::WorkloadReport& report);
  void AppendLogLocked(const api::LogChunk& chunk);
  std::vector<api::Assignment> AssignmentsForLocked(const std::string& node);
  // The job's parsed spec and requests, from parsed_ (parsed on first use).
  ParsedJob& ParsedLocked(const store::JobRecord& job);
  // Nodes or allocations changed so that capacity may have come back: rebuild the scheduler's
  // snapshot and retry the jobs that did not fit.
  void CapacityChangedLocked();
  absl::StatusOr<JobView> ViewLocked(const store::JobRecord& record);
  std::vector<workload::PoolEntry> PoolEntriesLocked();
  std::string LogDir(const std::string& job_id) const;

  friend class StoreBinder;

  // Constant after construction.
  const ControlPlaneOptions options_;
  store::Store& store_;
  Clock& clock_;
  const hw::GpuCatalog& catalog_;
  std::unique_ptr<ControlPlaneMetrics> metrics_;  // set by Create after Load; nullptr = no metrics

  // Group commit of submissions; never held together with mu_ except mu_ inside commit_mu_'s
  // unlocked section.
  std::mutex commit_mu_;
  std::condition_variable commit_cv_;
  std::vector<PendingSubmit*> commit_queue_;  // guarded by commit_mu_
  bool committing_ = false;                   // guarded by commit_mu_

  std::atomic<bool> shutting_down_{false};

  std::mutex mu_;  // guards everything below
  std::map<std::string, NodeState> nodes_;
  std::map<std::string, LiveJob> live_;                // by job id
  std::map<std::string, std::string> pending_reason_;  // by job id
  std::map<std::string, ParsedJob> parsed_;            // pending jobs by id; pruned each scheduling pass
  std::optional<sched::Cluster> cluster_;
  std::unique_ptr<sched::Framework> framework_;
  std::string active_policy_;
  std::vector<sched::TypicalPod> typical_;
  std::map<std::string, sched::NodeIndex> sched_index_;  // scheduler node name -> index
  std::vector<const SchedNode*> sched_nodes_;            // by index
  bool cluster_dirty_ = true;
  uint64_t capacity_generation_ = 0;  // see CapacityChangedLocked
  int64_t next_job_number_ = 1;
  // When each job still waiting for its recovery was requeued (metrics: requeue -> RUNNING again).
  // In memory only: Load seeds it from PENDING jobs that were requeued (their updated_at is the
  // requeue), but a job a restarted server finds already SCHEDULED again has lost its requeue time,
  // so that one recovery is not observed.
  std::map<std::string, TimePoint> requeued_at_;
};

}  // namespace gpugeek::controlplane
