#pragma once
// A quote: which offers (offers.h) a job would take and what it would cost, before it is submitted
// (`gpugeek submit --dry-run`, POST /v1/jobs with "dry_run": true).
//
// The job's scheduling requests (its capacity preference in order, then its shapes) are matched against
// the pool's offers the way the scheduler's filters match nodes: GPU model, capacity type, region, the job's
// max_price. Each matching offer is a line with what an hour of the job's GPUs costs there, whether it fits now
// (enough GPUs free on enough nodes) and, when there is an estimate, what the whole job would cost: the
// planner's time for that GPU model (a job with `model` + `task`), else `max_duration` as an upper bound.
// The scheduler chooses among the lines of the first capacity type that fits by its placement policy, not
// by price, so the cost of a run is one of these lines'.
//
// Pure: computed from one published snapshot.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "controlplane/offers.h"
#include "controlplane/state/snapshot.h"
#include "sched/request.h"
#include "workload/planner.h"

namespace gpugeek::controlplane {

struct QuoteLine {
  Offer offer;
  int members = 1;                     // nodes of the gang
  int gpus_per_member = 0;             // GPUs on each
  int64_t gpu_milli = 1000;            // per GPU (< 1000: a share of one)
  bool fits_now = false;               // enough GPUs free now on enough of the offer's nodes
  int64_t price_per_hour_micros = 0;   // every GPU of the job for an hour at the offer's price
  std::optional<int64_t> est_seconds;  // the planner's time for this GPU model, else max_duration
  std::string estimate;                // "planner" | "max_duration" | "" (none)
  std::optional<int64_t> est_cost_micros;
  bool operator==(const QuoteLine&) const = default;
};

// The lines, in the job's capacity preference order, then cheapest first; an offer appears once.
std::vector<QuoteLine> QuoteFor(const std::vector<sched::Request>& requests, const workload::ResourceRequest* plan,
                                std::optional<Duration> max_duration, const Snapshot& snap, const std::string& tenant);

}  // namespace gpugeek::controlplane
