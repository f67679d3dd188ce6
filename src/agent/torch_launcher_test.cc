// The torch launcher command run for real through /bin/sh and bash, as the executor runs a member.
#include "agent/torch_launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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
  // The trap also ends its own `sleep`: nothing outlives the test to hold ctest's output pipe open.
  const std::string run =
      "if [ \"$LOCAL_RANK\" = 1 ]; then sleep 0.2; exit 7; fi; sleep 60 & trap 'kill $!; echo "
      "stopped-$LOCAL_RANK >> " +
      (dir_ / "stopped").string() + "; exit 143' TERM; wait";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(RunShell(TorchLauncherCommand(run, 3, /*grace_s=*/5), "GPUGEEK_NODE_RANK=0 GPUGEEK_NUM_NODES=1"), 7);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  EXPECT_EQ(Lines(dir_ / "stopped"), (std::vector<std::string>{"stopped-0", "stopped-2"}));
}

// A rank that ignores SIGTERM is killed after the grace period.
TEST_F(TorchLauncherTest, ARankThatIgnoresTermIsKilledAfterTheGrace) {
  // exec: the rank is the sleep itself (SIGTERM still ignored), so the SIGKILL leaves nothing behind.
  const std::string run = "if [ \"$LOCAL_RANK\" = 0 ]; then exit 3; fi; trap '' TERM; exec sleep 60";
  EXPECT_EQ(RunShell(TorchLauncherCommand(run, 2, /*grace_s=*/1), ""), 3);
}

// A planned stop: SIGTERM to the member's process group (as the executor sends it). A rank whose `sh -c`
// wrapper dies of it while its child still writes the checkpoint the SIGTERM asked for (1 s here) is
// waited for: the launcher exits only once both children have finished (what they wrote is there when it
// has exited; before, it exited at once and the shim then killed the children mid-checkpoint).
TEST_F(TorchLauncherTest, ARanksChildStillCheckpointingOnSigtermIsWaitedFor) {
  const std::string done = (dir_ / "checkpointed").string();
  const std::string at_exit = (dir_ / "at-exit").string();
  // The wrapper `sh -c` cannot exec the rank (two commands): it stays its parent, as with a real run line.
  const std::string run = "sh -c 'trap \"sleep 1; echo $LOCAL_RANK >> " + done + "; exit 0\" TERM; echo up >> " +
                          (dir_ / "up").string() + "; while :; do sleep 0.1; done'; true";
  // The outer shell outlives the SIGTERM (a trap, which its children do not inherit) to copy what the
  // children wrote by the time the launcher exited.
  const std::string outer = "trap : TERM; (" + TorchLauncherCommand(run, 2, /*grace_s=*/10) + "); cp " + done + " " +
                            at_exit + "; echo copied >> " + at_exit;
  const std::string line = "env -i PATH=/usr/bin:/bin setsid /bin/sh -c " + ShellQuote(outer) + " & echo $!";
  FILE* p = popen(line.c_str(), "r");
  ASSERT_NE(p, nullptr);
  int pid = 0;
  ASSERT_EQ(fscanf(p, "%d", &pid), 1);
  pclose(p);
  for (int i = 0; i < 100 && Lines(dir_ / "up").size() < 2; ++i) usleep(50'000);
  ASSERT_EQ(Lines(dir_ / "up").size(), 2u);
  ASSERT_EQ(kill(-pid, SIGTERM), 0);  // setsid: the outer shell leads its own group
  for (int i = 0; i < 400 && Lines(at_exit).size() < 3; ++i) usleep(50'000);
  EXPECT_EQ(Lines(at_exit), (std::vector<std::string>{"0", "1", "copied"}));
}

}  // namespace
}  // namespace gpugeek::agent
