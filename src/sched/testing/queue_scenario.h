#pragma once
// A small scheduling-queue scenario with its exact expected placements, for tests of every scheduler
// that runs sched::SchedulingQueue: the queue's own driver (RunQueueScenario below, with a
// sched::Framework attempting), the simulator (sim/queue_scenario_test.cc) and the control plane.
// Each must place the scenario's jobs in the same order at the same times.
//
// The scenario exercises: priority then submission order; a job that does not fit parked until a
// job ends; a job of the same shape as one that just failed parked without an attempt; smaller jobs
// placed past a big one that waits (no head-of-line blocking); several jobs ending at one instant.

#include <algorithm>
#include <chrono>
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/units.h"
#include "sched/cluster.h"
#include "sched/request.h"
#include "sched/scheduling_queue.h"

namespace gpugeek::sched::testing {

struct ScenarioJob {
  std::string id;
  int priority = 0;
  int32_t gpus = 1;                 // whole GPUs (1000 milli each) on the scenario's one node
  std::chrono::seconds arrival{0};  // submitted at, since the start
  std::chrono::seconds runtime{1};  // > 0: it ends this long after it is placed, and its GPUs come back
};

struct ScenarioPlacement {
  std::string id;
  std::chrono::seconds at{0};  // since the start
  bool operator==(const ScenarioPlacement&) const = default;
};

struct QueueScenario {
  int32_t node_gpus = 4;                    // the one node's GPUs (ScenarioNode)
  std::vector<ScenarioJob> jobs;            // in submission order: sequence = index
  std::vector<ScenarioPlacement> expected;  // every placement, in order, with its time
};

// The scenario's one node: "node-0", node_gpus x A100, 64 cores, 256 GiB; only GPUs ever run short.
inline NodeSpec ScenarioNode(const QueueScenario& scenario) {
  NodeSpec n;
  n.name = "node-0";
  n.cpu_milli = 64000;
  n.memory_bytes = 256 * kGiB;
  n.gpu_count = scenario.node_gpus;
  n.gpu_model = "A100";
  return n;
}

// A job's shape: `gpus` whole GPUs, 1 core, 1 GiB.
inline ResourceShape ScenarioShape(const ScenarioJob& job) {
  ResourceShape s;
  s.cpu_milli = 1000;
  s.memory_bytes = kGiB;
  s.num_gpus = job.gpus;
  s.gpu_milli = kMilliPerGpu;
  return s;
}

// Shape key of a scenario job: equal GPU counts fit or fail alike on the scenario's node.
inline std::string ScenarioShapeKey(const ScenarioJob& job) { return fmt::format("{}xGPU", job.gpus); }

// One node of 4 GPUs. Timeline (t in seconds):
//  t=0  a(2 GPUs) placed, b(4) does not fit, c(2) placed, d(4) parked by b's shape
//  t=1  e(1, priority 5) does not fit
//  t=2  f(1, priority 9) and g(2) do not fit
//  t=10 a and c end: f (priority 9), e (5) placed; b does not fit (2 left), d parked by shape; g(2)
//       placed past them
//  t=11 g ends: b does not fit (2 free), d parked by shape
//  t=13 e ends: b does not fit (3 free)
//  t=14 f ends: b placed; d attempted (b's shape did not fail this cycle) and does not fit
//  t=19 b ends: d placed
inline QueueScenario SmallQueueScenario() {
  using std::chrono::seconds;
  QueueScenario s;
  s.jobs = {
      {"a", 0, 2, seconds(0), seconds(10)}, {"b", 0, 4, seconds(0), seconds(5)}, {"c", 0, 2, seconds(0), seconds(10)},
      {"d", 0, 4, seconds(0), seconds(5)},  {"e", 5, 1, seconds(1), seconds(3)}, {"f", 9, 1, seconds(2), seconds(4)},
      {"g", 0, 2, seconds(2), seconds(1)},
  };
  s.expected = {{"a", seconds(0)},  {"c", seconds(0)},  {"f", seconds(10)}, {"e", seconds(10)},
                {"g", seconds(10)}, {"b", seconds(14)}, {"d", seconds(19)}};
  return s;
}

// Attempts one job now: kPlaced when it was placed (its resources are taken), kUnschedulable when it
// does not fit, kError for a binding error. An error status ends the run.
using ScenarioAttemptFn = std::function<absl::StatusOr<AttemptOutcome>(const ScenarioJob& job)>;
// The job's runtime ended: give its resources back.
using ScenarioReleaseFn = std::function<void(const ScenarioJob& job)>;

// Drives `scenario` through a SchedulingQueue, as the simulator does: at each instant (an arrival, the
// end of a job, the end of a backoff), first the jobs ending then release their resources (each a
// CapacityChanged), then the arrivals are added, then one RunCycle attempts what is active. Stops
// when no arrival, end or backoff is left. Returns the placements in order. Errors: the attempt's.
inline absl::StatusOr<std::vector<ScenarioPlacement>> RunQueueScenario(const QueueScenario& scenario,
                                                                       const ScenarioAttemptFn& attempt,
                                                                       const ScenarioReleaseFn& release) {
  using std::chrono::seconds;
  SchedulingQueue queue;
  std::vector<ScenarioPlacement> placed;
  std::multimap<Duration, size_t> ends;  // end time -> job index
  size_t next_arrival = 0;
  std::vector<size_t> by_arrival(scenario.jobs.size());
  for (size_t i = 0; i < by_arrival.size(); ++i) by_arrival[i] = i;
  std::stable_sort(by_arrival.begin(), by_arrival.end(),
                   [&](size_t x, size_t y) { return scenario.jobs[x].arrival < scenario.jobs[y].arrival; });
  const MonoTime start{};
  while (true) {
    std::vector<Duration> candidates;
    if (next_arrival < by_arrival.size()) candidates.push_back(scenario.jobs[by_arrival[next_arrival]].arrival);
    if (!ends.empty()) candidates.push_back(ends.begin()->first);
    if (auto b = queue.NextBackoffExpiry()) candidates.push_back(*b - start);
    if (candidates.empty()) break;
    const Duration now = *std::min_element(candidates.begin(), candidates.end());
    while (!ends.empty() && ends.begin()->first == now) {
      release(scenario.jobs[ends.begin()->second]);
      ends.erase(ends.begin());
      queue.CapacityChanged();
    }
    while (next_arrival < by_arrival.size() && scenario.jobs[by_arrival[next_arrival]].arrival == now) {
      const size_t i = by_arrival[next_arrival++];
      const ScenarioJob& job = scenario.jobs[i];
      if (absl::Status s = queue.Add({job.id, job.priority, i, ScenarioShapeKey(job), i}); !s.ok()) return s;
    }
    absl::StatusOr<CycleStats> stats =
        queue.RunCycle(start + now, [&](const QueueItem& item) -> absl::StatusOr<AttemptOutcome> {
          const ScenarioJob& job = scenario.jobs[item.payload];
          absl::StatusOr<AttemptOutcome> outcome = attempt(job);
          if (outcome.ok() && outcome->kind == AttemptOutcome::Kind::kPlaced) {
            placed.push_back({job.id, std::chrono::duration_cast<seconds>(now)});
            ends.emplace(now + job.runtime, item.payload);
          }
          return outcome;
        });
    if (!stats.ok()) return stats.status();
  }
  return placed;
}

}  // namespace gpugeek::sched::testing
