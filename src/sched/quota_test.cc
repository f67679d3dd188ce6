#include "sched/quota.h"

#include <cmath>
#include <numbers>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::ElementsAre;

const MonoTime kT0 = MonoTime{} + seconds(5000);

Holding Held(std::map<std::string, int64_t> by_model) { return Holding{std::move(by_model)}; }

TenantLedger HourLedger() { return TenantLedger(TenantLedgerOptions{.half_life = hours(1)}); }

TEST(TenantLedgerTest, UsageHalvesInExactlyOneHalfLife) {
  TenantLedger l = HourLedger();
  ASSERT_TRUE(l.RestoreUsage("a", 1000.0).ok());
  l.AdvanceTo(kT0);  // the origin
  EXPECT_EQ(l.Usage("a").usage, 1000.0);
  l.AdvanceTo(kT0 + hours(1));
  EXPECT_EQ(l.Usage("a").usage, 500.0);
  l.AdvanceTo(kT0 + hours(3));
  EXPECT_EQ(l.Usage("a").usage, 125.0);
  // Time going back counts as no time.
  l.AdvanceTo(kT0);
  EXPECT_EQ(l.Usage("a").usage, 125.0);
  EXPECT_EQ(l.now(), kT0 + hours(3));
}

TEST(TenantLedgerTest, HoldingAccruesTheExactIntegralOfTheDecayedUsage) {
  TenantLedger l = HourLedger();
  ASSERT_TRUE(l.Bind("j1", "a", Held({{"A100", 2000}}), kT0).ok());
  l.AdvanceTo(kT0 + hours(1));
  // 2000 milli-GPU for one half-life h = 3600 s: 2000 * (h / ln 2) * (1 - 1/2) = 3,600,000 / ln 2.
  const double one_half_life = 3'600'000.0 / std::numbers::ln2;  // 5,193,811.9... milli-GPU-seconds
  EXPECT_NEAR(l.Usage("a").usage, one_half_life, 1e-6);
  // In two steps of 30 minutes: the same.
  TenantLedger split = HourLedger();
  ASSERT_TRUE(split.Bind("j1", "a", Held({{"A100", 2000}}), kT0).ok());
  split.AdvanceTo(kT0 + minutes(30));
  split.AdvanceTo(kT0 + minutes(60));
  EXPECT_NEAR(split.Usage("a").usage, one_half_life, 1e-6);
  // Released: the next half-life only halves it.
  EXPECT_TRUE(l.Release("j1", kT0 + hours(1)));
  l.AdvanceTo(kT0 + hours(2));
  EXPECT_NEAR(l.Usage("a").usage, one_half_life / 2, 1e-6);
  // Held forever, usage tends to a * h / ln 2 (7,200,000 / ln 2 for 2000 milli-GPU).
  TenantLedger forever = HourLedger();
  ASSERT_TRUE(forever.Bind("j1", "a", Held({{"A100", 2000}}), kT0).ok());
  forever.AdvanceTo(kT0 + hours(100));
  EXPECT_NEAR(forever.Usage("a").usage, 7'200'000.0 / std::numbers::ln2, 1e-3);
}

TEST(TenantLedgerTest, ZeroHalfLifeMeansNoDecay) {
  TenantLedger l(TenantLedgerOptions{.half_life = Duration::zero()});
  ASSERT_TRUE(l.Bind("j1", "a", Held({{"A100", 1000}}), kT0).ok());
  l.AdvanceTo(kT0 + seconds(90));
  EXPECT_EQ(l.Usage("a").usage, 90'000.0);  // 1000 milli-GPU x 90 s
  EXPECT_TRUE(l.Release("j1", kT0 + seconds(90)));
  l.AdvanceTo(kT0 + hours(1000));
  EXPECT_EQ(l.Usage("a").usage, 90'000.0);
  EXPECT_EQ(l.SetHalfLife(-seconds(1)).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TenantLedgerTest, FairShareFactorIsSlurms) {
  TenantLedger l = HourLedger();
  ASSERT_TRUE(l.RestoreUsage("a", 3000).ok());
  ASSERT_TRUE(l.RestoreUsage("b", 1000).ok());
  // Equal weights: a used 3/4 against a share of 1/2: F = 2^(-1.5); b: 2^(-0.5).
  EXPECT_DOUBLE_EQ(l.Usage("a").normalized_usage, 0.75);
  EXPECT_DOUBLE_EQ(l.Usage("a").normalized_share, 0.5);
  EXPECT_DOUBLE_EQ(l.Usage("a").fair_share_factor, std::pow(2.0, -1.5));
  EXPECT_DOUBLE_EQ(l.Usage("b").fair_share_factor, std::pow(2.0, -0.5));
  EXPECT_EQ(l.NormalizedUsage("a"), 3000.0);
  EXPECT_EQ(l.NormalizedUsage("b"), 1000.0);
  // Weights 3:1: each used exactly its share, F = 2^-1 for both, U / w equal.
  ASSERT_TRUE(l.SetTenant("a", {.weight = 3}).ok());
  EXPECT_DOUBLE_EQ(l.Usage("a").fair_share_factor, 0.5);
  EXPECT_DOUBLE_EQ(l.Usage("b").fair_share_factor, 0.5);
  EXPECT_EQ(l.NormalizedUsage("a"), l.NormalizedUsage("b"));
  // A tenant never seen: no usage, F = 1, counted with weight 1 of 5.
  EXPECT_EQ(l.Usage("new").fair_share_factor, 1.0);
  EXPECT_DOUBLE_EQ(l.Usage("new").normalized_share, 0.2);
  EXPECT_EQ(l.NormalizedUsage("new"), 0.0);
  EXPECT_EQ(l.SetTenant("a", {.weight = 0}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(l.SetTenant("a", {.weight = NAN}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(l.RestoreUsage("a", -1).code(), absl::StatusCode::kInvalidArgument);
}

TEST(TenantLedgerTest, BindAndReleaseKeepHoldingsByModelAndJobs) {
  TenantLedger l;
  ASSERT_TRUE(l.Bind("j1", "a", Held({{"A100", 4000}}), kT0).ok());
  ASSERT_TRUE(l.Bind("j2", "a", Held({{"A100", 500}, {"H100", 2000}}), kT0).ok());
  EXPECT_EQ(l.Bind("j1", "b", Held({}), kT0).code(), absl::StatusCode::kAlreadyExists);
  TenantUsage u = l.Usage("a");
  EXPECT_EQ(u.jobs, 2);
  EXPECT_EQ(u.held, Held({{"A100", 4500}, {"H100", 2000}}));
  EXPECT_EQ(u.held.gpu_milli(), 6500);
  const uint64_t g = l.generation("a");
  EXPECT_TRUE(l.Release("j1", kT0));
  EXPECT_FALSE(l.Release("j1", kT0));
  EXPECT_GT(l.generation("a"), g);
  EXPECT_EQ(l.Usage("a").held, Held({{"A100", 500}, {"H100", 2000}}));
  EXPECT_TRUE(l.Release("j2", kT0));
  EXPECT_EQ(l.Usage("a").held, Held({}));
  EXPECT_EQ(l.Usage("a").jobs, 0);
  ASSERT_EQ(l.AllUsage().size(), 1u);
  EXPECT_EQ(l.AllUsage()[0].tenant, "a");
}

TEST(TenantLedgerTest, HoldingOfCountsMilliGpuByTheNodesModel) {
  auto c = Cluster::Create({Node("x", 8000, 8, "A100-80GB"), Node("y", 8000, 8, "H100"), Node("cpu", 8000, 0, "")});
  ASSERT_TRUE(c.ok());
  std::vector<Placement> p = {Place(0, 1000, {0, 1}, 1000), Place(1, 1000, {3}, 500), Place(0, 1000, {4}, 1000),
                              Place(2, 1000, {}, 0)};
  EXPECT_EQ(HoldingOf(p, *c), Held({{"A100-80GB", 3000}, {"H100", 500}}));
}

class AdmitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = Cluster::Create({Node("x", 64000, 8, "A100-80GB"), Node("y", 64000, 8, "H100")});
    ASSERT_TRUE(c.ok());
    cluster_.emplace(*std::move(c));
  }
  std::optional<Cluster> cluster_;
  TenantLedger ledger_;
};

TEST_F(AdmitTest, NoQuotaAdmitsAsIs) {
  Admission a = ledger_.Admit("a", Req("r", Shape(1000, 8, 1000), 4), *cluster_);
  EXPECT_TRUE(a.admitted);
  EXPECT_FALSE(a.narrowed);
  EXPECT_EQ(ledger_.CheckBeforeAttempt("a", 32000), std::nullopt);
  EXPECT_FALSE(ledger_.MayNarrow("a"));
}

TEST_F(AdmitTest, ConcurrentJobs) {
  ASSERT_TRUE(ledger_.SetTenant("a", {.quota = {.max_jobs = 2}}).ok());
  ASSERT_TRUE(ledger_.Bind("j1", "a", Held({{"H100", 1000}}), kT0).ok());
  EXPECT_TRUE(ledger_.Admit("a", Req("r", Shape(1000, 1, 1000)), *cluster_).admitted);
  ASSERT_TRUE(ledger_.Bind("j2", "a", Held({}), kT0).ok());  // a CPU-only job counts too
  Admission a = ledger_.Admit("a", Req("r", Shape(1000, 1, 1000)), *cluster_);
  EXPECT_FALSE(a.admitted);
  EXPECT_EQ(a.reason, "over quota (tenant 'a'): 2 of 2 jobs running");
  EXPECT_EQ(ledger_.CheckBeforeAttempt("a", 0), "over quota (tenant 'a'): 2 of 2 jobs running");
  EXPECT_FALSE(ledger_.MayNarrow("a"));  // a jobs cap admits a request whole or not at all
  EXPECT_TRUE(ledger_.Admit("b", Req("r", Shape(1000, 1, 1000)), *cluster_).admitted);
}

TEST_F(AdmitTest, MilliGpuTotal) {
  ASSERT_TRUE(ledger_.SetTenant("a", {.quota = {.max_gpu_milli = 8000}}).ok());
  ASSERT_TRUE(ledger_.Bind("j1", "a", Held({{"A100-80GB", 4000}, {"H100", 2000}}), kT0).ok());
  EXPECT_TRUE(ledger_.MayNarrow("a"));
  Admission fits = ledger_.Admit("a", Req("r", Shape(1000, 2, 1000)), *cluster_);  // 6000 + 2000 = 8000
  EXPECT_TRUE(fits.admitted);
  EXPECT_FALSE(fits.narrowed);
  Admission over = ledger_.Admit("a", Req("r", Shape(1000, 1, 1000), 3), *cluster_);  // gang of 3
  EXPECT_FALSE(over.admitted);
  EXPECT_EQ(over.reason, "over quota (tenant 'a'): 6000 of 8000 milli-GPU held, 3000 more needed");
  EXPECT_EQ(ledger_.CheckBeforeAttempt("a", 3000), over.reason);
  EXPECT_EQ(ledger_.CheckBeforeAttempt("a", 2000), std::nullopt);
  // Of two alternatives (4 GPUs or 1 GPU) only the second fits: narrowed to it.
  Request two = Req("r", Shape(1000, 4, 1000));
  two.alternatives.push_back(Shape(1000, 1, 1000));
  Admission narrowed = ledger_.Admit("a", two, *cluster_);
  EXPECT_TRUE(narrowed.admitted);
  EXPECT_TRUE(narrowed.narrowed);
  ASSERT_EQ(narrowed.request.alternatives.size(), 1u);
  EXPECT_EQ(narrowed.request.alternatives[0].num_gpus, 1);
  // A CPU-only request holds no GPU: admitted under any milli-GPU cap.
  EXPECT_TRUE(ledger_.Admit("a", Req("r", Shape(1000, 0, 0)), *cluster_).admitted);
}

TEST_F(AdmitTest, GpusPerModel) {
  ASSERT_TRUE(ledger_.SetTenant("a", {.quota = {.max_gpus_by_model = {{"A100-80GB", 8}}}}).ok());
  ASSERT_TRUE(ledger_.Bind("j1", "a", Held({{"A100-80GB", 6000}}), kT0).ok());
  // Any model: narrowed to the models with room (H100).
  Admission any = ledger_.Admit("a", Req("r", Shape(1000, 4, 1000)), *cluster_);
  EXPECT_TRUE(any.admitted);
  EXPECT_TRUE(any.narrowed);
  ASSERT_EQ(any.request.alternatives.size(), 1u);
  EXPECT_THAT(any.request.alternatives[0].allowed_models, ElementsAre("H100"));
  // A100 only: over quota.
  Admission a100 = ledger_.Admit("a", Req("r", Shape(1000, 4, 1000, {"A100-80GB"})), *cluster_);
  EXPECT_FALSE(a100.admitted);
  EXPECT_EQ(a100.reason, "over quota (tenant 'a'): 6000 of 8000 milli-GPU of A100-80GB held, 4000 more needed");
  // 2 more A100 fit exactly; a share of one too.
  EXPECT_FALSE(ledger_.Admit("a", Req("r", Shape(1000, 2, 1000, {"A100-80GB"})), *cluster_).narrowed);
  EXPECT_TRUE(ledger_.Admit("a", Req("r", Shape(1000, 1, 500, {"A100-80GB"})), *cluster_).admitted);
  // Two alternatives, each over: one clause each.
  Request two = Req("r", Shape(1000, 4, 1000, {"A100-80GB"}));
  two.alternatives.push_back(Shape(1000, 3, 1000, {"A100-80GB"}));
  EXPECT_EQ(ledger_.Admit("a", two, *cluster_).reason,
            "over quota (tenant 'a'): alternative 0: 6000 of 8000 milli-GPU of A100-80GB held, 4000 more needed; "
            "alternative 1: 6000 of 8000 milli-GPU of A100-80GB held, 3000 more needed");
  // The queue's check knows no models: it lets the request through to Admit.
  EXPECT_EQ(ledger_.CheckBeforeAttempt("a", 4000), std::nullopt);
  // Raising the quota wakes (generation) and admits.
  const uint64_t g = ledger_.generation("a");
  ASSERT_TRUE(ledger_.SetTenant("a", {.quota = {.max_gpus_by_model = {{"A100-80GB", 10}}}}).ok());
  EXPECT_GT(ledger_.generation("a"), g);
  EXPECT_TRUE(ledger_.Admit("a", Req("r", Shape(1000, 4, 1000, {"A100-80GB"})), *cluster_).admitted);
  // Setting the same quota again (a weight change) wakes nothing.
  const uint64_t g2 = ledger_.generation("a");
  ASSERT_TRUE(ledger_.SetTenant("a", {.weight = 2, .quota = {.max_gpus_by_model = {{"A100-80GB", 10}}}}).ok());
  EXPECT_EQ(ledger_.generation("a"), g2);
  EXPECT_EQ(ledger_.SetTenant("a", {.quota = {.max_gpus_by_model = {{"H100", -1}}}}).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ScheduleWithinQuotaTest, NarrowsBindsAndParksOverQuota) {
  auto c = Cluster::Create({Node("x", 64000, 8, "A100-80GB"), Node("y", 64000, 8, "H100")});
  ASSERT_TRUE(c.ok());
  FrameworkOptions fo;
  fo.policy = "BestFit";
  auto fw = Framework::Create(fo, &*c);
  ASSERT_TRUE(fw.ok());
  AcceptAllBinder binder;
  TenantLedger l;
  ASSERT_TRUE(l.SetTenant("a", {.quota = {.max_gpus_by_model = {{"A100-80GB", 4}}}}).ok());
  auto r1 = ScheduleWithinQuota(l, "j1", "a", Req("j1", Shape(1000, 4, 1000, {"A100-80GB"})), **fw, binder, kT0);
  ASSERT_TRUE(r1.ok()) << r1.status();
  ASSERT_TRUE(r1->decision.scheduled);
  EXPECT_EQ(l.Usage("a").held, Held({{"A100-80GB", 4000}}));
  // Any model: the A100s are at the cap, so it lands on the H100 node.
  auto r2 = ScheduleWithinQuota(l, "j2", "a", Req("j2", Shape(1000, 2, 1000)), **fw, binder, kT0);
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE(r2->narrowed);
  ASSERT_TRUE(r2->decision.scheduled);
  EXPECT_EQ(r2->decision.placements[0].node, 1);
  auto r3 = ScheduleWithinQuota(l, "j3", "a", Req("j3", Shape(1000, 1, 1000, {"A100-80GB"})), **fw, binder, kT0);
  ASSERT_TRUE(r3.ok());
  EXPECT_TRUE(r3->over_quota);
  EXPECT_EQ(r3->reason, "over quota (tenant 'a'): 4000 of 4000 milli-GPU of A100-80GB held, 1000 more needed");
  EXPECT_EQ(c->allocated_gpu_milli(), 6000);  // nothing reserved for it
  EXPECT_EQ(ScheduleWithinQuota(l, "j1", "a", Req("j1", Shape(1000, 1, 1000)), **fw, binder, kT0).status().code(),
            absl::StatusCode::kAlreadyExists);
  // j1 released: j3 fits its quota.
  (*fw)->Release(r1->decision.placements);
  EXPECT_TRUE(l.Release("j1", kT0));
  auto r4 = ScheduleWithinQuota(l, "j3", "a", Req("j3", Shape(1000, 1, 1000, {"A100-80GB"})), **fw, binder, kT0);
  ASSERT_TRUE(r4.ok());
  EXPECT_TRUE(r4->decision.scheduled);
  EXPECT_EQ(l.Usage("a").held, Held({{"A100-80GB", 1000}, {"H100", 2000}}));
  EXPECT_EQ(l.Usage("a").jobs, 2);
}

}  // namespace
}  // namespace gpugeek::sched
