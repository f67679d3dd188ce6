// Spot capacity on the server, on a FakeClock with the test playing the agents: a job's capacity
// preference ([spot, on-demand]) is tried in order; a reclaim notice moves the jobs of the node with a
// grace that ends before the deadline, and placement keeps out of the reclaimed region for a while.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "controlplane/testing/control_plane_fixture.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using api::WorkloadPhase;
using std::chrono::minutes;
using std::chrono::seconds;

class ReclaimTest : public testing::ControlPlaneFixture {
 protected:
  std::string NodeOf(const std::string& id) { return cp_->GetJob(id)->allocation->members.at(0).node; }
  void Stopped(const std::string& node, const std::string& id, int64_t epoch) {
    Beat(node, {{.job_id = id, .epoch = epoch, .phase = WorkloadPhase::kExited, .exit_code = 0}});
  }
};

TEST_F(ReclaimTest, SpotFirstThenOnDemandWhenTheSpotNodeIsReclaimed) {
  Register("spot-a", "1xH100-SXM-80GB", "spot", "r1");
  Register("od-b", "1xH100-SXM-80GB", "on-demand", "r1");
  const std::string id = Submit(
      "name: cheap\nresources: {accelerators: H100-SXM-80GB:1, capacity: [spot, on-demand]}\n"
      "checkpoint: {grace: 30s}\nrun: sleep 1000\n");
  cp_->Reconcile();
  ASSERT_EQ(State(id), JobState::kScheduled);
  EXPECT_EQ(NodeOf(id), "spot-a") << "spot is preferred";
  Beat("spot-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});

  // 10 s notice: the member is told to stop with 10 - 1 (heartbeat) - 0.5 = 8.5 s of grace, not 30.
  ASSERT_TRUE(cp_->Reclaim("spot-a", seconds(10)).ok());
  EXPECT_EQ(State(id), JobState::kPending);
  EXPECT_EQ(cp_->GetJob(id)->record.reason,
            "node spot-a reclaimed (10 s notice); checkpointing and moving; placed again once its members have "
            "stopped");
  EXPECT_EQ(NodeState("spot-a"), "cordoned");
  const std::vector<api::Assignment> stop = Assignments("spot-a");
  ASSERT_EQ(stop.size(), 1u);
  EXPECT_TRUE(stop[0].cancel);
  EXPECT_EQ(stop[0].grace_ms, 8500);
  Heartbeat("od-b");
  Stopped("spot-a", id, 1);
  ASSERT_EQ(State(id), JobState::kScheduled);
  EXPECT_EQ(NodeOf(id), "od-b") << "no spot node left: on-demand, the second choice";
  EXPECT_EQ(Assignments("od-b").at(0).grace_ms, 30000) << "a new placement has the spec's grace again";

  // A job that takes spot only waits rather than run on on-demand.
  const std::string only = Submit("name: spot-only\nresources: {accelerators: H100-SXM-80GB:1, spot: true}\nrun: x\n");
  cp_->Reconcile();
  EXPECT_EQ(State(only), JobState::kPending);

  EXPECT_EQ(cp_->Reclaim("spot-a", seconds(0)).message(),
            "deadline_s: the notice must be 1..3600 seconds (AWS gives 120, GCP and Azure 30)");
  EXPECT_EQ(cp_->Reclaim("nope", seconds(30)).code(), absl::StatusCode::kNotFound);
}

TEST_F(ReclaimTest, PlacementAvoidsAReclaimedRegionForAWhile) {
  Register("a", "1xH100-SXM-80GB", "spot", "r1");
  Register("c", "1xH100-SXM-80GB", "spot", "r1");
  Register("d", "1xH100-SXM-80GB", "spot", "r2");
  const std::string spec = "name: s\nresources: {accelerators: H100-SXM-80GB:1, spot: true}\nrun: sleep 1000\n";
  const std::string id = Submit(spec);
  cp_->Reconcile();
  const std::string first = NodeOf(id);
  ASSERT_NE(first, "d") << "set up so that the first placement is in r1";
  ASSERT_TRUE(cp_->Reclaim(first, seconds(30)).ok());
  Stopped(first, id, 1);
  EXPECT_EQ(NodeOf(id), "d") << "r1 was just reclaimed: r2 although r1 has a free node";

  // While the window lasts, a job fits r1 only when r2 is full; after it, r1 is as good as any.
  const std::string second = Submit(spec);
  Heartbeat("c");
  Heartbeat("d");
  cp_->Reconcile();
  EXPECT_EQ(NodeOf(second), "c") << "r2 is full: r1 rather than wait";
  for (int i = 0; i < 10; ++i) {
    clock_.Advance(minutes(1));
    Heartbeat("c");
    Heartbeat("d");
  }
  ASSERT_TRUE(cp_->SetCordoned(first, false).ok());
  Heartbeat(first);
  const std::string third = Submit(spec);
  cp_->Reconcile();
  EXPECT_EQ(NodeOf(third), first);
}

// A multi-node job stays in one region (sched::Request::gang_label) unless it allows spanning them
// (resources.span_regions): r2 holds a gang of two; r1 and r3 one node each.
TEST_F(ReclaimTest, AGangStaysInOneRegionUnlessItMaySpanThem) {
  Register("r1-a", "1xH100-SXM-80GB", "on-demand", "r1");
  Register("r2-a", "1xH100-SXM-80GB", "on-demand", "r2");
  Register("r2-b", "1xH100-SXM-80GB", "on-demand", "r2");
  Register("r3-a", "1xH100-SXM-80GB", "on-demand", "r3");
  const std::string gang = "name: g\nresources: {accelerators: H100-SXM-80GB:1}\nnum_nodes: 2\nrun: sleep 1000\n";
  const std::string a = Submit(gang);
  cp_->Reconcile();
  ASSERT_EQ(State(a), JobState::kScheduled);
  // The members' nodes of a placed job.
  auto nodes_of = [&](const std::string& id) {
    const JobView job = *cp_->GetJob(id);
    std::set<std::string> nodes;
    for (const auto& m : job.allocation->members) nodes.insert(m.node);
    return nodes;
  };
  EXPECT_EQ(nodes_of(a), (std::set<std::string>{"r2-a", "r2-b"}));
  const std::string b = Submit(gang);
  cp_->Reconcile();
  EXPECT_EQ(State(b), JobState::kPending) << "r1-a and r3-a are free, but in two regions";
  const std::string c = Submit(
      "name: g\nresources: {accelerators: H100-SXM-80GB:1, span_regions: true}\nnum_nodes: 2\nrun: sleep 1000\n");
  cp_->Reconcile();
  ASSERT_EQ(State(c), JobState::kScheduled);
  EXPECT_EQ(nodes_of(c), (std::set<std::string>{"r1-a", "r3-a"}));
}

// Per-second metering (usage.h): 1 h on a spot node at 0.80 per GPU-hour, reclaimed, then 30 min on an
// on-demand node at 2.50: cost 0.80 + 1.25 = 2.05, the same GPU time on-demand 2.50 + 1.25 = 3.75, so
// spot saved 1.70 (micro-units below). An open segment counts up to now in the view.
TEST_F(ReclaimTest, UsageIsMeteredPerSecondWithTheSpotSaving) {
  api::Registration spot = Registration("spot-a", "1xH100-SXM-80GB", "spot", "r1");
  spot.price_micros_per_gpu_hour = 800'000;
  api::Registration od = Registration("od-b", "1xH100-SXM-80GB", "on-demand", "r1");
  od.price_micros_per_gpu_hour = 2'500'000;
  ASSERT_TRUE(cp_->Register(spot).ok());
  ASSERT_TRUE(cp_->Register(od).ok());
  const std::string id = Submit(
      "name: metered\nresources: {accelerators: H100-SXM-80GB:1, capacity: [spot, on-demand]}\nrun: sleep 1000\n");
  cp_->Reconcile();
  ASSERT_EQ(NodeOf(id), "spot-a");
  Beat("spot-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  clock_.Advance(std::chrono::hours(1));
  Heartbeat("od-b");
  Beat("spot-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  const Usage open = cp_->GetJob(id)->usage;
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0], (UsageLine{"spot", "H100-SXM-80GB", 3'600'000, 800'000, 2'500'000})) << "open, up to now";
  EXPECT_TRUE(UsageFromText(cp_->GetJob(id)->record.usage_json)->empty()) << "no line stored while it runs";
  EXPECT_EQ(OpenSegmentsFromText(cp_->GetJob(id)->record.usage_json)->size(), 1u) << "its open segment is";

  ASSERT_TRUE(cp_->Reclaim("spot-a", seconds(30)).ok());
  Stopped("spot-a", id, 1);
  ASSERT_EQ(NodeOf(id), "od-b");
  Beat("od-b", {{.job_id = id, .epoch = 2, .phase = WorkloadPhase::kRunning}});
  clock_.Advance(minutes(30));
  Beat("od-b", {{.job_id = id, .epoch = 2, .phase = WorkloadPhase::kExited, .exit_code = 0}});
  ASSERT_EQ(State(id), JobState::kSucceeded);
  const JobView job = *cp_->GetJob(id);
  EXPECT_EQ(job.usage, (Usage{{"on-demand", "H100-SXM-80GB", 1'800'000, 1'250'000, 1'250'000},
                              {"spot", "H100-SXM-80GB", 3'600'000, 800'000, 2'500'000}}));
  const nlohmann::json totals = UsageToJson(job.usage);
  EXPECT_EQ(totals["cost_micros"], 2'050'000);
  EXPECT_EQ(totals["on_demand_micros"], 3'750'000);
  EXPECT_EQ(totals["saving_micros"], 1'700'000);
  EXPECT_DOUBLE_EQ(totals["gpu_hours"].get<double>(), 1.5);
  Restart();
  EXPECT_EQ(cp_->GetJob(id)->usage, job.usage) << "stored with the job";
}

// A member on a node that is lost is metered up to the loss being detected (its node down).
TEST_F(ReclaimTest, AMemberOnALostNodeIsMeteredToo) {
  api::Registration spot = Registration("spot-a", "1xH100-SXM-80GB", "spot", "r1");
  spot.price_micros_per_gpu_hour = 800'000;
  ASSERT_TRUE(cp_->Register(spot).ok());
  const std::string id = Submit("name: lost\nresources: {accelerators: H100-SXM-80GB:1}\nrun: sleep 1000\n");
  cp_->Reconcile();
  Beat("spot-a", {{.job_id = id, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  clock_.Advance(seconds(7));  // silent past lease + fence grace + margin (6 s): down, presumed stopped
  cp_->Reconcile();
  ASSERT_EQ(NodeState("spot-a"), "down");
  EXPECT_EQ(cp_->GetJob(id)->usage, (Usage{{"spot", "H100-SXM-80GB", 7'000, 1'556, 1'556}}));
}

// The provider's price list (`gpugeek server --prices`) prices nodes whose agents name no price, by GPU
// model and capacity type; an agent's own price wins.
class ProviderPricesTest : public testing::ControlPlaneFixture {
 protected:
  ControlPlaneOptions Options() const override {
    ControlPlaneOptions o;
    o.gpu_hour_prices = {{{"H100-SXM-80GB", "spot"}, 1'500'000}, {{"H100-SXM-80GB", "on-demand"}, 4'000'000}};
    return o;
  }
};

TEST_F(ProviderPricesTest, UnpricedNodesTakeTheProvidersPrice) {
  Register("spot-a", "1xH100-SXM-80GB", "spot", "r1");
  Register("od-b", "1xH100-SXM-80GB", "on-demand", "r1");
  Register("a100", "1xA100-SXM-80GB", "spot", "r1");  // not in the list: unpriced
  api::Registration own = Registration("own-c", "1xH100-SXM-80GB", "spot", "r1");
  own.price_micros_per_gpu_hour = 900'000;
  ASSERT_TRUE(cp_->Register(own).ok());
  EXPECT_EQ(cp_->Node("spot-a")->registration.price_micros_per_gpu_hour, 1'500'000);
  EXPECT_EQ(cp_->Node("od-b")->registration.price_micros_per_gpu_hour, 4'000'000);
  EXPECT_EQ(cp_->Node("a100")->registration.price_micros_per_gpu_hour, 0);
  EXPECT_EQ(cp_->Node("own-c")->registration.price_micros_per_gpu_hour, 900'000);
  Restart();  // stored with the node
  EXPECT_EQ(cp_->Node("spot-a")->registration.price_micros_per_gpu_hour, 1'500'000);
}

}  // namespace
}  // namespace gpugeek::controlplane
