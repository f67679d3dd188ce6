#pragma once
// State: the controllers' working copy of the committed state. It belongs to the writer (whoever
// holds ControlPlane's writer token: the server's controller thread, or a test calling Reconcile);
// nothing else reads or writes it. Readers see the Snapshot the writer publishes after each pass
// (snapshot.h); heartbeats touch only the LeaseTable (lease_table.h).
//
// Every change here follows a store commit (compare-and-set + event in one transaction): the store is
// the record, this is its in-memory index, rebuilt from the store when the server starts.

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/agent_protocol.h"
#include "api/job_spec.h"
#include "api/job_state.h"
#include "common/clock.h"
#include "controlplane/allocation.h"
#include "controlplane/node_model.h"
#include "controlplane/usage.h"
#include "sched/request.h"
#include "store/store.h"

namespace gpugeek::controlplane {

// A registered node as the controllers see it.
struct NodeState {
  api::Registration registration;
  // The same registration, shared with every snapshot published while it holds (set with it).
  std::shared_ptr<const api::Registration> shared_registration;
  std::string instance_id;  // the agent process that holds the lease
  bool cordoned = false;    // durable: no new placements
  bool suspect = false;     // lease expired: no new placements, members not yet presumed stopped
  bool down = false;        // lease expired past the fencing deadline: members presumed stopped
  // GPUs not to be placed on, by UUID -> why ("xid:79 (quarantined until ...)", "lost", "ecc:2");
  // kept by GpuHealthController (controllers/gpu_health.h).
  std::map<std::string, std::string> unhealthy_gpus;
  std::vector<SchedNode> sched_nodes;
  // When it was lost (went down) lately, monotonic, oldest first (NodeLifecycleController): a node lost
  // block_after_losses times within block_window is blocked from placements until blocked_until.
  std::deque<MonoTime> losses;
  std::optional<MonoTime> blocked_until;
};

// A member of a placed gang, as its agent last reported it.
struct MemberStatus {
  bool running = false;
  // Metering (usage.h): since when it runs, monotonic; unset before its first running report and once its
  // segment was metered.
  std::optional<MonoTime> running_since;
  // The open segment as stored with the job (usage.h OpenSegment): the terms it began under. `terms` false
  // for a segment stored without them (controllers/metering.h SegmentTerms falls back to its node's).
  OpenSegment segment;
  // Idle-but-allocated time of the open segment (controllers/metering.h AccrueIdle): how long its GPUs
  // read idle, and the pass that last looked. Memory only: a restart of the server starts them over.
  Duration idle{};
  std::optional<MonoTime> idle_seen;
  bool exited = false;  // confirmed by the agent, or presumed after the fencing deadline
  bool failed = false;
  // When a gang member's failure was reported (monotonic): its verdict waits for the gang's nodes to be
  // heard from for a lease after it (JobLifecycleController). Unset for others, or after a reload until the
  // next pass sets it.
  std::optional<MonoTime> failed_at;
  std::optional<int> exit_code;  // as reported; 128 + signal for a member killed by one
  std::string detail;
  // How many of its metric reports (api::MetricPoint, by seq) of this epoch the store holds; -1 until the
  // first report of this placement (or after a reload), when the store is asked.
  int64_t metrics_stored = -1;
};

// A job whose allocation holds resources: placed, or being taken back (requeued, cancelled or ended
// with members still stopping). Its GPUs return to the pool only when every member has exited
// (confirmed by its agent) or its fencing deadline passed (ARCHITECTURE.md, "Fencing").
struct LiveJob {
  store::JobRecord record;
  api::JobSpec spec;
  Allocation allocation;
  std::vector<MemberStatus> members;  // by rank
  // Set when the allocation is being taken back while the job is PENDING again (its node was lost or
  // drained): the members still running are told to stop, and the job is not placed again until they
  // have (a member never runs in two places at once).
  bool draining = false;
  // When the allocation is given up regardless of reports: set when it starts draining, or the job
  // ends, to now + the members' grace + the fencing margin.
  std::optional<MonoTime> drain_deadline;
  // The planner's layout on the placed GPU model (JobRecord::plan_json's alternative for
  // allocation.gpu_model); all 0 for a job without a plan.
  int tp = 0, pp = 0, dp = 0;
  int zero_stage = 0;       // the plan's ZeRO stage (0..3) on that alternative
  int64_t micro_batch = 0;  // the plan's micro-batch; 0 = no plan
  // When this placement was made (or loaded, after a restart): max_duration counts from here.
  MonoTime placed_at{};
  // Set by a requeue with a retry backoff: the job may not be placed again before this.
  std::optional<MonoTime> retry_at;
  // idle_timeout: the last pass that saw one of its GPUs busy (or the job not yet RUNNING); unset
  // until the first pass after a placement or a restart of the server, which sets it to then.
  std::optional<MonoTime> busy_at;
  // Whether a member of this placement has reported a checkpoint yet: the first report is taken as it
  // is (a run may resume from an older one), later ones only when they move the step forward.
  bool checkpoint_reported = false;
  // An elastic gang (spec.elastic) that lost a node and keeps its survivors: set by NodeFailure
  // (controllers/transitions.h) with the retry it was charged. Its survivors are told to stop (their GPUs
  // stay held) so that no run of the next epoch meets one of this epoch (a rank reaching the old
  // rendezvous); once every one has exited (or its drain deadline passed) SchedulingController re-forms it
  // (lost members replaced, or dropped down to elastic.min_nodes) or requeues it whole, and clears this.
  // Stored with the allocation (Allocation::reforming): a restart goes on where it was.
  bool reform = false;
  std::string reform_reason;  // what was lost, and the retry's number when a retry policy counts them
  // Whether member `rank` holds its GPUs: until it exits, or for as long as the job is a live elastic gang
  // (its survivors restart where they are when it re-forms).
  bool Holds(int rank) const {
    return !members[static_cast<size_t>(rank)].exited ||
           (spec.elastic.has_value() && !draining && !api::IsTerminal(record.state));
  }
  // A stop with a deadline (a reclaim notice): the SIGTERM-to-SIGKILL time its members get instead of the
  // spec's checkpoint.grace (the shorter of the two).
  std::optional<Duration> stop_grace;
  // Set when this placement ends by a platform failure: "node-7 reclaimed" (a reclaim notice) or "node-7
  // lost" (a node of it went down while the job was live). Every member segment that ends from then on is
  // refunded its run since the job's last checkpoint (controllers/metering.h); cleared when an elastic gang
  // re-forms. Memory only: a restart of the server, or a failed pass commit, forgets it.
  std::string platform_loss;
};

// A PENDING job waiting for a placement: its spec and scheduler requests are parsed once, at submission
// or load (both derive from what was stored then and never change).
struct PendingJob {
  store::JobRecord record;
  absl::StatusOr<api::JobSpec> spec = absl::UnknownError("not parsed");
  absl::StatusOr<std::vector<sched::Request>> requests = absl::UnknownError("not built");
  std::string shape_key;  // what decides where it fits; equal keys fit or fail alike
  // A retry's backoff: the job enters the scheduling queue only from then on.
  std::optional<MonoTime> not_before;
};

struct State {
  std::map<std::string, NodeState> nodes;             // by name
  std::map<std::string, LiveJob> live;                // by job id
  std::map<std::string, PendingJob> pending;          // by job id
  std::map<std::string, std::string> pending_reason;  // by job id
  // Rendezvous ports in use, by master address (rank 0's node's address of each live allocation): keyed by
  // address, not node name, so that nodes sharing one address (agents behind one host) never share a port.
  std::map<std::string, std::set<int>> ports;
  // Bumped whenever capacity may have come back (a node up or uncordoned, an allocation released).
  uint64_t capacity_generation = 0;
  // Something a snapshot shows changed since the last publish.
  bool dirty = true;
  // The scheduler's view must be rebuilt (nodes or allocations changed).
  bool cluster_dirty = true;
  // The recovery of each job sent back to PENDING and not yet RUNNING again, monotonic: when it failed
  // (a lost node's last heartbeat; otherwise the requeue), was requeued (the failure detected), had every
  // member stopped (its allocation released), and was placed again. The RUNNING transition's reason and
  // the metrics give the phases (controllers/transitions.h, RecoveryPhases).
  struct Recovery {
    MonoTime failed_at{}, requeued_at{};
    std::optional<MonoTime> stopped_at, placed_at;
  };
  std::map<std::string, Recovery> recovery;
  // The last reclaim notice (ControlPlane::Reclaim) of a node of each region, monotonic: placement avoids
  // those regions for ControlPlaneOptions::reclaim_avoid when it can (controllers/scheduling.h).
  std::map<std::string, MonoTime> reclaimed_regions;

  // The nodes reservations hold now (reservations.h), by node name: kept by ReservationController
  // (controllers/reservation.h); the scheduler's pool marks them reserved for the tenant, and segments on
  // them of the tenant's jobs are priced under the reservation (controllers/metering.h).
  struct ReservationHold {
    std::string id;
    std::string tenant;
    bool operator==(const ReservationHold&) const = default;
  };
  std::map<std::string, ReservationHold> reserved;

  // Allocations released since the scheduler last looked (job ids): it returns their resources to its
  // pool in place rather than rebuilding it.
  std::vector<std::string> released;

  // Nodes changed (registered, up, down, cordoned, removed): the scheduler's pool is rebuilt.
  void CapacityChanged() {
    cluster_dirty = true;
    dirty = true;
    ++capacity_generation;
  }
  // A live allocation released its resources.
  void Released(const std::string& job_id) {
    released.push_back(job_id);
    dirty = true;
    ++capacity_generation;
  }
  // Live jobs with a member on `node`, by id.
  std::vector<std::string> JobsOn(const std::string& node) const;
};

}  // namespace gpugeek::controlplane
