#pragma once
// Metering: each member's GPU time, per second, from its first "running" report to its exit, at its
// node's price and capacity type (usage.h), charged to its tenant as it ends (billing.h), with what its
// GPUs sat idle while allocated and a refund of what a platform failure made it lose.
//
// Segments. A member's segment opens at its first running report (StartMetering: kept with the job as
// usage.h OpenSegment, so a restarted server resumes it) and ends at its exit, its node's loss, or its
// presumed stop at the drain deadline (MeterMember): added to the job's usage and charged in the pass's
// one store transaction, once ("usage/JOB/eEPOCH/rRANK"). A node whose provider sells a minimum rental
// (api::Registration::min_rental_s) bills a shorter segment as that long, in the usage and the charge.
//
// Idle-but-allocated time. Each pass (AccrueIdle) a metering member whose GPUs all read idle in its node's
// latest heartbeat (utilisation below api::kIdleUtilizationPercent) adds the time since the pass before to
// its segment's idle time; a GPU without a reading is busy (no evidence, no idle). The resolution is the
// pass interval; the idle time of a segment open across a server restart counts from the restart.
//
// Refunds. A placement the platform failed (LiveJob::platform_loss: a node of it lost, or reclaimed by its
// provider) loses the work since the job's last checkpoint: each of its member segments that ends from then
// on is refunded its run since then (store::JobRecord::checkpoint_at, when it lies inside the segment; else
// the whole segment), which the next placement redoes, and any minimum rental it did not get to use. The
// refund reverses that part of the charge in proportion (ledger::RefundFor, "refund/JOB/eEPOCH/rRANK": the
// tenant's accounts get back what they paid, the provider and the platform give back their shares). A
// reclaimed workload that checkpoints at its SIGTERM loses, and gets back, about nothing; one lost with its
// node, everything since its last checkpoint.
//
// Time: intervals on the monotonic clock, the open segment's start and checkpoints on the wall clock.

#include <map>
#include <string>

#include "absl/status/status.h"
#include "controlplane/controllers/context.h"

namespace gpugeek::controlplane {

// Starts the metering of member `rank` of `live` now: running_since, and its open segment (usage.h
// OpenSegment) stored with the job, so a restarted server resumes it (ResumeOpenSegments).
absl::Status StartMetering(ControllerContext& ctx, LiveJob& live, int rank);
// After a load from the store: the members whose segments of the job's current epoch are open run
// (running, running_since carried from the wall clock to the monotonic one).
void ResumeOpenSegments(LiveJob& live, MonoTime now, TimePoint wall);

// Ends the metering of member `rank` of `live`: its segment from running_since to `ended_ago` before now
// (the agent's api::WorkloadReport::ended_ms_ago; clamped to the segment), at its node's price and capacity
// type, with its idle time, is added to the job's usage and stored, and charged. A segment of a placement
// the platform failed (LiveJob::platform_loss) is refunded its work since the last checkpoint. No-op for a
// member not metering. Errors: the store's.
// `split`: the segment ends only because its price changes (a reservation's boundary): no minimum rental.
absl::Status MeterMember(ControllerContext& ctx, LiveJob& live, int rank, Duration ended_ago = Duration::zero(),
                         bool split = false);

// The terms member `rank` of `live` runs under: those its open segment began with, or, for a segment
// stored without them, its node's now. What metering charges, the budget controller estimates and job views
// show.
OpenSegment SegmentTerms(const State& state, const LiveJob& live, int rank);

// The provider a node's sales are paid to: its provider label (set by the server from its join token), ""
// for none or one that is not a name (the platform's own node).
std::string ProviderOf(const api::Registration& r);

// Whether every GPU of `member` reads idle (utilisation below api::kIdleUtilizationPercent) in its
// node's latest heartbeat; false for a member without GPUs, or a GPU without a reading.
bool MemberIdle(const ControllerContext& ctx, const AllocationMember& member);
// Adds to each metering member of `live` whose GPUs all read idle now the time since the pass before.
void AccrueIdle(ControllerContext& ctx, LiveJob& live, MonoTime now);

// The on-demand reference prices (usage.h), by GPU model: the highest price of the pool's priced on-demand
// nodes with that model. A model absent has none (the node's own price stands in).
std::map<std::string, int64_t> OnDemandPrices(const State& state);

}  // namespace gpugeek::controlplane
