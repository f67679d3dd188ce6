// LeaderElection against a real PostgreSQL (CTest fixture `postgres`, a schema per test): one leader among
// candidates, a graceful hand-over, a takeover seen by the renewer, and the watchdog ending a leader whose
// renewal hangs on the database (times on a fake monotonic clock).
#include "controlplane/leader_election.h"

#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/fake_clock.h"
#include "common/testing/services.h"

namespace gpugeek::controlplane {
namespace {

using store::PostgresStore;

// Runs `sql` on its own connection, which it returns (kept open: a transaction left open holds its locks).
PGconn* PgOpen(const std::string& url, const std::string& sql) {
  PGconn* pg = PQconnectdb(url.c_str());
  EXPECT_EQ(PQstatus(pg), CONNECTION_OK) << PQerrorMessage(pg);
  PQsetNoticeProcessor(
      pg, [](void*, const char*) {}, nullptr);
  PGresult* r = PQexec(pg, sql.c_str());
  const ExecStatusType st = PQresultStatus(r);
  EXPECT_TRUE(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) << sql << ": " << PQresultErrorMessage(r);
  PQclear(r);
  return pg;
}

class LeaderElectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = gpugeek::testing::PostgresTestUrl();
    if (server_.empty()) {
      if (gpugeek::testing::InCi()) FAIL() << "no PostgreSQL (the fixture `postgres` did not start one)";
      GTEST_SKIP() << "no PostgreSQL: run through ctest (fixture `postgres`)";
    }
    static std::atomic<int> next{0};
    schema_ = "election_" + std::to_string(::getpid()) + "_" + std::to_string(next++);
    PQfinish(PgOpen(server_, "CREATE SCHEMA " + schema_));
    url_ = server_ + (server_.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema_;
  }
  void TearDown() override {
    if (!schema_.empty()) PQfinish(PgOpen(server_, "DROP SCHEMA " + schema_ + " CASCADE"));
  }
  std::unique_ptr<PostgresStore> Store() {
    auto s = PostgresStore::Open({.url = url_, .connections = 2});
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }
  static LeaderElectionOptions Options(const std::string& holder, Clock* clock = nullptr) {
    return {.holder = holder,
            .api_url = "http://" + holder + ":8470",
            .agent_url = "http://" + holder + ":8472",
            .lease = std::chrono::seconds(1),
            .renew_every = std::chrono::milliseconds(250),
            .poll = std::chrono::milliseconds(50),
            .clock = clock};
  }
  std::string server_, schema_, url_;
};

TEST_F(LeaderElectionTest, OneCandidateLeadsTheOthersSeeItAndAGracefulStopHandsOver) {
  auto sa = Store(), sb = Store();
  ASSERT_TRUE(sa && sb);
  auto a = LeaderElection::Create(*sa, Options("a"));
  auto b = LeaderElection::Create(*sb, Options("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  auto never = [] { return false; };
  std::optional<int64_t> ta = (*a)->Campaign(never, [](const PostgresStore::Leadership*) {});
  ASSERT_EQ(ta, std::optional<int64_t>(1));
  (*a)->KeepLeading(*ta, [](const std::string& why) { ADD_FAILURE() << "a lost the lease: " << why; });

  int polls = 0;
  std::string seen;
  std::optional<int64_t> tb = (*b)->Campaign([&] { return polls >= 30; },  // 1.5 s: past a's 1 s lease
                                             [&](const PostgresStore::Leadership* l) {
                                               ++polls;
                                               seen = l ? l->api_url : "";
                                             });
  EXPECT_EQ(tb, std::nullopt);  // a renews every 250 ms
  EXPECT_EQ(seen, "http://a:8470");

  (*a)->Resign();  // ends the lease now
  const auto resigned = std::chrono::steady_clock::now();
  tb = (*b)->Campaign(never, [](const PostgresStore::Leadership*) {});
  EXPECT_EQ(tb, std::optional<int64_t>(2));
  EXPECT_LT(std::chrono::steady_clock::now() - resigned, std::chrono::milliseconds(500));  // not a whole lease
  (*b)->Resign();
}

TEST_F(LeaderElectionTest, ALeaderWhoseLeaseWasTakenOverIsToldOnce) {
  auto sa = Store();
  ASSERT_TRUE(sa);
  auto a = LeaderElection::Create(*sa, Options("a"));
  ASSERT_TRUE(a.ok());
  std::optional<int64_t> ta = (*a)->Campaign([] { return false; }, [](const PostgresStore::Leadership*) {});
  ASSERT_TRUE(ta.has_value());
  std::atomic<int> lost{0};
  std::string why;
  (*a)->KeepLeading(*ta, [&](const std::string& w) {
    why = w;
    ++lost;
  });
  PQfinish(PgOpen(url_, "UPDATE leader_lease SET holder = 'x', token = token + 1"));  // another took it
  for (int i = 0; i < 100 && lost.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(lost.load(), 1);
  EXPECT_NE(why.find("taken over"), std::string::npos) << why;
}

TEST_F(LeaderElectionTest, TheWatchdogEndsALeaderWhoseRenewalHangs) {
  FakeClock clock;
  auto sa = Store();
  ASSERT_TRUE(sa);
  auto a = LeaderElection::Create(*sa, Options("a", &clock));
  ASSERT_TRUE(a.ok());
  std::optional<int64_t> ta = (*a)->Campaign([] { return false; }, [](const PostgresStore::Leadership*) {});
  ASSERT_TRUE(ta.has_value());
  // The lease row locked by someone else: the renewal (a plain UPDATE) waits on it, without a lock timeout.
  PGconn* blocker = PgOpen(url_, "BEGIN; SELECT 1 FROM leader_lease FOR UPDATE");
  std::atomic<int> lost{0};
  std::string why;
  (*a)->KeepLeading(*ta, [&](const std::string& w) {
    why = w;
    ++lost;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // a renewal is now stuck
  EXPECT_EQ(lost.load(), 0);
  clock.Advance(std::chrono::milliseconds(800));  // lease 1 s less one renewal interval 250 ms: may expire
  for (int i = 0; i < 100 && lost.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(lost.load(), 1);
  EXPECT_NE(why.find("was not renewed"), std::string::npos) << why;
  PQfinish(blocker);  // the renewal goes on, finds nothing wrong; the watchdog already said
  (*a)->Resign();
  EXPECT_EQ(lost.load(), 1);
}

TEST_F(LeaderElectionTest, OptionsOutsideTheirRangesAreRefused) {
  auto s = Store();
  ASSERT_TRUE(s);
  LeaderElectionOptions o = Options("a");
  o.holder = "";
  EXPECT_FALSE(LeaderElection::Create(*s, o).ok());
  o = Options("a");
  o.lease = std::chrono::milliseconds(500);
  EXPECT_FALSE(LeaderElection::Create(*s, o).ok());
  o = Options("a");
  o.renew_every = std::chrono::milliseconds(600);  // not under lease / 2
  EXPECT_FALSE(LeaderElection::Create(*s, o).ok());
}

}  // namespace
}  // namespace gpugeek::controlplane
