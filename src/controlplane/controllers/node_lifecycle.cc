#include "controlplane/controllers/node_lifecycle.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/job_state.h"
#include "common/absl_fmt.h"
#include "controlplane/controllers/metering.h"
#include "controlplane/controllers/transitions.h"
#include "controlplane/metrics.h"

namespace gpugeek::controlplane {

void NodeLifecycleController::Reconcile(ControllerContext& ctx, MonoTime now) {
  const std::map<std::string, MonoTime> renewals = ctx.leases.Renewals();
  for (auto& [name, node] : ctx.state.nodes) {
    if (node.blocked_until && now >= *node.blocked_until) {
      spdlog::info("control plane: node {} is no longer blocked", name);
      node.blocked_until.reset();
      ctx.state.CapacityChanged();
    }
    auto it = renewals.find(name);
    if (it == renewals.end()) continue;  // no lease yet (loaded from the store; granted at load)
    const Duration silent = now - it->second;
    if (silent <= ctx.options.lease) {
      if (node.suspect || node.down) {
        spdlog::info("control plane: node {} is back", name);
        node.suspect = false;
        node.down = false;
        ctx.state.CapacityChanged();
      }
      continue;
    }
    if (!node.suspect) {
      node.suspect = true;
      ctx.state.CapacityChanged();  // no new placements there
      spdlog::warn("control plane: node {} is suspect (no heartbeat for {} ms)", name,
                   std::chrono::duration_cast<std::chrono::milliseconds>(silent).count());
    }
    if (!node.down && silent > ctx.options.node_down_after()) Lost(ctx, name, silent);
  }
}

void NodeLifecycleController::Lost(ControllerContext& ctx, const std::string& node, Duration silent) {
  NodeState& state = ctx.state.nodes[node];
  state.down = true;
  ctx.state.CapacityChanged();
  spdlog::warn("control plane: node {} is down (no heartbeat for {} ms; its members were fenced)", node,
               std::chrono::duration_cast<std::chrono::milliseconds>(silent).count());
  const MonoTime now = ctx.clock.Monotonic();
  state.losses.push_back(now);
  while (!state.losses.empty() && now - state.losses.front() > ctx.options.block_window) state.losses.pop_front();
  if (ctx.options.block_after_losses > 0 && static_cast<int>(state.losses.size()) >= ctx.options.block_after_losses) {
    state.blocked_until = now + ctx.options.block_for;
    state.losses.clear();
    spdlog::warn("control plane: node {} was lost {} times within {} min: blocked from placements for {} min", node,
                 ctx.options.block_after_losses,
                 std::chrono::duration_cast<std::chrono::minutes>(ctx.options.block_window).count(),
                 std::chrono::duration_cast<std::chrono::minutes>(ctx.options.block_for).count());
  }
  if (ctx.metrics != nullptr) ctx.metrics->NodeLost();
  for (const std::string& id : ctx.state.JobsOn(node)) {
    LiveJob& live = ctx.state.live.at(id);
    // The platform's failure: every member's run since the last checkpoint is refunded as it ends.
    if (!api::IsTerminal(live.record.state) && live.platform_loss.empty()) {
      live.platform_loss = fmt::format("{} lost", node);
    }
    // Its members here are stopped by now (the fencing timeline): presume so.
    for (const AllocationMember& m : live.allocation.members) {
      MemberStatus& status = live.members[m.rank];
      if (m.node != node || status.exited) continue;
      if (absl::Status st = MeterMember(ctx, live, m.rank); !st.ok()) {
        spdlog::error("control plane: metering job {} rank {} on lost node {}: {}", id, m.rank, node, st);
      }
      status.exited = true;
      status.failed = true;
      status.detail = fmt::format("node {} lost", node);
    }
    // It failed when its node fell silent, not when that was noticed.
    absl::Status st = api::IsTerminal(live.record.state)
                          ? ReleaseIfDone(ctx, id)
                          : NodeFailure(ctx, id, fmt::format("node {} stopped heartbeating", node), now - silent);
    if (!st.ok()) spdlog::error("control plane: job {} on lost node {}: {}", id, node, st);
  }
}

}  // namespace gpugeek::controlplane
