#include "sim/fair_share.h"

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/fake_clock.h"
#include "sched/framework.h"
#include "sim/simulator.h"

namespace gpugeek::sim {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using ::testing::ElementsAre;

std::string Describe(const FairShareResult& r) {
  std::string out = fmt::format("{} pods; contended {:.2f} h of 24, utilization {:.3f} while contended\n", r.pods,
                                std::chrono::duration<double>(r.contended).count() / 3600, r.utilization);
  for (const FairShareTenantResult& t : r.tenants) {
    out += fmt::format(
        "  tenant {}: {} pods, share {:.4f} (target {:.2f}, error {:+.4f} = {:+.2f} % of target); "
        "{:.1f} GPU-h while contended, {:.1f} GPU-h in all\n",
        t.name, t.pods, t.share, t.target, t.error, 100 * t.error / t.target, t.contended_milli_gpu_seconds / 3.6e6,
        t.total_milli_gpu_seconds / 3.6e6);
  }
  return out;
}

TEST(FairShareWorkloadTest, SeededAndEachTenantFloodsInTurn) {
  FairShareOptions o;
  auto a = FairShareWorkload(o);
  auto b = FairShareWorkload(o);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].id, (*b)[i].id);
    EXPECT_EQ((*a)[i].arrival, (*b)[i].arrival);
    EXPECT_EQ((*a)[i].runtime, (*b)[i].runtime);
  }
  // Phase 0 (first 4 h): a floods at 1.5 of the cluster, b trickles at 0.2; phase 1 the reverse.
  int a0 = 0, b0 = 0, a1 = 0, b1 = 0;
  for (const SimPod& p : *a) {
    ASSERT_LT(p.arrival, o.horizon);
    if (p.arrival < hours(4)) ++(p.tenant == "a" ? a0 : b0);
    if (p.arrival >= hours(4) && p.arrival < hours(8)) ++(p.tenant == "a" ? a1 : b1);
  }
  EXPECT_GT(a0, 5 * b0);
  EXPECT_GT(b1, 5 * a1);
  o.tenants = {};
  EXPECT_EQ(FairShareWorkload(o).status().code(), absl::StatusCode::kInvalidArgument);
}

// The done criterion of issue 10: two tenants with a 50/50 share (and 70/30) under bursty load, in
// the simulator on the control plane's queue, get within 5 % of their share (relative to it) of
// what is delivered while both have demand, over a simulated day.
void ExpectConverges(double weight_a) {
  FairShareOptions o;
  o.tenants = {{"a", weight_a}, {"b", 1 - weight_a}};
  auto r = RunFairShare(o);
  ASSERT_TRUE(r.ok()) << r.status();
  fmt::print("fair share, weights {:.2f}/{:.2f}, half-life 1 h, seed 1: {}", weight_a, 1 - weight_a, Describe(*r));
  EXPECT_GT(r->contended, hours(12));  // mostly contended: the measure means something
  EXPECT_GT(r->utilization, 0.95);
  for (const FairShareTenantResult& t : r->tenants) {
    EXPECT_LE(std::abs(t.error), 0.05 * t.target) << t.name << ": share " << t.share << " against " << t.target;
  }
}

TEST(FairShareTest, FiftyFiftyConvergesWithinFivePercentOverADay) { ExpectConverges(0.5); }
TEST(FairShareTest, SeventyThirtyConvergesWithinFivePercentOverADay) { ExpectConverges(0.7); }

// In the simulator: tenant a's pod over its quota (4 A100s), at the head of the queue (a has used
// less than b, and the pod has priority 9), waits; a's own smaller pod and b's pod behind it are
// placed in the same pass; when a's running pod departs, a's big pod runs.
TEST(FairShareTest, OverQuotaPodNeverBlocksOthersInTheSimulator) {
  sched::NodeSpec node;
  node.name = "n";
  node.cpu_milli = 64000;
  node.memory_bytes = uint64_t{1} << 40;
  node.gpu_count = 16;
  node.gpu_model = "A100-80GB";
  auto cluster = sched::Cluster::Create({node});
  ASSERT_TRUE(cluster.ok());
  sched::FrameworkOptions fo;
  fo.policy = "BestFit";
  auto framework = sched::Framework::Create(fo, &*cluster);
  ASSERT_TRUE(framework.ok());
  FakeClock clock;
  SimulatorOptions so;
  so.requeue_unschedulable = true;
  so.tenants["a"] = sched::TenantConfig{.quota = {.max_gpus_by_model = {{"A100-80GB", 4}}}};
  Simulator sim(**framework, clock, so);
  auto shape = [](int gpus) {
    sched::ResourceShape s;
    s.cpu_milli = 1000;
    s.num_gpus = gpus;
    s.gpu_milli = 1000;
    return s;
  };
  const std::vector<SimPod> pods = {
      {"a-run", shape(3), seconds(0), seconds(100), 0, "a"},    {"b-run", shape(4), seconds(0), seconds(100), 0, "b"},
      {"a-big", shape(2), seconds(10), seconds(100), 9, "a"},   {"b-job", shape(2), seconds(10), seconds(100), 0, "b"},
      {"a-small", shape(1), seconds(10), seconds(100), 0, "a"},
  };
  std::vector<std::string> log;
  const MonoTime start = clock.Monotonic();
  ASSERT_TRUE(sim.Run(pods,
                      [&](const SimEvent& e) {
                        if (e.kind == SimEvent::Kind::kDeparture) return;
                        const auto t = std::chrono::duration_cast<seconds>(clock.Monotonic() - start).count();
                        log.push_back(fmt::format("{}@{}:{}", pods[e.pod].id, t,
                                                  e.decision->scheduled ? "placed"
                                                  : e.over_quota        ? "over quota"
                                                                        : "no"));
                      })
                  .ok());
  EXPECT_THAT(log, ElementsAre("a-run@0:placed", "b-run@0:placed", "a-big@10:over quota", "a-small@10:placed",
                               "b-job@10:placed", "a-big@100:placed"));
  EXPECT_EQ(sim.queue().size(), 0u);
  EXPECT_EQ(sim.queue().ledger().Usage("a").jobs, 0);
}

}  // namespace
}  // namespace gpugeek::sim
