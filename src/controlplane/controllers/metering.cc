#include "controlplane/controllers/metering.h"

#include <algorithm>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/job_spec.h"
#include "api/names.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/billing.h"
#include "controlplane/secrets.h"
#include "controlplane/usage.h"
#include "ledger/wallet.h"

namespace gpugeek::controlplane {
namespace {

int64_t ToMillis(Duration d) {
  return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

// Refunds the part of `charge` (a segment that ran `millis` until `ended`, wall clock, billed for
// `billed_millis` >= millis: the node's minimum rental, and ended by the platform's doing) since the job's
// last checkpoint, and the minimum rental it did not get to use (metering.h). Logged, never failing the pass:
// a refund that does not post is posted by no one else (the operator can grant it by hand; the log names
// the amount).
void RefundLostWork(ControllerContext& ctx, const LiveJob& live, const ledger::Transaction& charge, int64_t millis,
                    int64_t billed_millis, TimePoint ended) {
  const TimePoint now = ctx.clock.Now();
  const TimePoint began = ended - std::chrono::milliseconds(millis);
  int64_t lost = millis;
  std::string since = "its start";
  if (live.record.checkpoint_step && live.record.checkpoint_at > began) {
    lost = ToMillis(ended - live.record.checkpoint_at);
    since = fmt::format("checkpoint step {}", *live.record.checkpoint_step);
  }
  std::string memo = fmt::format("{}: the {} s run since {}", live.platform_loss, lost / 1000, since);
  if (billed_millis > millis) {
    memo += fmt::format(" and {} s of its minimum rental unused", (billed_millis - millis) / 1000);
    lost += billed_millis - millis;
  }
  std::optional<ledger::Transaction> refund = ledger::RefundFor(charge, lost, billed_millis, now, memo);
  if (!refund) return;
  if (absl::Status st = ctx.billing->Post(*refund).status(); !st.ok()) {
    spdlog::error("billing: refunding {} of {} ({}): {}", ledger::TenantChange(*refund).ToString(), charge.id, memo,
                  st);
    return;
  }
  spdlog::info("billing: refunded {} to {} for {} ({})", ledger::TenantChange(*refund).ToString(), charge.tenant,
               charge.job, memo);
}

// A segment of member `rank` of a job of `tenant` (its ledger name) beginning at `start` on `node`, with the
// terms the node sells at now: its price, minimum rental, capacity type and provider (its label, set from its
// join token; one that is not a name makes no ledger account: the platform's own). On a node a reservation of
// `tenant` holds: nothing more to pay (reservations.h), capacity type "reserved".
OpenSegment NodeTerms(const State& state, const std::string& node, const std::string& tenant, int64_t epoch, int rank,
                      TimePoint start) {
  OpenSegment s{.epoch = epoch,
                .rank = rank,
                .start_ms = std::chrono::duration_cast<std::chrono::milliseconds>(start.time_since_epoch()).count(),
                .terms = true,
                .capacity_type = "on-demand"};
  auto it = state.nodes.find(node);
  if (it == state.nodes.end()) return s;
  const api::Registration& r = it->second.registration;
  s.price = r.price_micros_per_gpu_hour;
  s.min_rental_s = r.min_rental_s;
  s.capacity_type = r.capacity_type;
  s.provider = ProviderOf(r);
  if (auto hold = state.reserved.find(node); hold != state.reserved.end() && hold->second.tenant == tenant) {
    s.price = 0;
    s.min_rental_s = 0;
    s.capacity_type = "reserved";
    s.reservation = hold->second.id;
  }
  return s;
}

}  // namespace

std::string ProviderOf(const api::Registration& r) {
  auto p = r.labels.find(std::string(api::kProviderLabel));
  if (p == r.labels.end() || !api::ValidateName("provider", p->second, api::NameKind::kJob).ok()) return "";
  return p->second;
}

OpenSegment SegmentTerms(const State& state, const LiveJob& live, int rank) {
  const MemberStatus& m = live.members[static_cast<size_t>(rank)];
  if (m.segment.terms) return m.segment;
  return NodeTerms(state, live.allocation.members[static_cast<size_t>(rank)].node, SecretTenant(live.record.tenant),
                   live.record.epoch, rank, TimePoint{});
}

bool MemberIdle(const ControllerContext& ctx, const AllocationMember& member) {
  auto node = ctx.state.nodes.find(member.node);
  if (node == ctx.state.nodes.end() || member.gpu_uuids.empty()) return false;
  const std::optional<Lease> lease = ctx.leases.Get(member.node);
  if (!lease.has_value()) return false;
  const std::vector<hw::GpuDevice>& gpus = node->second.registration.inventory.gpus;
  for (const std::string& uuid : member.gpu_uuids) {
    auto g = std::find_if(gpus.begin(), gpus.end(), [&](const hw::GpuDevice& d) { return d.uuid == uuid; });
    const size_t i = static_cast<size_t>(g - gpus.begin());
    if (g == gpus.end() || i >= lease->samples.size()) return false;
    const std::optional<uint32_t>& percent = lease->samples[i].telemetry.utilization_percent;
    if (!percent.has_value() || *percent >= api::kIdleUtilizationPercent) return false;
  }
  return true;
}

void AccrueIdle(ControllerContext& ctx, LiveJob& live, MonoTime now) {
  for (const AllocationMember& member : live.allocation.members) {
    MemberStatus& m = live.members[static_cast<size_t>(member.rank)];
    if (!m.running_since || m.exited) continue;
    if (m.idle_seen && MemberIdle(ctx, member)) m.idle += now - std::max(*m.idle_seen, *m.running_since);
    m.idle_seen = now;
  }
}

std::map<std::string, int64_t> OnDemandPrices(const State& state) {
  std::map<std::string, int64_t> best;
  for (const auto& [name, node] : state.nodes) {
    const api::Registration& r = node.registration;
    if (r.capacity_type != "on-demand" || r.price_micros_per_gpu_hour <= 0) continue;
    for (const hw::GpuDevice& g : r.inventory.gpus) {
      int64_t& price = best[g.model_id];
      price = std::max(price, r.price_micros_per_gpu_hour);
    }
  }
  return best;
}

absl::Status MeterMember(ControllerContext& ctx, LiveJob& live, int rank, Duration ended_ago, bool split) {
  MemberStatus& m = live.members[static_cast<size_t>(rank)];
  if (!m.running_since) return absl::OkStatus();
  const Duration until_now = ctx.clock.Monotonic() - *m.running_since;
  const Duration elapsed = until_now - std::clamp(ended_ago, Duration::zero(), std::max(until_now, Duration::zero()));
  const Duration idle = std::min(m.idle, elapsed);
  m.running_since.reset();
  m.idle = Duration::zero();
  m.idle_seen.reset();
  const AllocationMember& member = live.allocation.members[static_cast<size_t>(rank)];
  // The terms the segment began under (its node may have registered other terms since).
  const OpenSegment terms = SegmentTerms(ctx.state, live, rank);
  m.segment = OpenSegment{};
  const std::string& capacity = terms.capacity_type;
  const std::string& provider = terms.provider;
  const int64_t price = terms.price;
  const Duration billed = split ? elapsed : std::max<Duration>(elapsed, std::chrono::seconds(terms.min_rental_s));
  absl::StatusOr<Usage> usage = UsageFromText(live.record.usage_json);
  if (!usage.ok()) {
    spdlog::warn("control plane: job {}: {}; metering starts over", live.record.id, usage.status());
    usage = Usage{};
  }
  const int64_t milli = static_cast<int64_t>(member.gpu_uuids.size()) * member.gpu_milli;
  const std::map<std::string, int64_t> on_demand = OnDemandPrices(ctx.state);
  auto reference = on_demand.find(live.allocation.gpu_model);
  Accrue(*usage, capacity, live.allocation.gpu_model, milli, billed, price,
         reference != on_demand.end() ? reference->second : price, idle);
  std::vector<OpenSegment> open = OpenSegmentsFromText(live.record.usage_json).value_or(std::vector<OpenSegment>{});
  std::erase_if(open, [rank](const OpenSegment& o) { return o.rank == rank; });
  store::JobRecord next = live.record;
  next.usage_json = UsageToText(*usage, open);
  ASSIGN_OR_RETURN(live.record, ctx.store.UpdateJob(next));
  // Reserved capacity used (reservations.h), with the usage.
  if (ctx.billing != nullptr && !terms.reservation.empty()) {
    if (absl::Status st = ctx.billing->reservations().AddUsed(terms.reservation, milli * ToMillis(elapsed) / 1000);
        !st.ok()) {
      spdlog::error("billing: counting {}'s use of reservation {}: {}", live.record.id, terms.reservation, st);
    }
  }
  // The charge commits with the usage (the pass's one transaction, billing.h).
  if (ctx.billing != nullptr && price > 0) {
    const ledger::ChargeInput in{
        .id = fmt::format("usage/{}/e{}/r{}", live.record.id, live.record.epoch, rank),
        .tenant = SecretTenant(live.record.tenant),
        .provider = provider,
        .job = live.record.id,
        .user = live.record.submitted_by,
        .milli = milli,
        .millis = ToMillis(billed),
        .idle_millis = ToMillis(idle),
        .price_per_gpu_hour = ledger::Money::Micros(price),
        .on_demand_per_gpu_hour = ledger::Money::Micros(reference != on_demand.end() ? reference->second : price),
        .gpu_model = live.allocation.gpu_model,
        .capacity_type = capacity,
        .memo = fmt::format("rank {} on {}", rank, member.node)};
    // A failed charge must not hold the job's state back: it is logged (the store failing here fails the
    // pass's commit, and the whole pass is redone from the store).
    absl::StatusOr<std::optional<ledger::Transaction>> charge = ctx.billing->Charge(in);
    if (!charge.ok()) {
      spdlog::error("billing: charging {} (usage stored without its charge): {}", in.id, charge.status());
    } else if (charge->has_value() && !live.platform_loss.empty()) {
      RefundLostWork(ctx, live, **charge, ToMillis(elapsed), in.millis, ctx.clock.Now() - (until_now - elapsed));
    }
  }
  return absl::OkStatus();
}

absl::Status StartMetering(ControllerContext& ctx, LiveJob& live, int rank) {
  MemberStatus& m = live.members[static_cast<size_t>(rank)];
  m.running_since = ctx.clock.Monotonic();
  std::vector<OpenSegment> open = OpenSegmentsFromText(live.record.usage_json).value_or(std::vector<OpenSegment>{});
  std::erase_if(open, [rank](const OpenSegment& o) { return o.rank == rank; });
  m.segment = NodeTerms(ctx.state, live.allocation.members[static_cast<size_t>(rank)].node,
                        SecretTenant(live.record.tenant), live.record.epoch, rank, ctx.clock.Now());
  open.push_back(m.segment);
  store::JobRecord next = live.record;
  next.usage_json = UsageToText(UsageFromText(live.record.usage_json).value_or(Usage{}), open);
  ASSIGN_OR_RETURN(live.record, ctx.store.UpdateJob(next));
  return absl::OkStatus();
}

void ResumeOpenSegments(LiveJob& live, MonoTime now, TimePoint wall) {
  absl::StatusOr<std::vector<OpenSegment>> open = OpenSegmentsFromText(live.record.usage_json);
  if (!open.ok()) return;
  for (const OpenSegment& o : *open) {
    if (o.epoch != live.record.epoch || o.rank < 0 || o.rank >= static_cast<int>(live.members.size())) continue;
    MemberStatus& m = live.members[static_cast<size_t>(o.rank)];
    const TimePoint start{std::chrono::milliseconds(o.start_ms)};
    m.running = true;
    m.running_since = now - std::max(Duration::zero(), wall - start);
    m.segment = o;
  }
}

}  // namespace gpugeek::controlplane
