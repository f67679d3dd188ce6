#include "controlplane/controllers/reservation.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/absl_fmt.h"
#include "controlplane/billing.h"
#include "controlplane/controllers/metering.h"
#include "controlplane/reservations.h"
#include "controlplane/secrets.h"
#include "ledger/wallet.h"
#include "sched/filters.h"

namespace gpugeek::controlplane {
namespace {

int64_t Millis(Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

// GPUs of `model` on `node` (its scheduler nodes' of that model).
int GpusOf(const NodeState& node, const std::string& model) {
  int gpus = 0;
  for (const SchedNode& sn : node.sched_nodes) {
    if (sn.spec.gpu_model == model) gpus += sn.spec.gpu_count;
  }
  return gpus;
}

// Whether a reservation may keep (or take) `node`: in the pool, up and not cordoned.
bool InPool(const NodeState& node) { return !node.down && !node.cordoned; }

// Charges each hour of `r`'s term that closed by `wall` and was not charged yet, for its nodes up then.
void ChargeClosedHours(ControllerContext& ctx, store::ReservationRecord& r, TimePoint wall,
                       const std::map<std::string, int64_t>& on_demand) {
  while (true) {
    const TimePoint hour_start = r.start + std::chrono::hours(r.charged_hours);
    if (hour_start >= r.end) return;
    const TimePoint hour_end = std::min(hour_start + std::chrono::hours(1), r.end);
    if (hour_end > wall) return;
    const int64_t millis = Millis(hour_end - hour_start);
    auto reference = on_demand.find(r.gpu_model);
    int64_t held = 0;  // GPUs charged this hour so far: never more than reserved
    for (const std::string& name : r.nodes) {
      auto node = ctx.state.nodes.find(name);
      // A node silent at the close (suspect or down) is not charged for the hour.
      if (node == ctx.state.nodes.end() || node->second.down || node->second.suspect) continue;
      const int gpus = static_cast<int>(std::min<int64_t>(GpusOf(node->second, r.gpu_model), r.gpus - held));
      if (gpus <= 0) continue;
      held += gpus;
      const ledger::ChargeInput in{
          .id = fmt::format("reservation/{}/h{}/{}", r.id, r.charged_hours, name),
          .tenant = r.tenant,
          .provider = ProviderOf(node->second.registration),
          .job = r.id,
          .milli = int64_t{gpus} * 1000,
          .millis = millis,
          .price_per_gpu_hour = ledger::Money::Micros(r.price_micros),
          .on_demand_per_gpu_hour =
              ledger::Money::Micros(reference != on_demand.end() ? reference->second : r.price_micros),
          .gpu_model = r.gpu_model,
          .capacity_type = "reserved",
          .at = hour_end,
          .memo = fmt::format("reservation {} hour {}: {} GPUs on {}", r.id, r.charged_hours + 1, gpus, name)};
      // Once per id: a pass that charged the hour but failed to store its progress is not charged twice.
      if (absl::Status st = ctx.billing->Charge(in, /*once=*/true).status(); !st.ok()) {
        spdlog::error("billing: charging {} (retried next pass): {}", in.id, st);
        return;
      }
    }
    r.held_gpu_milli_seconds += held * millis;
    ++r.charged_hours;
  }
}

// Keeps `r`'s nodes holding its GPUs: drops those gone from the pool, adds free ones (on-demand, not in
// `taken`) while they fit what is missing. `taken`: the nodes reservations hold; updated.
void Hold(ControllerContext& ctx, store::ReservationRecord& r, std::set<std::string>& taken) {
  int held = 0;
  std::erase_if(r.nodes, [&](const std::string& name) {
    auto node = ctx.state.nodes.find(name);
    const int gpus = node == ctx.state.nodes.end() ? 0 : GpusOf(node->second, r.gpu_model);
    if (gpus == 0 || !InPool(node->second)) {
      spdlog::warn("reservation {}: {} left the pool; no longer held", r.id, name);
      taken.erase(name);
      return true;
    }
    held += gpus;
    return false;
  });
  if (held >= r.gpus) return;
  // GPUs other tenants' work holds on each node: the least busy are taken first.
  std::map<std::string, int> busy;
  for (const auto& [id, live] : ctx.state.live) {
    if (SecretTenant(live.record.tenant) == r.tenant) continue;
    for (const AllocationMember& m : live.allocation.members) busy[m.node] += static_cast<int>(m.gpus.size());
  }
  using Candidate = std::tuple<int, int, std::string>;  // (busy, -gpus, name)
  std::vector<Candidate> candidates;
  for (const auto& [name, node] : ctx.state.nodes) {
    const int gpus = GpusOf(node, r.gpu_model);
    if (gpus == 0 || taken.contains(name) || !InPool(node) || node.suspect || node.blocked_until ||
        node.registration.capacity_type == "spot" || !sched::ReservedTo(node.registration.labels, r.tenant)) {
      continue;
    }
    candidates.emplace_back(busy[name], -gpus, name);
  }
  std::sort(candidates.begin(), candidates.end());
  for (const auto& [used, minus_gpus, name] : candidates) {
    if (held - minus_gpus > r.gpus) continue;  // a node is held whole: only one that fits what is missing
    r.nodes.push_back(name);
    taken.insert(name);
    held -= minus_gpus;
    spdlog::info("reservation {}: holding {} ({} GPUs) for {}", r.id, name, -minus_gpus, r.tenant);
    if (held == r.gpus) break;
  }
}

// Ends and begins again every running member's segment whose reservation pricing no longer matches its
// node's hold; returns the open segments' milli-GPU-seconds so far by reservation.
std::map<std::string, int64_t> SplitSegments(ControllerContext& ctx, MonoTime now, TimePoint wall) {
  std::map<std::string, int64_t> open;
  for (auto& [id, live] : ctx.state.live) {
    const std::string tenant = SecretTenant(live.record.tenant);
    for (const AllocationMember& member : live.allocation.members) {
      MemberStatus& m = live.members[static_cast<size_t>(member.rank)];
      if (!m.running_since || m.exited) continue;
      auto hold = ctx.state.reserved.find(member.node);
      const std::string expected =
          hold != ctx.state.reserved.end() && hold->second.tenant == tenant ? hold->second.id : "";
      if (m.segment.terms && m.segment.reservation != expected) {
        spdlog::info(
            "control plane: {} rank {} on {}: {}; its segment ends here", id, member.rank, member.node,
            expected.empty() ? "the reservation " + m.segment.reservation + " ended" : "now reserved by " + expected);
        // Ended at the boundary: the term's end when that passed (a pass runs a little after it); a provider's
        // minimum rental is not billed for a split.
        Duration ended_ago = Duration::zero();
        if (expected.empty()) {
          if (std::optional<store::ReservationRecord> was = ctx.billing->reservations().Find(m.segment.reservation);
              was && was->end <= wall) {
            ended_ago = wall - was->end;
          }
        }
        if (absl::Status st = MeterMember(ctx, live, member.rank, ended_ago, /*split=*/true); !st.ok()) {
          spdlog::error("control plane: metering {} rank {}: {}", id, member.rank, st);
          continue;
        }
        if (absl::Status st = StartMetering(ctx, live, member.rank); !st.ok()) {
          spdlog::error("control plane: metering {} rank {}: {}", id, member.rank, st);
          continue;
        }
        ctx.state.dirty = true;
      }
      if (!m.running_since || m.segment.reservation.empty()) continue;
      const int64_t milli = static_cast<int64_t>(member.gpu_uuids.size()) * member.gpu_milli;
      open[m.segment.reservation] += milli * std::max<int64_t>(0, Millis(now - *m.running_since)) / 1000;
    }
  }
  return open;
}

}  // namespace

std::map<std::string, State::ReservationHold> HeldNodes(const Reservations& reservations, TimePoint wall) {
  std::map<std::string, State::ReservationHold> holds;
  for (const store::ReservationRecord& r : reservations.List("")) {
    if (wall < r.start || wall >= r.end) continue;
    for (const std::string& node : r.nodes) holds[node] = {.id = r.id, .tenant = r.tenant};
  }
  return holds;
}

void ReservationController::Reconcile(ControllerContext& ctx, MonoTime now) {
  if (ctx.billing == nullptr) return;
  Reservations& book = ctx.billing->reservations();
  const TimePoint wall = ctx.clock.Now();
  const std::map<std::string, int64_t> on_demand = OnDemandPrices(ctx.state);
  std::vector<store::ReservationRecord> all = book.List("");
  std::set<std::string> taken;
  for (const store::ReservationRecord& r : all) {
    if (wall >= r.start && wall < r.end) taken.insert(r.nodes.begin(), r.nodes.end());
  }
  std::map<std::string, State::ReservationHold> holds;
  for (const store::ReservationRecord& r : all) {
    // Ended, charged to its end and given back: nothing left to do.
    if (wall >= r.end && r.nodes.empty() && r.start + std::chrono::hours(r.charged_hours) >= r.end) continue;
    store::ReservationRecord next = r;
    ChargeClosedHours(ctx, next, wall, on_demand);
    if (wall >= r.start && wall < r.end) {
      Hold(ctx, next, taken);
    } else {
      next.nodes.clear();
    }
    if (next.nodes != r.nodes || next.charged_hours != r.charged_hours) {
      if (absl::Status st = book.SetProgress(next); !st.ok()) {
        spdlog::error("reservation {}: storing its progress: {}", r.id, st);
        next.nodes = r.nodes;
      }
    }
    for (const std::string& node : next.nodes) holds[node] = {.id = r.id, .tenant = r.tenant};
  }
  if (holds != ctx.state.reserved) {
    ctx.state.reserved = std::move(holds);
    ctx.state.CapacityChanged();
  }
  book.SetOpenUsed(SplitSegments(ctx, now, wall));
}

}  // namespace gpugeek::controlplane
