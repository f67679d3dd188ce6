#include "sched/scheduling_queue.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpugeek::sched {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;

QueueItem Item(std::string key, int priority, uint64_t sequence, std::string shape = "s") {
  return QueueItem{std::move(key), priority, sequence, std::move(shape), sequence};
}

const MonoTime kT0 = MonoTime{} + seconds(1000);

// Pops the rest of the cycle, attempting nothing: the keys of the items returned for an attempt.
// Each is reported Done so the queue stays consistent.
std::vector<std::string> DrainDone(SchedulingQueue& q, MonoTime now = kT0) {
  std::vector<std::string> out;
  while (auto p = q.Pop(now)) {
    if (!p->attempt) continue;
    out.push_back(p->item.key);
    EXPECT_TRUE(q.Done(p->item.key).ok());
  }
  return out;
}

TEST(SchedulingQueueTest, PriorityThenSubmissionOrderThenKey) {
  SchedulingQueue q;
  ASSERT_TRUE(q.Add(Item("c", 0, 3)).ok());
  ASSERT_TRUE(q.Add(Item("a", 5, 7)).ok());
  ASSERT_TRUE(q.Add(Item("b", 0, 1)).ok());
  ASSERT_TRUE(q.Add(Item("d", 5, 2)).ok());
  ASSERT_TRUE(q.Add(Item("f", -1, 0)).ok());
  ASSERT_TRUE(q.Add(Item("e2", 0, 4)).ok());
  ASSERT_TRUE(q.Add(Item("e1", 0, 4)).ok());
  EXPECT_EQ(q.size(), 7u);
  EXPECT_EQ(q.active_size(), 7u);
  EXPECT_THAT(DrainDone(q), ElementsAre("d", "a", "b", "c", "e1", "e2", "f"));
  EXPECT_EQ(q.size(), 0u);
}

TEST(SchedulingQueueTest, ErrorsForUnknownDuplicateAndNotInFlight) {
  SchedulingQueue q;
  ASSERT_TRUE(q.Add(Item("a", 0, 1)).ok());
  EXPECT_EQ(q.Add(Item("a", 3, 9)).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(q.Done("a").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(q.Unschedulable("a", 0, "x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(q.Backoff("a", kT0, "x").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(q.Done("zz").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(q.Update(Item("zz", 0, 0)).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(q.Remove("zz"));
  auto p = q.Pop(kT0);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(q.State("a"), QueueState::kInFlight);
  EXPECT_EQ(q.in_flight_size(), 1u);
  EXPECT_EQ(q.Unschedulable("a", 1, "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(q.Done("a").ok());
  EXPECT_EQ(q.Done("a").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(q.in_flight_size(), 0u);
}

TEST(SchedulingQueueTest, UnschedulableParksUntilCapacityChanges) {
  SchedulingQueue q;
  ASSERT_TRUE(q.Add(Item("big", 1, 1, "8gpu")).ok());
  ASSERT_TRUE(q.Add(Item("small", 0, 2, "1gpu")).ok());
  auto p = q.Pop(kT0);
  ASSERT_EQ(p->item.key, "big");
  ASSERT_TRUE(q.Unschedulable("big", q.capacity_generation(), "no node fits").ok());
  EXPECT_EQ(q.State("big"), QueueState::kParked);
  EXPECT_EQ(q.Reason("big"), "no node fits");
  EXPECT_EQ(q.parked_size(), 1u);
  EXPECT_THAT(DrainDone(q), ElementsAre("small"));
  // Later cycles without a capacity change do not attempt it.
  q.BeginCycle();
  EXPECT_FALSE(q.Pop(kT0).has_value());
  q.BeginCycle();
  EXPECT_FALSE(q.Pop(kT0).has_value());
  EXPECT_EQ(q.capacity_generation(), 0u);
  q.CapacityChanged();
  EXPECT_EQ(q.capacity_generation(), 1u);
  EXPECT_EQ(q.State("big"), QueueState::kActive);
  EXPECT_EQ(q.parked_size(), 0u);
  EXPECT_EQ(q.active_size(), 1u);
  EXPECT_EQ(q.Reason("big"), "no node fits");  // kept until the next outcome
  EXPECT_THAT(DrainDone(q), ElementsAre("big"));
  EXPECT_EQ(q.Reason("big"), "");
}

TEST(SchedulingQueueTest, WokenAfterItsAttemptWaitsForTheNextCycle) {
  SchedulingQueue q;
  ASSERT_TRUE(q.Add(Item("a", 0, 1, "x")).ok());
  ASSERT_TRUE(q.Add(Item("b", 0, 2, "y")).ok());
  q.BeginCycle();
  auto a = q.Pop(kT0);
  ASSERT_EQ(a->item.key, "a");
  ASSERT_TRUE(q.Unschedulable("a", 0, "full").ok());
  q.CapacityChanged();  // e.g. a job ended while this pass runs
  EXPECT_EQ(q.State("a"), QueueState::kActive);
  EXPECT_EQ(q.active_size(), 2u);
  EXPECT_THAT(DrainDone(q), ElementsAre("b"));  // "a" was attempted in this cycle already
  q.BeginCycle();
  EXPECT_THAT(DrainDone(q), ElementsAre("a"));
}

TEST(SchedulingQueueTest, StaleGenerationMakesTheItemActiveAgain) {
  SchedulingQueue q;
  ASSERT_TRUE(q.Add(Item("a", 0, 1, "x")).ok());
  ASSERT_TRUE(q.Add(Item("b", 0, 2, "x")).ok());
  const uint64_t generation = q.capacity_generation();
  auto a = q.Pop(kT0);
  ASSERT_EQ(a->item.key, "a");
  q.CapacityChanged();  // while "a" was being attempted
  ASSERT_TRUE(q.Unschedulable("a", generation, "full").ok());
  EXPECT_EQ(q.State("a"), QueueState::kActive);
  EXPECT_EQ(q.Reason("a"), "full");
  // The stale failure does not speak for shape "x": "b" gets its attempt.
  auto b = q.Pop(kT0);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->item.key, "b");
  EXPECT_TRUE(b->attempt);
  ASSERT_TRUE(q.Done("b").ok());
  EXPECT_FALSE(q.Pop(kT0).has_value());
  q.BeginCycle();
  EXPECT_THAT(DrainDone(q), ElementsAre("a"));
}

TEST(SchedulingQueueTest, SameShapeParkedWithoutAttemptWithinACycle) {
  SchedulingQueue q;
  ASSERT_TRUE(q.Add(Item("a", 10, 5, "8gpu")).ok());
  ASSERT_TRUE(q.Add(Item("b", 5, 1, "1gpu")).ok());
  ASSERT_TRUE(q.Add(Item("c", 5, 2, "8gpu")).ok());
  ASSERT_TRUE(q.Add(Item("d", 0, 0, "8gpu")).ok());
  q.BeginCycle();
  auto a = q.Pop(kT0);
  ASSERT_EQ(a->item.key, "a");
  ASSERT_TRUE(q.Unschedulable("a", 0, "fewer than 8 GPUs free").ok());
  auto b = q.Pop(kT0);
  ASSERT_EQ(b->item.key, "b");
  ASSERT_TRUE(b->attempt);
  ASSERT_TRUE(q.Done("b").ok());
  auto c = q.Pop(kT0);
  ASSERT_EQ(c->item.key, "c");
  EXPECT_FALSE(c->attempt);
  EXPECT_EQ(c->reason, "fewer than 8 GPUs free");
  EXPECT_EQ(q.State("c"), QueueState::kParked);
  EXPECT_EQ(q.Reason("c"), "fewer than 8 GPUs free");
  auto d = q.Pop(kT0);
  ASSERT_EQ(d->item.key, "d");
  EXPECT_FALSE(d->attempt);
  EXPECT_FALSE(q.Pop(kT0).has_value());
  EXPECT_EQ(q.parked_size(), 3u);
  EXPECT_EQ(q.in_flight_size(), 0u);

  // A new item of that shape in a later cycle gets its own attempt (the cycle forgot the shape).
  q.BeginCycle();
  ASSERT_TRUE(q.Add(Item("e", 0, 9, "8gpu")).ok());
  auto e = q.Pop(kT0);
  ASSERT_EQ(e->item.key, "e");
  EXPECT_TRUE(e->attempt);
  ASSERT_TRUE(q.Unschedulable("e", 0, "still full").ok());
  // After a capacity change within the cycle the shape is no longer known to fail: "f" is attempted.
  q.CapacityChanged();
  ASSERT_TRUE(q.Add(Item("f", 0, 10, "8gpu")).ok());
  auto next = q.Pop(kT0);
  ASSERT_EQ(next->item.key, "a");  // woken, not attempted in this cycle
  EXPECT_TRUE(next->attempt);
  ASSERT_TRUE(q.Done("a").ok());
  EXPECT_THAT(DrainDone(q), ElementsAre("c", "d", "f"));  // "e" waits for the next cycle
  q.BeginCycle();
  EXPECT_THAT(DrainDone(q), ElementsAre("e"));
}

TEST(SchedulingQueueTest, BackoffDoublesToTheCapAndExpires) {
  SchedulingQueue q;  // 100 ms doubling to 10 s
  ASSERT_TRUE(q.Add(Item("a", 0, 1)).ok());
  MonoTime now = kT0;
  std::vector<int64_t> delays_ms;
  for (int i = 0; i < 9; ++i) {
    q.BeginCycle();
    auto p = q.Pop(now);
    ASSERT_TRUE(p.has_value()) << i;
    ASSERT_TRUE(q.Backoff("a", now, "store: database is locked").ok());
    EXPECT_EQ(q.State("a"), QueueState::kBackoff);
    EXPECT_EQ(q.backoff_size(), 1u);
    const MonoTime until = *q.NextBackoffExpiry();
    delays_ms.push_back(std::chrono::duration_cast<milliseconds>(until - now).count());
    q.BeginCycle();
    EXPECT_FALSE(q.Pop(until - std::chrono::nanoseconds(1)).has_value()) << i;
    now = until;
  }
  EXPECT_THAT(delays_ms, ElementsAre(100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000));
  EXPECT_EQ(q.Reason("a"), "store: database is locked");
  // An unschedulable outcome ends the run of errors: the next error backs off 100 ms again.
  auto p = q.Pop(now);
  ASSERT_TRUE(p.has_value());
  ASSERT_TRUE(q.Unschedulable("a", 0, "full").ok());
  q.CapacityChanged();
  q.BeginCycle();
  ASSERT_TRUE(q.Pop(now).has_value());
  ASSERT_TRUE(q.Backoff("a", now, "again").ok());
  EXPECT_EQ(*q.NextBackoffExpiry(), now + milliseconds(100));
}

TEST(SchedulingQueueTest, BackoffConfigurableAndOrderedByExpiry) {
  SchedulingQueue q(SchedulingQueueOptions{.initial_backoff = seconds(1), .max_backoff = seconds(3)});
  ASSERT_TRUE(q.Add(Item("late", 9, 1)).ok());
  ASSERT_TRUE(q.Add(Item("early", 0, 2)).ok());
  ASSERT_TRUE(q.Pop(kT0).has_value());
  ASSERT_TRUE(q.Backoff("late", kT0 + seconds(1), "e").ok());  // until kT0 + 2 s
  ASSERT_TRUE(q.Pop(kT0).has_value());
  ASSERT_TRUE(q.Backoff("early", kT0, "e").ok());  // until kT0 + 1 s
  EXPECT_EQ(*q.NextBackoffExpiry(), kT0 + seconds(1));
  q.BeginCycle();
  EXPECT_THAT(DrainDone(q, kT0 + milliseconds(1500)), ElementsAre("early"));
  EXPECT_EQ(q.State("late"), QueueState::kBackoff);
  EXPECT_THAT(DrainDone(q, kT0 + seconds(2)), ElementsAre("late"));
}

TEST(SchedulingQueueTest, RemoveTakesOutParkedBackingOffAndInFlightItems) {
  SchedulingQueue q;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.Add(Item(fmt::format("j{}", i), 0, i, fmt::format("s{}", i))).ok());
  ASSERT_EQ(q.Pop(kT0)->item.key, "j0");
  ASSERT_TRUE(q.Unschedulable("j0", 0, "full").ok());
  ASSERT_EQ(q.Pop(kT0)->item.key, "j1");
  ASSERT_TRUE(q.Backoff("j1", kT0, "error").ok());
  ASSERT_EQ(q.Pop(kT0)->item.key, "j2");
  EXPECT_EQ(q.parked_size(), 1u);
  EXPECT_EQ(q.backoff_size(), 1u);
  EXPECT_EQ(q.in_flight_size(), 1u);
  EXPECT_EQ(q.active_size(), 1u);
  EXPECT_TRUE(q.Remove("j0"));
  EXPECT_TRUE(q.Remove("j1"));
  EXPECT_TRUE(q.Remove("j2"));
  EXPECT_FALSE(q.Remove("j2"));
  EXPECT_EQ(q.Done("j2").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(q.Reason("j0"), "");
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.parked_size() + q.backoff_size() + q.in_flight_size(), 0u);
  EXPECT_FALSE(q.NextBackoffExpiry().has_value());
  // Neither a capacity change nor the end of the backoff brings them back.
  q.CapacityChanged();
  q.BeginCycle();
  EXPECT_THAT(DrainDone(q, kT0 + seconds(60)), ElementsAre("j3"));
  EXPECT_EQ(q.size(), 0u);
}

TEST(SchedulingQueueTest, UpdateReordersAndUnparksOnANewShape) {
  SchedulingQueue q;
  ASSERT_TRUE(q.Add(Item("a", 0, 1, "x")).ok());
  ASSERT_TRUE(q.Add(Item("b", 0, 2, "y")).ok());
  ASSERT_TRUE(q.Add(Item("c", 0, 3, "z")).ok());
  ASSERT_TRUE(q.Update(Item("c", 7, 3, "z")).ok());
  ASSERT_EQ(q.Pop(kT0)->item.key, "c");
  ASSERT_TRUE(q.Unschedulable("c", 0, "full").ok());
  ASSERT_TRUE(q.Update(Item("c", 7, 3, "z")).ok());  // same shape: stays parked
  EXPECT_EQ(q.State("c"), QueueState::kParked);
  q.BeginCycle();
  ASSERT_TRUE(q.Update(Item("c", 7, 3, "z-smaller")).ok());
  EXPECT_EQ(q.State("c"), QueueState::kActive);
  EXPECT_THAT(DrainDone(q), ElementsAre("c", "a", "b"));
}

TEST(SchedulingQueueTest, RunCycleAppliesOutcomes) {
  SchedulingQueue q;
  ASSERT_TRUE(q.Add(Item("place", 3, 1, "p")).ok());
  ASSERT_TRUE(q.Add(Item("full", 2, 2, "f")).ok());
  ASSERT_TRUE(q.Add(Item("full-too", 1, 3, "f")).ok());
  ASSERT_TRUE(q.Add(Item("err", 0, 4, "e")).ok());
  ASSERT_TRUE(q.Add(Item("drop", 0, 5, "d")).ok());
  std::vector<std::string> attempted, parked;
  auto stats = q.RunCycle(
      kT0,
      [&](const QueueItem& item) -> absl::StatusOr<AttemptOutcome> {
        attempted.push_back(item.key);
        if (item.key == "place") return AttemptOutcome{AttemptOutcome::Kind::kPlaced, ""};
        if (item.key == "full") return AttemptOutcome{AttemptOutcome::Kind::kUnschedulable, "no GPU"};
        if (item.key == "err") return AttemptOutcome{AttemptOutcome::Kind::kError, "locked"};
        return AttemptOutcome{AttemptOutcome::Kind::kDropped, ""};
      },
      [&](const QueueItem& item, const std::string& reason) { parked.push_back(item.key + ": " + reason); });
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_THAT(attempted, ElementsAre("place", "full", "err", "drop"));
  EXPECT_THAT(parked, ElementsAre("full-too: no GPU"));
  EXPECT_EQ(stats->attempted, 4u);
  EXPECT_EQ(stats->placed, 1u);
  EXPECT_EQ(stats->unschedulable, 1u);
  EXPECT_EQ(stats->parked_by_shape, 1u);
  EXPECT_EQ(stats->errors, 1u);
  EXPECT_EQ(stats->dropped, 1u);
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(q.parked_size(), 2u);
  EXPECT_EQ(q.backoff_size(), 1u);
  EXPECT_EQ(*q.NextBackoffExpiry(), kT0 + milliseconds(100));

  // An error from the attempt ends the pass; the item is active again from the next cycle.
  q.CapacityChanged();
  attempted.clear();
  auto failed = q.RunCycle(kT0 + milliseconds(100), [&](const QueueItem& item) -> absl::StatusOr<AttemptOutcome> {
    attempted.push_back(item.key);
    return absl::InternalError("boom");
  });
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(attempted, ElementsAre("full"));
  EXPECT_EQ(q.State("full"), QueueState::kActive);
  EXPECT_EQ(q.active_size(), 3u);  // "full", "full-too" and "err" (its backoff ended)
  EXPECT_EQ(q.in_flight_size(), 0u);
}

TEST(SchedulingQueueTest, RunCycleSeesCapacityChangedDuringAnAttempt) {
  SchedulingQueue q;
  ASSERT_TRUE(q.Add(Item("a", 0, 1, "x")).ok());
  ASSERT_TRUE(q.Add(Item("b", 0, 2, "x")).ok());
  auto stats = q.RunCycle(kT0, [&](const QueueItem& item) -> absl::StatusOr<AttemptOutcome> {
    if (item.key == "a") q.CapacityChanged();  // a release while "a" was attempted
    return AttemptOutcome{AttemptOutcome::Kind::kUnschedulable, "full"};
  });
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->attempted, 2u);  // "a"'s failure was stale, so "b" was attempted, not parked
  EXPECT_EQ(q.State("a"), QueueState::kActive);
  EXPECT_EQ(q.State("b"), QueueState::kParked);
}

TEST(SchedulingQueueTest, TenThousandItemsInOrder) {
  SchedulingQueue q;
  // Priorities 0..9 interleaved; sequence runs backwards within the insertion order.
  for (int i = 0; i < 10000; ++i) {
    const std::string key = fmt::format("k{:05}", i);
    ASSERT_TRUE(q.Add(Item(key, i % 10, 10000 - i, key)).ok());  // shapes all differ: no parking by shape
  }
  EXPECT_EQ(q.size(), 10000u);
  int n = 0, last_priority = 10;
  uint64_t last_sequence = 0;
  while (auto p = q.Pop(kT0)) {
    if (p->item.priority != last_priority) {
      EXPECT_EQ(p->item.priority, last_priority - 1);
      last_priority = p->item.priority;
      last_sequence = 0;
    }
    EXPECT_GT(p->item.sequence, last_sequence);
    last_sequence = p->item.sequence;
    ASSERT_TRUE(q.Unschedulable(p->item.key, 0, "full").ok());
    ++n;
  }
  EXPECT_EQ(n, 10000);
  EXPECT_EQ(q.parked_size(), 10000u);
  q.CapacityChanged();
  q.BeginCycle();
  EXPECT_EQ(q.active_size(), 10000u);
  EXPECT_EQ(q.Pop(kT0)->item.key, "k09999");  // priority 9, lowest sequence
}

}  // namespace
}  // namespace gpugeek::sched
