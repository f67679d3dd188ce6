#pragma once
// Job transitions that several controllers share: every one commits to the store first (compare-and-set
// + event in one transaction), then updates State. Writer token required (ControllerContext).

#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "api/job_spec.h"
#include "api/job_state.h"
#include "controlplane/controllers/context.h"
#include "controlplane/recovery.h"

namespace gpugeek::controlplane {

// Moves `live`'s job to `to` (reason and, when given, exit code), keeping live.record current, and
// counts the transition (metrics, recovery timing). A job that ends gets a drain deadline: members
// that have not confirmed their exit by then are presumed stopped.
absl::Status CommitJobState(ControllerContext& ctx, LiveJob& live, api::JobState to, std::string reason,
                            std::optional<int> exit_code = std::nullopt);

// Sends a placed job back to PENDING (restarts + 1) with `reason`. Its allocation drains: members
// still running are told to stop, and the job is placed again only once every one has exited
// (confirmed, or presumed at the drain deadline), so a member never runs in two places. A job that
// is draining already is not requeued again: it is released if every member has exited by now.
// `retry`, when given, is the cause the requeue counts against (store::JobRecord::retries) and the
// backoff before the job may be placed again (0: at once).
struct RetryCharge {
  api::RetryCause cause = api::RetryCause::kError;
  Duration backoff{};
};
absl::Status Requeue(ControllerContext& ctx, const std::string& job_id, const std::string& reason,
                     std::optional<RetryCharge> retry = std::nullopt);

// A placement of `job_id` ended early for `cause` (`what` says how, e.g. "rank 0 on node-a: exit code
// 1"): the job is requeued as its retry policy says (retry_policy.h: counted per cause, backed off), or
// ends FAILED with the policy's reason and `exit_code`. A job already ended or draining is only released
// if every member has exited.
absl::Status RetryOrFail(ControllerContext& ctx, const std::string& job_id, api::RetryCause cause,
                         const std::string& what, std::optional<int> exit_code = std::nullopt);

// The reason NodeFailure stores while an elastic gang stops its survivors, before what was lost.
inline constexpr std::string_view kReformingPrefix = "re-forming (elastic): stopping the survivors; ";

// A node of `job_id`'s allocation was lost (`what`: declared down, or a member fenced by its agent): an
// elastic gang (spec.elastic) with a member on a node not down is marked for re-forming (LiveJob::reform:
// its survivors are told to stop, keeping their GPUs, and once they have SchedulingController replaces
// only the lost members) while its node-failure retries are within retry.limit (whatever retry.on lists;
// always without `retry:`); any other job goes to RetryOrFail
// (kNodeFailure). `failed_at` (monotonic) is when the node fell silent, for the recovery's timing. No-op for a job
// re-forming already.
absl::Status NodeFailure(ControllerContext& ctx, const std::string& job_id, const std::string& what,
                         MonoTime failed_at);

// Whether a node of `live`'s allocation is silent: suspect or down (lost, or maybe about to be).
bool AnyMemberNodeSilent(const ControllerContext& ctx, const LiveJob& live);

// Releases the allocation of `job_id` if every member has exited: its resources and rendezvous port
// return to the pool; a draining (requeued) job enters the scheduling queue. No-op otherwise.
absl::Status ReleaseIfDone(ControllerContext& ctx, const std::string& job_id);

// Marks every member of `job_id` not yet exited as exited with `detail` (presumed stopped: its node is
// down, or the drain deadline passed), then releases the allocation.
absl::Status PresumeStopped(ControllerContext& ctx, const std::string& job_id, const std::string& detail);

// The phases of a recovery (State::recovery) that ends with RUNNING at `running_at`; a phase whose
// moment was not seen (a restart in between) counts as zero.
RecoveryPhases PhasesOf(const State::Recovery& r, MonoTime running_at);

// Counts a committed state change of job `id` (metrics; recovery timing: State::recovery starts at a
// move to PENDING and ends at RUNNING, observed as metrics, or at an end).
void CountTransition(ControllerContext& ctx, const std::string& id, api::JobState from, api::JobState to);

// Sets live.tp/pp/dp from the job's plan (record.plan_json) for the placed GPU model; all 0 without a
// plan or an alternative of that model.
void SetLayout(LiveJob& live);

// Adds a stored PENDING job to State::pending with its spec and requests parsed once; with
// `not_before`, it waits out a retry backoff before it enters the scheduling queue.
void AddPending(ControllerContext& ctx, const store::JobRecord& record,
                std::optional<MonoTime> not_before = std::nullopt);

// The time by which every member of `live` must have stopped once told to: its grace, then the
// fencing timeline, from `now`.
MonoTime DrainDeadline(const ControllerContext& ctx, const LiveJob& live, MonoTime now);

}  // namespace gpugeek::controlplane
