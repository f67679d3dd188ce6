// GET /v1/jobs/{id}/logs over a real http::Server on loopback and a real LogStore; the job states come
// from a table this test owns (the control plane's part).
#include "controlplane/log_routes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "absl/strings/escaping.h"
#include "http/client.h"

namespace gpugeek::controlplane {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

class LogRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("gpugeek_log_routes_test_{}_{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    logs_ = std::make_unique<LogStore>(dir_.string(), LogStoreOptions{.max_waiters = 4});
    auto server = http::Server::Create({.host = "127.0.0.1", .port = 0, .threads = 8});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    job_info_ = [this](const std::string& id) -> absl::StatusOr<LogJobInfo> {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = jobs_.find(id);
      if (it == jobs_.end()) return absl::NotFoundError(fmt::format("no job '{}'", id));
      return it->second;
    };
    server_->Route("GET", kLogRoutePattern, [this](const http::Request& r) { return ServeLogs(*logs_, job_info_, r); });
    server_->Route("GET", "/v1/healthz", [](const http::Request&) -> absl::StatusOr<http::Reply> {
      return http::Reply::Json({{"ok", true}});
    });
    ASSERT_TRUE(server_->Start().ok());
    client_ = Client();
    SetJob("j-1", {.state = "RUNNING", .num_ranks = 2, .latest_epoch = {{0, 2}, {1, 2}}});
  }
  void TearDown() override {
    logs_->Shutdown();
    client_.reset();
    server_.reset();
    fs::remove_all(dir_);
  }

  std::unique_ptr<http::Client> Client() {
    auto c = http::Client::Create({.base_url = server_->url()});
    EXPECT_TRUE(c.ok());
    return std::move(*c);
  }
  void SetJob(const std::string& id, LogJobInfo info) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[id] = std::move(info);
  }
  static std::string Data(const json& j) {
    std::string out;
    EXPECT_TRUE(absl::Base64Unescape(j["data_b64"].get<std::string>(), &out)) << j;
    return out;
  }

  fs::path dir_;
  std::unique_ptr<LogStore> logs_;
  LogJobInfoFn job_info_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<http::Client> client_;
  std::mutex mu_;
  std::map<std::string, LogJobInfo> jobs_;
};

TEST_F(LogRoutesTest, ReadsRangesOfRawBytes) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(static_cast<char>(b));
  ASSERT_TRUE(logs_->Append("default", "j-1", 0, 1, 0, "first attempt\n").ok());
  ASSERT_TRUE(logs_->Append("default", "j-1", 0, 2, 0, bytes).ok());

  auto r = client_->Get("/v1/jobs/j-1/logs");  // rank 0, the latest epoch, from 0
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Data(*r), bytes);
  EXPECT_EQ((*r)["job"], "j-1");
  EXPECT_EQ((*r)["rank"], 0);
  EXPECT_EQ((*r)["epoch"], 2);
  EXPECT_EQ((*r)["offset"], 0);
  EXPECT_EQ((*r)["next_offset"], 256);
  EXPECT_EQ((*r)["size"], 256);
  EXPECT_EQ((*r)["complete"], false);
  EXPECT_EQ((*r)["state"], "RUNNING");
  EXPECT_TRUE((*r)["exit_code"].is_null());
  EXPECT_EQ((*r)["ranks"], 2);
  EXPECT_EQ((*r)["latest_epoch"], 2);
  EXPECT_EQ((*r)["epochs"], json::parse(R"([{"epoch": 1, "size": 14}, {"epoch": 2, "size": 256}])"));

  r = client_->Get("/v1/jobs/j-1/logs?offset=250&limit=4");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Data(*r), bytes.substr(250, 4));
  EXPECT_EQ((*r)["offset"], 250);
  EXPECT_EQ((*r)["next_offset"], 254);
  r = client_->Get("/v1/jobs/j-1/logs?epoch=1&offset=6");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Data(*r), "attempt\n");
  EXPECT_EQ((*r)["epoch"], 1);
  r = client_->Get("/v1/jobs/j-1/logs?rank=1");  // placed, nothing logged yet
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Data(*r), "");
  EXPECT_EQ((*r)["size"], 0);
  EXPECT_EQ((*r)["epoch"], 2);
  EXPECT_EQ((*r)["epochs"], json::array());

  SetJob("j-2", {.state = "FAILED", .terminal = true, .logs_complete = true, .exit_code = 3, .num_ranks = 1});
  r = client_->Get("/v1/jobs/j-2/logs?wait_ms=10000");  // complete: answers at once
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["complete"], true);
  EXPECT_EQ((*r)["state"], "FAILED");
  EXPECT_EQ((*r)["exit_code"], 3);
  EXPECT_EQ((*r)["epoch"], 0);
  EXPECT_TRUE((*r)["latest_epoch"].is_null()) << *r;  // never placed
}

TEST_F(LogRoutesTest, LongPollAnswersWhenBytesArrive) {
  ASSERT_TRUE(logs_->Append("default", "j-1", 0, 2, 0, "abc").ok());
  const auto start = Steady::now();
  auto writer = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(200));
    return logs_->Append("default", "j-1", 0, 2, 3, "def\xff");
  });
  auto r = client_->Get("/v1/jobs/j-1/logs?offset=3&wait_ms=5000");
  const auto waited = Steady::now() - start;
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Data(*r), "def\xff");
  EXPECT_EQ((*r)["next_offset"], 7);
  EXPECT_GE(waited, milliseconds(150));
  EXPECT_LT(waited, milliseconds(4000));
  EXPECT_TRUE(writer.get().ok());

  // Nothing arrives: the answer comes empty after wait_ms.
  auto t0 = Steady::now();
  r = client_->Get("/v1/jobs/j-1/logs?offset=7&wait_ms=300");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Data(*r), "");
  EXPECT_EQ((*r)["next_offset"], 7);
  EXPECT_GE(Steady::now() - t0, milliseconds(300));

  // The job ends: Wake ends the poll, which answers complete with the exit code.
  auto ender = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(200));
    SetJob("j-1", {.state = "SUCCEEDED",
                   .terminal = true,
                   .logs_complete = true,
                   .exit_code = 0,
                   .num_ranks = 2,
                   .latest_epoch = {{0, 2}, {1, 2}}});
    logs_->Wake("j-1");
  });
  t0 = Steady::now();
  r = client_->Get("/v1/jobs/j-1/logs?offset=7&wait_ms=8000");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(Steady::now() - t0, milliseconds(6000));
  EXPECT_EQ((*r)["complete"], true);
  EXPECT_EQ((*r)["state"], "SUCCEEDED");
  EXPECT_EQ((*r)["exit_code"], 0);
  ender.get();
}

TEST_F(LogRoutesTest, TwentyFollowersDoNotStopTheApi) {
  std::vector<std::future<absl::StatusOr<json>>> followers;
  for (int i = 0; i < 20; ++i) {
    followers.push_back(
        std::async(std::launch::async, [this] { return Client()->Get("/v1/jobs/j-1/logs?offset=0&wait_ms=3000"); }));
  }
  std::this_thread::sleep_for(milliseconds(300));  // they are all in
  const auto start = Steady::now();
  auto health = client_->Get("/v1/healthz");
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_LT(Steady::now() - start, milliseconds(1500));
  ASSERT_TRUE(logs_->Append("default", "j-1", 0, 2, 0, "x").ok());
  for (auto& f : followers) {
    auto r = f.get();
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)["offset"], 0);  // each answered: with "x", or empty when it came back at once
  }
}

TEST_F(LogRoutesTest, BadParametersAre400NamingTheParameter) {
  ASSERT_TRUE(logs_->Append("default", "j-1", 0, 2, 0, "abc").ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"offset=-1", "offset: must be an integer >= 0 (got '-1')"},
      {"offset=abc", "offset: must be an integer >= 0 (got 'abc')"},
      {"offset=", "offset: must be an integer >= 0 (got '')"},
      {"offset=99999999999999999999", "offset: must be an integer >= 0 (got '99999999999999999999')"},
      {"offset=4", "offset: 4 is past the end of the log (3 bytes)"},
      {"limit=0", "limit: must be an integer 1..1048576 (got '0')"},
      {"limit=1048577", "limit: must be an integer 1..1048576 (got '1048577')"},
      {"wait_ms=10001", "wait_ms: must be an integer 0..10000 (got '10001')"},
      {"wait_ms=1.5", "wait_ms: must be an integer 0..10000 (got '1.5')"},
      {"rank=x", "rank: must be an integer 0..1023 (got 'x')"},
      {"rank=2", "rank: must be 0..1 (the job has 2 ranks), got 2"},
      {"epoch=-2", "epoch: must be an integer >= 0 (got '-2')"},
      {"epoch=+1", "epoch: must be an integer >= 0 (got '+1')"},
      {"follow=true",
       "follow: no longer supported: read from offset=next_offset with wait_ms until complete (gpugeek logs -f)"},
  };
  for (const auto& [query, message] : cases) {
    auto r = client_->Get("/v1/jobs/j-1/logs?" + query);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << query << ": " << r.status();
    EXPECT_EQ(r.status().message(), message) << query;
  }
  auto r = client_->Get("/v1/jobs/j-404/logs");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  EXPECT_EQ(r.status().message(), "no job 'j-404'");
  r = client_->Get("/v1/jobs/" + http::UrlEncode("..") + "/logs");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
}

}  // namespace
}  // namespace gpugeek::controlplane
