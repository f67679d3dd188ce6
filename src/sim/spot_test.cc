#include "sim/spot.h"

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/trace_reader.h"

namespace gpugeek::sim {
namespace {

using std::chrono::hours;
using std::chrono::seconds;

// A10 nodes of `gpus` GPUs each, of the given capacity types, at 1.00 and 0.30 per GPU-hour.
SpotInputs Nodes(std::vector<SpotJob> jobs, std::vector<sched::CapacityType> capacity, int gpus) {
  SpotInputs in;
  for (sched::CapacityType c : capacity) {
    sched::NodeSpec n;
    n.name = fmt::format("node-{}", in.nodes.size());
    n.cpu_milli = 128000;
    n.gpu_count = gpus;
    n.gpu_model = "A10";
    n.capacity_type = c;
    in.nodes.push_back(n);
  }
  in.jobs = std::move(jobs);
  return in;
}

// Two one-GPU nodes: node 0 spot, node 1 on-demand.
SpotInputs TwoNodes(std::vector<SpotJob> jobs) {
  return Nodes(std::move(jobs), {sched::CapacityType::kSpot, sched::CapacityType::kOnDemand}, 1);
}

const std::map<std::string, GpuPrice> kPrices = {{"A10", {1'000'000, 300'000}}};

SpotRunOptions ReclaimAt(CapacityPolicy policy, Duration at, bool just_in_time) {
  SpotRunOptions o;
  o.policy = policy;
  o.just_in_time = just_in_time;
  o.checkpoint_interval = seconds(600);
  o.restart_overhead = seconds(120);
  o.reclaims = {NodeOutage{0, at, hours(2)}};
  return o;
}

TEST(SpotRun, WithoutReclaimsSpotFirstPaysTheSpotPriceAndOnDemandTheListPrice) {
  const SpotInputs in = TwoNodes({{"a", seconds(0), seconds(3600), 1}});
  SpotRunOptions o;
  o.interruptions_per_month = 0;
  o.policy = CapacityPolicy::kSpotFirst;
  auto spot = RunSpotOnce(in, kPrices, o);
  ASSERT_TRUE(spot.ok()) << spot.status();
  EXPECT_EQ(spot->completed, 1);
  EXPECT_EQ(spot->cost_micros, 300'000);  // 1 GPU-hour on the spot node
  EXPECT_EQ(spot->on_demand_micros, 1'000'000);
  EXPECT_DOUBLE_EQ(spot->spot_gpu_hours, 1.0);
  EXPECT_DOUBLE_EQ(spot->lost_gpu_hours, 0.0);
  o.policy = CapacityPolicy::kOnDemandOnly;
  auto od = RunSpotOnce(in, kPrices, o);
  ASSERT_TRUE(od.ok()) << od.status();
  EXPECT_EQ(od->cost_micros, 1'000'000);
  EXPECT_DOUBLE_EQ(od->spot_gpu_hours, 0.0);
}

// Reclaimed at 1,000 s of a 3,600 s job. Just-in-time checkpoint: all 1,000 s are saved; the job
// resumes at once on the on-demand node and needs 120 s (loading) + 2,600 s: done at 3,720 s.
// Billed: 1,000 s spot (0.30/h) + 2,720 s on-demand (1.00/h) = (300,000 + 2,720,000) / 3,600 micro-units.
TEST(SpotRun, AReclaimWithAJustInTimeCheckpointLosesOnlyTheRestart) {
  const SpotInputs in = TwoNodes({{"a", seconds(0), seconds(3600), 1}});
  auto r = RunSpotOnce(in, kPrices, ReclaimAt(CapacityPolicy::kSpotFirst, seconds(1000), true));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1);
  EXPECT_EQ(r->evictions, 1);
  EXPECT_EQ(r->reclaims, 1);
  EXPECT_DOUBLE_EQ(r->mean_jct_h, 3720.0 / 3600);
  EXPECT_DOUBLE_EQ(r->lost_gpu_hours, 120.0 / 3600);
  EXPECT_EQ(r->cost_micros, (int64_t{1000} * 300000 + int64_t{2720} * 1000000) / 3600);
  EXPECT_EQ(r->on_demand_micros, int64_t{3720} * 1000000 / 3600);
}

// Without it, the last periodic checkpoint (every 600 s of progress) is at 600 s: 400 s are redone, plus
// the 120 s load: done at 1,000 + 120 + 3,000 = 4,120 s, 520 s lost.
TEST(SpotRun, AReclaimWithoutOneRedoesTheWorkSinceThePeriodicCheckpoint) {
  const SpotInputs in = TwoNodes({{"a", seconds(0), seconds(3600), 1}});
  auto r = RunSpotOnce(in, kPrices, ReclaimAt(CapacityPolicy::kSpotFirst, seconds(1000), false));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_DOUBLE_EQ(r->mean_jct_h, 4120.0 / 3600);
  EXPECT_DOUBLE_EQ(r->lost_gpu_hours, 520.0 / 3600);
}

// Spot only: the job waits for the spot node to return (2 h after the reclaim), then runs 2,720 s.
TEST(SpotRun, SpotOnlyWaitsForSpotCapacityToReturn) {
  const SpotInputs in = TwoNodes({{"a", seconds(0), seconds(3600), 1}});
  auto r = RunSpotOnce(in, kPrices, ReclaimAt(CapacityPolicy::kSpotOnly, seconds(1000), true));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1);
  EXPECT_DOUBLE_EQ(r->mean_jct_h, (1000.0 + 7200 + 2720) / 3600);
  EXPECT_EQ(r->cost_micros, int64_t{3720} * 300000 / 3600);
  EXPECT_DOUBLE_EQ(r->spot_gpu_hours, 3720.0 / 3600);
}

// "a" takes the spot node (tried first), "b" the on-demand one; "a" is evicted at 1,000 s and waits for
// a node: "b" ends at 3,600 s, then "a" resumes there for 120 + 2,600 s: done at 6,320 s.
TEST(SpotRun, AnEvictedJobWaitsForAFreeNode) {
  const SpotInputs in = TwoNodes({{"a", seconds(0), seconds(3600), 1}, {"b", seconds(0), seconds(3600), 1}});
  auto r = RunSpotOnce(in, kPrices, ReclaimAt(CapacityPolicy::kSpotFirst, seconds(1000), true));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 2);
  EXPECT_EQ(r->evictions, 1);
  EXPECT_DOUBLE_EQ(r->p99_jct_h, 6320.0 / 3600);
}

// A 16-GPU job is a gang of two 8-GPU members, all of one capacity type: on the two spot nodes. The
// reclaim of one evicts both; one spot node and one on-demand node hold no gang of two of one type, so
// it waits for the reclaimed node (back 2 h later, at 8,200 s) and runs 2,720 s more.
TEST(SpotRun, AReclaimEvictsTheWholeGang) {
  const SpotInputs in =
      Nodes({{"g", seconds(0), seconds(3600), 16}},
            {sched::CapacityType::kSpot, sched::CapacityType::kSpot, sched::CapacityType::kOnDemand}, 8);
  auto r = RunSpotOnce(in, kPrices, ReclaimAt(CapacityPolicy::kSpotFirst, seconds(1000), true));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->completed, 1);
  EXPECT_EQ(r->evictions, 1);
  EXPECT_DOUBLE_EQ(r->mean_jct_h, (8200.0 + 2720) / 3600);
  EXPECT_DOUBLE_EQ(r->billed_gpu_hours, 16 * 3720.0 / 3600);
  EXPECT_DOUBLE_EQ(r->lost_gpu_hours, 16 * 120.0 / 3600);
  EXPECT_DOUBLE_EQ(r->spot_gpu_hours, r->billed_gpu_hours);
}

TEST(SpotRun, InvalidOptionsNameTheField) {
  const SpotInputs in = TwoNodes({{"a", seconds(0), seconds(3600), 1}});
  SpotRunOptions o;
  o.interruptions_per_month = -1;
  auto r = RunSpotOnce(in, kPrices, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("interruptions_per_month"));
  o = ReclaimAt(CapacityPolicy::kSpotFirst, seconds(10), true);
  o.reclaims[0].node = 7;
  r = RunSpotOnce(in, kPrices, o);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), ::testing::HasSubstr("outage of node 7"));
}

TEST(SpotTrace, PhillyRowsParseWithTheirTimestampAndRoundedUpDuration) {
  auto jobs = ParsePhillyCsv(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-02 00:00:00,66.0,1,66.0,11cb48\n"
      "2017-10-09 06:13:03,2950.5,8,23604.0,6214e9\n",
      "p.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].submit_s, 1506902400);  // date -u -d '2017-10-02' +%s
  EXPECT_EQ((*jobs)[0].duration_s, 66);
  EXPECT_EQ((*jobs)[1].submit_s, 1506902400 + 7 * 86400 + 6 * 3600 + 13 * 60 + 3);
  EXPECT_EQ((*jobs)[1].duration_s, 2951);
  EXPECT_EQ((*jobs)[1].num_gpus, 8);
}

TEST(SpotTrace, BadRowsNameFileLineAndColumn) {
  auto bad_time = ParsePhillyCsv("timestamp,duration,num_gpus\n2017-13-02 00:00:00,1,1\n", "p.csv");
  EXPECT_EQ(bad_time.status().message(), "p.csv:2:1: timestamp '2017-13-02 00:00:00' is not YYYY-MM-DD HH:MM:SS");
  auto bad_duration = ParsePhillyCsv("timestamp,duration,num_gpus\n2017-10-02 00:00:00,-5,1\n", "p.csv");
  EXPECT_EQ(bad_duration.status().message(), "p.csv:2:2: duration '-5' is not a number of seconds in 0..3.2e8");
  auto no_column = ParsePhillyCsv("timestamp,num_gpus\n", "p.csv");
  EXPECT_EQ(no_column.status().message(), "p.csv:1:1: header has no column 'duration'");
  auto bad_gpus = ParseSpotNodeCsv("gpu_model,gpu_capacity_num,cpu_num,node_name\nA10,17,128,3\n", "n.csv");
  EXPECT_EQ(bad_gpus.status().message(), "n.csv:2:2: gpu_capacity_num 17 outside 1..16");
}

// The shared traces (beside the checkout, as in CI): the default pool and week load as documented.
TEST(SpotTrace, TheDefaultInputsFromTheSharedTraces) {
  const std::string shared = GPUGEEK_SHARED_DIR;  // beside the checkout (cmake/gpugeek.cmake)
  SpotInputOptions o;
  o.node_csv = shared + "/traces/alibaba-spot-gpu-v2026/node_info_df.csv";
  o.job_csv = shared + "/traces/philly/philly_jobs.csv";
  auto in = LoadSpotInputs(o, DefaultGpuPrices());
  ASSERT_TRUE(in.ok()) << in.status();
  // Priced nodes: 432 A100 + 22 A800 + 219 H800 + 2,494 A10 = 3,167; every 10th: 317, every other one spot
  // (the 1st, 3rd, ...: 159).
  EXPECT_EQ(in->nodes.size(), 317u);
  int spot = 0;
  for (const auto& n : in->nodes) spot += n.capacity_type == sched::CapacityType::kSpot;
  EXPECT_EQ(spot, 159);
  // Philly jobs submitted 2017-10-02 .. 2017-10-08 (awk over the file: 11,386).
  EXPECT_EQ(in->jobs.size(), 11386u);
}

}  // namespace
}  // namespace gpugeek::sim
