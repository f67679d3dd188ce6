// Regions as places, on a FakeClock with the test playing the agents: a job is placed where its data
// lives (resources.data_region, or once it has one its last checkpoint's region) first, then in the
// other regions nearest that one first (ControlPlaneOptions::region_latency).
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "controlplane/job_request.h"
#include "controlplane/node_model.h"
#include "controlplane/testing/control_plane_fixture.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using api::WorkloadPhase;
using std::chrono::seconds;

class DataLocalityTest : public testing::ControlPlaneFixture {
 protected:
  // r2 is 10 ms from r3 and 80 ms from r1; r1 is 90 ms from r3.
  ControlPlaneOptions Options() const override {
    ControlPlaneOptions o;
    o.region_latency = *api::ParseRegionLatency("r1,r2,80\nr2,r3,10\nr1,r3,90\n", "latency.csv");
    return o;
  }
  std::string NodeOf(const std::string& id) { return cp_->GetJob(id)->allocation->members.at(0).node; }
};

TEST_F(DataLocalityTest, TheDataRegionFirstThenTheNearest) {
  Register("r1-a", "1xH100-SXM-80GB", "on-demand", "r1");
  Register("r2-a", "1xH100-SXM-80GB", "on-demand", "r2");
  Register("r3-a", "1xH100-SXM-80GB", "on-demand", "r3");
  const std::string spec = "name: d\nresources: {accelerators: H100-SXM-80GB:1, data_region: r2}\nrun: sleep 1000\n";
  const std::string first = Submit(spec);
  cp_->Reconcile();
  EXPECT_EQ(NodeOf(first), "r2-a") << "where the data is";
  const std::string second = Submit(spec);
  cp_->Reconcile();
  EXPECT_EQ(NodeOf(second), "r3-a") << "r2 is full: r3 is 10 ms away, r1 80";
  const std::string third = Submit(spec);
  cp_->Reconcile();
  EXPECT_EQ(NodeOf(third), "r1-a") << "the last region left";
  // A region the job may not use stays out, however near: `regions` is the constraint.
  const std::string fenced =
      Submit("name: d\nresources: {accelerators: H100-SXM-80GB:1, data_region: r2, regions: [r1]}\nrun: sleep 1000\n");
  cp_->Reconcile();
  EXPECT_EQ(State(fenced), JobState::kPending);
}

// The checkpoint's region outranks the spec's data region: it is what the job resumes from.
TEST_F(DataLocalityTest, ARequeuedJobGoesBackToItsCheckpointsRegion) {
  Register("n1-a", "1xH100-SXM-80GB", "on-demand", "r1");
  Register("n2-a", "1xH100-SXM-80GB", "on-demand", "r2");
  Register("n3-a", "1xH100-SXM-80GB", "on-demand", "r2");
  const std::string filler =
      Submit("name: f\nresources: {accelerators: H100-SXM-80GB:1, data_region: r1}\nrun: sleep 1000\n");
  cp_->Reconcile();
  ASSERT_EQ(NodeOf(filler), "n1-a");
  const std::string job = Submit(
      "name: j\nresources: {accelerators: H100-SXM-80GB:1, data_region: r1}\ncheckpoint: {dir: /ckpt, grace: 5s}\n"
      "run: sleep 1000\n");
  cp_->Reconcile();
  const std::string first = NodeOf(job);
  ASSERT_TRUE(first == "n2-a" || first == "n3-a") << first;
  const std::string other = first == "n2-a" ? "n3-a" : "n2-a";
  Beat("n1-a", {{.job_id = filler, .epoch = 1, .phase = WorkloadPhase::kRunning}});
  Beat(first, {{.job_id = job, .epoch = 1, .phase = WorkloadPhase::kRunning, .checkpoint_step = 40}});
  ASSERT_EQ(cp_->GetJob(job)->record.checkpoint_step, 40);
  EXPECT_EQ(cp_->GetJob(job)->record.checkpoint_region, "r2");
  // The filler ends: n1-a (the spec's data region) is free, and so is `other` (the checkpoint's).
  Beat("n1-a", {{.job_id = filler, .epoch = 1, .phase = WorkloadPhase::kExited, .exit_code = 0}});
  ASSERT_EQ(State(filler), JobState::kSucceeded);
  // `first` falls silent until it is down; the job is requeued and placed again.
  for (int i = 0; i < 8; ++i) {
    clock_.Advance(seconds(1));
    Heartbeat("n1-a");
    Beat(other);
  }
  ASSERT_EQ(NodeState(first), "down");
  ASSERT_EQ(State(job), JobState::kScheduled);
  EXPECT_EQ(NodeOf(job), other) << "its checkpoint is in r2";
}

// The order of the attempts: regions reclaimed lately (AvoidingRegions) still come after every other,
// and within each, the data region then the nearest.
TEST(PreferringDataRegion, NearestFirstWithinWhatAvoidingRegionsAllows) {
  const api::RegionLatency latency = *api::ParseRegionLatency("r1,r2,80\nr2,r3,10\nr1,r3,90\n", "latency.csv");
  const std::set<std::string> known = {"r1", "r2", "r3"};
  sched::Request request;
  request.id = "j";
  const std::vector<sched::Request> attempts =
      PreferringDataRegion(AvoidingRegions({request}, known, {"r2"}), known, "r2", latency);
  std::vector<std::string> regions;
  for (const sched::Request& r : attempts) {
    auto it = r.node_selector.find(kRegionLabel);
    regions.push_back(it == r.node_selector.end() ? "any" : fmt::format("{}", fmt::join(it->second, "+")));
  }
  EXPECT_EQ(regions, (std::vector<std::string>{"r3", "r1", "r1+r3", "r2", "r3", "r1", "any"}));
  EXPECT_EQ(PreferringDataRegion({request}, known, "", latency).size(), 1u) << "no data region: unchanged";
  EXPECT_EQ(PreferringDataRegion({request}, {"r1"}, "r2", latency).size(), 1u) << "one region: nothing to prefer";
}

}  // namespace
}  // namespace gpugeek::controlplane
