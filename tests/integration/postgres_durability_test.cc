// A control plane on PostgreSQL killed with SIGKILL during 1,000 concurrent submissions loses no acknowledged
// job: 8 clients submit 125 jobs each over the API to `gpugeek server --store postgres://...` (a real
// PostgreSQL 15 from the CTest fixture `postgres`, its own schema); the server is SIGKILLed once 300
// submissions are acknowledged, started again on the same store, and every job whose submission was answered
// 2xx must be there, as it was acknowledged (counted and printed).

#include <signal.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "common/testing/services.h"
#include "pool_fixture.h"

namespace gpugeek::testing {
namespace {

class PostgresDurabilityTest : public PoolFixture {};

TEST_F(PostgresDurabilityTest, SigkillDuringConcurrentSubmissionsLosesNoAcknowledgedJob) {
  const std::string base = PostgresTestUrl();
  if (base.empty()) {
    if (InCi()) {
      FAIL() << "no PostgreSQL (scripts/postgres-test-server.sh up failed)";
    }
    GTEST_SKIP() << "no PostgreSQL here";
  }
  const std::string schema = "durability_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(fmt::format("psql -q '{}' -c 'CREATE SCHEMA {}' >/dev/null", base, schema).c_str()), 0);
  const std::string store =
      base + (base.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema;
  MakeScratch("pg_durability");
  ::signal(SIGPIPE, SIG_IGN);  // the clients write to a server that is SIGKILLed under them
  ASSERT_FALSE(StartServer(1, {"--store", store}).empty());

  constexpr int kClients = 8, kPerClient = 125;
  std::mutex mu;
  std::set<std::string> acknowledged;
  std::atomic<int> answered{0}, refused{0};
  std::vector<std::thread> clients;
  const std::string url = url_, ca = ca_, token = token_;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto client = http::Client::Create({.base_url = url, .ca_file = ca, .bearer_token = token});
      ASSERT_TRUE(client.ok());
      for (int i = 0; i < kPerClient; ++i) {
        const std::string spec =
            fmt::format("name: c{}-{}\nresources: {{accelerators: H100-SXM-80GB:1}}\nrun: true\n", c, i);
        auto job = (*client)->Post("/v1/jobs", {{"spec_yaml", spec}});
        if (job.ok() && job->contains("id")) {
          std::lock_guard<std::mutex> lock(mu);
          acknowledged.insert((*job)["id"].get<std::string>());
          ++answered;
        } else {
          ++refused;
        }
      }
    });
  }
  while (answered.load() < 300) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(server_->pid(), SIGKILL);
  server_->Stop();
  for (std::thread& t : clients) t.join();
  ASSERT_GT(refused.load(), 0) << "the kill came after every submission";

  ASSERT_FALSE(StartServer(1, {"--store", store}).empty());
  std::set<std::string> stored;
  std::string after;
  for (;;) {
    auto page = Client().Get("/v1/jobs?order=oldest&limit=500" + (after.empty() ? "" : "&after=" + after));
    ASSERT_TRUE(page.ok()) << page.status();
    for (const auto& j : (*page)["jobs"]) stored.insert(j["id"].get<std::string>());
    if ((*page)["next_after"].is_null()) break;
    after = (*page)["next_after"].get<std::string>();
  }
  int lost = 0;
  for (const std::string& id : acknowledged) lost += stored.count(id) == 0;
  fmt::print(
      "PostgreSQL, SIGKILL during {} concurrent submissions: {} acknowledged, {} stored after the restart, {} "
      "acknowledged lost, {} refused or unanswered\n",
      kClients * kPerClient, acknowledged.size(), stored.size(), lost, refused.load());
  EXPECT_EQ(lost, 0);
  EXPECT_GE(stored.size(), acknowledged.size());
  std::system(fmt::format("psql -q '{}' -c 'DROP SCHEMA {} CASCADE' >/dev/null 2>&1", base, schema).c_str());
}

}  // namespace
}  // namespace gpugeek::testing
