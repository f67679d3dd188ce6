// The scheduling queue with tenants: fair-share order, quotas parked without blocking, release and
// quota changes waking them. The attempts go through ScheduleWithinQuota on a real Framework, as
// the control plane's and the simulator's do.

#include <map>
#include <numbers>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sched/framework.h"
#include "sched/quota.h"
#include "sched/scheduling_queue.h"
#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers
using std::chrono::hours;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

const MonoTime kT0 = MonoTime{} + seconds(1000);

QueueItem Item(std::string key, std::string tenant, uint64_t sequence, int priority = 0) {
  QueueItem item{std::move(key), priority, sequence, "s", sequence};
  item.tenant = std::move(tenant);
  return item;
}

// Pops a whole cycle, attempting nothing (each attempted item reported Done).
std::vector<std::string> PopOrder(SchedulingQueue& q) {
  std::vector<std::string> out;
  q.BeginCycle();
  while (auto p = q.Pop(kT0)) {
    if (!p->attempt) continue;
    out.push_back(p->item.key);
    EXPECT_TRUE(q.Done(p->item.key).ok());
  }
  return out;
}

TEST(FairShareQueueTest, TenantsByNormalisedUsageThenTheirOwnOrder) {
  SchedulingQueue q;
  ASSERT_TRUE(q.ledger().RestoreUsage("a", 3000).ok());
  ASSERT_TRUE(q.ledger().RestoreUsage("b", 1000).ok());
  for (auto item :
       {Item("a1", "a", 1), Item("a2", "a", 3, 5), Item("b1", "b", 2), Item("b2", "b", 4, 7), Item("c1", "c", 9)}) {
    ASSERT_TRUE(q.Add(item).ok());
  }
  // c has no usage (0), then b (1000), then a (3000); inside each, priority then submission order.
  EXPECT_THAT(PopOrder(q), ElementsAre("c1", "b2", "b1", "a2", "a1"));
}

TEST(FairShareQueueTest, WeightsScaleUsageAndTiesGoToTheEarlierItem) {
  SchedulingQueue q;
  ASSERT_TRUE(q.ledger().SetTenant("a", {.weight = 3}).ok());
  ASSERT_TRUE(q.ledger().RestoreUsage("a", 3000).ok());
  ASSERT_TRUE(q.ledger().RestoreUsage("b", 1000).ok());
  // 3000 / 3 = 1000 / 1: a tie, so the queue's own order (submission here) decides across tenants.
  for (auto item : {Item("a1", "a", 1), Item("b2", "b", 2), Item("a3", "a", 3), Item("b4", "b", 4)}) {
    ASSERT_TRUE(q.Add(item).ok());
  }
  EXPECT_THAT(PopOrder(q), ElementsAre("a1", "b2", "a3", "b4"));
}

TEST(FairShareQueueTest, UsageAccruedFromHoldingsOrdersTheNextCycle) {
  SchedulingQueue q(SchedulingQueueOptions{.ledger = {.half_life = hours(1)}});
  ASSERT_TRUE(q.ledger().Bind("held", "a", Holding{{{"A100", 1000}}}, kT0).ok());
  ASSERT_TRUE(q.Add(Item("a1", "a", 1)).ok());
  ASSERT_TRUE(q.Add(Item("b1", "b", 2)).ok());
  std::vector<std::string> order;
  auto attempt = [&](const QueueItem& item) -> absl::StatusOr<AttemptOutcome> {
    order.push_back(item.key);
    return AttemptOutcome{AttemptOutcome::Kind::kPlaced, ""};
  };
  // An hour later a has used 1000 * (3600 / ln 2) / 2 milli-GPU-seconds; b none: b goes first.
  ASSERT_TRUE(q.RunCycle(kT0 + hours(1), attempt).ok());
  EXPECT_THAT(order, ElementsAre("b1", "a1"));
  EXPECT_NEAR(q.ledger().Usage("a").usage, 1000 * 3600 / std::numbers::ln2 / 2, 1e-6);
}

// A cluster, a framework and a queue whose attempts go through ScheduleWithinQuota.
class QuotaQueueTest : public ::testing::Test {
 protected:
  void Init(std::vector<NodeSpec> nodes) {
    auto c = Cluster::Create(std::move(nodes));
    ASSERT_TRUE(c.ok());
    cluster_.emplace(*std::move(c));
    FrameworkOptions fo;
    fo.policy = "BestFit";
    auto fw = Framework::Create(fo, &*cluster_);
    ASSERT_TRUE(fw.ok());
    framework_ = *std::move(fw);
  }
  void Submit(const std::string& key, const std::string& tenant, ResourceShape shape, int priority = 0,
              bool declare_min = false) {
    requests_[key] = Req(key, shape);
    QueueItem item = Item(key, tenant, ++sequence_, priority);
    item.shape_key = fmt::format("{}x{}:{}", shape.num_gpus, shape.gpu_milli, fmt::join(shape.allowed_models, "|"));
    if (declare_min) item.min_gpu_milli = int64_t{shape.num_gpus} * shape.gpu_milli;
    ASSERT_TRUE(queue_.Add(item).ok());
  }
  // One pass: what was placed, in order; parked items' reasons in parked_.
  std::vector<std::string> Cycle(MonoTime now = kT0) {
    std::vector<std::string> placed;
    auto attempt = [&](const QueueItem& item) -> absl::StatusOr<AttemptOutcome> {
      attempted_.push_back(item.key);
      auto r = ScheduleWithinQuota(queue_.ledger(), item.key, item.tenant, requests_.at(item.key), *framework_, binder_,
                                   now);
      if (!r.ok()) return r.status();
      if (r->over_quota) return AttemptOutcome{AttemptOutcome::Kind::kOverQuota, r->reason};
      if (!r->decision.scheduled) return AttemptOutcome{AttemptOutcome::Kind::kUnschedulable, "no node fits"};
      placements_[item.key] = r->decision.placements;
      placed.push_back(item.key);
      return AttemptOutcome{AttemptOutcome::Kind::kPlaced, ""};
    };
    auto parked = [&](const QueueItem& item, const std::string& reason) { parked_[item.key] = reason; };
    auto stats = queue_.RunCycle(now, attempt, parked);
    EXPECT_TRUE(stats.ok());
    if (stats.ok()) stats_ = *stats;
    return placed;
  }
  // Job `key` ends: the framework and the ledger get its resources back, the queue hears of capacity.
  void End(const std::string& key, MonoTime now = kT0) {
    framework_->Release(placements_.at(key));
    EXPECT_TRUE(queue_.ledger().Release(key, now));
    queue_.CapacityChanged();
  }

  std::optional<Cluster> cluster_;
  std::unique_ptr<Framework> framework_;
  AcceptAllBinder binder_;
  SchedulingQueue queue_;
  std::map<std::string, Request> requests_;
  std::map<std::string, std::vector<Placement>> placements_;
  std::map<std::string, std::string> parked_;
  std::vector<std::string> attempted_;
  CycleStats stats_;
  uint64_t sequence_ = 0;
};

TEST_F(QuotaQueueTest, OverQuotaHeadNeverBlocksAnotherTenantsJobOrItsOwnSmallerOne) {
  Init({Node("n", 64000, 8, "A100-80GB")});
  ASSERT_TRUE(queue_.ledger().SetTenant("a", {.quota = {.max_gpu_milli = 6000}}).ok());
  Submit("a-run", "a", Shape(1000, 4, 1000));
  EXPECT_THAT(Cycle(), ElementsAre("a-run"));
  // a's head (priority 10) needs 4 more GPUs against 2 left in its quota; behind it, a's 1-GPU job and
  // b's 2-GPU job. The pass parks the head and places both others.
  Submit("a-big", "a", Shape(1000, 4, 1000), 10);
  Submit("a-small", "a", Shape(1000, 1, 1000));
  Submit("b-job", "b", Shape(1000, 2, 1000));
  EXPECT_THAT(Cycle(), ElementsAre("a-small", "b-job"));
  EXPECT_THAT(attempted_, ElementsAre("a-run", "a-big", "a-small", "b-job"));
  EXPECT_EQ(stats_.over_quota, 1u);
  EXPECT_EQ(stats_.placed, 2u);
  EXPECT_EQ(queue_.State("a-big"), QueueState::kOverQuota);
  EXPECT_EQ(queue_.Reason("a-big"), "over quota (tenant 'a'): 4000 of 6000 milli-GPU held, 4000 more needed");
  EXPECT_EQ(queue_.over_quota_size(), 1u);
  EXPECT_EQ(queue_.parked_size(), 0u);
  EXPECT_EQ(queue_.waiting_size("a"), 1u);
  EXPECT_EQ(queue_.waiting_size("b"), 0u);
}

TEST_F(QuotaQueueTest, DeclaredDemandParksWithoutAnAttemptAndOnlyItsTenantsReleaseWakesIt) {
  Init({Node("n", 64000, 8, "A100-80GB")});
  ASSERT_TRUE(queue_.ledger().SetTenant("a", {.quota = {.max_gpu_milli = 6000}}).ok());
  Submit("a-run", "a", Shape(1000, 4, 1000));
  Submit("b-run", "b", Shape(1000, 1, 1000));
  EXPECT_THAT(Cycle(), ElementsAre("a-run", "b-run"));
  Submit("a-big", "a", Shape(1000, 4, 1000), 10, /*declare_min=*/true);
  Submit("b-job", "b", Shape(1000, 1, 1000));
  attempted_.clear();
  EXPECT_THAT(Cycle(), ElementsAre("b-job"));
  EXPECT_THAT(attempted_, ElementsAre("b-job"));  // a-big parked by the queue's own check
  EXPECT_EQ(parked_.at("a-big"), "over quota (tenant 'a'): 4000 of 6000 milli-GPU held, 4000 more needed");
  EXPECT_EQ(stats_.over_quota, 1u);
  // Capacity coming back (b's job ends) and passes do not wake it: a holds as much as before.
  End("b-run");
  attempted_.clear();
  EXPECT_THAT(Cycle(), IsEmpty());
  EXPECT_THAT(Cycle(), IsEmpty());
  EXPECT_THAT(attempted_, IsEmpty());
  EXPECT_EQ(queue_.State("a-big"), QueueState::kOverQuota);
  // a's job ends: the next pass places it (4000 of 6000).
  End("a-run");
  EXPECT_THAT(Cycle(), ElementsAre("a-big"));
  EXPECT_EQ(queue_.ledger().Usage("a").held.gpu_milli(), 4000);
  EXPECT_EQ(queue_.over_quota_size(), 0u);
}

TEST_F(QuotaQueueTest, QuotaChangeWakesParkedJobs) {
  Init({Node("n", 64000, 8, "A100-80GB")});
  ASSERT_TRUE(queue_.ledger().SetTenant("a", {.quota = {.max_jobs = 1}}).ok());
  Submit("a1", "a", Shape(1000, 1, 1000));
  Submit("a2", "a", Shape(1000, 1, 1000));
  EXPECT_THAT(Cycle(), ElementsAre("a1"));
  EXPECT_EQ(queue_.Reason("a2"), "over quota (tenant 'a'): 1 of 1 jobs running");
  EXPECT_THAT(Cycle(), IsEmpty());
  ASSERT_TRUE(queue_.ledger().SetTenant("a", {.quota = {.max_jobs = 2}}).ok());
  EXPECT_THAT(Cycle(), ElementsAre("a2"));
}

TEST_F(QuotaQueueTest, ConcurrentJobLimit) {
  Init({Node("n", 64000, 8, "A100-80GB")});
  ASSERT_TRUE(queue_.ledger().SetTenant("a", {.quota = {.max_jobs = 2}}).ok());
  for (const char* key : {"a1", "a2", "a3", "a4"}) Submit(key, "a", Shape(1000, 1, 1000));
  Submit("b1", "b", Shape(1000, 1, 1000));
  EXPECT_THAT(Cycle(), ElementsAre("a1", "a2", "b1"));
  EXPECT_EQ(queue_.State("a3"), QueueState::kOverQuota);
  EXPECT_EQ(queue_.State("a4"), QueueState::kOverQuota);
  EXPECT_EQ(parked_.at("a3"), "over quota (tenant 'a'): 2 of 2 jobs running");
  EXPECT_EQ(stats_.over_quota, 2u);
  End("a1");
  EXPECT_THAT(Cycle(), ElementsAre("a3"));
  EXPECT_EQ(queue_.State("a4"), QueueState::kOverQuota);
  EXPECT_EQ(queue_.ledger().Usage("a").jobs, 2);
}

TEST_F(QuotaQueueTest, PerModelGpuLimit) {
  Init({Node("x", 64000, 4, "A100-80GB"), Node("y", 64000, 2, "H100")});
  ASSERT_TRUE(queue_.ledger().SetTenant("a", {.quota = {.max_gpus_by_model = {{"A100-80GB", 2}}}}).ok());
  for (const char* key : {"a1", "a2", "a3"}) Submit(key, "a", Shape(1000, 1, 1000, {"A100-80GB"}));
  EXPECT_THAT(Cycle(), ElementsAre("a1", "a2"));
  EXPECT_EQ(queue_.Reason("a3"), "over quota (tenant 'a'): 2000 of 2000 milli-GPU of A100-80GB held, 1000 more needed");
  // Any model: narrowed to H100, where both of its GPUs go.
  Submit("a-any", "a", Shape(1000, 2, 1000));
  EXPECT_THAT(Cycle(), ElementsAre("a-any"));
  EXPECT_EQ(cluster_->spec(placements_.at("a-any")[0].node).gpu_model, "H100");
  EXPECT_EQ(queue_.ledger().Usage("a").held, (Holding{{{"A100-80GB", 2000}, {"H100", 2000}}}));
  // a's next any-model job is narrowed to the full H100 node and does not fit; b's job of the same
  // shape is still attempted in the pass (a's narrowed failure says nothing of the shape) and placed.
  Submit("a-any2", "a", Shape(1000, 1, 1000));
  Submit("b-any", "b", Shape(1000, 1, 1000));
  attempted_.clear();
  EXPECT_THAT(Cycle(), ElementsAre("b-any"));
  EXPECT_THAT(attempted_, ElementsAre("a-any2", "b-any"));
  EXPECT_EQ(queue_.State("a-any2"), QueueState::kParked);
  EXPECT_EQ(cluster_->spec(placements_.at("b-any")[0].node).gpu_model, "A100-80GB");
  // a1 ends: a3 (A100 only) fits the quota again and is placed; a-any2 is not (A100 back at the cap).
  End("a1");
  EXPECT_THAT(Cycle(), ElementsAre("a3"));
  EXPECT_EQ(queue_.State("a-any2"), QueueState::kParked);
}

TEST_F(QuotaQueueTest, RemoveAndUpdateOfAnOverQuotaItem) {
  Init({Node("n", 64000, 8, "A100-80GB")});
  ASSERT_TRUE(queue_.ledger().SetTenant("a", {.quota = {.max_jobs = 1}}).ok());
  Submit("a1", "a", Shape(1000, 1, 1000));
  Submit("a2", "a", Shape(1000, 1, 1000));
  Submit("a3", "a", Shape(1000, 1, 1000));
  EXPECT_THAT(Cycle(), ElementsAre("a1"));
  EXPECT_EQ(queue_.over_quota_size(), 2u);
  EXPECT_TRUE(queue_.Remove("a2"));
  EXPECT_EQ(queue_.over_quota_size(), 1u);
  // Moved to tenant b (no quota): active again, placed in the next pass.
  QueueItem moved = Item("a3", "b", 3);
  ASSERT_TRUE(queue_.Update(moved).ok());
  EXPECT_EQ(queue_.State("a3"), QueueState::kActive);
  EXPECT_EQ(queue_.over_quota_size(), 0u);
  EXPECT_THAT(Cycle(), ElementsAre("a3"));
  EXPECT_EQ(queue_.size(), 0u);
}

}  // namespace
}  // namespace gpugeek::sched
