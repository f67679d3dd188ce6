#pragma once
// JobLifecycleController: drives each placed job through api/job_state.h from its agents' reports, and
// takes back allocations whose members have stopped.
//
//   SCHEDULED --(every member running)--> RUNNING --(every member exited 0)--> SUCCEEDED
//   any live  --(a member failed)--> FAILED (the other members are told to stop)
//   an ended or requeued job's allocation is released when every member has exited: confirmed by its
//   agent, or presumed at the drain deadline (its grace plus the fencing timeline)
// Reports of another epoch than the job's current placement are stale (fencing) and ignored. A report
// that cannot be committed is dropped: the agent reports again on its next heartbeat (desired state).
// A report may carry the last checkpoint step the member's workload reported complete
// (docs/checkpointing.md): stored with the job (store::JobRecord::checkpoint_step) as what it resumes from.

#include <string>

#include "api/agent_protocol.h"
#include "controlplane/controllers/context.h"

namespace gpugeek::controlplane {

class JobLifecycleController {
 public:
  // Applies one workload report from `node`.
  absl::Status Apply(ControllerContext& ctx, const std::string& node, const api::WorkloadReport& report);
  // Drain deadlines, and requeues that a store error interrupted.
  void Reconcile(ControllerContext& ctx, MonoTime now);

 private:
  // Stores `step` as the job's checkpoint, with the region of `node` (the reporter's) as where it lives:
  // the first report of a placement as it is, later ones only when they move forward (the members of a
  // gang may report one after another).
  absl::Status RecordCheckpoint(ControllerContext& ctx, LiveJob& live, const std::string& node, int64_t step);
  // Stores the report's metrics the store does not hold yet (store::MetricReportRecord) and moves the
  // member's acknowledgement (api::Assignment::metrics_stored) past them.
  absl::Status RecordMetrics(ControllerContext& ctx, LiveJob& live, const api::WorkloadReport& report);
};

}  // namespace gpugeek::controlplane
