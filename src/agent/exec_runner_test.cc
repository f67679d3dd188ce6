#include "agent/exec_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "api/exec_stream.h"

namespace gpugeek::agent {
namespace {

namespace fs = std::filesystem;

struct Captured {
  std::string out, err;
  std::optional<api::ExecExit> exit;
  int writes = 0;
};

Captured RunCaptured(const std::vector<std::string>& argv, const ExecTarget& target, Duration timeout,
                     int fail_after_writes = -1) {
  Captured c;
  api::ExecFrameDecoder d;
  RunExec(target, argv, timeout, [&](const std::string& chunk) {
    if (fail_after_writes >= 0 && c.writes >= fail_after_writes) return false;
    ++c.writes;
    auto frames = d.Feed(chunk);
    EXPECT_TRUE(frames.ok()) << frames.status();
    for (const api::ExecFrame& f : *frames) {
      if (f.stream == api::ExecStream::kStdout) c.out += f.payload;
      if (f.stream == api::ExecStream::kStderr) c.err += f.payload;
      if (f.stream == api::ExecStream::kExit) c.exit = *api::DecodeExecExit(f.payload);
    }
    return true;
  });
  return c;
}

class ExecRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpugeek_exec_runner_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    target_ = {.workload_id = "j-1-0",
               .working_dir = dir_.string(),
               .env = {{"PATH", "/usr/bin:/bin"}, {"GPUGEEK_JOB_ID", "j-1"}}};
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  ExecTarget target_;
};

TEST_F(ExecRunnerTest, StreamsStdoutAndStderrApartAndEndsWithTheExitCode) {
  Captured c = RunCaptured({"sh", "-c", "echo out; echo err >&2; echo \"$GPUGEEK_JOB_ID $FOO\"; pwd; exit 7"}, target_,
                           std::chrono::seconds(10));
  EXPECT_EQ(c.out, "out\nj-1 \n" + dir_.string() + "\n");  // nothing of the test's own environment
  EXPECT_EQ(c.err, "err\n");
  ASSERT_TRUE(c.exit.has_value());
  EXPECT_EQ(c.exit->exit_code, 7);
  EXPECT_EQ(c.exit->message, "");
}

TEST_F(ExecRunnerTest, AMissingCommandExits127SayingWhy) {
  Captured c = RunCaptured({"no-such-command-xyz"}, target_, std::chrono::seconds(10));
  EXPECT_EQ(c.err, "gpugeek exec: no-such-command-xyz: exec: no such file or directory\n");
  ASSERT_TRUE(c.exit.has_value());
  EXPECT_EQ(c.exit->ShellStatus(), 127);
}

TEST_F(ExecRunnerTest, TheTimeoutKillsTheGroup) {
  const auto start = std::chrono::steady_clock::now();
  Captured c = RunCaptured({"sh", "-c", "sleep 30 & sleep 30"}, target_, std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  ASSERT_TRUE(c.exit.has_value());
  EXPECT_EQ(c.exit->signal, 9);
  EXPECT_EQ(c.exit->message, "timed out after 300 ms");
  EXPECT_EQ(c.exit->ShellStatus(), 137);
}

TEST_F(ExecRunnerTest, AClientThatLeftEndsTheCommand) {
  const auto start = std::chrono::steady_clock::now();
  // The first write (a line of output) fails: the command is killed long before its 30 s.
  Captured c =
      RunCaptured({"sh", "-c", "echo hi; sleep 30"}, target_, std::chrono::seconds(60), /*fail_after_writes=*/0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(c.writes, 0);
}

}  // namespace
}  // namespace gpugeek::agent
