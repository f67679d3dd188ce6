#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "common/fake_clock.h"
#include "common/testing/services.h"
#include "store/postgres_migrations.h"
#include "store/postgres_store.h"
#include "store/sqlite_migrations.h"
#include "store/sqlite_store.h"

namespace gpugeek::store {
namespace {

using api::JobState;

// Both stores report the same schema version for the same tables.
static_assert(std::size(kPostgresMigrations) == std::size(kSqliteMigrations));

// The PostgreSQL server the "postgres" instances run against: its URL from GPUGEEK_TEST_POSTGRES_URL, or
// read from the file GPUGEEK_TEST_POSTGRES_URL_FILE names (CTest's fixture `postgres` writes it:
// scripts/postgres-test-server.sh). "" when there is none.
using gpugeek::testing::InCi;
using gpugeek::testing::PostgresTestUrl;

// Runs statements that take no values on `url`'s server; a failure fails the test.
void PgExec(const std::string& url, const std::string& sql) {
  PGconn* pg = PQconnectdb(url.c_str());
  ASSERT_EQ(PQstatus(pg), CONNECTION_OK) << PQerrorMessage(pg);
  PQsetNoticeProcessor(
      pg, [](void*, const char*) {}, nullptr);  // DROP SCHEMA ... CASCADE lists each table
  PGresult* r = PQexec(pg, sql.c_str());
  const ExecStatusType st = PQresultStatus(r);
  EXPECT_TRUE(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) << sql << ": " << PQresultErrorMessage(r);
  PQclear(r);
  PQfinish(pg);
}

// The same suite on each backend (GetParam(): "sqlite" or "postgres"). A SQLite instance gets a fresh
// database file in a directory of its own; a PostgreSQL one a fresh schema of the test server's database,
// made in SetUp and dropped in TearDown, so instances run in parallel.
class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    if (postgres()) {
      const std::string server = PostgresTestUrl();
      if (server.empty()) {
        if (InCi()) {
          FAIL() << "no PostgreSQL server for the store tests (CI=true): run them through ctest, whose fixture "
                    "`postgres` starts one, or set GPUGEEK_TEST_POSTGRES_URL";
        }
        GTEST_SKIP() << "no PostgreSQL server: run through ctest (fixture `postgres`) or set GPUGEEK_TEST_POSTGRES_URL";
      }
      // An identifier of [a-z0-9_] only, unique per process and test, within PostgreSQL's 63 bytes.
      static std::atomic<int> next{0};
      std::string name;
      for (char c : test) name.push_back(std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(c) : '_');
      schema_ = "gpugeek_" + std::to_string(::getpid()) + "_" + std::to_string(next++) + "_" + name.substr(0, 30);
      PgExec(server, "CREATE SCHEMA " + schema_);
      url_ = server + (server.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema_;
      server_ = server;
    } else {
      std::string name = test;
      std::replace(name.begin(), name.end(), '/', '_');
      dir_ = std::filesystem::temp_directory_path() / ("gpugeek_store_test_" + std::to_string(::getpid()) + "_" + name);
      std::filesystem::remove_all(dir_);
      std::filesystem::create_directories(dir_);
    }
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    if (!schema_.empty()) PgExec(server_, "DROP SCHEMA " + schema_ + " CASCADE");
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  bool postgres() const { return GetParam() == "postgres"; }
  // A new store on this test's database (as another process would open it), with its schema version.
  absl::StatusOr<std::unique_ptr<Store>> Open(Sealer* sealer = nullptr) {
    if (postgres()) {
      auto s = PostgresStore::Open({.url = url_, .connections = 4, .clock = &clock_, .sealer = sealer});
      if (!s.ok()) return s.status();
      schema_version_ = (*s)->schema_version();
      return std::unique_ptr<Store>(std::move(*s));
    }
    auto s = SqliteStore::Open({.path = (dir_ / "gpugeek.db").string(), .clock = &clock_, .sealer = sealer});
    if (!s.ok()) return s.status();
    schema_version_ = (*s)->schema_version();
    return std::unique_ptr<Store>(std::move(*s));
  }
  void Reopen() {
    store_.reset();
    auto s = Open();
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  // Runs `sql` on the test's database behind the store's back (a newer gpugeek's write, say).
  void ExecBehindTheStore(const std::string& sql) {
    if (postgres()) {
      PgExec(url_, sql);
      return;
    }
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open((dir_ / "gpugeek.db").c_str(), &db), SQLITE_OK);
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
    sqlite3_close(db);
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
  std::filesystem::path dir_;  // sqlite
  std::string server_;         // postgres: the test server's URL
  std::string schema_;         // postgres: this test's schema
  std::string url_;            // postgres: the server's URL with this test's schema
  int schema_version_ = 0;
  std::unique_ptr<Store> store_;
};

// The suite's tests that exist only for PostgreSQL (a pool, connections, concurrent writers).
class PostgresOnlyStoreTest : public StoreTest {};

TEST_P(StoreTest, CreateThenGetReturnsEveryField) {
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

TEST_P(StoreTest, DuplicateIdIsAlreadyExistsAndKeepsTheFirst) {
  ASSERT_TRUE(store_->CreateJob(NewJob("j-1")).ok());
  JobRecord other = NewJob("j-1", "team-b");
  EXPECT_EQ(store_->CreateJob(other).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->GetJob("j-1")->tenant, "team-a");
}

TEST_P(StoreTest, GroupCommitStoresEachJobAndReportsDuplicatesAlone) {
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

TEST_P(StoreTest, UpdateIsCompareAndSetAndFollowsTheStateMachine) {
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

  // The retries used per cause are stored with the job.
  JobRecord retried = *updated;
  retried.retries = {{"error", 2}, {"node-failure", 1}};
  ASSERT_TRUE(store_->UpdateJob(retried).ok());
  EXPECT_EQ(store_->GetJob("j-1")->retries, (std::map<std::string, int>{{"error", 2}, {"node-failure", 1}}));

  // So is the last checkpoint reported complete: none yet, then step 1200 and when it was reported.
  EXPECT_FALSE(store_->GetJob("j-1")->checkpoint_step.has_value());
  JobRecord checkpointed = *store_->GetJob("j-1");
  checkpointed.checkpoint_step = 1200;
  checkpointed.checkpoint_at = clock_.Now() + std::chrono::seconds(7);
  checkpointed.usage_json = R"([["spot","H100-SXM-80GB",3600000,1000000,2500000]])";
  checkpointed.checkpoint_region = "eu-west-1";
  ASSERT_TRUE(store_->UpdateJob(checkpointed).ok());
  const JobRecord read = *store_->GetJob("j-1");
  EXPECT_EQ(read.checkpoint_step, 1200);
  EXPECT_EQ(read.checkpoint_at, clock_.Now() + std::chrono::seconds(7));
  EXPECT_EQ(read.usage_json, checkpointed.usage_json);
  EXPECT_EQ(read.checkpoint_region, "eu-west-1");
}

TEST_P(StoreTest, ListFiltersAndPages) {
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

TEST_P(StoreTest, CountJobsGroupsByStateAndPriorityWithTheOldestUpdate) {
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

TEST_P(StoreTest, EverythingSurvivesAReopen) {
  JobRecord j = *store_->CreateJob(NewJob("j-1"));
  j.state = JobState::kScheduled;
  j.allocation_json = R"({"node":"n1"})";
  ASSERT_TRUE(store_->UpdateJob(j).ok());
  ASSERT_TRUE(store_->PutNode({.id = "n1", .inventory_json = "{}", .state = "ready"}).ok());
  Reopen();
  EXPECT_EQ(schema_version_, static_cast<int>(std::size(kSqliteMigrations)));
  auto got = store_->GetJob("j-1");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, JobState::kScheduled);
  EXPECT_EQ(got->allocation_json, R"({"node":"n1"})");
  EXPECT_EQ(store_->ListEvents({.job_id = "", .after_seq = 0, .limit = 100})->size(), 2u);
  EXPECT_EQ(store_->GetNode("n1")->state, "ready");
}

TEST_P(StoreTest, AccountsAreStoredWithTheirParentsAndSurviveAReopen) {
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

TEST_P(StoreTest, JoinTokensAreConsumedOneUseAtATimeAndCredentialsKeepTheirGeneration) {
  ASSERT_TRUE(store_
                  ->CreateJoinToken({.id = "j1",
                                     .secret_sha256 = "ab",
                                     .created_by = "admin",
                                     .created_at = clock_.Now(),
                                     .uses_left = 2,
                                     .provider = "acme-gpus"})
                  .ok());
  EXPECT_TRUE(store_->ConsumeJoinToken("j1", "n1", 0xfedcba9876543210ull).ok());  // the top bit survives
  EXPECT_TRUE(store_->ConsumeJoinToken("j1", "n2", 5).ok());
  absl::Status spent = store_->ConsumeJoinToken("j1", "n3", 6);
  EXPECT_EQ(spent.code(), absl::StatusCode::kFailedPrecondition) << spent;
  EXPECT_EQ(store_->ConsumeJoinToken("j9", "n4", 7).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*store_->ListJoinTokens())[0].uses_left, 0);
  EXPECT_EQ(store_->ListNodeCredentials()->size(), 2u);  // nothing recorded for the refused ones
  ASSERT_TRUE(store_->DeleteNodeCredential("n2").ok());
  ASSERT_TRUE(store_->DeleteNodeCredential("n2").ok());  // idempotent
  Reopen();
  auto creds = *store_->ListNodeCredentials();
  ASSERT_EQ(creds.size(), 1u);
  EXPECT_EQ(creds[0].node, "n1");
  EXPECT_EQ(creds[0].generation, 0xfedcba9876543210ull);
  EXPECT_EQ(creds[0].provider, "acme-gpus") << "the join token's provider, kept with the credential";
  EXPECT_EQ((*store_->ListJoinTokens())[0].provider, "acme-gpus");
  ASSERT_TRUE(store_->DeleteJoinToken("j1").ok());
  EXPECT_TRUE(store_->ListJoinTokens()->empty());
}

TEST_P(StoreTest, EventsFilterByTheirJobsTenant) {
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

TEST_P(StoreTest, AuditRecordsAppendInOrderFilterAndAgeOut) {
  const TimePoint t0 = TimePoint(std::chrono::hours(24 * 20000));
  std::vector<AuditRecord> batch;
  for (int i = 0; i < 4; ++i) {
    batch.push_back({.time = t0 + std::chrono::hours(i),
                     .user = i % 2 == 0 ? "alice" : "bob",
                     .tenant = i < 3 ? "team-a" : "team-b",
                     .token_id = "0123456789abcdef",
                     .role = "member",
                     .method = "POST",
                     .route = "/v1/jobs/{id}/cancel",
                     .path = "/v1/jobs/j-1/cancel",
                     .status = 200 + i,
                     .remote_address = "127.0.0.1:4242",
                     .request_id = i == 0 ? "req-1" : ""});
  }
  ASSERT_TRUE(store_->AppendAudit(batch).ok());
  ASSERT_TRUE(store_->AppendAudit({}).ok());
  Reopen();
  auto all = store_->ListAudit({});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_LT((*all)[0].seq, (*all)[1].seq);
  EXPECT_EQ((*all)[0].time, t0);
  EXPECT_EQ((*all)[0].request_id, "req-1");
  EXPECT_EQ((*all)[2].status, 202);
  EXPECT_EQ((*all)[3].remote_address, "127.0.0.1:4242");
  EXPECT_EQ((*all)[3].route, "/v1/jobs/{id}/cancel");
  EXPECT_EQ(store_->ListAudit({.user = "bob"})->size(), 2u);
  EXPECT_EQ(store_->ListAudit({.tenant = "team-b"})->size(), 1u);
  EXPECT_EQ(store_->ListAudit({.user = "alice", .tenant = "team-a"})->size(), 2u);
  auto page = store_->ListAudit({.after_seq = (*all)[1].seq, .limit = 1});
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].seq, (*all)[2].seq);
  EXPECT_EQ(store_->ListAudit({.limit = 0}).status().code(), absl::StatusCode::kInvalidArgument);
  // The two older than t0 + 2h go, oldest first, a batch at a time.
  EXPECT_EQ(*store_->DeleteOldAudit(t0 + std::chrono::hours(2), 1), 1);
  EXPECT_EQ(*store_->DeleteOldAudit(t0 + std::chrono::hours(2), 10), 1);
  EXPECT_EQ(*store_->DeleteOldAudit(t0 + std::chrono::hours(2), 10), 0);
  EXPECT_EQ(store_->ListAudit({})->front().seq, (*all)[2].seq);
}

TEST_P(StoreTest, LedgerAppendsAllOrNoneInOrderAndRefusesATakenId) {
  const TimePoint t0 = TimePoint(std::chrono::hours(24 * 20000));
  ASSERT_TRUE(store_
                  ->AppendLedger({{.id = "grant/a/trial", .tenant = "a", .kind = "grant", .at = t0, .body = "{1}"},
                                  {.id = "usage/j/e1/r0", .tenant = "b", .kind = "charge", .at = t0, .body = "{2}"}})
                  .ok());
  ASSERT_TRUE(store_->AppendLedger({}).ok());
  // One taken id fails the whole append: "top-up/a/1" is not stored either.
  absl::Status dup =
      store_->AppendLedger({{.id = "top-up/a/1", .tenant = "a", .kind = "top-up", .at = t0, .body = "{3}"},
                            {.id = "grant/a/trial", .tenant = "a", .kind = "grant", .at = t0, .body = "{4}"}});
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(dup.message(), "store: ledger transaction grant/a/trial exists");
  Reopen();
  auto all = store_->ListLedger({});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_LT((*all)[0].seq, (*all)[1].seq);
  EXPECT_EQ((*all)[0].body, "{1}");
  EXPECT_EQ((*all)[1].kind, "charge");
  EXPECT_EQ((*all)[1].at, t0);
  EXPECT_EQ(store_->ListLedger({.tenant = "b"})->size(), 1u);
  auto page = store_->ListLedger({.after_seq = (*all)[0].seq, .limit = 1});
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].id, "usage/j/e1/r0");
  EXPECT_EQ(store_->ListLedger({.limit = 10001}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(StoreTest, ReservationsInsertEndProgressAndListSurviveAReopen) {
  const TimePoint t0 = TimePoint(std::chrono::hours(24 * 20000));
  ReservationRecord r{.id = "rsv-00000001",
                      .tenant = "team-a",
                      .gpu_model = "nvidia-h100-80gb",
                      .gpus = 8,
                      .price_micros = 2'000'000,
                      .start = t0,
                      .end = t0 + std::chrono::hours(720),
                      .created_by = "admin",
                      .created_at = t0};
  ASSERT_TRUE(store_->InsertReservation(r).ok());
  EXPECT_EQ(store_->InsertReservation(r).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->InsertReservation({.id = "rsv-2"}).code(), absl::StatusCode::kInvalidArgument);
  // The writer's columns and the operator's apart: a cancel only ever shortens the term.
  r.nodes = {"n1", "n2"};
  r.charged_hours = 3;
  r.held_gpu_milli_seconds = 3 * 8 * 3'600'000;
  r.used_gpu_milli_seconds = 1'234;
  r.end = t0;  // not the writer's column: ignored
  ASSERT_TRUE(store_->UpdateReservationProgress(r).ok());
  ASSERT_TRUE(store_->EndReservation(r.id, t0 + std::chrono::hours(5)).ok());
  ASSERT_TRUE(store_->EndReservation(r.id, t0 + std::chrono::hours(9)).ok());
  EXPECT_EQ(store_->EndReservation("rsv-9", t0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->UpdateReservationProgress({.id = "rsv-9"}).code(), absl::StatusCode::kNotFound);
  Reopen();
  auto all = store_->ListReservations();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  const ReservationRecord& got = (*all)[0];
  EXPECT_EQ(got.tenant, "team-a");
  EXPECT_EQ(got.gpu_model, "nvidia-h100-80gb");
  EXPECT_EQ(got.gpus, 8);
  EXPECT_EQ(got.price_micros, 2'000'000);
  EXPECT_EQ(got.start, t0);
  EXPECT_EQ(got.end, t0 + std::chrono::hours(5));
  EXPECT_EQ(got.created_by, "admin");
  EXPECT_EQ(got.nodes, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(got.charged_hours, 3);
  EXPECT_EQ(got.held_gpu_milli_seconds, 3 * 8 * 3'600'000);
  EXPECT_EQ(got.used_gpu_milli_seconds, 1'234);
}

TEST_P(StoreTest, BudgetsPutReplaceListAndDeleteAndJobsKeepTheirSubmitter) {
  const TimePoint t0 = TimePoint(std::chrono::hours(24 * 20000));
  ASSERT_TRUE(
      store_
          ->PutBudget(
              {.tenant = "a", .monthly_limit_micros = 100'000'000, .alert_percents = {50, 80, 100}, .updated_at = t0})
          .ok());
  ASSERT_TRUE(store_
                  ->PutBudget({.tenant = "a",
                               .user = "alice",
                               .monthly_limit_micros = 5'000'000,
                               .alert_percents = {90},
                               .updated_at = t0})
                  .ok());
  // Replaced: the alert state of the month.
  ASSERT_TRUE(store_
                  ->PutBudget({.tenant = "a",
                               .user = "alice",
                               .monthly_limit_micros = 5'000'000,
                               .alert_percents = {90},
                               .alerted_period = "2026-12",
                               .alerted_percent = 90,
                               .updated_at = t0})
                  .ok());
  EXPECT_EQ(store_->PutBudget({.tenant = "a", .monthly_limit_micros = 0}).code(), absl::StatusCode::kInvalidArgument);
  Reopen();
  auto all = store_->ListBudgets();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].user, "");
  EXPECT_EQ((*all)[0].alert_percents, (std::vector<int>{50, 80, 100}));
  EXPECT_EQ((*all)[1].user, "alice");
  EXPECT_EQ((*all)[1].alerted_period, "2026-12");
  EXPECT_EQ((*all)[1].alerted_percent, 90);
  EXPECT_EQ((*all)[1].updated_at, t0);
  ASSERT_TRUE(store_->DeleteBudget("a", "alice").ok());
  EXPECT_EQ(store_->DeleteBudget("a", "alice").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListBudgets()->size(), 1u);

  JobRecord job = NewJob("j-budget");
  job.submitted_by = "alice";
  ASSERT_TRUE(store_->CreateJob(job).ok());
  Reopen();
  EXPECT_EQ(store_->GetJob("j-budget")->submitted_by, "alice");
}

TEST_P(StoreTest, NodesUpsertAndList) {
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

TEST_P(StoreTest, DeleteNodeRemovesOnlyThatNodeDurablyAndLeavesJobsAlone) {
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

TEST_P(StoreTest, RefusesADatabaseFromANewerSchema) {
  store_.reset();
  ExecBehindTheStore("INSERT INTO schema_migrations VALUES (99, 0)");
  auto s = Open();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.status().message(),
            fmt::format("{}: database schema version 99 is newer than this gpugeek knows ({}); upgrade gpugeek",
                        GetParam(), std::size(kSqliteMigrations)));
}

TEST_P(StoreTest, AStoreThatCannotBeReachedIsUnavailable) {
  if (postgres()) {
    // Port 1 on loopback: nothing listens there, so the connection is refused at once.
    auto s = PostgresStore::Open({.url = "postgres://postgres@127.0.0.1:1/gpugeek"});
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();
    EXPECT_TRUE(std::string(s.status().message()).starts_with("postgres: cannot connect to 127.0.0.1:1/gpugeek: "))
        << s.status();
    EXPECT_EQ(PostgresStore::Open({.url = "mysql://x"}).status().code(), absl::StatusCode::kInvalidArgument);
    return;
  }
  auto s = SqliteStore::Open({.path = (dir_ / "missing-dir" / "x.db").string()});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable);
}

TEST_P(StoreTest, ConcurrentCompareAndSetLosesNoUpdate) {
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

TEST_P(StoreTest, WriteBatchCommitsTogetherAndAFailedCallLeavesNothingOfItself) {
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

TEST_P(StoreTest, AWriteBatchNeverCommittedIsNotStored) {
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

TEST_P(StoreTest, OldEventsOfEndedJobsAreDeletedOldestFirstAndTheJobsStay) {
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

TEST_P(StoreTest, TenantQuotasAndUsageAreReplacedPerTenantAndSurviveReopen) {
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

namespace gpugeek::store {
namespace {

// A stand-in for the keyring's sealer: a reversible scramble bound to tenant and aad, so the test can
// read the database file's bytes and see neither the value nor the spec's env.
class ToySealer final : public Sealer {
 public:
  absl::StatusOr<std::string> Seal(std::string_view tenant, std::string_view plaintext, std::string_view aad) override {
    std::string out = "toy|" + std::string(tenant) + "|" + std::string(aad) + "|";
    for (char c : plaintext) out.push_back(static_cast<char>(c ^ 0x5a));
    return out;
  }
  absl::StatusOr<std::string> Open(std::string_view tenant, std::string_view sealed,
                                   std::string_view aad) const override {
    const std::string head = "toy|" + std::string(tenant) + "|" + std::string(aad) + "|";
    if (!sealed.starts_with(head)) return absl::DataLossError("toy: does not authenticate");
    std::string out;
    for (char c : sealed.substr(head.size())) out.push_back(static_cast<char>(c ^ 0x5a));
    return out;
  }
};

std::string FileBytes(const std::filesystem::path& p) {
  std::string all;
  for (const char* suffix : {"", "-wal"}) {
    FILE* f = std::fopen((p.string() + suffix).c_str(), "rb");
    if (f == nullptr) continue;
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) all.append(buf, n);
    std::fclose(f);
  }
  return all;
}

TEST_P(StoreTest, ExperimentsTrialsAndMetricReportsSurviveAReopen) {
  ExperimentRecord e{.id = "x-000001", .tenant = "acme", .user = "alice", .name = "tune", .spec_yaml = "name: tune\n"};
  auto created = store_->CreateExperiment(e);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->version, 1);
  EXPECT_EQ(store_->CreateExperiment(e).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(store_->CreateExperiment({.id = "x-000002", .tenant = "other", .name = "b", .spec_yaml = "s"}).ok());

  // Compare-and-set on version.
  ExperimentRecord stale = *created;
  created->state = "stopping";
  created->reason = "stopped by alice";
  auto updated = store_->UpdateExperiment(*created);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->version, 2);
  EXPECT_EQ(store_->UpdateExperiment(stale).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(store_->GetExperiment("x-9").status().code(), absl::StatusCode::kNotFound);

  // Trials: inserted, then replaced in place.
  ASSERT_TRUE(store_->PutTrial({.experiment_id = "x-000001", .number = 1, .params_json = R"({"lr":0.1})"}).ok());
  ASSERT_TRUE(store_->PutTrial({.experiment_id = "x-000001", .number = 0, .params_json = R"({"lr":0.01})"}).ok());
  ASSERT_TRUE(store_
                  ->PutTrial({.experiment_id = "x-000001",
                              .number = 0,
                              .params_json = R"({"lr":0.01})",
                              .state = "complete",
                              .job_id = "j-7",
                              .value = 0.25})
                  .ok());

  // Reports: a resent one is stored once.
  std::vector<MetricReportRecord> reports = {
      {.job_id = "j-7", .epoch = 1, .node_rank = 0, .seq = 0, .step = 1, .value = 2.5},
      {.job_id = "j-7", .epoch = 1, .node_rank = 0, .seq = 1, .step = 2, .value = 1.5}};
  ASSERT_TRUE(store_->AppendMetricReports(reports).ok());
  reports.push_back({.job_id = "j-7", .epoch = 1, .node_rank = 0, .seq = 2, .step = 3, .value = 1.25});
  ASSERT_TRUE(store_->AppendMetricReports(reports).ok());
  ASSERT_TRUE(store_->AppendMetricReports({{.job_id = "j-8", .epoch = 1, .seq = 0, .step = 1, .value = 9}}).ok());

  Reopen();
  auto got = store_->GetExperiment("x-000001");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->state, "stopping");
  EXPECT_EQ(got->user, "alice");
  EXPECT_EQ(got->spec_yaml, "name: tune\n");
  auto mine = store_->ListExperiments({.tenant = "acme"});
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 1u);
  auto page = store_->ListExperiments({.after_id = "x-000001", .limit = 10});
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].id, "x-000002");
  EXPECT_EQ(store_->ListExperiments({.limit = 0}).status().code(), absl::StatusCode::kInvalidArgument);

  auto trials = store_->ListTrials("x-000001");
  ASSERT_TRUE(trials.ok());
  ASSERT_EQ(trials->size(), 2u);
  EXPECT_EQ((*trials)[0].number, 0);
  EXPECT_EQ((*trials)[0].state, "complete");
  EXPECT_EQ((*trials)[0].job_id, "j-7");
  EXPECT_EQ((*trials)[0].value, 0.25);
  EXPECT_FALSE((*trials)[1].value.has_value());

  auto listed = store_->ListMetricReports("j-7", 0, 100);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_EQ((*listed)[2].step, 3);
  EXPECT_EQ((*listed)[2].value, 1.25);
  EXPECT_EQ(store_->ListMetricReports("j-7", (*listed)[1].id, 100)->size(), 1u);
  EXPECT_EQ(*store_->CountMetricReports("j-7", 1, 0), 3);
  EXPECT_EQ(*store_->CountMetricReports("j-7", 2, 0), 0);
}

TEST_P(StoreTest, ServiceUsageCountersOnlyRiseAndSurviveAReopen) {
  ASSERT_TRUE(store_
                  ->PutServiceUsage(
                      {.service_id = "s-1", .version_name = "v1", .instance = "gw-a", .requests = 10, .tokens = 300})
                  .ok());
  ASSERT_TRUE(
      store_->PutServiceUsage({.service_id = "s-1", .version_name = "v2", .instance = "gw-a", .requests = 1}).ok());
  // A late (lower) report changes neither counter; a higher one raises each on its own.
  ASSERT_TRUE(store_
                  ->PutServiceUsage(
                      {.service_id = "s-1", .version_name = "v1", .instance = "gw-a", .requests = 4, .tokens = 900})
                  .ok());
  ASSERT_TRUE(
      store_->PutServiceUsage({.service_id = "s-1", .version_name = "v1", .instance = "gw-0", .requests = 7}).ok());
  ASSERT_TRUE(
      store_->PutServiceUsage({.service_id = "s-2", .version_name = "v1", .instance = "gw-a", .requests = 5}).ok());
  Reopen();
  auto rows = store_->ListServiceUsage("s-1");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  EXPECT_EQ((*rows)[0].instance, "gw-0");
  EXPECT_EQ((*rows)[0].requests, 7);
  EXPECT_EQ((*rows)[1].instance, "gw-a");
  EXPECT_EQ((*rows)[1].requests, 10);
  EXPECT_EQ((*rows)[1].tokens, 900);
  EXPECT_EQ((*rows)[2].version_name, "v2");
  EXPECT_EQ((*rows)[2].requests, 1);
  EXPECT_EQ(store_->ListServiceUsage("s-9")->size(), 0u);
}

TEST_P(StoreTest, ServicesAndReplicasSurviveAReopen) {
  ServiceRecord svc{.id = "s-000001",
                    .tenant = "acme",
                    .user = "alice",
                    .name = "gpt-small",
                    .spec_yaml = "kind: service\nname: gpt-small\n",
                    .desired = "v1=1"};
  auto created = store_->CreateService(svc);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->version, 1);
  EXPECT_EQ(created->generation, 1);
  EXPECT_EQ(created->state, "ACTIVE");
  EXPECT_EQ(store_->CreateService(svc).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->CreateService({.name = "x"}).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(store_->CreateService({.id = "s-000002", .tenant = "other", .name = "b", .spec_yaml = "s"}).ok());

  // Compare-and-set on version.
  ServiceRecord stale = *created;
  created->generation = 2;
  created->desired = "v1=2,v2=1";
  created->reason = "scaled by alice";
  auto updated = store_->UpdateService(*created);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->version, 2);
  EXPECT_EQ(store_->UpdateService(stale).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(store_->UpdateService({.id = "s-9", .version = 1}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetService("s-9").status().code(), absl::StatusCode::kNotFound);

  // Replicas: inserted, then replaced in place.
  ASSERT_TRUE(store_->PutReplica({.service_id = "s-000001", .version_name = "v2", .ordinal = 0, .port = 20001}).ok());
  ASSERT_TRUE(store_->PutReplica({.service_id = "s-000001", .version_name = "v1", .ordinal = 1, .port = 20002}).ok());
  ASSERT_TRUE(store_
                  ->PutReplica({.service_id = "s-000001",
                                .version_name = "v1",
                                .ordinal = 0,
                                .job_id = "j-1",
                                .port = 20000,
                                .spec_digest = "abc"})
                  .ok());
  ASSERT_TRUE(store_
                  ->PutReplica({.service_id = "s-000001",
                                .version_name = "v1",
                                .ordinal = 0,
                                .job_id = "j-1",
                                .port = 20000,
                                .spec_digest = "abc",
                                .state = "ENDED",
                                .reason = "job j-1 FAILED"})
                  .ok());

  Reopen();
  auto got = store_->GetService("s-000001");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->user, "alice");
  EXPECT_EQ(got->name, "gpt-small");
  EXPECT_EQ(got->spec_yaml, "kind: service\nname: gpt-small\n");
  EXPECT_EQ(got->generation, 2);
  EXPECT_EQ(got->desired, "v1=2,v2=1");
  EXPECT_EQ(got->reason, "scaled by alice");
  EXPECT_EQ(got->version, 2);
  EXPECT_EQ(got->created_at, created->created_at);
  auto mine = store_->ListServices({.tenant = "acme"});
  ASSERT_TRUE(mine.ok());
  ASSERT_EQ(mine->size(), 1u);
  auto named = store_->ListServices({.name = "b", .state = "ACTIVE"});
  ASSERT_EQ(named->size(), 1u);
  EXPECT_EQ((*named)[0].id, "s-000002");
  EXPECT_TRUE(store_->ListServices({.state = "DELETED"})->empty());
  auto page = store_->ListServices({.after_id = "s-000001", .limit = 10});
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ((*page)[0].id, "s-000002");
  EXPECT_EQ(store_->ListServices({.limit = 0}).status().code(), absl::StatusCode::kInvalidArgument);

  auto replicas = store_->ListReplicas("s-000001", /*active_only=*/false);
  ASSERT_TRUE(replicas.ok()) << replicas.status();
  ASSERT_EQ(replicas->size(), 3u);
  EXPECT_EQ((*replicas)[0].version_name, "v1");
  EXPECT_EQ((*replicas)[0].ordinal, 0);
  EXPECT_EQ((*replicas)[0].job_id, "j-1");
  EXPECT_EQ((*replicas)[0].port, 20000);
  EXPECT_EQ((*replicas)[0].spec_digest, "abc");
  EXPECT_EQ((*replicas)[0].state, "ENDED");
  EXPECT_EQ((*replicas)[0].reason, "job j-1 FAILED");
  EXPECT_EQ((*replicas)[1].ordinal, 1);
  EXPECT_EQ((*replicas)[2].version_name, "v2");
  auto active = store_->ListReplicas("s-000001", /*active_only=*/true);
  ASSERT_EQ(active->size(), 2u);
  EXPECT_EQ((*active)[0].port, 20002);
  EXPECT_TRUE(store_->ListReplicas("s-000002", /*active_only=*/false)->empty());
}

TEST_P(StoreTest, PlatformEnvIsStoredWithTheJob) {
  JobRecord j = NewJob("j-1");
  j.platform_env = {{"GPUGEEK_TRIAL_ID", "3"}, {"GPUGEEK_PARAMS", R"({"lr":0.01,"opt":"a'b"})"}};
  ASSERT_TRUE(store_->CreateJob(j).ok());
  Reopen();
  auto got = store_->GetJob("j-1");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->platform_env, j.platform_env);
  got->platform_env.clear();
  ASSERT_TRUE(store_->UpdateJob(*got).ok());
  EXPECT_TRUE(store_->GetJob("j-1")->platform_env.empty());
}

// Whether any job spec, experiment spec or secret value as stored (the database's own bytes) holds `text`.
bool StoredBytesHold(const std::string& url, const std::string& text) {
  PGconn* pg = PQconnectdb(url.c_str());
  EXPECT_EQ(PQstatus(pg), CONNECTION_OK) << PQerrorMessage(pg);
  char* literal = PQescapeLiteral(pg, text.data(), text.size());
  const std::string needle = fmt::format("convert_to({}, 'UTF8')", literal);
  PQfreemem(literal);
  PGresult* r = PQexec(pg, fmt::format("SELECT 1 FROM jobs WHERE position({0} IN spec_yaml) > 0 UNION ALL SELECT 1 "
                                       "FROM experiments WHERE position({0} IN spec_yaml) > 0 UNION ALL SELECT 1 "
                                       "FROM services WHERE position({0} IN spec_yaml) > 0 UNION ALL SELECT 1 "
                                       "FROM secrets WHERE position({0} IN value) > 0",
                                       needle)
                               .c_str());
  EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << PQresultErrorMessage(r);
  const bool found = PQntuples(r) > 0;
  PQclear(r);
  PQfinish(pg);
  return found;
}

TEST_P(StoreTest, WithASealerSpecsAndSecretsAreStoredSealedAndNeedTheKeyToRead) {
  ToySealer sealer;
  store_.reset();
  auto sealed = Open(&sealer);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  store_ = std::move(*sealed);
  const TimePoint t0 = clock_.Now();
  JobRecord j = NewJob("j-1", "acme");
  j.spec_yaml = "env: {AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI}\n";
  ASSERT_TRUE(store_->CreateJob(j).ok());
  JobRecord got = *store_->GetJob("j-1");
  EXPECT_EQ(got.spec_yaml, j.spec_yaml);
  got.state = JobState::kScheduled;
  ASSERT_TRUE(store_->UpdateJob(got).ok());
  EXPECT_EQ(store_->ListJobs({.tenant = "acme"})->at(0).spec_yaml, j.spec_yaml);
  ASSERT_TRUE(
      store_->CreateExperiment({.id = "x-1", .tenant = "acme", .name = "tune", .spec_yaml = "token: xp_SEALEDSPEC\n"})
          .ok());
  EXPECT_EQ(store_->GetExperiment("x-1")->spec_yaml, "token: xp_SEALEDSPEC\n");
  ASSERT_TRUE(
      store_->CreateService({.id = "s-1", .tenant = "acme", .name = "llm", .spec_yaml = "token: sv_SEALEDSPEC\n"})
          .ok());
  EXPECT_EQ(store_->GetService("s-1")->spec_yaml, "token: sv_SEALEDSPEC\n");
  ASSERT_TRUE(
      store_->PutSecret({.tenant = "acme", .name = "hf", .value = "hf_TOPSECRET", .created_at = t0, .updated_at = t0})
          .ok());
  EXPECT_EQ(store_->GetSecret("acme", "hf")->value, "hf_TOPSECRET");
  store_.reset();
  for (const char* plain : {"wJalrXUtnFEMI", "xp_SEALEDSPEC", "sv_SEALEDSPEC", "hf_TOPSECRET"}) {
    const bool found =
        postgres() ? StoredBytesHold(url_, plain) : FileBytes(dir_ / "gpugeek.db").find(plain) != std::string::npos;
    EXPECT_FALSE(found) << plain << " is stored in the clear";
  }
  Reopen();  // without the key: sealed rows are DataLoss, never the sealed bytes as a spec
  EXPECT_EQ(store_->GetJob("j-1").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(store_->GetExperiment("x-1").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(store_->GetService("s-1").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(store_->GetSecret("acme", "hf").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(store_->PutSecret({.tenant = "acme", .name = "hf", .value = "v"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(SealedStoreTest, SpecsAndSecretsAreSealedAtRestAndOldPlainRowsStillRead) {
  const auto dir = std::filesystem::temp_directory_path() / ("gpugeek_sealed_store_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto path = dir / "gpugeek.db";
  const TimePoint t0 = TimePoint(std::chrono::seconds(1'700'000'000));
  {
    // A row from before: written without a sealer.
    auto plain = SqliteStore::Open({.path = path.string()});
    ASSERT_TRUE(plain.ok()) << plain.status();
    JobRecord old{.id = "j-old", .tenant = "acme", .name = "old", .spec_yaml = "env: {A: old-plain}\n"};
    old.created_at = old.updated_at = t0;
    ASSERT_TRUE((*plain)->CreateJob(old).ok());
    EXPECT_EQ((*plain)->PutSecret({.tenant = "acme", .name = "hf", .value = "v"}).status().code(),
              absl::StatusCode::kFailedPrecondition);
  }
  ToySealer sealer;
  {
    auto s = SqliteStore::Open({.path = path.string(), .sealer = &sealer});
    ASSERT_TRUE(s.ok()) << s.status();
    SqliteStore& store = **s;
    JobRecord j{
        .id = "j-1", .tenant = "acme", .name = "n", .spec_yaml = "env: {AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI}\n"};
    j.created_at = j.updated_at = t0;
    ASSERT_TRUE(store.CreateJob(j).ok());
    auto got = store.GetJob("j-1");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->spec_yaml, j.spec_yaml);
    got->state = api::JobState::kScheduled;
    ASSERT_TRUE(store.UpdateJob(*got).ok());
    EXPECT_EQ(store.GetJob("j-old")->spec_yaml, "env: {A: old-plain}\n");
    auto listed = store.ListJobs({.tenant = "acme"});
    ASSERT_TRUE(listed.ok()) << listed.status();
    ASSERT_EQ(listed->size(), 2u);
    EXPECT_EQ((*listed)[0].spec_yaml, j.spec_yaml);  // by id: j-1, j-old

    ASSERT_TRUE(
        store.PutSecret({.tenant = "acme", .name = "hf", .value = "hf_TOPSECRET", .created_at = t0, .updated_at = t0})
            .ok());
    auto replaced = store.PutSecret({.tenant = "acme",
                                     .name = "hf",
                                     .value = "hf_TOPSECRET2",
                                     .created_at = t0 + std::chrono::hours(1),
                                     .updated_at = t0 + std::chrono::hours(1)});
    ASSERT_TRUE(replaced.ok()) << replaced.status();
    EXPECT_EQ(replaced->created_at, t0);
    EXPECT_EQ(store.GetSecret("acme", "hf")->value, "hf_TOPSECRET2");
    EXPECT_EQ(store.GetSecret("other", "hf").status().code(), absl::StatusCode::kNotFound);
    auto list = store.ListSecrets("acme");
    ASSERT_EQ(list->size(), 1u);
    EXPECT_EQ((*list)[0].name, "hf");
    EXPECT_EQ((*list)[0].value, "");
    EXPECT_TRUE(store.ListSecrets("other")->empty());
  }
  const std::string raw = FileBytes(path);
  EXPECT_EQ(raw.find("wJalrXUtnFEMI"), std::string::npos);
  EXPECT_EQ(raw.find("hf_TOPSECRET"), std::string::npos);
  {
    auto s = SqliteStore::Open({.path = path.string(), .sealer = &sealer});
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->DeleteSecret("acme", "hf").ok());
    EXPECT_EQ((*s)->DeleteSecret("acme", "hf").code(), absl::StatusCode::kNotFound);
  }
  {
    // Sealed rows without the key: a clear DataLoss, never the sealed bytes as a spec.
    auto s = SqliteStore::Open({.path = path.string()});
    ASSERT_TRUE(s.ok());
    EXPECT_EQ((*s)->GetJob("j-1").status().code(), absl::StatusCode::kDataLoss);
  }
  std::filesystem::remove_all(dir);
}

// A read inside a write batch that fails at the database (its table renamed behind the store's back)
// fails alone: PostgreSQL would fail the batch's whole transaction with it, and answer its COMMIT with a
// ROLLBACK that stored nothing.
TEST_P(StoreTest, AReadThatFailsInsideAWriteBatchTakesNoneOfTheBatchsWritesWithIt) {
  ExecBehindTheStore("ALTER TABLE nodes RENAME TO nodes_elsewhere");
  ASSERT_TRUE(store_->BeginWriteBatch().ok());
  ASSERT_TRUE(store_->CreateJob(NewJob("j-1")).ok());
  EXPECT_EQ(store_->ListNodes().status().code(), absl::StatusCode::kInternal);
  ASSERT_TRUE(store_->CreateJob(NewJob("j-2")).ok());
  EXPECT_EQ(store_->GetJob("j-1")->version, 1);
  ASSERT_TRUE(store_->CommitWriteBatch().ok());
  ExecBehindTheStore("ALTER TABLE nodes_elsewhere RENAME TO nodes");
  Reopen();
  auto jobs = store_->ListJobs({});
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].id, "j-1");
  EXPECT_EQ((*jobs)[1].id, "j-2");
  EXPECT_EQ(store_->ListEvents({.job_id = "", .after_seq = 0, .limit = 100})->size(), 2u);
}

// SQLite stores any bytes as text; PostgreSQL's text holds neither NUL nor invalid UTF-8. An id with
// either finds nothing when looked up (never the job its NUL would cut it to) and, on PostgreSQL, is
// refused when stored; free-form text is stored either way (escaped on PostgreSQL), and one malformed
// audit record never fails the others of its group.
TEST_P(StoreTest, TextWithANulOrInvalidUtf8FindsNothingAsAKeyAndIsKeptAsFreeText) {
  ASSERT_TRUE(store_->CreateJob(NewJob("a")).ok());
  const std::string nul_id("a\0b", 3);
  const std::string bad_id = "j-\xff";
  EXPECT_EQ(store_->GetJob(nul_id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetJob(bad_id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->ListJobs({.tenant = "team-\xff"})->size(), 0u);
  EXPECT_EQ(store_->ListJobs({.tenant = std::string("team-a\0x", 8)})->size(), 0u);
  EXPECT_EQ(store_->DeleteNode(nul_id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->RevokeToken(bad_id, clock_.Now()).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetExperiment(bad_id).status().code(), absl::StatusCode::kNotFound);

  auto with_nul = store_->CreateJob(NewJob(nul_id));
  auto not_utf8 = store_->CreateJob(NewJob(bad_id));
  auto results = store_->CreateJobs({NewJob("b"), NewJob("c", "team-\xc3"), NewJob("d")});
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 3u);
  EXPECT_TRUE((*results)[0].ok());
  EXPECT_TRUE((*results)[2].ok());
  if (postgres()) {
    EXPECT_EQ(with_nul.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(not_utf8.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(not_utf8.status().message()),
              "store: insert job: value $1 = 'j-\\xff' holds a NUL byte or is not UTF-8, which PostgreSQL's text "
              "cannot store");
    EXPECT_EQ((*results)[1].status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(store_->ListJobs({})->size(), 3u);  // a, b, d
  } else {
    EXPECT_TRUE(with_nul.ok());
    EXPECT_TRUE(not_utf8.ok());
    EXPECT_TRUE((*results)[1].ok());
    EXPECT_EQ(store_->GetJob(nul_id)->id, nul_id);
    EXPECT_EQ(store_->ListJobs({})->size(), 6u);
  }
  EXPECT_EQ(store_->GetJob("a")->name, "train-a");

  // Free-form text: a reason with a NUL and a cut-short sequence between well-formed UTF-8.
  JobRecord a = *store_->GetJob("a");
  a.state = JobState::kScheduled;
  a.reason = std::string("placed\0on \xc3 n\xc3\xa9", 15);
  ASSERT_TRUE(store_->UpdateJob(a).ok());
  const std::string stored_reason = postgres() ? "placed\\x00on \\xc3 n\xc3\xa9" : a.reason;
  EXPECT_EQ(store_->GetJob("a")->reason, stored_reason);
  auto events = store_->ListEvents({.job_id = "a", .after_seq = 0, .limit = 100});
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].reason, stored_reason);

  // An unauthenticated call to /v1/jobs/%FF/cancel between two others: all three are stored.
  std::vector<AuditRecord> audit = {
      {.user = "alice", .method = "POST", .path = "/v1/jobs/j-1/cancel", .status = 200},
      {.method = "POST", .path = "/v1/jobs/\xff/cancel", .status = 401, .request_id = std::string("r\0x", 3)},
      {.user = "bob", .method = "POST", .path = "/v1/jobs/j-2/cancel", .status = 200}};
  ASSERT_TRUE(store_->AppendAudit(audit).ok());
  auto listed = store_->ListAudit({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_EQ((*listed)[0].path, "/v1/jobs/j-1/cancel");
  EXPECT_EQ((*listed)[1].path, postgres() ? "/v1/jobs/\\xff/cancel" : "/v1/jobs/\xff/cancel");
  EXPECT_EQ((*listed)[1].request_id, postgres() ? "r\\x00x" : std::string("r\0x", 3));
  EXPECT_EQ((*listed)[1].status, 401);
  EXPECT_EQ((*listed)[2].user, "bob");
  EXPECT_EQ(store_->ListAudit({.user = "bob"})->size(), 1u);
}

// A raw session on the test's schema for the postgres-only tests below: a lock or a transaction held
// behind the store's back.
class PgSession {
 public:
  explicit PgSession(const std::string& url) : pg_(PQconnectdb(url.c_str())) {
    PQsetNoticeProcessor(
        pg_, [](void*, const char*) {}, nullptr);
  }
  ~PgSession() { PQfinish(pg_); }
  bool ok() const { return PQstatus(pg_) == CONNECTION_OK; }
  // Runs `sql` (statements without values): "" when it succeeded, else the error.
  std::string Exec(const std::string& sql) {
    PGresult* r = PQexec(pg_, sql.c_str());
    const ExecStatusType st = PQresultStatus(r);
    std::string error = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? "" : PQresultErrorMessage(r);
    PQclear(r);
    return error;
  }
  // Sends `sql` without waiting for it; Wait() collects its SQLSTATE ("" when it succeeded).
  bool Send(const std::string& sql) { return PQsendQuery(pg_, sql.c_str()) == 1; }
  std::string Wait() {
    std::string state;
    while (PGresult* r = PQgetResult(pg_)) {
      if (const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE); s != nullptr && state.empty()) state = s;
      PQclear(r);
    }
    return state;
  }

 private:
  PGconn* pg_;
};

// A write batch begins only after the writes already under way (SqliteStore's writer lock orders them
// so): overlapping them it would wait on their row locks or deadlock with them.
TEST_P(PostgresOnlyStoreTest, AWriteBatchBeginsOnlyAfterTheWritesUnderWayEnd) {
  PgSession other(url_);
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(other.Exec("BEGIN; LOCK TABLE nodes IN EXCLUSIVE MODE"), "");
  std::thread writer([&] { EXPECT_TRUE(store_->PutNode({.id = "n-1", .state = "ready"}).ok()); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // PutNode waits for the table's lock
  std::atomic<bool> began{false};
  std::thread batch([&] {
    EXPECT_TRUE(store_->BeginWriteBatch().ok());
    began = true;
    EXPECT_TRUE(store_->PutNode({.id = "n-2", .state = "ready"}).ok());
    EXPECT_TRUE(store_->CommitWriteBatch().ok());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(began.load()) << "a write batch began while a write was under way";
  ASSERT_EQ(other.Exec("COMMIT"), "");
  writer.join();
  batch.join();
  EXPECT_TRUE(began.load());
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].id, "n-1");
  EXPECT_EQ((*nodes)[1].id, "n-2");
}

// A call inside a write batch that the server aborts for a deadlock is rolled back to its savepoint and
// run again: the batch goes on. The other transaction holds j-2 and waits for j-1, which the batch holds;
// the batch's update of j-2 closes the cycle. The server breaks it by aborting the batch's statement
// (its deadlock_timeout, 1 s, is the shorter) until the other gives up waiting (lock_timeout).
TEST_P(PostgresOnlyStoreTest, ACallInsideAWriteBatchAbortedForADeadlockIsRunAgain) {
  JobRecord j1 = *store_->CreateJob(NewJob("j-1"));
  JobRecord j2 = *store_->CreateJob(NewJob("j-2"));
  PgSession other(url_);
  ASSERT_TRUE(other.ok());
  ASSERT_EQ(other.Exec("SET deadlock_timeout = '10s'; SET lock_timeout = '2500ms'; BEGIN; UPDATE jobs SET "
                       "priority = 9 WHERE id = 'j-2'"),
            "");
  ASSERT_TRUE(store_->BeginWriteBatch().ok());
  j1.state = JobState::kScheduled;
  ASSERT_TRUE(store_->UpdateJob(j1).ok());
  ASSERT_TRUE(other.Send("UPDATE jobs SET priority = 9 WHERE id = 'j-1'"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  j2.state = JobState::kScheduled;
  auto updated = store_->UpdateJob(j2);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->version, 2);
  ASSERT_TRUE(store_->CommitWriteBatch().ok());
  EXPECT_EQ(other.Wait(), "55P03");  // the other's wait for j-1 timed out
  ASSERT_EQ(other.Exec("ROLLBACK"), "");
  EXPECT_EQ(store_->GetJob("j-1")->version, 2);
  EXPECT_EQ(store_->GetJob("j-2")->version, 2);
  EXPECT_EQ(store_->GetJob("j-2")->state, JobState::kScheduled);
  EXPECT_EQ(store_->GetJob("j-2")->priority, 5);
}

// Unless the URL says otherwise, a connection times out connecting and keeps its idle TCP connection
// probed, so a network cut fails the call instead of freezing its thread.
TEST_P(PostgresOnlyStoreTest, ConnectionsTimeOutAndKeepAliveUnlessTheUrlSaysOtherwise) {
  const auto& settings = static_cast<PostgresStore&>(*store_).connection_settings();
  EXPECT_EQ(settings.at("connect_timeout"), "5");
  EXPECT_EQ(settings.at("keepalives"), "1");
  EXPECT_EQ(settings.at("keepalives_idle"), "10");
  EXPECT_EQ(settings.at("keepalives_interval"), "5");
  EXPECT_EQ(settings.at("keepalives_count"), "3");
  EXPECT_EQ(settings.at("tcp_user_timeout"), "30000");
  EXPECT_EQ(settings.count("password"), 0u);
  auto own = PostgresStore::Open({.url = url_ + "&connect_timeout=7&keepalives_idle=60", .connections = 1});
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ((*own)->connection_settings().at("connect_timeout"), "7");
  EXPECT_EQ((*own)->connection_settings().at("keepalives_idle"), "60");
  EXPECT_EQ((*own)->connection_settings().at("tcp_user_timeout"), "30000");
}

// After the server closed every connection of the pool (as a restart does), each kind of call succeeds:
// the pool notices a closed connection before the call's first statement and reconnects it.
TEST_P(PostgresOnlyStoreTest, EveryCallSucceedsAfterTheServerClosedThePoolsConnections) {
  const std::string app = schema_;  // the application_name of the connections of `s`
  auto s = PostgresStore::Open({.url = url_ + "&application_name=" + app, .connections = 2, .clock = &clock_});
  ASSERT_TRUE(s.ok()) << s.status();
  PostgresStore& store = **s;
  auto close_all = [&] {
    PgExec(server_,
           "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE application_name = '" + app + "'");
  };
  close_all();
  EXPECT_TRUE(store.PutNode({.id = "n-1", .state = "ready"}).ok());  // one statement, no transaction
  close_all();
  auto created = store.CreateJob(NewJob("j-1"));  // a transaction
  EXPECT_TRUE(created.ok()) << created.status();
  close_all();
  auto got = store.GetJob("j-1");  // a read
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->version, 1);
  close_all();
  ASSERT_TRUE(store.BeginWriteBatch().ok());
  EXPECT_TRUE(store.CreateJob(NewJob("j-2")).ok());
  ASSERT_TRUE(store.CommitWriteBatch().ok());
  close_all();
  EXPECT_TRUE(store.DeleteNode("n-1").ok());
  EXPECT_EQ(store.ListJobs({})->size(), 2u);
  EXPECT_EQ(store.ListNodes()->size(), 0u);
}

// NaN is stored as SQLite stores it: NULL. A trial's value reads back as none; a metric report's
// (NOT NULL) is skipped as SQLite's INSERT OR IGNORE skips it; a quota's weight is refused.
TEST_P(StoreTest, NaNIsStoredAsSqliteStoresIt) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ASSERT_TRUE(store_->CreateExperiment({.id = "x-1", .tenant = "acme", .name = "tune", .spec_yaml = "s"}).ok());
  ASSERT_TRUE(store_->PutTrial({.experiment_id = "x-1", .number = 0, .params_json = "{}", .value = nan}).ok());
  auto trials = store_->ListTrials("x-1");
  ASSERT_TRUE(trials.ok()) << trials.status();
  ASSERT_EQ(trials->size(), 1u);
  EXPECT_FALSE((*trials)[0].value.has_value());
  const absl::Status reports =
      store_->AppendMetricReports({{.job_id = "j-1", .epoch = 1, .seq = 0, .step = 1, .value = 2.5},
                                   {.job_id = "j-1", .epoch = 1, .seq = 1, .step = 2, .value = nan},
                                   {.job_id = "j-1", .epoch = 1, .seq = 2, .step = 3, .value = 1.5}});
  EXPECT_TRUE(reports.ok()) << reports;
  auto listed = store_->ListMetricReports("j-1", 0, 100);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].value, 2.5);
  EXPECT_EQ((*listed)[1].seq, 2);
  EXPECT_EQ(store_->PutTenantQuota({.tenant = "team-a", .weight = nan}).code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(store_->ListTenantQuotas()->empty());
}

// libpq's messages about a URL quote it, or its bad piece (the password itself): no error of Open shows
// the password.
TEST(PostgresStoreOpenTest, NoErrorShowsTheUrlsPassword) {
  auto refused = PostgresStore::Open({.url = "postgres://u:s3cret@127.0.0.1:1/db"});
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(std::string(refused.status().message()).find("s3cret"), std::string::npos) << refused.status();
  auto bad_escape = PostgresStore::Open({.url = "postgres://u:p%zz@h/db"});
  EXPECT_EQ(bad_escape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(bad_escape.status().message()).find("p%zz"), std::string::npos) << bad_escape.status();
  EXPECT_EQ(std::string(bad_escape.status().message()),
            "postgres: malformed store URL: invalid percent-encoded token: \"***\"");
  auto whole_url_quoted = PostgresStore::Open({.url = "postgres://u:s3cret@[::1/db"});
  EXPECT_EQ(whole_url_quoted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(whole_url_quoted.status().message()).find("s3cret"), std::string::npos)
      << whole_url_quoted.status();
  auto param = PostgresStore::Open({.url = "postgres://u@[::1/db?password=s%33cret"});
  EXPECT_EQ(std::string(param.status().message()).find("s3cret"), std::string::npos) << param.status();
  EXPECT_EQ(std::string(param.status().message()).find("s%33cret"), std::string::npos) << param.status();
}

INSTANTIATE_TEST_SUITE_P(Backends, StoreTest, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& backend) { return backend.param; });
// What only a server store has (a pool, connections, concurrent writers): SQLite's own tests are above.
// Leadership (postgres_store.h, "Leadership"): one lease, a token that grows by one per takeover.
TEST_P(PostgresOnlyStoreTest, LeadershipHasOneHolderAndEachTakeoverAddsOneToTheToken) {
  auto a = PostgresStore::Open({.url = url_, .connections = 2, .clock = &clock_});
  auto b = PostgresStore::Open({.url = url_, .connections = 2, .clock = &clock_});
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  auto never = (*a)->Leader();
  ASSERT_TRUE(never.ok()) << never.status();
  EXPECT_EQ(never->token, 0);
  EXPECT_EQ(never->holder, "");
  EXPECT_EQ(never->remaining, Duration::zero());

  auto first = (*a)->TryAcquireLeadership("server-a", "http://a:8470", "http://a:8472", std::chrono::seconds(10));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, std::optional<int64_t>(1));
  auto refused = (*b)->TryAcquireLeadership("server-b", "http://b:8470", "http://b:8472", std::chrono::seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(*refused, std::nullopt);  // a's lease is live
  auto seen = (*b)->Leader();
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->holder, "server-a");
  EXPECT_EQ(seen->api_url, "http://a:8470");
  EXPECT_EQ(seen->agent_url, "http://a:8472");
  EXPECT_EQ(seen->token, 1);
  EXPECT_GT(seen->remaining, std::chrono::seconds(8));
  EXPECT_LE(seen->remaining, std::chrono::seconds(10));
  EXPECT_TRUE((*a)->RenewLeadership(1, std::chrono::seconds(10)).ok());

  ASSERT_TRUE((*a)->ReleaseLeadership(1).ok());  // a graceful stop: b need not wait 10 s
  auto second = (*b)->TryAcquireLeadership("server-b", "http://b:8470", "http://b:8472", std::chrono::seconds(10));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, std::optional<int64_t>(2));
  absl::Status lost = (*a)->RenewLeadership(1, std::chrono::seconds(10));
  EXPECT_EQ(lost.code(), absl::StatusCode::kFailedPrecondition) << lost;
  EXPECT_TRUE((*a)->ReleaseLeadership(1).ok());  // releasing a lost lease changes nothing
  EXPECT_EQ((*a)->Leader()->holder, "server-b");
  EXPECT_EQ((*a)->TryAcquireLeadership("", "", "", std::chrono::seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*a)->TryAcquireLeadership("a", "", "", std::chrono::milliseconds(50)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(PostgresOnlyStoreTest, ADeposedLeadersWritesAreRefusedAndNothingOfThemIsStored) {
  auto a = PostgresStore::Open({.url = url_, .connections = 2, .clock = &clock_});
  auto b = PostgresStore::Open({.url = url_, .connections = 2, .clock = &clock_});
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  auto token = (*a)->TryAcquireLeadership("server-a", "", "", std::chrono::milliseconds(300));
  ASSERT_TRUE(token.ok() && token->has_value()) << token.status();
  std::atomic<int> fenced{0};
  (*a)->FenceWrites(**token, [&] { ++fenced; });
  ASSERT_TRUE((*a)->CreateJob(NewJob("j-1")).ok());  // still the leader
  ASSERT_TRUE((*a)->CreateTenant({.id = "team-a"}).ok());

  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // a's lease expires (a paused, say)
  auto taken = (*b)->TryAcquireLeadership("server-b", "", "", std::chrono::seconds(10));
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_EQ(*taken, std::optional<int64_t>(2));

  // a has not noticed: every kind of write it tries is refused before it runs.
  absl::Status job = (*a)->CreateJob(NewJob("j-2")).status();
  EXPECT_EQ(job.code(), absl::StatusCode::kFailedPrecondition) << job;
  EXPECT_NE(job.message().find("fenced"), std::string_view::npos) << job;
  EXPECT_EQ((*a)->CreateTenant({.id = "team-b"}).code(), absl::StatusCode::kFailedPrecondition);  // one statement
  EXPECT_EQ((*a)->BeginWriteBatch().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(fenced.load(), 3);
  EXPECT_EQ((*b)->GetJob("j-2").status().code(), absl::StatusCode::kNotFound);
  auto tenants = (*b)->ListTenants();
  ASSERT_TRUE(tenants.ok()) << tenants.status();
  ASSERT_EQ(tenants->size(), 1u);
  EXPECT_EQ((*tenants)[0].id, "team-a");
  EXPECT_TRUE((*a)->GetJob("j-1").ok());  // its reads still answer
  EXPECT_TRUE((*b)->CreateJob(NewJob("j-3")).ok());
}

TEST_P(PostgresOnlyStoreTest, ATakeoverWaitsForTheFencedWriteBatchUnderWay) {
  auto a = PostgresStore::Open({.url = url_, .connections = 2, .clock = &clock_});
  auto b = PostgresStore::Open({.url = url_, .connections = 2, .clock = &clock_});
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  auto token = (*a)->TryAcquireLeadership("server-a", "", "", std::chrono::milliseconds(200));
  ASSERT_TRUE(token.ok() && token->has_value()) << token.status();
  (*a)->FenceWrites(**token, nullptr);
  ASSERT_TRUE((*a)->BeginWriteBatch().ok());  // checked the token: holds the lease row until it ends
  ASSERT_TRUE((*a)->CreateJob(NewJob("j-1")).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // expired meanwhile

  std::atomic<bool> committed{false};
  std::atomic<bool> took_before_commit{false};
  std::thread taker([&] {
    auto t = (*b)->TryAcquireLeadership("server-b", "", "", std::chrono::seconds(10));
    took_before_commit = !committed.load();
    EXPECT_TRUE(t.ok() && *t == std::optional<int64_t>(2)) << t.status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  committed = true;
  ASSERT_TRUE((*a)->CommitWriteBatch().ok());  // began under a's token: it stands
  taker.join();
  EXPECT_FALSE(took_before_commit.load());
  EXPECT_TRUE((*b)->GetJob("j-1").ok());
  EXPECT_EQ((*a)->CreateJob(NewJob("j-2")).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_P(PostgresOnlyStoreTest, ATakeoverEndsTheSessionsOfAnExpiredLeaderFrozenInsideAWrite) {
  auto a = PostgresStore::Open({.url = url_,
                                .connections = 2,
                                .clock = &clock_,
                                .application_name = PostgresStore::LeaderApplicationName("server-a")});
  auto b = PostgresStore::Open({.url = url_, .connections = 2, .clock = &clock_});
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  auto token = (*a)->TryAcquireLeadership("server-a", "", "", std::chrono::milliseconds(200));
  ASSERT_TRUE(token.ok() && token->has_value()) << token.status();
  (*a)->FenceWrites(**token, nullptr);
  ASSERT_TRUE((*a)->BeginWriteBatch().ok());  // a freezes here, its transaction open
  ASSERT_TRUE((*a)->CreateJob(NewJob("j-1")).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));

  auto first = (*b)->TryAcquireLeadership("server-b", "", "", std::chrono::seconds(10));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, std::nullopt);  // waited 1 s for the row, then ended a's sessions
  auto second = (*b)->TryAcquireLeadership("server-b", "", "", std::chrono::seconds(10));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, std::optional<int64_t>(2));
  EXPECT_FALSE((*a)->CommitWriteBatch().ok());  // a wakes: its write is gone
  EXPECT_EQ((*b)->GetJob("j-1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*a)->CreateJob(NewJob("j-2")).status().code(), absl::StatusCode::kFailedPrecondition);
}

INSTANTIATE_TEST_SUITE_P(Backends, PostgresOnlyStoreTest, ::testing::Values("postgres"),
                         [](const ::testing::TestParamInfo<std::string>& backend) { return backend.param; });

}  // namespace
}  // namespace gpugeek::store
