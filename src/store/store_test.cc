#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "common/fake_clock.h"
#include "store/sqlite_store.h"

namespace gpugeek::store {
namespace {

using api::JobState;

class SqliteStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("gpugeek_store_test_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    store_.reset();
    auto s = SqliteStore::Open({.path = (dir_ / "gpugeek.db").string(), .clock = &clock_});
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  JobRecord NewJob(const std::string& id, const std::string& tenant = "team-a") {
    JobRecord j;
    j.id = id;
    j.tenant = tenant;
    j.name = "train-" + id;
    j.spec_yaml = "name: train\nrun: echo\n";
    j.priority = 5;
    j.created_at = j.updated_at = clock_.Now();
    return j;
  }

  FakeClock clock_{TimePoint(std::chrono::seconds(1'700'000'000))};
  std::filesystem::path dir_;
  std::unique_ptr<SqliteStore> store_;
};

TEST_F(SqliteStoreTest, CreateThenGetReturnsEveryField) {
  JobRecord j = NewJob("j-1");
  j.plan_json = R"({"gpus":4})";
  j.exit_code = 3;
  j.reason = "submitted by alice";
  auto created = store_->CreateJob(j);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->version, 1);
  auto got = store_->GetJob("j-1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tenant, "team-a");
  EXPECT_EQ(got->name, "train-j-1");
  EXPECT_EQ(got->spec_yaml, j.spec_yaml);
  EXPECT_EQ(got->state, JobState::kPending);
  EXPECT_EQ(got->priority, 5);
  EXPECT_EQ(got->plan_json, R"({"gpus":4})");
  EXPECT_EQ(got->exit_code, 3);
  EXPECT_EQ(got->created_at, clock_.Now());
  EXPECT_EQ(got->version, 1);
  EXPECT_EQ(store_->GetJob("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SqliteStoreTest, DuplicateIdIsAlreadyExistsAndKeepsTheFirst) {
  ASSERT_TRUE(store_->CreateJob(NewJob("j-1")).ok());
  JobRecord other = NewJob("j-1", "team-b");
  EXPECT_EQ(store_->CreateJob(other).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->GetJob("j-1")->tenant, "team-a");
}

TEST_F(SqliteStoreTest, GroupCommitStoresEachJobAndReportsDuplicatesAlone) {
  ASSERT_TRUE(store_->CreateJob(NewJob("j-2")).ok());
  auto results = store_->CreateJobs({NewJob("j-1"), NewJob("j-2"), NewJob("j-3"), NewJob("")});
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 4u);
  EXPECT_TRUE((*results)[0].ok());
  EXPECT_EQ((*results)[1].status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE((*results)[2].ok());
  EXPECT_EQ((*results)[3].status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->ListJobs({})->size(), 3u);
  EXPECT_EQ(store_->ListEvents({.job_id = "", .after_seq = 0, .limit = 100})->size(),
            3u);  // one creation event per stored job
}

TEST_F(SqliteStoreTest, UpdateIsCompareAndSetAndFollowsTheStateMachine) {
  JobRecord j = *store_->CreateJob(NewJob("j-1"));
  JobRecord stale = j;
  clock_.Advance(std::chrono::seconds(2));
  j.state = JobState::kScheduled;
  j.reason = "placed on node-a";
  j.epoch = 1;
  j.updated_at = clock_.Now();
  auto updated = store_->UpdateJob(j);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->version, 2);

  stale.reason = "lost update";
  EXPECT_EQ(store_->UpdateJob(stale).status().code(), absl::StatusCode::kAborted);

  JobRecord bad = *updated;
  bad.state = JobState::kSucceeded;  // SCHEDULED -> SUCCEEDED skips RUNNING
  EXPECT_EQ(store_->UpdateJob(bad).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->GetJob("j-1")->state, JobState::kScheduled);

  auto events = store_->ListEvents({.job_id = "j-1", .after_seq = 0, .limit = 100});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);  // creation, then PENDING -> SCHEDULED
  EXPECT_EQ((*events)[1].from, JobState::kPending);
  EXPECT_EQ((*events)[1].to, JobState::kScheduled);
  EXPECT_EQ((*events)[1].reason, "placed on node-a");
  EXPECT_EQ((*events)[1].time - (*events)[0].time, std::chrono::seconds(2));
}

TEST_F(SqliteStoreTest, ListFiltersAndPages) {
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(store_->CreateJob(NewJob("j-" + std::to_string(i), i % 2 ? "team-b" : "team-a")).ok());
  }
  JobRecord j3 = *store_->GetJob("j-3");
  j3.state = JobState::kCancelled;
  ASSERT_TRUE(store_->UpdateJob(j3).ok());

  auto b = store_->ListJobs({.tenant = "team-b"});
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->size(), 3u);
  EXPECT_EQ((*b)[0].id, "j-1");
  EXPECT_EQ(store_->ListJobs({.state = JobState::kCancelled})->size(), 1u);
  EXPECT_EQ(store_->ListJobs({.state = JobState::kPending, .tenant = "team-b"})->size(), 2u);

  std::vector<std::string> seen;
  std::string after;
  for (;;) {
    auto page = store_->ListJobs({.after_id = after, .limit = 3});
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    for (const auto& j : *page) seen.push_back(j.id);
    after = page->back().id;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"j-0", "j-1", "j-2", "j-3", "j-4", "j-5", "j-6"}));
  EXPECT_EQ(store_->ListJobs({.limit = 0}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SqliteStoreTest, CountJobsGroupsByStateAndPriorityWithTheOldestUpdate) {
  EXPECT_TRUE(store_->CountJobs()->empty());
  const TimePoint t0 = clock_.Now();
  JobRecord a = NewJob("j-1");  // priority 5
  JobRecord b = NewJob("j-2");
  b.created_at = b.updated_at = t0 + std::chrono::seconds(10);
  JobRecord c = NewJob("j-3");
  c.priority = 0;
  c.created_at = c.updated_at = t0 + std::chrono::seconds(20);
  ASSERT_TRUE(store_->CreateJobs({a, b, c}).ok());
  JobRecord running = *store_->GetJob("j-1");
  running.state = JobState::kScheduled;
  running.updated_at = t0 + std::chrono::seconds(30);
  ASSERT_TRUE(store_->UpdateJob(running).ok());

  auto counts = store_->CountJobs();
  ASSERT_TRUE(counts.ok()) << counts.status();
  ASSERT_EQ(counts->size(), 3u);
  // PENDING sorts before SCHEDULED; priorities ascending.
  EXPECT_EQ((*counts)[0].state, JobState::kPending);
  EXPECT_EQ((*counts)[0].priority, 0);
  EXPECT_EQ((*counts)[0].count, 1);
  EXPECT_EQ((*counts)[0].oldest_update, t0 + std::chrono::seconds(20));
  EXPECT_EQ((*counts)[1].state, JobState::kPending);
  EXPECT_EQ((*counts)[1].priority, 5);
  EXPECT_EQ((*counts)[1].count, 1);  // j-2; j-1 moved on
  EXPECT_EQ((*counts)[1].oldest_update, t0 + std::chrono::seconds(10));
  EXPECT_EQ((*counts)[2].state, JobState::kScheduled);
  EXPECT_EQ((*counts)[2].priority, 5);
  EXPECT_EQ((*counts)[2].count, 1);
  EXPECT_EQ((*counts)[2].oldest_update, t0 + std::chrono::seconds(30));
}

TEST_F(SqliteStoreTest, EverythingSurvivesAReopen) {
  JobRecord j = *store_->CreateJob(NewJob("j-1"));
  j.state = JobState::kScheduled;
  j.allocation_json = R"({"node":"n1"})";
  ASSERT_TRUE(store_->UpdateJob(j).ok());
  ASSERT_TRUE(store_->PutNode({.id = "n1", .inventory_json = "{}", .state = "ready"}).ok());
  Reopen();
  EXPECT_EQ(store_->schema_version(), 4);
  auto got = store_->GetJob("j-1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, JobState::kScheduled);
  EXPECT_EQ(got->allocation_json, R"({"node":"n1"})");
  EXPECT_EQ(store_->ListEvents({.job_id = "", .after_seq = 0, .limit = 100})->size(), 2u);
  EXPECT_EQ(store_->GetNode("n1")->state, "ready");
}

TEST_F(SqliteStoreTest, AccountsAreStoredWithTheirParentsAndSurviveAReopen) {
  const TimePoint t = clock_.Now();
  ASSERT_TRUE(store_->CreateTenant({.id = "team-a", .created_at = t}).ok());
  ASSERT_TRUE(store_->CreateTenant({.id = "team-b", .created_at = t}).ok());
  EXPECT_EQ(store_->CreateTenant({.id = "team-a", .created_at = t}).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(store_->CreateUser({.name = "alice", .tenant = "team-a", .role = "member", .created_at = t}).ok());
  // A user of a tenant that does not exist, a token of a user that does not exist: NotFound, nothing stored.
  absl::Status orphan = store_->CreateUser({.name = "bob", .tenant = "team-x", .role = "viewer", .created_at = t});
  EXPECT_EQ(orphan.code(), absl::StatusCode::kNotFound) << orphan;
  EXPECT_EQ(orphan.message(), "store: user 'bob' names tenant 'team-x' that does not exist");
  EXPECT_EQ(store_->CreateToken({.id = "t0", .user = "nobody", .secret_hash = "h", .created_at = t}).code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(store_
                  ->CreateToken({.id = "t1",
                                 .user = "alice",
                                 .secret_hash = "$argon2id$x",
                                 .description = "ci",
                                 .created_at = t,
                                 .expires_at = t + std::chrono::hours(24)})
                  .ok());
  ASSERT_TRUE(store_->RevokeToken("t1", t + std::chrono::seconds(5)).ok());
  ASSERT_TRUE(store_->RevokeToken("t1", t + std::chrono::seconds(9)).ok());  // the first revocation's time stays
  EXPECT_EQ(store_->RevokeToken("t9", t).code(), absl::StatusCode::kNotFound);
  Reopen();
  auto tenants = *store_->ListTenants();
  ASSERT_EQ(tenants.size(), 2u);
  EXPECT_EQ(tenants[0].id, "team-a");
  EXPECT_EQ(tenants[1].created_at, t);
  auto users = *store_->ListUsers();
  ASSERT_EQ(users.size(), 1u);
  EXPECT_EQ(users[0].tenant, "team-a");
  EXPECT_EQ(users[0].role, "member");
  auto tokens = *store_->ListTokens();
  ASSERT_EQ(tokens.size(), 1u);
  EXPECT_EQ(tokens[0].user, "alice");
  EXPECT_EQ(tokens[0].secret_hash, "$argon2id$x");
  EXPECT_EQ(tokens[0].description, "ci");
  EXPECT_EQ(tokens[0].expires_at, t + std::chrono::hours(24));
  EXPECT_EQ(tokens[0].revoked_at, t + std::chrono::seconds(5));
}

TEST_F(SqliteStoreTest, EventsFilterByTheirJobsTenant) {
  JobRecord a = NewJob("j-a");
  a.tenant = "team-a";
  JobRecord b = NewJob("j-b");
  b.tenant = "team-b";
  ASSERT_TRUE(store_->CreateJob(a).ok());
  ASSERT_TRUE(store_->CreateJob(b).ok());
  auto only_b = *store_->ListEvents({.tenant = "team-b"});
  ASSERT_EQ(only_b.size(), 1u);
  EXPECT_EQ(only_b[0].job_id, "j-b");
  EXPECT_TRUE(store_->ListEvents({.job_id = "j-a", .tenant = "team-b"})->empty());
  EXPECT_EQ(store_->ListEvents({})->size(), 2u);
}

TEST_F(SqliteStoreTest, NodesUpsertAndList) {
  ASSERT_TRUE(store_->PutNode({.id = "n2", .inventory_json = R"({"gpus":8})", .state = "ready"}).ok());
  ASSERT_TRUE(store_->PutNode({.id = "n1", .inventory_json = "{}", .state = "ready"}).ok());
  ASSERT_TRUE(store_->PutNode({.id = "n2", .inventory_json = R"({"gpus":8})", .state = "cordoned"}).ok());
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].id, "n1");
  EXPECT_EQ((*nodes)[1].state, "cordoned");
  EXPECT_EQ(store_->GetNode("n9").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->PutNode({.id = ""}).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SqliteStoreTest, DeleteNodeRemovesOnlyThatNodeDurablyAndLeavesJobsAlone) {
  ASSERT_TRUE(store_->PutNode({.id = "n1", .inventory_json = "{}", .state = "ready"}).ok());
  ASSERT_TRUE(store_->PutNode({.id = "n2", .inventory_json = R"({"gpus":8})", .state = "down"}).ok());
  JobRecord j = *store_->CreateJob(NewJob("j-1"));
  j.state = JobState::kScheduled;
  j.allocation_json = R"({"node":"n2"})";
  ASSERT_TRUE(store_->UpdateJob(j).ok());

  ASSERT_TRUE(store_->DeleteNode("n2").ok());
  EXPECT_EQ(store_->GetNode("n2").status().code(), absl::StatusCode::kNotFound);
  absl::Status again = store_->DeleteNode("n2");
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(again.message(), "store: no node 'n2'");
  Reopen();
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].id, "n1");
  EXPECT_EQ(store_->GetJob("j-1")->allocation_json, R"({"node":"n2"})");
  // The same name can be put again (a removed node whose agent comes back).
  ASSERT_TRUE(store_->PutNode({.id = "n2", .inventory_json = R"({"gpus":8})", .state = "ready"}).ok());
  EXPECT_EQ(store_->GetNode("n2")->state, "ready");
}

TEST_F(SqliteStoreTest, RefusesADatabaseFromANewerSchema) {
  store_.reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "gpugeek.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "INSERT INTO schema_migrations VALUES (99, 0)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto s = SqliteStore::Open({.path = (dir_ / "gpugeek.db").string()});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(SqliteStoreTest, UnopenablePathIsUnavailable) {
  auto s = SqliteStore::Open({.path = (dir_ / "missing-dir" / "x.db").string()});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(SqliteStoreTest, ConcurrentCompareAndSetLosesNoUpdate) {
  ASSERT_TRUE(store_->CreateJob(NewJob("j-1")).ok());
  constexpr int kThreads = 4, kIncrements = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements; ++i) {
        for (;;) {
          JobRecord j = *store_->GetJob("j-1");
          ++j.restarts;
          auto r = store_->UpdateJob(j);
          if (r.ok()) break;
          ASSERT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  auto j = store_->GetJob("j-1");
  EXPECT_EQ(j->restarts, kThreads * kIncrements);
  EXPECT_EQ(j->version, 1 + kThreads * kIncrements);
}

TEST_F(SqliteStoreTest, WriteBatchCommitsTogetherAndAFailedCallLeavesNothingOfItself) {
  JobRecord j1 = *store_->CreateJob(NewJob("j-1"));
  JobRecord j2 = *store_->CreateJob(NewJob("j-2"));
  ASSERT_TRUE(store_->BeginWriteBatch().ok());
  EXPECT_EQ(store_->BeginWriteBatch().code(), absl::StatusCode::kFailedPrecondition);  // one at a time
  j1.state = JobState::kScheduled;
  j1.reason = "placed";
  ASSERT_TRUE(store_->UpdateJob(j1).ok());
  JobRecord stale = j2;
  stale.version = 7;
  stale.state = JobState::kScheduled;
  EXPECT_EQ(store_->UpdateJob(stale).status().code(), absl::StatusCode::kAborted);
  ASSERT_TRUE(store_->CreateJob(NewJob("j-3")).ok());
  // Inside the batch its owner reads its own writes; another thread reads the last commit at once, and
  // its writes wait for the batch's commit.
  EXPECT_EQ(store_->GetJob("j-1")->state, JobState::kScheduled);
  JobState seen = JobState::kScheduled;
  std::thread reader([&] { seen = store_->GetJob("j-1")->state; });
  reader.join();
  EXPECT_EQ(seen, JobState::kPending);
  std::atomic<bool> wrote{false};
  std::thread writer([&] {
    EXPECT_TRUE(store_->CreateJob(NewJob("j-4")).ok());
    wrote = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(wrote.load()) << "another thread wrote inside an open write batch";
  ASSERT_TRUE(store_->CommitWriteBatch().ok());
  writer.join();
  EXPECT_EQ(store_->GetJob("j-4")->version, 1);
  EXPECT_EQ(store_->CommitWriteBatch().code(), absl::StatusCode::kFailedPrecondition);  // none open

  Reopen();
  EXPECT_EQ(store_->GetJob("j-1")->version, 2);
  EXPECT_EQ(store_->GetJob("j-2")->version, 1);  // the aborted update wrote nothing
  EXPECT_EQ(store_->GetJob("j-2")->state, JobState::kPending);
  EXPECT_TRUE(store_->GetJob("j-3").ok());
  EXPECT_EQ(store_->ListEvents({.job_id = "j-1", .after_seq = 0, .limit = 100})->size(),
            2u);  // creation, PENDING -> SCHEDULED
  EXPECT_EQ(store_->ListEvents({.job_id = "j-2", .after_seq = 0, .limit = 100})->size(), 1u);
}

TEST_F(SqliteStoreTest, AWriteBatchNeverCommittedIsNotStored) {
  JobRecord j1 = *store_->CreateJob(NewJob("j-1"));
  ASSERT_TRUE(store_->BeginWriteBatch().ok());
  j1.state = JobState::kScheduled;
  ASSERT_TRUE(store_->UpdateJob(j1).ok());
  ASSERT_TRUE(store_->CreateJob(NewJob("j-2")).ok());
  Reopen();  // the process ends with the batch open
  EXPECT_EQ(store_->GetJob("j-1")->state, JobState::kPending);
  EXPECT_EQ(store_->GetJob("j-1")->version, 1);
  EXPECT_EQ(store_->GetJob("j-2").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SqliteStoreTest, OldEventsOfEndedJobsAreDeletedOldestFirstAndTheJobsStay) {
  // j-1 ends at t0 + 1 s, j-2 runs on from t0 + 2 s, j-3 ends at t0 + 10 s.
  JobRecord j1 = *store_->CreateJob(NewJob("j-1"));
  JobRecord j2 = *store_->CreateJob(NewJob("j-2"));
  JobRecord j3 = *store_->CreateJob(NewJob("j-3"));
  auto move = [&](JobRecord& j, JobState to) {
    j.state = to;
    j.updated_at = clock_.Now();
    auto r = store_->UpdateJob(j);
    ASSERT_TRUE(r.ok()) << r.status();
    j = *r;
  };
  clock_.Advance(std::chrono::seconds(1));
  move(j1, JobState::kCancelled);  // events: created, PENDING -> CANCELLED
  clock_.Advance(std::chrono::seconds(1));
  move(j2, JobState::kScheduled);
  move(j2, JobState::kRunning);  // events: created, SCHEDULED, RUNNING
  clock_.Advance(std::chrono::seconds(8));
  move(j3, JobState::kCancelled);
  const TimePoint cutoff = clock_.Now() - std::chrono::seconds(5);  // after j-1's end, before j-3's

  EXPECT_EQ(store_->DeleteOldEvents(cutoff, 0).status().code(), absl::StatusCode::kInvalidArgument);
  auto deleted = store_->DeleteOldEvents(cutoff, 1);  // a batch of one: j-1's creation event
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 1);
  EXPECT_EQ(store_->ListEvents({.job_id = "j-1", .after_seq = 0, .limit = 100})->size(), 1u);
  EXPECT_EQ(*store_->DeleteOldEvents(cutoff, 100), 1);  // the rest of j-1's
  EXPECT_EQ(*store_->DeleteOldEvents(cutoff, 100), 0);  // nothing of that age is left
  EXPECT_TRUE(store_->ListEvents({.job_id = "j-1", .after_seq = 0, .limit = 100})->empty());
  EXPECT_EQ(store_->ListEvents({.job_id = "j-2", .after_seq = 0, .limit = 100})->size(), 3u);  // still running
  EXPECT_EQ(store_->ListEvents({.job_id = "j-3", .after_seq = 0, .limit = 100})->size(), 2u);  // ended after the cutoff
  EXPECT_EQ(store_->GetJob("j-1")->state, JobState::kCancelled);                               // the job row stays
}

TEST_F(SqliteStoreTest, TenantQuotasAndUsageAreReplacedPerTenantAndSurviveReopen) {
  const TimePoint t0 = TimePoint(std::chrono::seconds(1'700'000'000));
  ASSERT_TRUE(store_->PutTenantQuota({.tenant = "team-a", .weight = 2, .updated_at = t0}).ok());
  ASSERT_TRUE(store_
                  ->PutTenantQuota({.tenant = "team-a",
                                    .weight = 0.5,
                                    .max_gpus_by_model = {{"A100-SXM-80GB", 8}, {"H100-SXM-80GB", 2}},
                                    .max_gpu_milli = 16000,
                                    .max_jobs = 10,
                                    .updated_at = t0})
                  .ok());
  ASSERT_TRUE(store_->PutTenantQuota({.tenant = "team-b", .updated_at = t0}).ok());
  EXPECT_EQ(store_->PutTenantQuota({.tenant = ""}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->PutTenantQuota({.tenant = "x", .max_gpus_by_model = {{"a=b", 1}}}).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store_->PutTenantUsage({{"team-a", 1.5e9, t0}, {"team-b", 3, t0}}).ok());
  ASSERT_TRUE(store_->PutTenantUsage({{"team-b", 4.25, t0 + std::chrono::seconds(60)}}).ok());
  Reopen();
  auto quotas = store_->ListTenantQuotas();
  ASSERT_TRUE(quotas.ok()) << quotas.status();
  ASSERT_EQ(quotas->size(), 2u);
  EXPECT_EQ((*quotas)[0].tenant, "team-a");
  EXPECT_EQ((*quotas)[0].weight, 0.5);
  EXPECT_EQ((*quotas)[0].max_gpus_by_model,
            (std::map<std::string, int64_t>{{"A100-SXM-80GB", 8}, {"H100-SXM-80GB", 2}}));
  EXPECT_EQ((*quotas)[0].max_gpu_milli, 16000);
  EXPECT_EQ((*quotas)[0].max_jobs, 10);
  EXPECT_EQ((*quotas)[0].updated_at, t0);
  EXPECT_EQ((*quotas)[1].tenant, "team-b");
  EXPECT_TRUE((*quotas)[1].max_gpus_by_model.empty());
  auto usage = store_->ListTenantUsage();
  ASSERT_TRUE(usage.ok()) << usage.status();
  ASSERT_EQ(usage->size(), 2u);
  EXPECT_EQ((*usage)[0].usage, 1.5e9);
  EXPECT_EQ((*usage)[1].usage, 4.25);
  EXPECT_EQ((*usage)[1].as_of, t0 + std::chrono::seconds(60));
}

}  // namespace
}  // namespace gpugeek::store
