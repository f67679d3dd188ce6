// Tenants' quotas and fair share in the control plane: the sched/quota.h ledger wired to the store and
// the scheduling pass. An over-quota job waits PENDING with its reason and blocks nobody; a release
// un-parks it; quotas and decayed usage survive a restart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "controlplane/testing/control_plane_fixture.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;
using ::testing::HasSubstr;

constexpr char kOneGpu[] = "name: one\nresources: {accelerators: H100-SXM-80GB:1}\nrun: python train.py\n";
constexpr char kFourGpus[] = "name: four\nresources: {accelerators: H100-SXM-80GB:4}\nrun: python train.py\n";

class QuotaTest : public testing::ControlPlaneFixture {
 protected:
  ControlPlaneOptions Options() const override {
    ControlPlaneOptions o;
    // The test advances hours without heartbeats: a long lease keeps the node up meanwhile.
    o.lease = std::chrono::hours(48);
    o.fair_share_half_life = std::chrono::hours(1);
    o.usage_save_interval = std::chrono::seconds(60);
    return o;
  }
  std::string SubmitAs(const std::string& tenant, const std::string& yaml = kOneGpu) {
    auto job = cp_->Submit({.spec_yaml = yaml, .tenant = tenant});
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? job->record.id : "";
  }
  void SetQuota(const std::string& tenant, const sched::TenantConfig& config) {
    auto row = cp_->SetTenantQuota(tenant, config);
    ASSERT_TRUE(row.ok()) << row.status();
    EXPECT_EQ(row->usage.config, config);
  }
  std::string PendingReason(const std::string& id) { return cp_->GetJob(id)->pending_reason; }
};

TEST_F(QuotaTest, AnOverQuotaHeadJobWaitsWithItsReasonWhileAnotherTenantsLaterJobIsPlaced) {
  Register("node-a", "8xH100-SXM-80GB");
  SetQuota("team-a", {.quota = {.max_jobs = 1}});
  const std::string a1 = SubmitAs("team-a");
  cp_->Reconcile();
  ASSERT_EQ(State(a1), JobState::kScheduled);
  // a2 is the head of the queue (no time passed: equal usage, and it came first); b1 comes after it.
  const std::string a2 = SubmitAs("team-a");
  const std::string b1 = SubmitAs("team-b");
  cp_->Reconcile();
  EXPECT_EQ(State(a2), JobState::kPending);
  EXPECT_THAT(PendingReason(a2), HasSubstr("over quota (tenant 'team-a'): 1 of 1 jobs running"));
  EXPECT_EQ(State(b1), JobState::kScheduled);  // in the same pass

  TenantQuotaView a = cp_->TenantQuota("team-a");
  EXPECT_EQ(a.usage.jobs, 1);
  EXPECT_EQ(a.usage.held.gpu_milli(), 1000);
  ASSERT_EQ(a.over_quota_jobs.size(), 1u);
  EXPECT_EQ(a.over_quota_jobs[0].first, a2);
  EXPECT_THAT(a.over_quota_jobs[0].second, HasSubstr("over quota"));
  EXPECT_TRUE(cp_->TenantQuota("team-b").over_quota_jobs.empty());

  cp_->Reconcile();  // still parked: nothing of team-a was released
  EXPECT_EQ(State(a2), JobState::kPending);

  // a1 ends: its release un-parks a2.
  Beat("node-a", {{a1, 1, api::WorkloadPhase::kExited, 0}});
  cp_->Reconcile();
  EXPECT_EQ(State(a1), JobState::kSucceeded);
  EXPECT_EQ(State(a2), JobState::kScheduled);
  EXPECT_TRUE(cp_->TenantQuota("team-a").over_quota_jobs.empty());
}

TEST_F(QuotaTest, AJobOverTheMilliGpuCapWaitsAndARaisedQuotaPlacesIt) {
  Register("node-a", "8xH100-SXM-80GB");
  SetQuota("team-a", {.quota = {.max_gpu_milli = 2000}});
  const std::string big = SubmitAs("team-a", kFourGpus);
  const std::string small = SubmitAs("team-a");
  cp_->Reconcile();
  EXPECT_EQ(State(big), JobState::kPending);
  EXPECT_THAT(PendingReason(big), HasSubstr("milli-GPU"));
  EXPECT_EQ(State(small), JobState::kScheduled);  // of the same tenant, behind it, within the cap
  SetQuota("team-a", {.weight = 2, .quota = {.max_gpu_milli = 8000}});
  cp_->Reconcile();
  EXPECT_EQ(State(big), JobState::kScheduled);
  EXPECT_EQ(cp_->TenantQuota("team-a").usage.held.gpu_milli(), 5000);
}

TEST_F(QuotaTest, BadQuotasAreRefusedAndNothingIsStored) {
  EXPECT_EQ(cp_->SetTenantQuota("team-a", {.weight = 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cp_->SetTenantQuota("team-a", {.quota = {.max_jobs = -1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto unknown = cp_->SetTenantQuota("team-a", {.quota = {.max_gpus_by_model = {{"NO-SUCH-GPU", 1}}}});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("NO-SUCH-GPU"));
  EXPECT_EQ(cp_->SetTenantQuota("", {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->ListTenantQuotas()->empty());
}

TEST_F(QuotaTest, QuotasAndHoldingsSurviveARestart) {
  Register("node-a", "8xH100-SXM-80GB");
  const sched::TenantConfig config{.weight = 2, .quota = {.max_gpus_by_model = {{"H100-SXM-80GB", 1}}}};
  SetQuota("team-a", config);
  const std::string a1 = SubmitAs("team-a");
  cp_->Reconcile();
  ASSERT_EQ(State(a1), JobState::kScheduled);
  Restart();
  TenantQuotaView a = cp_->TenantQuota("team-a");
  EXPECT_EQ(a.usage.config, config);
  EXPECT_EQ(a.usage.jobs, 1);  // the live allocation counted again
  EXPECT_EQ(a.usage.held.gpu_milli_by_model, (std::map<std::string, int64_t>{{"H100-SXM-80GB", 1000}}));
  const std::string a2 = SubmitAs("team-a");
  cp_->Reconcile();
  EXPECT_EQ(State(a2), JobState::kPending);
  EXPECT_THAT(PendingReason(a2), HasSubstr("over quota (tenant 'team-a')"));
}

TEST_F(QuotaTest, DecayedUsageIsSavedByThePassAndRestoredDecayedOverTheDowntime) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string a1 = SubmitAs("team-a");
  cp_->Reconcile();
  ASSERT_EQ(State(a1), JobState::kScheduled);
  clock_.Advance(std::chrono::hours(1));
  cp_->Reconcile();  // advances the ledger an hour (one half-life) and saves
  // 1000 milli-GPU held for one half-life h: 1000 * h / ln 2 * (1 - 1/2) milli-GPU-seconds.
  const double expected = 1000 * 3600 / std::log(2.0) * 0.5;
  auto saved = store_->ListTenantUsage();
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->size(), 1u);
  EXPECT_EQ((*saved)[0].tenant, "team-a");
  EXPECT_NEAR((*saved)[0].usage, expected, expected * 1e-9);
  EXPECT_NEAR(cp_->TenantQuota("team-a").usage.usage, expected, expected * 1e-9);

  Restart();
  EXPECT_NEAR(cp_->TenantQuota("team-a").usage.usage, expected, expected * 1e-9);
  // A stop saves; an hour down halves it.
  cp_.reset();
  clock_.Advance(std::chrono::hours(1));
  Restart();
  EXPECT_NEAR(cp_->TenantQuota("team-a").usage.usage, expected / 2, expected * 1e-9);
  EXPECT_EQ(cp_->TenantQuota("team-a").usage.jobs, 1);
}

}  // namespace
}  // namespace gpugeek::controlplane
