#include "controlplane/controllers/job_lifecycle.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/job_state.h"
#include "api/quantity.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/controllers/transitions.h"

namespace gpugeek::controlplane {

using api::JobState;

absl::Status JobLifecycleController::Apply(ControllerContext& ctx, const std::string& node,
                                           const api::WorkloadReport& report) {
  auto it = ctx.state.live.find(report.job_id);
  if (it == ctx.state.live.end()) return absl::OkStatus();  // not holding resources: the agent stops it
  LiveJob& live = it->second;
  if (report.epoch != live.record.epoch) return absl::OkStatus();  // a stale placement (fencing)
  if (report.node_rank < 0 || report.node_rank >= static_cast<int>(live.members.size()) ||
      live.allocation.members[report.node_rank].node != node) {
    return absl::InvalidArgumentError(
        fmt::format("rank {} of {} is not on node {}", report.node_rank, report.job_id, node));
  }
  MemberStatus& member = live.members[report.node_rank];
  if (member.exited) return absl::OkStatus();  // already final (reported before, or presumed)
  if (report.phase == api::WorkloadPhase::kRunning) {
    if (member.running) return absl::OkStatus();
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
  ctx.state.dirty = true;
  const bool all_started = std::all_of(live.members.begin(), live.members.end(),
                                       [](const MemberStatus& m) { return m.running || m.exited; });
  const bool all_exited =
      std::all_of(live.members.begin(), live.members.end(), [](const MemberStatus& m) { return m.exited; });
  const JobState state = live.record.state;
  if (!api::IsTerminal(state) && !live.draining) {
    if (member.exited && member.failed) {
      // The job's own error: retried as its policy says (the default: FAILED).
      const int code = report.exit_code.value_or(report.term_signal ? 128 + report.term_signal : 1);
      return RetryOrFail(ctx, report.job_id, api::RetryCause::kError,
                         fmt::format("rank {} on {}: {}", report.node_rank, node, member.detail), code);
    } else if (all_started && state == JobState::kScheduled) {
      RETURN_IF_ERROR(
          CommitJobState(ctx, live, JobState::kRunning, fmt::format("all {} members started", live.members.size())));
    }
    if (all_exited && !api::IsTerminal(live.record.state)) {
      if (live.record.state == JobState::kScheduled)
        RETURN_IF_ERROR(CommitJobState(ctx, live, JobState::kRunning, "started"));
      RETURN_IF_ERROR(CommitJobState(ctx, live, JobState::kSucceeded,
                                     fmt::format("all {} members exited 0", live.members.size()), 0));
    }
  }
  return ReleaseIfDone(ctx, report.job_id);
}

void JobLifecycleController::Reconcile(ControllerContext& ctx, MonoTime now) {
  std::vector<std::string> expired;
  std::vector<std::string> lost;
  std::vector<std::string> overtime;
  for (const auto& [id, live] : ctx.state.live) {
    if (live.drain_deadline && now >= *live.drain_deadline) {
      expired.push_back(id);
      continue;
    }
    if (api::IsTerminal(live.record.state) || live.draining) continue;
    if (live.spec.max_duration && now - live.placed_at >= *live.spec.max_duration) {
      overtime.push_back(id);
      continue;
    }
    for (const AllocationMember& m : live.allocation.members) {
      auto node = ctx.state.nodes.find(m.node);
      if (node == ctx.state.nodes.end() || node->second.down) {
        lost.push_back(id);
        break;
      }
    }
  }
  for (const std::string& id : expired) {
    if (absl::Status st = PresumeStopped(ctx, id, "presumed stopped at its drain deadline"); !st.ok()) {
      spdlog::error("control plane: releasing {}: {}", id, st);
    }
  }
  // A requeue a store error interrupted (node_lifecycle marked the node down first).
  for (const std::string& id : lost) {
    if (absl::Status st = RetryOrFail(ctx, id, api::RetryCause::kNodeFailure, "a node of its allocation is down");
        !st.ok()) {
      spdlog::error("control plane: requeueing {}: {}", id, st);
    }
  }
  // Ran out of time: ended like a cancel (its members are told to stop), not retried.
  for (const std::string& id : overtime) {
    LiveJob& live = ctx.state.live.at(id);
    const std::string reason = fmt::format("max_duration {} reached", api::FormatDuration(*live.spec.max_duration));
    if (absl::Status st = CommitJobState(ctx, live, JobState::kFailed, reason); !st.ok()) {
      spdlog::error("control plane: ending {} at its max_duration: {}", id, st);
    }
  }
}

}  // namespace gpugeek::controlplane
