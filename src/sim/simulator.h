#pragma once
// Simulator: a discrete-event loop on a virtual clock that drives sched::Framework through the
// scheduling queue the control plane runs (sched::SchedulingQueue).
//
// Events are arrivals, departures and node outages. At each instant, in this order: the pods departing
// release their resources (each a capacity change for the queue), outages end and begin, the pods
// arriving join the queue, and one queue cycle (SchedulingQueue::RunCycle) attempts every active pod
// by (priority desc, list order).
// A departure due at that same instant (a runtime of zero) comes after that cycle, with a cycle of
// its own. The virtual clock (a FakeClock) is advanced to each instant before its events run.
//
// What happens to a pod that does not fit depends on SimulatorOptions::requeue_unschedulable:
//  - false (the FGD experiments' protocol): its one attempt, at arrival, was final; it leaves.
//  - true (the control plane's behaviour): it is parked in the queue and attempted again after a
//    departure gives capacity back; a pod of the same shape as one that failed earlier in the same
//    cycle is parked without an attempt.
// A placed pod with a runtime departs after it and its resources are released.
//
// Node outages (SimulatorOptions::outages: a spot reclaim, a node lost): when one begins, every pod
// with a member on the node is evicted (all its members released, on every node), the node's capacity
// is held (Framework::Hold) until the outage ends, and the pod waits in the queue again, in its
// original list order, for the runtime SimulatorOptions::remaining_after_eviction says it still needs
// (what its checkpoints saved), as the control plane requeues the jobs of a lost or reclaimed node.
//
// Capacity preference (SimPod::capacity): each attempt tries the listed capacity types in order and
// takes the first that places the pod, as the control plane tries a job's requests
// (controlplane/job_request.h), each through the same sched::ScheduleWithinQuota.
//
// Tenants: each pod belongs to one (SimPod::tenant, "" = the default tenant). The queue orders
// tenants by fair share and parks pods over their tenant's quota (sched::TenantLedger, configured
// from SimulatorOptions::tenants), exactly as in the control plane: each attempt goes through
// sched::ScheduleWithinQuota, which records the placement in the ledger, and each departure
// releases it there at its virtual time. Without tenants configured nothing changes.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/fake_clock.h"
#include "sched/framework.h"
#include "sched/quota.h"
#include "sched/scheduling_queue.h"

namespace gpugeek::sim {

struct SimPod {
  std::string id;  // need not be unique (the FGD protocol clones pods)
  sched::ResourceShape shape;
  Duration arrival{};               // since the start of the simulation
  std::optional<Duration> runtime;  // none: never departs
  int priority = 0;                 // higher is attempted first among pods waiting at one instant
  std::string tenant;               // owner, for quotas and fair share ("" = the default tenant)
  // Members of `shape`, placed all or nothing, each on a node of its own when > 1 (a multi-node job).
  int32_t gang_size = 1;
  // Capacity types to try, in order (e.g. {kSpot, kOnDemand}: spot first, on-demand when no spot node
  // fits); empty: any node.
  std::vector<sched::CapacityType> capacity;
};

// A node out of service for a while: from `at` for `length` (> 0), both since the start.
struct NodeOutage {
  sched::NodeIndex node = -1;
  Duration at{};
  Duration length{};
};

struct SimEvent {
  enum class Kind {
    kArrival,    // the pod's first attempt, at its arrival
    kDeparture,  // the pod's runtime ended; its resources were released
    kRetry,      // a later attempt of a waiting pod (only with requeue_unschedulable)
    kEviction,   // an outage of a node the pod ran on released all its members; it waits again
  };
  Kind kind = Kind::kArrival;
  size_t pod = 0;  // index into the pod list
  // Arrivals and retries: the scheduling decision (unschedulable, with no reasons, for a pod parked
  // without an attempt because its shape failed earlier in the cycle). Departures, evictions: null.
  const sched::Decision* decision = nullptr;
  // Arrivals and retries: the pod was over its tenant's quota (parked by the queue's check or by
  // the attempt's admission; `decision` is then unschedulable with no reasons).
  bool over_quota = false;
};

struct SimulatorOptions {
  // See the class comment: false is the FGD protocol (a failure is final).
  bool requeue_unschedulable = false;
  sched::SchedulingQueueOptions queue;  // its `ledger` holds the fair-share half-life
  // Weight and quota per tenant (sched::TenantLedger::SetTenant); tenants absent: weight 1, no quota.
  std::map<std::string, sched::TenantConfig> tenants;
  // Node outages, in any order; overlapping ones on one node merge. Errors: InvalidArgument for a node
  // outside the cluster or a length <= 0.
  std::vector<NodeOutage> outages;
  // The runtime an evicted pod still needs, given its index, the runtime it needed when this run
  // began, and how long the run lasted (< remaining). Unset: all of `remaining` (nothing was saved).
  std::function<Duration(size_t pod, Duration remaining, Duration ran)> remaining_after_eviction;
};

class Simulator {
 public:
  // Borrows both; they must outlive the Simulator.
  Simulator(sched::Framework& framework, FakeClock& clock, SimulatorOptions options = {})
      : framework_(framework), clock_(clock), options_(options) {}

  // Called after each event has been applied (for an attempt: after the placement, if any).
  using Observer = std::function<void(const SimEvent&)>;
  // Runs until no event is left. Errors: a scheduling error (an invalid pod, a binder failure) names
  // the pod; InvalidArgument for an invalid tenant configuration.
  absl::Status Run(const std::vector<SimPod>& pods, const Observer& observer);

  // After Run: the pods still waiting (requeue_unschedulable), keyed by their index in the pod list
  // as a decimal string; empty otherwise. Its ledger() holds the tenants' usage as of the last event.
  const sched::SchedulingQueue& queue() const { return queue_; }

 private:
  sched::Framework& framework_;
  FakeClock& clock_;
  const SimulatorOptions options_;
  sched::SchedulingQueue queue_;
};

}  // namespace gpugeek::sim
