// The reader of `gpugeek logs` against the real log route (controlplane/log_routes.h) and a real
// LogStore on loopback; the job states come from a table this test owns (the control plane's part).
#include "cli/log_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "controlplane/log_routes.h"
#include "controlplane/log_store.h"
#include "http/server.h"

namespace gpugeek::cli {
namespace {

namespace fs = std::filesystem;
using controlplane::LogJobInfo;
using nlohmann::json;
using std::chrono::milliseconds;
using Steady = std::chrono::steady_clock;

TEST(JobExitCode, IsTheJobsOutcome) {
  EXPECT_EQ(JobExitCode("SUCCEEDED", 0), 0);
  EXPECT_EQ(JobExitCode("FAILED", 3), 3);
  EXPECT_EQ(JobExitCode("FAILED", 255), 255);
  EXPECT_EQ(JobExitCode("FAILED", json()), 1);
  EXPECT_EQ(JobExitCode("FAILED", 0), 1);  // failed for another reason (e.g. node lost)
  EXPECT_EQ(JobExitCode("FAILED", -9), 1);
  EXPECT_EQ(JobExitCode("FAILED", 300), 1);
  EXPECT_EQ(JobExitCode("CANCELLED", json()), 130);
  EXPECT_EQ(JobExitCode("RUNNING", json()), 0);
  EXPECT_EQ(JobExitCode("PENDING", json()), 0);
}

TEST(RankLinePrefixer, PrefixesCompleteLinesAndFlushesPartialOnes) {
  RankLinePrefixer p;
  EXPECT_EQ(p.Add(0, "a\nb"), "[rank 0] a\n");
  EXPECT_EQ(p.Add(1, "x\n\ny"), "[rank 1] x\n[rank 1] \n");
  EXPECT_EQ(p.Add(0, "c\nd"), "[rank 0] bc\n");
  EXPECT_EQ(p.Add(2, ""), "");
  EXPECT_EQ(p.Flush(), "[rank 0] d\n[rank 1] y\n");
  EXPECT_EQ(p.Flush(), "");
  EXPECT_EQ(p.Add(0, std::string_view("\xff\x00\n", 3)), std::string("[rank 0] \xff\x00\n", 12));
}

class LogReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("gpugeek_log_reader_test_{}_{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    logs_ = std::make_unique<controlplane::LogStore>(dir_.string());
    auto server = http::Server::Create({.host = "127.0.0.1", .port = 0});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    job_info_ = [this](const std::string& id) -> absl::StatusOr<LogJobInfo> {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = jobs_.find(id);
      if (it == jobs_.end()) return absl::NotFoundError(fmt::format("no job '{}'", id));
      return it->second;
    };
    server_->Route("GET", controlplane::kLogRoutePattern,
                   [this](const http::Request& r) { return controlplane::ServeLogs(*logs_, job_info_, r); });
    ASSERT_TRUE(server_->Start().ok());
    auto c = http::Client::Create({.base_url = server_->url()});
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
  }
  void TearDown() override {
    logs_->Shutdown();
    client_.reset();
    server_.reset();
    fs::remove_all(dir_);
  }

  void SetJob(const std::string& id, LogJobInfo info) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_[id] = std::move(info);
    }
    logs_->Wake(id);
  }
  static LogJobInfo Running(int ranks, int64_t epoch) {
    LogJobInfo info{.state = "RUNNING", .num_ranks = ranks};
    for (int r = 0; r < ranks; ++r) info.latest_epoch[r] = epoch;
    return info;
  }
  static LogJobInfo Ended(const std::string& state, std::optional<int> exit_code, int ranks, int64_t epoch) {
    LogJobInfo info = Running(ranks, epoch);
    info.state = state;
    info.terminal = true;
    info.logs_complete = true;
    info.exit_code = exit_code;
    return info;
  }
  void Append(const std::string& job, int rank, int64_t epoch, const std::string& data) {
    const uint64_t offset = logs_->Read("default", job, rank, epoch, 0, 0)->size;
    ASSERT_TRUE(logs_->Append("default", job, rank, epoch, offset, data).ok());
  }
  // ReadJobLogs into a string.
  absl::StatusOr<std::pair<std::string, json>> Read(JobLogsOptions options) {
    std::string out;
    absl::StatusOr<json> last =
        ReadJobLogs(*client_, options, [&](std::string_view b) { out.append(b.data(), b.size()); });
    if (!last.ok()) return last.status();
    return std::make_pair(out, *last);
  }

  fs::path dir_;
  std::unique_ptr<controlplane::LogStore> logs_;
  controlplane::LogJobInfoFn job_info_;
  std::unique_ptr<http::Server> server_;
  std::unique_ptr<http::Client> client_;
  std::mutex mu_;
  std::map<std::string, LogJobInfo> jobs_;
};

TEST_F(LogReaderTest, ReadsRawBytesOverSeveralRequests) {
  std::string bytes;
  for (int i = 0; i < 3 * (1 << 20) + 7; ++i) bytes.push_back(static_cast<char>((i * 7) % 256));
  SetJob("j-1", Running(1, 1));
  for (size_t at = 0; at < bytes.size(); at += 1 << 20) {
    ASSERT_TRUE(logs_->Append("default", "j-1", 0, 1, at, std::string_view(bytes).substr(at, 1 << 20)).ok());
  }
  auto r = Read({.job_id = "j-1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->first.size(), bytes.size());
  EXPECT_TRUE(r->first == bytes);
  EXPECT_EQ(r->second["state"], "RUNNING");
  EXPECT_EQ(JobExitCode(r->second["state"], r->second["exit_code"]), 0);
}

TEST_F(LogReaderTest, ShowsEachAttemptWithAHeaderOrOnlyTheChosenEpoch) {
  SetJob("j-1", Ended("FAILED", 3, 1, 3));
  Append("j-1", 0, 1, "first\n");
  Append("j-1", 0, 3, "third, no newline");
  auto r = Read({.job_id = "j-1"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->first, "== attempt 1 (epoch 1) ==\nfirst\n== attempt 2 (epoch 3) ==\nthird, no newline");
  EXPECT_EQ(JobExitCode(r->second["state"], r->second["exit_code"]), 3);
  r = Read({.job_id = "j-1", .epoch = 1});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->first, "first\n");
  r = Read({.job_id = "j-1", .follow = true});  // complete: returns at once
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->first, "== attempt 1 (epoch 1) ==\nfirst\n== attempt 2 (epoch 3) ==\nthird, no newline");
  r = Read({.job_id = "j-1", .epoch = 2});  // no such placement: empty
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->first, "");
}

TEST_F(LogReaderTest, FollowsUntilTheJobEndsAcrossPlacements) {
  SetJob("j-1", LogJobInfo{.state = "PENDING", .num_ranks = 1});
  auto job = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(200));
    SetJob("j-1", Running(1, 1));
    Append("j-1", 0, 1, "one");
    std::this_thread::sleep_for(milliseconds(200));
    Append("j-1", 0, 1, "\n");
    std::this_thread::sleep_for(milliseconds(200));
    SetJob("j-1", Running(1, 2));  // requeued: placed again
    std::this_thread::sleep_for(milliseconds(200));
    Append("j-1", 0, 2, "two\n");
    std::this_thread::sleep_for(milliseconds(200));
    SetJob("j-1", Ended("CANCELLED", std::nullopt, 1, 2));
  });
  const auto start = Steady::now();
  auto r = Read({.job_id = "j-1", .follow = true, .wait_ms = 5000});
  ASSERT_TRUE(r.ok()) << r.status();
  job.get();
  EXPECT_LT(Steady::now() - start, milliseconds(8000));
  EXPECT_EQ(r->first, "one\n== attempt 2 (epoch 2) ==\ntwo\n");
  EXPECT_EQ(r->second["state"], "CANCELLED");
  EXPECT_EQ(JobExitCode(r->second["state"], r->second["exit_code"]), 130);
}

TEST_F(LogReaderTest, AllRanksAreInterleavedLineByLine) {
  SetJob("j-1", Running(2, 1));
  Append("j-1", 0, 1, "r0 line\nr0 partial");
  Append("j-1", 1, 1, "r1 line\n");
  auto r = Read({.job_id = "j-1", .rank = std::nullopt});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->first, "[rank 0] r0 line\n[rank 1] r1 line\n[rank 0] r0 partial\n");

  // Following: new lines of either rank show up; the end flushes the partial line.
  auto job = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(200));
    Append("j-1", 1, 1, "r1 second\n");
    // Longer than a follower waits on one rank (1 s), so the order of the two lines is certain.
    std::this_thread::sleep_for(milliseconds(1500));
    Append("j-1", 0, 1, " ends\n");
    std::this_thread::sleep_for(milliseconds(200));
    SetJob("j-1", Ended("SUCCEEDED", 0, 2, 1));
  });
  r = Read({.job_id = "j-1", .rank = std::nullopt, .follow = true, .wait_ms = 5000});
  ASSERT_TRUE(r.ok()) << r.status();
  job.get();
  EXPECT_EQ(r->first, "[rank 0] r0 line\n[rank 1] r1 line\n[rank 1] r1 second\n[rank 0] r0 partial ends\n");
  EXPECT_EQ(r->second["state"], "SUCCEEDED");
}

TEST_F(LogReaderTest, UnknownJobAndBadRankAreErrors) {
  auto r = Read({.job_id = "j-404"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound) << r.status();
  EXPECT_EQ(r.status().message(), "no job 'j-404'");
  SetJob("j-1", Running(2, 1));
  r = Read({.job_id = "j-1", .rank = 5});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_EQ(r.status().message(), "rank: must be 0..1 (the job has 2 ranks), got 5");
}

}  // namespace
}  // namespace gpugeek::cli
