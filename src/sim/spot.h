#pragma once
// The spot experiment: what a capacity policy costs and loses when spot nodes are reclaimed.
//
// A job mix from Microsoft's Philly trace (ATC'19; arrival, duration, GPUs) runs on a pool shaped like
// Alibaba's spot-GPU cluster (ASPLOS'26 GFS node list: A100, A800, H800 x 8 and A10 x 1 nodes), a part
// of whose nodes are spot. Each spot node is reclaimed as a Poisson process at a monthly interruption
// rate (AWS Spot Instance Advisor's buckets: < 5 %, 5-10 %, 10-15 %, 15-20 %, > 20 % of instances
// interrupted per month) and comes back after an outage. Jobs follow the checkpoint contract
// (docs/checkpointing.md): a periodic checkpoint every `checkpoint_interval` of progress and, when the
// reclaim notice covers a checkpoint write, a just-in-time one on the notice; a resumed run first
// spends `restart_overhead` loading its checkpoint. Each job runs under one capacity policy:
//   on-demand   capacity: [on-demand]        only on-demand nodes
//   spot-first  capacity: [spot, on-demand]  spot when a spot node fits, else on-demand
//   spot-only   capacity: [spot]             only spot nodes
// The placements come from the very scheduler the control plane runs (sim::Simulator, sched::Framework
// with the control plane's default policy); money is integer micro-units, time whole seconds.

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "sched/cluster.h"
#include "sim/simulator.h"
#include "sim/trace_reader.h"

namespace gpugeek::sim {

// Price of one GPU-hour of a model, in micro-units of money.
struct GpuPrice {
  int64_t on_demand_micros = 0;
  int64_t spot_micros = 0;
};

// List prices in USD per GPU-hour (the instance price / 8 GPUs), spot at 30 % of on-demand (the
// issue's "60-90 % cheaper", mid-range). Sources: A100 (and A800, A100-80GB): AWS p4d.24xlarge
// $32.77/h in us-east-1, Q2 2024; H800: AWS p5.48xlarge (8 x H100) $98.32/h at launch (The Next
// Platform, 2023-07-27); A10: AWS g5.xlarge (1 x A10G) $1.006/h. The trace's undisclosed
// "GPU-series-1/2" have no price and are left out of the pool.
std::map<std::string, GpuPrice> DefaultGpuPrices();

enum class CapacityPolicy { kOnDemandOnly, kSpotFirst, kSpotOnly };
std::string_view CapacityPolicyName(CapacityPolicy p);  // "on-demand", "spot-first", "spot-only"

struct SpotJob {
  std::string id;
  Duration submit{};   // since the window's start
  Duration runtime{};  // uninterrupted, > 0
  int32_t gpus = 0;    // whole GPUs: up to 8 on one node, more as a gang of nodes
};

struct SpotInputOptions {
  std::string node_csv;                 // alibaba-spot-gpu-v2026/node_info_df.csv
  std::string job_csv;                  // philly/philly_jobs.csv
  int node_stride = 10;                 // every node_stride-th node of the list (file order), of the priced models
  int spot_stride = 2;                  // of those, every spot_stride-th is spot (the rest on-demand)
  int64_t window_start_s = 1506902400;  // 2017-10-02 00:00:00, the trace's clock
  Duration window = std::chrono::hours(24 * 7);  // jobs submitted in [start, start + window)
};

struct SpotInputs {
  std::vector<sched::NodeSpec> nodes;  // capacity_type set; 4 vCPU per GPU requested by jobs
  std::vector<SpotJob> jobs;           // by submit time
};
// Errors: NotFound / InvalidArgument from the readers (file, line, column); InvalidArgument for
// strides < 1 or a window without jobs or nodes.
absl::StatusOr<SpotInputs> LoadSpotInputs(const SpotInputOptions& options,
                                          const std::map<std::string, GpuPrice>& prices);

struct SpotRunOptions {
  CapacityPolicy policy = CapacityPolicy::kSpotFirst;
  double interruptions_per_month = 0.05;                    // per spot node, reclaims per 30 days (Poisson)
  uint64_t seed = 42;                                       // reclaim times and the scheduler's tie order
  Duration checkpoint_interval = std::chrono::minutes(30);  // of progress
  Duration notice = std::chrono::seconds(120);              // AWS's two-minute warning
  Duration checkpoint_write = std::chrono::seconds(60);     // just-in-time checkpoint when <= notice
  bool just_in_time = true;                                 // the contract's checkpoint on notice
  Duration restart_overhead = std::chrono::seconds(120);    // loading a checkpoint on each resume
  Duration outage = std::chrono::hours(2);                  // a reclaimed node returns after this
  Duration horizon = std::chrono::hours(24 * 60);           // reclaims drawn over [0, horizon)
  // When non-empty: exactly these reclaims (node indices into SpotInputs::nodes, each for its own
  // length) instead of drawn ones.
  std::vector<NodeOutage> reclaims;
};

struct SpotRunResult {
  CapacityPolicy policy = CapacityPolicy::kSpotFirst;
  double interruptions_per_month = 0;
  uint64_t seed = 0;
  int jobs = 0, completed = 0;           // jobs that never fit this policy's nodes are not completed
  int reclaims = 0;                      // spot nodes reclaimed while the run lasted
  int evictions = 0;                     // job runs stopped by a reclaim
  double useful_gpu_hours = 0;           // the completed jobs' own work (runtime x GPUs)
  double billed_gpu_hours = 0;           // GPUs held, each second, on any capacity
  double spot_gpu_hours = 0;             // of billed, on spot nodes
  double lost_gpu_hours = 0;             // billed - useful: work redone after a reclaim, and checkpoint loads
  int64_t cost_micros = 0;               // billed at each node's price
  int64_t on_demand_micros = 0;          // the same GPU-hours at on-demand prices
  double mean_jct_h = 0, p99_jct_h = 0;  // completion - submit, hours, over completed jobs
  double mean_wait_h = 0;                // time queued before the first start
};

// One run. Errors: a scheduling error; InvalidArgument for a rate < 0 or a non-positive interval.
absl::StatusOr<SpotRunResult> RunSpotOnce(const SpotInputs& inputs, const std::map<std::string, GpuPrice>& prices,
                                          const SpotRunOptions& options);

struct SpotExperimentOptions {
  SpotRunOptions run;  // policy, rate and seed are set per run
  std::vector<CapacityPolicy> policies = {CapacityPolicy::kOnDemandOnly, CapacityPolicy::kSpotFirst,
                                          CapacityPolicy::kSpotOnly};
  // AWS Spot Instance Advisor's buckets, each by a representative rate (the last: > 20 %).
  std::vector<double> rates = {0.025, 0.075, 0.125, 0.175, 0.25};
  std::vector<uint64_t> seeds = {42, 43, 44};
  int jobs = 1;                                     // runs in parallel (threads)
  std::function<void(size_t, size_t)> on_progress;  // (done, total), one call at a time
};

// All runs, ordered by policy, rate, seed (on-demand runs once per seed: no spot node is used).
absl::StatusOr<std::vector<SpotRunResult>> RunSpotExperiment(const SpotInputs& inputs,
                                                             const std::map<std::string, GpuPrice>& prices,
                                                             const SpotExperimentOptions& options);

// Means over seeds per (policy, rate), in run order.
std::vector<SpotRunResult> SummarizeSpot(const std::vector<SpotRunResult>& runs);
// A terminal table of summary rows; costs relative to on-demand of the same rows' first on-demand row.
std::string SpotTable(const std::vector<SpotRunResult>& summary);
std::string SpotCsv(const std::vector<SpotRunResult>& rows);
// Writes summary.csv, runs.csv, cost.svg (cost per useful GPU-hour against the interruption rate, one
// line per policy) and lost.svg (lost GPU-hours, % of useful) into `dir` (created). Errors: Internal.
absl::Status WriteSpotReport(const std::string& dir, const std::vector<SpotRunResult>& runs,
                             const std::vector<SpotRunResult>& summary);

}  // namespace gpugeek::sim
