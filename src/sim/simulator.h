#pragma once
// Simulator: a discrete-event loop on a virtual clock that drives sched::Framework through the
// scheduling queue the control plane runs (sched::SchedulingQueue).
//
// Events are arrivals and departures. At each instant, in this order: the pods departing release
// their resources (each a capacity change for the queue), the pods arriving join the queue, and one
// queue cycle (SchedulingQueue::RunCycle) attempts every active pod by (priority desc, list order).
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
};

struct SimEvent {
  enum class Kind {
    kArrival,    // the pod's first attempt, at its arrival
    kDeparture,  // the pod's runtime ended; its resources were released
    kRetry,      // a later attempt of a waiting pod (only with requeue_unschedulable)
  };
  Kind kind = Kind::kArrival;
  size_t pod = 0;  // index into the pod list
  // Arrivals and retries: the scheduling decision (unschedulable, with no reasons, for a pod parked
  // without an attempt because its shape failed earlier in the cycle). Departures: null.
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
