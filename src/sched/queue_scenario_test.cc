// The queue scenario of testing/queue_scenario.h, driven by its own loop with a sched::Framework
// placing: the reference the simulator's and the control plane's runs of it are held to.

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sched/framework.h"
#include "sched/testing/queue_scenario.h"

namespace gpugeek::sched {
namespace {

TEST(QueueScenarioTest, FrameworkPlacesInTheExpectedOrder) {
  const testing::QueueScenario scenario = testing::SmallQueueScenario();
  auto cluster = Cluster::Create({testing::ScenarioNode(scenario)});
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  FrameworkOptions options;
  options.policy = "BestFit";
  auto framework = Framework::Create(options, &*cluster);
  ASSERT_TRUE(framework.ok()) << framework.status();
  AcceptAllBinder binder;
  std::map<std::string, std::vector<Placement>> running;
  std::vector<std::string> unschedulable;  // "id@free GPUs" per failed attempt
  auto placed = testing::RunQueueScenario(
      scenario,
      [&](const testing::ScenarioJob& job) -> absl::StatusOr<AttemptOutcome> {
        Request request;
        request.id = job.id;
        request.priority = job.priority;
        request.alternatives = {testing::ScenarioShape(job)};
        absl::StatusOr<Decision> d = (*framework)->Schedule(request, binder);
        if (!d.ok()) return d.status();
        if (!d->scheduled) {
          unschedulable.push_back(job.id);
          return AttemptOutcome{AttemptOutcome::Kind::kUnschedulable, d->reasons.at(0).reason};
        }
        running[job.id] = d->placements;
        return AttemptOutcome{AttemptOutcome::Kind::kPlaced, ""};
      },
      [&](const testing::ScenarioJob& job) {
        (*framework)->Release(running.at(job.id));
        running.erase(job.id);
      });
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(*placed, scenario.expected);
  // The attempts that failed, in order: each parked job is attempted once per capacity change, and
  // d only where b's shape had not failed earlier in the same cycle.
  EXPECT_EQ(unschedulable, (std::vector<std::string>{"b", "e", "f", "g", "b", "b", "b", "d"}));
  EXPECT_TRUE(running.empty());
  EXPECT_EQ((*framework)->cluster().allocated_gpu_milli(), 0);
}

}  // namespace
}  // namespace gpugeek::sched
