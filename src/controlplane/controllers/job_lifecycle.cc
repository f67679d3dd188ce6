#include "controlplane/controllers/job_lifecycle.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/job_state.h"
#include "api/quantity.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/controllers/metering.h"
#include "controlplane/controllers/transitions.h"

namespace gpugeek::controlplane {

using api::JobState;

absl::Status JobLifecycleController::RecordCheckpoint(ControllerContext& ctx, LiveJob& live, const std::string& node,
                                                      int64_t step) {
  const bool first = !live.checkpoint_reported;
  live.checkpoint_reported = true;
  if (live.record.checkpoint_step == step || (!first && step < live.record.checkpoint_step.value_or(-1))) {
    return absl::OkStatus();
  }
  store::JobRecord next = live.record;
  next.checkpoint_step = step;
  next.checkpoint_at = ctx.clock.Now();
  if (auto n = ctx.state.nodes.find(node); n != ctx.state.nodes.end()) {
    next.checkpoint_region = n->second.registration.region;
  }
  ASSIGN_OR_RETURN(live.record, ctx.store.UpdateJob(next));
  ctx.state.dirty = true;
  spdlog::info("control plane: job {} (epoch {}) has a complete checkpoint at step {}", live.record.id,
               live.record.epoch, step);
  return absl::OkStatus();
}

absl::Status JobLifecycleController::RecordMetrics(ControllerContext& ctx, LiveJob& live,
                                                   const api::WorkloadReport& report) {
  MemberStatus& member = live.members[report.node_rank];
  if (member.metrics_stored < 0) {
    ASSIGN_OR_RETURN(member.metrics_stored,
                     ctx.store.CountMetricReports(live.record.id, live.record.epoch, report.node_rank));
  }
  std::vector<store::MetricReportRecord> fresh;
  for (const api::MetricPoint& m : report.metrics) {
    if (m.seq < member.metrics_stored) continue;  // resent: stored already
    fresh.push_back({.job_id = live.record.id,
                     .epoch = live.record.epoch,
                     .node_rank = report.node_rank,
                     .seq = m.seq,
                     .step = m.step,
                     .value = m.value});
  }
  if (fresh.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(ctx.store.AppendMetricReports(fresh));
  member.metrics_stored = fresh.back().seq + 1;
  ctx.state.dirty = true;  // the acknowledgement goes out with the next snapshot
  return absl::OkStatus();
}

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
  if (report.checkpoint_step) RETURN_IF_ERROR(RecordCheckpoint(ctx, live, node, *report.checkpoint_step));
  if (!report.metrics.empty()) RETURN_IF_ERROR(RecordMetrics(ctx, live, report));
  MemberStatus& member = live.members[report.node_rank];
  if (member.exited) return absl::OkStatus();  // already final (reported before, or presumed)
  const bool fenced = report.phase == api::WorkloadPhase::kExited && report.message.starts_with(api::kFencedPrefix);
  if (report.phase == api::WorkloadPhase::kRunning) {
    if (member.running) return absl::OkStatus();
    RETURN_IF_ERROR(StartMetering(ctx, live, report.node_rank));  // metering (usage.h)
    member.running = true;
  } else {
    RETURN_IF_ERROR(MeterMember(ctx, live, report.node_rank, std::chrono::milliseconds(report.ended_ms_ago)));
    member.exited = true;
    // A fenced member (its agent lost the server and stopped it) did not finish, whatever its status.
    member.failed = fenced || report.phase == api::WorkloadPhase::kFailedToStart || report.term_signal != 0 ||
                    report.exit_code.value_or(1) != 0;
    member.exit_code = report.term_signal != 0 ? std::optional<int>(128 + report.term_signal) : report.exit_code;
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
  if (!api::IsTerminal(state) && !live.draining && !live.reform) {
    if (member.exited && member.failed && fenced) {
      // Not the job's error: its node lost the server for a while (a freeze, a partition) and came back
      // before it was declared down. Retried as a node failure (the default: at once, without limit).
      return NodeFailure(ctx, report.job_id, fmt::format("rank {} on {}: {}", report.node_rank, node, member.detail),
                         ctx.clock.Monotonic());
    }
    if (member.exited && member.failed && live.members.size() > 1) {
      // A gang member that failed may have failed for a peer: its collectives break as soon as the peer's
      // node dies (its agent killed: the shim ends that node's members at once, before the node misses a
      // beat). Held, GPUs and all, until every node of the gang has been heard from for a lease after the
      // failure (Reconcile); a node lost meanwhile (suspect then down, or registered again by a restarted
      // agent) makes it a node failure instead of the job's error.
      member.failed_at = ctx.clock.Monotonic();
      spdlog::info("control plane: {} rank {} on {} exited ({}); held for its gang's nodes' next {}", report.job_id,
                   report.node_rank, node, member.detail, api::FormatDuration(ctx.options.lease));
      return absl::OkStatus();
    }
    if (member.exited && member.failed) {
      // The job's own error: retried as its policy says (the default: FAILED).
      return RetryOrFail(ctx, report.job_id, api::RetryCause::kError,
                         fmt::format("rank {} on {}: {}", report.node_rank, node, member.detail),
                         member.exit_code.value_or(1));
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

namespace {

// Whether one GPU of `live` reads busy in its node's latest heartbeat: a utilisation at or above
// api::kIdleUtilizationPercent, or none reported (no data never stops a job), or no lease at all.
bool AnyGpuBusy(const ControllerContext& ctx, const LiveJob& live) {
  return std::any_of(live.allocation.members.begin(), live.allocation.members.end(),
                     [&](const AllocationMember& m) { return !m.gpu_uuids.empty() && !MemberIdle(ctx, m); });
}

}  // namespace

void JobLifecycleController::Reconcile(ControllerContext& ctx, MonoTime now) {
  std::vector<std::string> expired;
  std::vector<std::string> lost;
  std::vector<std::string> overtime;
  std::vector<std::string> idle;
  std::vector<std::pair<std::string, int>> held_failures;  // job, rank
  for (auto& [id, live] : ctx.state.live) {
    AccrueIdle(ctx, live, now);  // idle-but-allocated time (metering.h)
    if (live.drain_deadline && now >= *live.drain_deadline) {
      expired.push_back(id);
      continue;
    }
    if (api::IsTerminal(live.record.state) || live.draining || live.reform) continue;
    if (live.spec.max_duration && now - live.placed_at >= *live.spec.max_duration) {
      overtime.push_back(id);
      continue;
    }
    bool on_lost_node = false;
    for (const AllocationMember& m : live.allocation.members) {
      auto node = ctx.state.nodes.find(m.node);
      if (node == ctx.state.nodes.end() || node->second.down) {
        on_lost_node = true;
        break;
      }
    }
    if (on_lost_node) {
      lost.push_back(id);
      continue;
    }
    // A gang's member held after it failed (Apply) whose nodes have all renewed their leases since: none is
    // suspect more than a lease after the failure (a node is suspect once silent for more than a lease, so
    // a peer that died before the failure is suspect by then). It failed on its own account after all.
    if (live.members.size() > 1 && !AnyMemberNodeSilent(ctx, live)) {
      for (size_t rank = 0; rank < live.members.size(); ++rank) {
        MemberStatus& m = live.members[rank];
        if (!m.exited || !m.failed) continue;
        if (!m.failed_at) m.failed_at = now;  // held across a reload: the lease counts from now
        if (now - *m.failed_at > ctx.options.lease) {
          held_failures.emplace_back(id, static_cast<int>(rank));
          break;
        }
      }
    }
    // Idle is judged only on live nodes' samples: a lost node's last ones say nothing of now.
    if (live.spec.idle_timeout) {
      if (!live.busy_at || live.record.state != JobState::kRunning || AnyGpuBusy(ctx, live)) live.busy_at = now;
      if (now - *live.busy_at >= *live.spec.idle_timeout) idle.push_back(id);
    }
  }
  for (const std::string& id : expired) {
    if (absl::Status st = PresumeStopped(ctx, id, "presumed stopped at its drain deadline"); !st.ok()) {
      spdlog::error("control plane: releasing {}: {}", id, st);
    }
  }
  // A requeue a store error interrupted (node_lifecycle marked the node down first).
  for (const std::string& id : lost) {
    if (absl::Status st = NodeFailure(ctx, id, "a node of its allocation is down", now); !st.ok()) {
      spdlog::error("control plane: requeueing {}: {}", id, st);
    }
  }
  for (const auto& [id, rank] : held_failures) {
    const LiveJob& live = ctx.state.live.at(id);
    const std::string what =
        fmt::format("rank {} on {}: {}", rank, live.allocation.members[rank].node, live.members[rank].detail);
    if (absl::Status st = RetryOrFail(ctx, id, api::RetryCause::kError, what, live.members[rank].exit_code.value_or(1));
        !st.ok()) {
      spdlog::error("control plane: retrying {}: {}", id, st);
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
  for (const std::string& id : idle) {
    LiveJob& live = ctx.state.live.at(id);
    const std::string timeout = api::FormatDuration(*live.spec.idle_timeout);
    const std::string reason = fmt::format("idle_timeout {}: its GPUs were idle (utilisation below {}%) for {}",
                                           timeout, api::kIdleUtilizationPercent, timeout);
    if (absl::Status st = CommitJobState(ctx, live, JobState::kFailed, reason); !st.ok()) {
      spdlog::error("control plane: ending {} at its idle_timeout: {}", id, st);
    }
  }
}

}  // namespace gpugeek::controlplane
