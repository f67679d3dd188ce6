#pragma once
// Usage metering: what a job's members used, per second, by capacity type and GPU model, with what it
// cost at the nodes' prices and what the same GPU time costs on-demand (so what spot saved).
//
// A member meters from its first "running" report to its exit (reported, or presumed at the drain
// deadline) in milliseconds; each such segment is added to the job's lines when it ends and is stored
// with the job (store::JobRecord::usage_json); a segment still open is added to the view up to now. A
// node's price is its agent's --gpu-hour-price (api::Registration::price_micros_per_gpu_hour); the
// on-demand reference price of a model is the highest price of the pool's on-demand nodes of that model
// (the node's own price when the pool has none, so no saving is claimed without a reference).
//
// Units: milli-GPU x seconds (1000 = one whole GPU for one second), integer micro-units of money.
// cost = milli x milliseconds x price / (1000 x 3,600,000), rounded to the nearest micro-unit per segment.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace gpugeek::controlplane {

struct UsageLine {
  std::string capacity_type;      // "on-demand" | "spot" | "reserved"
  std::string gpu_model;          // catalog id
  int64_t gpu_milli_seconds = 0;  // milli-GPU x seconds
  int64_t cost_micros = 0;        // at the nodes' prices
  int64_t on_demand_micros = 0;   // the same GPU time at the on-demand reference price
  // Of gpu_milli_seconds, the time its GPUs sat idle while allocated (controllers/metering.h).
  int64_t idle_gpu_milli_seconds = 0;
  bool operator==(const UsageLine&) const = default;
};

// Lines sorted by (capacity_type, gpu_model), one per pair.
using Usage = std::vector<UsageLine>;

// A member's segment still open, kept with the job so that metering survives a server restart or a
// failed pass: it began at `start_ms` (wall clock, ms since the Unix epoch) in placement `epoch`. A
// restarted server resumes it from then (the workload ran on while the server was away), so what is
// metered and charged is the whole segment, once. It keeps the terms its node sold it at when it began
// (price, minimum rental, capacity type, provider): a node registering again with other terms changes what
// later segments cost, never one already running. `terms` false: a segment stored without them (older
// servers), charged at the node's terms when it ends.
struct OpenSegment {
  int64_t epoch = 0;
  int rank = 0;
  int64_t start_ms = 0;
  bool terms = false;
  int64_t price = 0;         // micro-units per GPU-hour
  int64_t min_rental_s = 0;  // seconds
  std::string capacity_type;
  std::string provider;  // "" = the platform's own node
  // The reservation (reservations.h) whose held node it runs on, for its tenant: price 0, capacity type
  // "reserved"; "" = none.
  std::string reservation;
  bool operator==(const OpenSegment&) const = default;
};

// A member's segment: `milli` milli-GPU (its GPUs x milli per GPU) for `elapsed`, of which `idle` with
// its GPUs idle, at `price` and `on_demand_price` micro-units per GPU-hour. Negative durations count as 0;
// idle is at most elapsed.
void Accrue(Usage& usage, const std::string& capacity_type, const std::string& gpu_model, int64_t milli,
            Duration elapsed, int64_t price, int64_t on_demand_price, Duration idle = Duration::zero());

// The stored form: compact JSON, "" for none: the lines as an array (each [capacity_type, gpu_model,
// gpu_milli_seconds, cost_micros, on_demand_micros, idle_gpu_milli_seconds?]), or {"lines": [...], "open": [[epoch,
// rank, start_ms, price?, min_rental_s?, capacity_type?, provider?, reservation?], ...]} while segments are open.
// UsageFromText (the lines) and OpenSegmentsFromText: DataLoss for a malformed value.
std::string UsageToText(const Usage& usage, const std::vector<OpenSegment>& open = {});
absl::StatusOr<Usage> UsageFromText(const std::string& text);
absl::StatusOr<std::vector<OpenSegment>> OpenSegmentsFromText(const std::string& text);

// {"lines": [{capacity_type, gpu_model, gpu_hours, idle_gpu_hours, cost_micros, on_demand_micros}...],
// "gpu_hours", "idle_gpu_hours", "cost_micros", "on_demand_micros", "saving_micros"} (gpu_hours: milli-GPU-seconds /
// 3,600,000).
nlohmann::json UsageToJson(const Usage& usage);

}  // namespace gpugeek::controlplane
