#include "controlplane/controllers/transitions.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "api/names.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/controllers/metering.h"
#include "controlplane/job_request.h"
#include "controlplane/log_store.h"
#include "controlplane/metrics.h"
#include "controlplane/retry_policy.h"
#include "controlplane/secrets.h"
#include "controlplane/usage.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;

// Everything of a job's requests that decides where it fits (not its id or priority), as text.
std::string ShapeKey(const std::vector<sched::Request>& requests) {
  std::string key;
  for (const sched::Request& r : requests) {
    // The tenant is part of the shape: nodes reserved to tenants fit one tenant's job and not another's.
    key += fmt::format("tenant={} image={} gang={} distinct={} capacity={} selector=", r.tenant, r.image, r.gang_size,
                       r.distinct_nodes, r.capacity_type ? static_cast<int>(*r.capacity_type) : -1);
    for (const auto& [label, values] : r.node_selector) key += fmt::format("{}:{};", label, fmt::join(values, ","));
    for (const sched::ResourceShape& a : r.alternatives) {
      key += fmt::format("|{},{},{},{},{}", a.cpu_milli, a.memory_bytes, a.num_gpus, a.gpu_milli,
                         fmt::join(a.allowed_models, ","));
    }
    key += '\n';
  }
  return key;
}

bool AllExited(const LiveJob& live) {
  return std::all_of(live.members.begin(), live.members.end(), [](const MemberStatus& m) { return m.exited; });
}

}  // namespace

RecoveryPhases PhasesOf(const State::Recovery& r, MonoTime running_at) {
  auto s = [](MonoTime from, MonoTime to) { return std::max(0.0, std::chrono::duration<double>(to - from).count()); };
  const MonoTime stopped = r.stopped_at.value_or(r.requeued_at);
  const MonoTime placed = r.placed_at.value_or(running_at);
  return RecoveryPhases{.detect_s = s(r.failed_at, r.requeued_at),
                        .stop_s = s(r.requeued_at, stopped),
                        .place_s = s(stopped, placed),
                        .start_s = s(placed, running_at),
                        .total_s = s(r.failed_at, running_at)};
}

void CountTransition(ControllerContext& ctx, const std::string& id, JobState from, JobState to) {
  if (from == to) return;
  ctx.state.dirty = true;
  const MonoTime now = ctx.clock.Monotonic();
  if (ctx.metrics != nullptr) ctx.metrics->Transition(from, to);
  if (to == JobState::kPending) {
    // From the first loss: a job requeued again before it ran has been recovering all along.
    ctx.state.recovery.try_emplace(id, State::Recovery{.failed_at = now, .requeued_at = now});
    return;
  }
  if (to != JobState::kRunning && !api::IsTerminal(to)) return;
  auto it = ctx.state.recovery.find(id);
  if (it == ctx.state.recovery.end()) return;
  if (to == JobState::kRunning && ctx.metrics != nullptr) ctx.metrics->Recovered(PhasesOf(it->second, now));
  ctx.state.recovery.erase(it);
}

MonoTime DrainDeadline(const ControllerContext& ctx, const LiveJob& live, MonoTime now) {
  return now + live.spec.checkpoint.grace + ctx.options.node_down_after();
}

absl::Status CommitJobState(ControllerContext& ctx, LiveJob& live, JobState to, std::string reason,
                            std::optional<int> exit_code) {
  store::JobRecord next = live.record;
  next.state = to;
  next.reason = std::move(reason);
  if (auto r = ctx.state.recovery.find(live.record.id); to == JobState::kRunning && r != ctx.state.recovery.end()) {
    next.reason += "; " + PhasesOf(r->second, ctx.clock.Monotonic()).Text();
  }
  next.updated_at = ctx.clock.Now();
  if (exit_code) next.exit_code = exit_code;
  const JobState from = live.record.state;
  ASSIGN_OR_RETURN(live.record, ctx.store.UpdateJob(next));
  CountTransition(ctx, live.record.id, from, to);
  if (api::IsTerminal(to) && !live.drain_deadline)
    live.drain_deadline = DrainDeadline(ctx, live, ctx.clock.Monotonic());
  ctx.logs.Wake(live.record.id);
  return absl::OkStatus();
}

absl::Status Requeue(ControllerContext& ctx, const std::string& job_id, const std::string& reason,
                     std::optional<RetryCharge> retry) {
  auto it = ctx.state.live.find(job_id);
  if (it == ctx.state.live.end()) return absl::OkStatus();
  LiveJob& live = it->second;
  if (api::IsTerminal(live.record.state)) return absl::OkStatus();
  // Requeued already (restarts counted once); the caller may just have presumed its last running
  // members stopped (their node is down), so release it now rather than at the drain deadline.
  if (live.draining) return ReleaseIfDone(ctx, job_id);
  const bool drained = AllExited(live);
  store::JobRecord next = live.record;
  Allocation allocation = live.allocation;
  allocation.released = drained;
  next.allocation_json = ToJson(allocation).dump();
  next.state = JobState::kPending;
  next.restarts = live.record.restarts + 1;
  if (retry) ++next.retries[std::string(api::RetryCauseName(retry->cause))];
  next.reason = drained ? reason : reason + "; placed again once its members have stopped";
  next.updated_at = ctx.clock.Now();
  const JobState from = live.record.state;
  ASSIGN_OR_RETURN(live.record, ctx.store.UpdateJob(next));
  CountTransition(ctx, job_id, from, JobState::kPending);
  spdlog::info("control plane: {} requeued: {}", job_id, next.reason);
  live.draining = true;
  live.drain_deadline = DrainDeadline(ctx, live, ctx.clock.Monotonic());
  if (retry && retry->backoff > Duration::zero()) live.retry_at = ctx.clock.Monotonic() + retry->backoff;
  ctx.logs.Wake(job_id);
  ctx.state.dirty = true;
  if (drained) return ReleaseIfDone(ctx, job_id);
  return absl::OkStatus();
}

absl::Status ReleaseIfDone(ControllerContext& ctx, const std::string& job_id) {
  auto it = ctx.state.live.find(job_id);
  if (it == ctx.state.live.end()) return absl::OkStatus();
  LiveJob& live = it->second;
  if (!AllExited(live)) return absl::OkStatus();
  const bool requeued = live.draining && !api::IsTerminal(live.record.state);
  if (!api::IsTerminal(live.record.state) && !requeued) return absl::OkStatus();  // still running
  // The stored allocation says released, unless a requeue already wrote it so.
  ASSIGN_OR_RETURN(Allocation stored, ParseAllocation(live.record.allocation_json));
  if (!stored.released) {
    store::JobRecord next = live.record;
    stored.released = true;
    next.allocation_json = ToJson(stored).dump();
    next.updated_at = ctx.clock.Now();
    ASSIGN_OR_RETURN(live.record, ctx.store.UpdateJob(next));
  }
  const store::JobRecord record = live.record;
  const std::optional<MonoTime> retry_at = live.retry_at;
  if (!live.allocation.members.empty()) {
    auto ports = ctx.state.ports.find(live.allocation.master_addr);
    if (ports != ctx.state.ports.end()) ports->second.erase(live.allocation.master_port);
  }
  ctx.log_grants.Release(job_id, ctx.clock.Monotonic());
  ctx.state.live.erase(it);
  ctx.state.Released(job_id);
  ctx.logs.Wake(job_id);
  if (requeued) {
    if (auto r = ctx.state.recovery.find(job_id); r != ctx.state.recovery.end() && !r->second.stopped_at) {
      r->second.stopped_at = ctx.clock.Monotonic();
    }
    AddPending(ctx, record, retry_at);
  }
  return absl::OkStatus();
}

absl::Status RetryOrFail(ControllerContext& ctx, const std::string& job_id, api::RetryCause cause,
                         const std::string& what, std::optional<int> exit_code) {
  auto it = ctx.state.live.find(job_id);
  if (it == ctx.state.live.end()) return absl::OkStatus();
  LiveJob& live = it->second;
  if (api::IsTerminal(live.record.state) || live.draining) return ReleaseIfDone(ctx, job_id);
  const RetryDecision d = DecideRetry(live.spec, cause, RetriesUsed(live.record.retries, cause), what);
  if (d.retry) return Requeue(ctx, job_id, d.reason, RetryCharge{.cause = cause, .backoff = d.backoff});
  RETURN_IF_ERROR(CommitJobState(ctx, live, JobState::kFailed, d.reason, exit_code));
  return ReleaseIfDone(ctx, job_id);
}

bool AnyMemberNodeSilent(const ControllerContext& ctx, const LiveJob& live) {
  for (const AllocationMember& m : live.allocation.members) {
    auto node = ctx.state.nodes.find(m.node);
    if (node == ctx.state.nodes.end() || node->second.down || node->second.suspect) return true;
  }
  return false;
}

absl::Status NodeFailure(ControllerContext& ctx, const std::string& job_id, const std::string& what,
                         MonoTime failed_at) {
  auto it = ctx.state.live.find(job_id);
  if (it == ctx.state.live.end()) return absl::OkStatus();
  LiveJob& live = it->second;
  if (live.reform) return absl::OkStatus();
  const bool survivor =
      std::any_of(live.allocation.members.begin(), live.allocation.members.end(), [&](const AllocationMember& m) {
        auto node = ctx.state.nodes.find(m.node);
        return node != ctx.state.nodes.end() && !node->second.down;
      });
  if (!live.spec.elastic || !survivor || api::IsTerminal(live.record.state) || live.draining) {
    RETURN_IF_ERROR(RetryOrFail(ctx, job_id, api::RetryCause::kNodeFailure, what));
  } else {
    // Asking for elasticity is asking to outlive a lost node: re-forming is within retry.limit even when
    // retry.on does not list node-failure (that list governs requeues of the whole gang); unlimited
    // without `retry:`, as node failures are.
    const int used = RetriesUsed(live.record.retries, api::RetryCause::kNodeFailure);
    if (live.spec.retry && used >= live.spec.retry->limit) {
      return RetryOrFail(ctx, job_id, api::RetryCause::kNodeFailure, what);
    }
    // At once, whatever the policy's backoff: the survivors hold their GPUs meanwhile.
    const std::string reason =
        live.spec.retry ? fmt::format("node-failure: {}; retry {} of {}", what, used + 1, live.spec.retry->limit)
                        : what;
    store::JobRecord next = live.record;
    Allocation allocation = live.allocation;
    allocation.reforming = true;
    next.allocation_json = ToJson(allocation).dump();
    next.reason = std::string(kReformingPrefix) + reason;
    next.updated_at = ctx.clock.Now();
    ASSIGN_OR_RETURN(live.record, ctx.store.UpdateJob(next));
    live.allocation = std::move(allocation);
    live.reform = true;
    live.reform_reason = reason;
    const MonoTime now = ctx.clock.Monotonic();
    // The survivors are told to stop (a SIGTERM: their checkpoint moment); given up at this deadline.
    live.drain_deadline = DrainDeadline(ctx, live, now);
    ctx.state.recovery.try_emplace(job_id, State::Recovery{.failed_at = now, .requeued_at = now});
    ctx.state.dirty = true;
    spdlog::info("control plane: {} (elastic) re-forms without its lost members: {}", job_id, live.reform_reason);
  }
  // It failed when its node fell silent, not when that was noticed.
  if (auto r = ctx.state.recovery.find(job_id); r != ctx.state.recovery.end()) {
    r->second.failed_at = std::min(r->second.failed_at, failed_at);
  }
  return absl::OkStatus();
}

absl::Status PresumeStopped(ControllerContext& ctx, const std::string& job_id, const std::string& detail) {
  auto it = ctx.state.live.find(job_id);
  if (it == ctx.state.live.end()) return absl::OkStatus();
  for (size_t rank = 0; rank < it->second.members.size(); ++rank) {
    MemberStatus& m = it->second.members[rank];
    if (m.exited) continue;
    RETURN_IF_ERROR(MeterMember(ctx, it->second, static_cast<int>(rank)));
    m.exited = true;
    m.failed = true;
    m.detail = detail;
  }
  return ReleaseIfDone(ctx, job_id);
}

void AddPending(ControllerContext& ctx, const store::JobRecord& record, std::optional<MonoTime> not_before) {
  PendingJob& p = ctx.state.pending[record.id];
  p.record = record;
  p.not_before = not_before;
  p.spec = api::ParseJobSpec(record.spec_yaml, ctx.catalog);
  if (!p.spec.ok()) {
    p.requests = p.spec.status();
  } else if (record.plan_json.empty()) {
    p.requests = BuildRequests(record.id, *p.spec, nullptr);
  } else if (auto plan = PlanFromJson(record.plan_json); plan.ok()) {
    p.requests = BuildRequests(record.id, *p.spec, &*plan);
  } else {
    p.requests = plan.status();
  }
  if (p.requests.ok()) {
    // The owner goes with every alternative: nodes reserved to some tenants take only theirs.
    for (sched::Request& r : *p.requests) r.tenant = record.tenant;
    p.shape_key = ShapeKey(*p.requests);
  }
  ctx.state.dirty = true;
}

void SetLayout(LiveJob& live) {
  live.tp = live.pp = live.dp = 0;
  live.zero_stage = 0;
  live.micro_batch = 0;
  if (live.record.plan_json.empty()) return;
  absl::StatusOr<workload::ResourceRequest> plan = PlanFromJson(live.record.plan_json);
  if (!plan.ok()) return;  // AddPending reported it when the job was queued
  if (const auto* alt = PlanFor(*plan, live.allocation.gpu_model)) {
    live.tp = alt->tp;
    live.pp = alt->pp;
    live.dp = alt->dp;
    live.zero_stage = alt->zero_stage;
    live.micro_batch = alt->micro_batch;
  }
}

}  // namespace gpugeek::controlplane
