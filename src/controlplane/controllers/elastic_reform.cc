// Elastic gangs (api::ElasticSpec): a gang that lost nodes keeps its survivors where they are and
// replaces only the lost members (SchedulingController::ReformGangs, declared in scheduling.h).
//
// The survivors' GPUs stay bound in the scheduler's pool throughout (SchedulingController::Rebuild keeps
// a live elastic gang's exited members bound), so nothing else is placed there while the gang re-forms.
// The lost members' GPUs went with their node. First the survivors are told to stop (SIGTERM: a
// just-in-time checkpoint) and the new allocation waits until each has exited (or its drain deadline
// passed), so no run of the next epoch ever meets one of this one (a replacement reaching the old
// rendezvous on rank 0's node, two epochs of one rank on one GPU); a lost node's members were stopped by
// its fencing timeline before the node was declared down. Then every member starts at the next epoch,
// the survivors on the same GPUs, with the new WORLD_SIZE, ranks and MASTER_ADDR.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "api/job_state.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/controllers/metering.h"
#include "controlplane/controllers/scheduling.h"
#include "controlplane/controllers/transitions.h"
#include "controlplane/job_request.h"
#include "controlplane/log_store.h"
#include "controlplane/metrics.h"

namespace gpugeek::controlplane {
namespace {

// Keeps the placements the framework permits; the control plane commits them with the survivors.
class KeepPlacements final : public sched::Binder {
 public:
  absl::Status Bind(const sched::Request&, std::span<const sched::Placement> placements) override {
    placements_.assign(placements.begin(), placements.end());
    return absl::OkStatus();
  }
  const std::vector<sched::Placement>& placements() const { return placements_; }

 private:
  std::vector<sched::Placement> placements_;
};

}  // namespace

void SchedulingController::ReformGangs(ControllerContext& ctx, MonoTime now) {
  std::vector<std::string> ids;
  for (const auto& [id, live] : ctx.state.live) {
    if (live.reform) ids.push_back(id);
  }
  for (const std::string& id : ids) {
    if (absl::Status st = Reform(ctx, id, now); !st.ok()) {
      // The store refused the write: the placements were given back; tried again next pass.
      spdlog::error("control plane: re-forming {}: {}", id, st);
    }
  }
}

absl::Status SchedulingController::Reform(ControllerContext& ctx, const std::string& job_id, MonoTime now) {
  LiveJob& live = ctx.state.live.at(job_id);
  std::vector<int> lost, kept;
  for (const AllocationMember& m : live.allocation.members) {
    auto node = ctx.state.nodes.find(m.node);
    (node == ctx.state.nodes.end() || node->second.down ? lost : kept).push_back(m.rank);
  }
  // Not before every survivor has stopped: no run of the next epoch may meet one of this epoch.
  if (!std::all_of(kept.begin(), kept.end(), [&](int rank) { return live.members[rank].exited; })) {
    return absl::OkStatus();
  }
  const int min_nodes = live.spec.elastic ? live.spec.elastic->min_nodes : 1;
  const auto requeue = [&](const std::string& why) {
    live.reform = false;
    return Requeue(ctx, job_id, live.reform_reason + "; " + why,
                   RetryCharge{.cause = api::RetryCause::kNodeFailure, .backoff = Duration::zero()});
  };
  if (kept.empty()) return requeue("no member survived");

  // Replacements for the lost members: beside the survivors, their shape, the gang's GPU model.
  std::vector<sched::Placement> survivors;
  if (auto b = bound_.find(job_id); b != bound_.end()) survivors = b->second;
  std::vector<sched::Placement> added;
  if (!lost.empty()) {
    const AllocationMember& like = live.allocation.members[lost.front()];
    const sched::ResourceShape shape{.cpu_milli = like.cpu_milli,
                                     .memory_bytes = like.memory_bytes,
                                     .num_gpus = static_cast<int32_t>(like.gpu_uuids.size()),
                                     .gpu_milli = static_cast<int32_t>(like.gpu_milli)};
    for (sched::Request& request : ReplacementRequests(job_id, live.record.tenant, live.spec, live.allocation.gpu_model,
                                                       shape, static_cast<int>(lost.size()))) {
      request.placed = survivors;
      KeepPlacements binder;
      ASSIGN_OR_RETURN(const sched::Decision decision, framework_->Schedule(request, binder));
      if (decision.scheduled) {
        added = binder.placements();
        break;
      }
    }
    if (added.empty() && static_cast<int>(kept.size()) < min_nodes) {
      return requeue(
          fmt::format("no node fits its {} lost members and its {} survivors are fewer than "
                      "elastic.min_nodes {}",
                      lost.size(), kept.size(), min_nodes));
    }
  }

  // The next allocation: survivors keep their rank and GPUs, replacements take the lost ranks; with no
  // replacement the survivors alone, ranked 0.. in their old order.
  Allocation next = live.allocation;
  next.reforming = false;
  std::string change;
  if (!added.empty()) {
    std::vector<std::string> where;
    for (size_t i = 0; i < lost.size(); ++i) {
      next.members[lost[i]] = ToMember(ctx.state, *sched_nodes_[added[i].node], added[i], lost[i]);
      where.push_back(fmt::format("{} on {}", lost[i], next.members[lost[i]].node));
    }
    change = fmt::format("rank {} replaced", fmt::join(where, ", "));
  } else if (!lost.empty()) {
    next.members.clear();
    for (int rank : kept) {
      next.members.push_back(live.allocation.members[rank]);
      next.members.back().rank = static_cast<int>(next.members.size()) - 1;
    }
    change = fmt::format("no node fits rank {}: goes on with {} of {} nodes (elastic.min_nodes {})",
                         fmt::join(lost, ", "), kept.size(), live.allocation.members.size(), min_nodes);
  } else {
    change = "every member restarts where it is";
  }
  const std::string old_master = live.allocation.members.front().node;
  const std::string master = next.members.front().node;
  if (master != old_master) {
    next.master_addr = MasterAddress(ctx.state, master);
    next.master_port = FreeRendezvousPort(ctx.state, next.master_addr);
    if (next.master_port == 0) {
      framework_->Release(added);
      return requeue(fmt::format("node {} has all {} rendezvous ports in use", master, kRendezvousPorts));
    }
  }

  // Metering: the survivors' running segments end here; the next starts with their new epoch.
  for (int rank : kept) {
    if (absl::Status st = MeterMember(ctx, live, rank); !st.ok()) {
      framework_->Release(added);
      return st;
    }
  }
  store::JobRecord record = live.record;
  record.state = api::JobState::kScheduled;
  record.epoch = live.record.epoch + 1;
  record.restarts = live.record.restarts + 1;
  ++record.retries[std::string(api::RetryCauseName(api::RetryCause::kNodeFailure))];
  record.allocation_json = ToJson(next).dump();
  record.reason = fmt::format(
      "re-formed (elastic): {}; {} kept their GPUs; {}", change,
      kept.size() == 1 ? fmt::format("rank {}", kept.front()) : fmt::format("ranks {}", fmt::join(kept, ", ")),
      live.reform_reason);
  record.updated_at = ctx.clock.Now();
  const api::JobState from = live.record.state;
  absl::StatusOr<store::JobRecord> stored = ctx.store.UpdateJob(record);
  if (!stored.ok()) {
    framework_->Release(added);
    return stored.status();
  }
  spdlog::info("control plane: {} {}", job_id, stored->reason);

  if (master != old_master) {
    ctx.state.ports[live.allocation.master_addr].erase(live.allocation.master_port);
    ctx.state.ports[next.master_addr].insert(next.master_port);
  }
  live.record = *std::move(stored);
  live.allocation = next;
  live.members.assign(next.members.size(), MemberStatus{});
  live.reform = false;
  live.reform_reason.clear();
  live.platform_loss.clear();
  live.drain_deadline.reset();
  live.placed_at = now;  // max_duration: each retry has the whole of it
  live.busy_at.reset();
  live.checkpoint_reported = false;
  live.stop_grace.reset();
  SetLayout(live);
  ctx.log_grants.Place(job_id, live.record.tenant, live.record.epoch, MemberNodes(next));
  // The scheduler's pool: the survivors' placements stay; the replacements join them. A smaller gang holds
  // less: its tenant's holding is counted again.
  std::vector<sched::Placement>& bound = bound_[job_id];
  bound.insert(bound.end(), added.begin(), added.end());
  queue_.ledger().Release(job_id, now);
  BindLiveHoldings(ctx, now);
  if (auto r = ctx.state.recovery.find(job_id); r != ctx.state.recovery.end()) {
    r->second.stopped_at = now;  // every survivor has exited (the lost members stopped with their node)
    r->second.placed_at = now;
  }
  CountTransition(ctx, job_id, from, api::JobState::kScheduled);
  cluster_changed_ = true;
  ctx.logs.Wake(job_id);
  ctx.state.dirty = true;
  return absl::OkStatus();
}

}  // namespace gpugeek::controlplane
