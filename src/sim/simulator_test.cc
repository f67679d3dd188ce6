#include "sim/simulator.h"

#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sched/testing/queue_scenario.h"

namespace gpugeek::sim {
namespace {

using std::chrono::seconds;
using ::testing::ElementsAre;

// A one-node cluster (the queue scenario's node) with a BestFit framework and a virtual clock, and
// what the observer saw: "kind:id@t" per event, t in seconds.
class SimulatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = sched::Cluster::Create({sched::testing::ScenarioNode(scenario_)});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_.emplace(*std::move(cluster));
    sched::FrameworkOptions options;
    options.policy = "BestFit";
    auto framework = sched::Framework::Create(options, &*cluster_);
    ASSERT_TRUE(framework.ok()) << framework.status();
    framework_ = *std::move(framework);
  }

  static SimPod Pod(const sched::testing::ScenarioJob& job) {
    return SimPod{job.id, sched::testing::ScenarioShape(job), job.arrival, job.runtime, job.priority};
  }

  absl::Status Run(const std::vector<SimPod>& pods, SimulatorOptions options) {
    simulator_.emplace(*framework_, clock_, options);
    const TimePoint start = clock_.Now();
    return simulator_->Run(pods, [&](const SimEvent& e) {
      const int64_t t = std::chrono::duration_cast<seconds>(clock_.Now() - start).count();
      const std::string& id = pods[e.pod].id;
      switch (e.kind) {
        case SimEvent::Kind::kDeparture:
          log_.push_back(fmt::format("depart:{}@{}", id, t));
          break;
        case SimEvent::Kind::kArrival:
        case SimEvent::Kind::kRetry:
          log_.push_back(fmt::format("{}:{}@{}:{}", e.kind == SimEvent::Kind::kArrival ? "arrive" : "retry", id, t,
                                     e.decision->scheduled ? "placed" : "no"));
          if (e.decision->scheduled) placed_.push_back({id, seconds(t)});
          break;
        case SimEvent::Kind::kEviction:
          log_.push_back(fmt::format("evict:{}@{}", id, t));
          break;
      }
    });
  }

  sched::testing::QueueScenario scenario_ = sched::testing::SmallQueueScenario();
  std::optional<sched::Cluster> cluster_;
  std::unique_ptr<sched::Framework> framework_;
  FakeClock clock_;
  std::optional<Simulator> simulator_;
  std::vector<std::string> log_;
  std::vector<sched::testing::ScenarioPlacement> placed_;
};

// The scenario of sched/testing/queue_scenario.h: the simulator, requeueing, places its jobs in the
// order and at the times the queue's reference run (sched/queue_scenario_test.cc) and the control
// plane do.
TEST_F(SimulatorTest, QueueScenarioPlacesInTheExpectedOrder) {
  std::vector<SimPod> pods;
  for (const auto& job : scenario_.jobs) pods.push_back(Pod(job));
  ASSERT_TRUE(Run(pods, {.requeue_unschedulable = true}).ok());
  EXPECT_EQ(placed_, scenario_.expected);
  EXPECT_THAT(log_, ElementsAre("arrive:a@0:placed", "arrive:b@0:no", "arrive:c@0:placed", "arrive:d@0:no",
                                "arrive:e@1:no", "arrive:f@2:no", "arrive:g@2:no",                       //
                                "depart:a@10", "depart:c@10", "retry:f@10:placed", "retry:e@10:placed",  //
                                "retry:b@10:no", "retry:d@10:no", "retry:g@10:placed",                   //
                                "depart:g@11", "retry:b@11:no", "retry:d@11:no",                         //
                                "depart:e@13", "retry:b@13:no", "retry:d@13:no",                         //
                                "depart:f@14", "retry:b@14:placed", "retry:d@14:no",                     //
                                "depart:b@19", "retry:d@19:placed", "depart:d@24"));
  EXPECT_EQ(simulator_->queue().size(), 0u);
  EXPECT_EQ(cluster_->allocated_gpu_milli(), 0);
}

// The FGD protocol: one attempt per pod at its arrival, a failure is final, departures before
// arrivals at equal times, and pods arriving together attempted in list order (equal priorities) even
// when of one shape.
TEST_F(SimulatorTest, FgdProtocolGivesEachPodOneAttempt) {
  using sched::testing::ScenarioJob;
  std::vector<SimPod> pods = {
      Pod(ScenarioJob{"a", 0, 4, seconds(0), seconds(5)}), Pod(ScenarioJob{"b", 0, 4, seconds(1), seconds(5)}),
      Pod(ScenarioJob{"c", 0, 4, seconds(5), seconds(5)}), Pod(ScenarioJob{"d", 0, 1, seconds(6), seconds(1)}),
      Pod(ScenarioJob{"e", 0, 1, seconds(6), seconds(1)}), Pod(ScenarioJob{"f", 0, 1, seconds(10), seconds(1)}),
  };
  pods[5].runtime.reset();  // never departs
  ASSERT_TRUE(Run(pods, {}).ok());
  EXPECT_THAT(log_, ElementsAre("arrive:a@0:placed", "arrive:b@1:no", "depart:a@5", "arrive:c@5:placed",
                                "arrive:d@6:no", "arrive:e@6:no", "depart:c@10", "arrive:f@10:placed"));
  EXPECT_EQ(simulator_->queue().size(), 0u);  // b, d and e left
  EXPECT_EQ(cluster_->allocated_gpu_milli(), 1000);
}

// Pods arriving at one instant are attempted by priority, then list order.
TEST_F(SimulatorTest, PriorityOrdersPodsArrivingTogether) {
  using sched::testing::ScenarioJob;
  const std::vector<SimPod> pods = {
      Pod(ScenarioJob{"low", 0, 2, seconds(3), seconds(1)}),
      Pod(ScenarioJob{"high", 7, 3, seconds(3), seconds(1)}),
      Pod(ScenarioJob{"mid", 1, 1, seconds(3), seconds(1)}),
  };
  ASSERT_TRUE(Run(pods, {.requeue_unschedulable = true}).ok());
  EXPECT_THAT(log_, ElementsAre("arrive:high@3:placed", "arrive:mid@3:placed", "arrive:low@3:no", "depart:high@4",
                                "depart:mid@4", "retry:low@4:placed", "depart:low@5"));
}

TEST_F(SimulatorTest, SchedulingErrorNamesThePod) {
  SimPod bad = Pod(sched::testing::ScenarioJob{"bad", 0, 1, seconds(0), seconds(1)});
  bad.shape.gpu_milli = 0;  // GPUs without milli: invalid
  const absl::Status s = Run({bad}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("pod 'bad': "));
}

}  // namespace
}  // namespace gpugeek::sim
