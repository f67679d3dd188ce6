// A writer pass is one store transaction (ControlPlane::Reconcile): when its commit fails, nothing of
// the pass is stored or published, memory is reloaded from the store, and the next pass does the work
// again, once.

#include <gtest/gtest.h>

#include "controlplane/testing/control_plane_fixture.h"

namespace gpugeek::controlplane {
namespace {

// The real store, with commits of write batches that fail on demand (the batch is rolled back, as a
// failed COMMIT leaves it).
class CommitFailingStore final : public store::Store {
 public:
  explicit CommitFailingStore(store::Store& inner) : inner_(inner) {}
  int fail_commits = 0;  // batch commits still to fail
  int failed = 0;        // batch commits failed so far

  absl::StatusOr<store::JobRecord> CreateJob(const store::JobRecord& job) override { return inner_.CreateJob(job); }
  absl::StatusOr<std::vector<absl::StatusOr<store::JobRecord>>> CreateJobs(
      const std::vector<store::JobRecord>& jobs) override {
    return inner_.CreateJobs(jobs);
  }
  absl::StatusOr<store::JobRecord> GetJob(const std::string& id) override { return inner_.GetJob(id); }
  absl::StatusOr<std::vector<store::JobRecord>> ListJobs(const store::JobFilter& filter) override {
    return inner_.ListJobs(filter);
  }
  absl::StatusOr<std::vector<store::JobCount>> CountJobs() override { return inner_.CountJobs(); }
  absl::StatusOr<store::JobRecord> UpdateJob(const store::JobRecord& job) override { return inner_.UpdateJob(job); }
  absl::StatusOr<std::vector<store::EventRecord>> ListEvents(const store::EventFilter& filter) override {
    return inner_.ListEvents(filter);
  }
  absl::StatusOr<int64_t> DeleteOldEvents(TimePoint before, int limit) override {
    return inner_.DeleteOldEvents(before, limit);
  }
  absl::Status PutNode(const store::NodeRecord& node) override { return inner_.PutNode(node); }
  absl::StatusOr<store::NodeRecord> GetNode(const std::string& id) override { return inner_.GetNode(id); }
  absl::Status DeleteNode(const std::string& id) override { return inner_.DeleteNode(id); }
  absl::StatusOr<std::vector<store::NodeRecord>> ListNodes() override { return inner_.ListNodes(); }
  absl::Status CreateTenant(const store::TenantRecord& t) override { return inner_.CreateTenant(t); }
  absl::StatusOr<std::vector<store::TenantRecord>> ListTenants() override { return inner_.ListTenants(); }
  absl::Status CreateUser(const store::UserRecord& u) override { return inner_.CreateUser(u); }
  absl::StatusOr<std::vector<store::UserRecord>> ListUsers() override { return inner_.ListUsers(); }
  absl::Status CreateToken(const store::TokenRecord& t) override { return inner_.CreateToken(t); }
  absl::StatusOr<std::vector<store::TokenRecord>> ListTokens() override { return inner_.ListTokens(); }
  absl::Status RevokeToken(const std::string& id, TimePoint at) override { return inner_.RevokeToken(id, at); }
  absl::Status CreateJoinToken(const store::JoinTokenRecord& t) override { return inner_.CreateJoinToken(t); }
  absl::StatusOr<std::vector<store::JoinTokenRecord>> ListJoinTokens() override { return inner_.ListJoinTokens(); }
  absl::Status ConsumeJoinToken(const std::string& id, const std::string& node, uint64_t g) override {
    return inner_.ConsumeJoinToken(id, node, g);
  }
  absl::Status DeleteJoinToken(const std::string& id) override { return inner_.DeleteJoinToken(id); }
  absl::Status DeleteNodeCredential(const std::string& node) override { return inner_.DeleteNodeCredential(node); }
  absl::StatusOr<std::vector<store::NodeCredentialRecord>> ListNodeCredentials() override {
    return inner_.ListNodeCredentials();
  }
  absl::Status AppendAudit(const std::vector<store::AuditRecord>& records) override {
    return inner_.AppendAudit(records);
  }
  absl::StatusOr<std::vector<store::AuditRecord>> ListAudit(const store::AuditFilter& filter) override {
    return inner_.ListAudit(filter);
  }
  absl::StatusOr<int64_t> DeleteOldAudit(TimePoint before, int limit) override {
    return inner_.DeleteOldAudit(before, limit);
  }
  absl::Status PutTenantQuota(const store::TenantQuotaRecord& q) override { return inner_.PutTenantQuota(q); }
  absl::StatusOr<std::vector<store::TenantQuotaRecord>> ListTenantQuotas() override {
    return inner_.ListTenantQuotas();
  }
  absl::Status PutTenantUsage(const std::vector<store::TenantUsageRecord>& u) override {
    return inner_.PutTenantUsage(u);
  }
  absl::StatusOr<std::vector<store::TenantUsageRecord>> ListTenantUsage() override { return inner_.ListTenantUsage(); }
  absl::Status AppendLedger(const std::vector<store::LedgerRecord>& records) override {
    return inner_.AppendLedger(records);
  }
  absl::StatusOr<std::vector<store::LedgerRecord>> ListLedger(const store::LedgerFilter& filter) override {
    return inner_.ListLedger(filter);
  }
  absl::Status BeginWriteBatch() override { return inner_.BeginWriteBatch(); }
  absl::Status CommitWriteBatch() override {
    if (fail_commits == 0) return inner_.CommitWriteBatch();
    --fail_commits;
    ++failed;
    if (absl::Status st = inner_.AbortWriteBatch(); !st.ok()) return st;
    return absl::UnavailableError("sqlite: commit write batch: disk I/O error (injected)");
  }
  absl::Status AbortWriteBatch() override { return inner_.AbortWriteBatch(); }

 private:
  store::Store& inner_;
};

class PassCommitTest : public testing::ControlPlaneFixture {
 protected:
  store::Store& StoreFor(store::SqliteStore& sqlite) override {
    failing_ = std::make_unique<CommitFailingStore>(sqlite);
    return *failing_;
  }
  std::unique_ptr<CommitFailingStore> failing_;
};

constexpr char kOneGpu[] = "name: one\nresources: {accelerators: H100-SXM-80GB:1}\nrun: python train.py\n";

TEST_F(PassCommitTest, AFailedCommitStoresAndPublishesNothingAndTheNextPassPlacesOnce) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string id = Submit(kOneGpu);
  failing_->fail_commits = 1;
  cp_->Reconcile();  // places the job in memory, then its commit fails
  ASSERT_EQ(failing_->failed, 1);
  auto stored = store_->GetJob(id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state, api::JobState::kPending);
  EXPECT_EQ(stored->epoch, 0);
  EXPECT_EQ(stored->version, 1);
  EXPECT_TRUE(Assignments("node-a").empty()) << "a placement that was never stored reached the agent";
  EXPECT_EQ(cp_->GetJob(id)->record.state, api::JobState::kPending);

  cp_->Reconcile();  // memory came back from the store: the job is placed again, and stored
  stored = store_->GetJob(id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state, api::JobState::kScheduled);
  EXPECT_EQ(stored->epoch, 1);  // one placement, not two
  EXPECT_EQ(stored->version, 2);
  const std::vector<api::Assignment> assigned = Assignments("node-a");
  ASSERT_EQ(assigned.size(), 1u);
  EXPECT_EQ(assigned[0].job_id, id);
  EXPECT_EQ(assigned[0].epoch, 1);
  EXPECT_EQ(assigned[0].gpu_uuids.size(), 1u);
  auto events = store_->ListEvents({.job_id = id, .after_seq = 0, .limit = 100});
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 2u);  // created; PENDING -> SCHEDULED (the failed pass left no event)
}

TEST_F(PassCommitTest, ReportsOfAFailedPassTakeEffectWhenTheAgentReportsAgain) {
  Register("node-a", "8xH100-SXM-80GB");
  const std::string id = Submit(kOneGpu);
  cp_->Reconcile();
  ASSERT_EQ(Assignments("node-a").size(), 1u);
  const api::WorkloadReport running{.job_id = id, .epoch = 1, .phase = api::WorkloadPhase::kRunning, .node_rank = 0};
  failing_->fail_commits = 1;
  Beat("node-a", {running});
  EXPECT_EQ(store_->GetJob(id)->state, api::JobState::kScheduled);
  Beat("node-a", {running});  // the agent reports until acknowledged by the job's state
  EXPECT_EQ(store_->GetJob(id)->state, api::JobState::kRunning);
  EXPECT_EQ(Assignments("node-a").size(), 1u);
}

// The pass that meters a member's exit and charges it fails to commit: neither the usage nor the charge is
// stored, the ledger is reloaded with the rest of memory, and when the agent reports the exit again the whole
// segment (its start was stored when it began) is metered and charged, once.
TEST_F(PassCommitTest, AChargeOfAFailedPassIsPostedOnceWhenTheExitIsReportedAgain) {
  api::Registration r = Registration("node-a", "8xH100-SXM-80GB");
  r.price_micros_per_gpu_hour = 3'600'000;  // 0.001 a second
  ASSERT_TRUE(cp_->Register(r).ok());
  const std::string id = Submit(kOneGpu);
  cp_->Reconcile();
  Beat("node-a", {{.job_id = id, .epoch = 1, .phase = api::WorkloadPhase::kRunning, .node_rank = 0}});
  clock_.Advance(std::chrono::seconds(100));
  const api::WorkloadReport exited{
      .job_id = id, .epoch = 1, .phase = api::WorkloadPhase::kExited, .exit_code = 0, .node_rank = 0};
  failing_->fail_commits = 1;
  Beat("node-a", {exited});
  EXPECT_EQ(store_->GetJob(id)->state, api::JobState::kRunning);
  EXPECT_TRUE(cp_->billing().Entries("", 0, 10).entries.empty()) << "memory holds a charge the store lost";
  clock_.Advance(std::chrono::seconds(1));
  Beat("node-a", {exited});
  EXPECT_EQ(store_->GetJob(id)->state, api::JobState::kSucceeded);
  const Billing::Page page = cp_->billing().Entries("", 0, 10);
  ASSERT_EQ(page.entries.size(), 1u);
  EXPECT_EQ(page.entries[0].id, "usage/" + id + "/e1/r0");
  EXPECT_EQ(page.entries[0].gpu_milli_seconds, 101'000);
  EXPECT_EQ(page.entries[0].postings[0], (ledger::Posting{"tenant:team-a:cash", ledger::Money::Micros(-101'000)}));
  EXPECT_EQ(store_->ListLedger({})->size(), 1u);
}

}  // namespace
}  // namespace gpugeek::controlplane
