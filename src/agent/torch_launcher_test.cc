// The torch launcher command run for real through /bin/sh and bash, as the executor runs a member.
#include "agent/torch_launcher.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace gpugeek::agent {
namespace {

namespace fs = std::filesystem;

// Runs `command` with /bin/sh -c in `env` (KEY=VALUE ...); returns the exit status (128 + signal).
int RunShell(const std::string& command, const std::string& env) {
  const std::string line = "env -i PATH=/usr/bin:/bin " + env + " /bin/sh -c " + ShellQuote(command);
  const int status = std::system(line.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<std::string> Lines(const fs::path& p) {
  std::ifstream in(p);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  std::sort(out.begin(), out.end());
  return out;
}

class TorchLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpugeek_torch_launcher_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(ShellQuote, AnyTextSurvivesTheShell) {
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote(""), "''");
}

// Node 1 of 2, three local ranks: each sees torchrun's variables (RANK = 1 x 3 + local rank).
TEST_F(TorchLauncherTest, EachLocalRankGetsTheEnvRendezvousVariables) {
  const std::string out = (dir_ / "ranks").string();
  const std::string run =
      "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR:$MASTER_PORT\" >> " + out +
      "; echo 'quoted $HOME stays' > /dev/null";
  EXPECT_EQ(RunShell(TorchLauncherCommand(run, 3),
                     "GPUGEEK_NODE_RANK=1 GPUGEEK_NUM_NODES=2 GPUGEEK_MASTER_ADDR=10.0.0.1 GPUGEEK_MASTER_PORT=29400"),
            0);
  EXPECT_EQ(Lines(out), (std::vector<std::string>{"3 0 6 3 1 10.0.0.1:29400", "4 1 6 3 1 10.0.0.1:29400",
                                                  "5 2 6 3 1 10.0.0.1:29400"}));
}

// A local rank that fails stops its siblings at once and the member exits with its status.
TEST_F(TorchLauncherTest, AFailingRankStopsTheOthersAndItsStatusIsTheMembers) {
  const std::string run = "if [ \"$LOCAL_RANK\" = 1 ]; then sleep 0.2; exit 7; fi; trap 'echo stopped-$LOCAL_RANK >> " +
                          (dir_ / "stopped").string() + "; exit 143' TERM; sleep 60 & wait";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(RunShell(TorchLauncherCommand(run, 3, /*grace_s=*/5), "GPUGEEK_NODE_RANK=0 GPUGEEK_NUM_NODES=1"), 7);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(Lines(dir_ / "stopped"), (std::vector<std::string>{"stopped-0", "stopped-2"}));
}

// A rank that ignores SIGTERM is killed after the grace period.
TEST_F(TorchLauncherTest, ARankThatIgnoresTermIsKilledAfterTheGrace) {
  const std::string run = "if [ \"$LOCAL_RANK\" = 0 ]; then exit 3; fi; trap '' TERM; sleep 60";
  EXPECT_EQ(RunShell(TorchLauncherCommand(run, 2, /*grace_s=*/1), ""), 3);
}

}  // namespace
}  // namespace gpugeek::agent
