// Emulated GPU utilisation from the CPU time of the member holding the GPU, on a /proc tree of the test's
// own and on the real /proc.
#include "agent/emulated_utilization.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "common/clock.h"

namespace gpugeek::agent {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class FakeProc : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("gpugeek_fake_proc_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  // /proc/PID/stat with session `sid` and utime, stime, cutime, cstime; the name holds ") (" to show
  // fields are counted after the last parenthesis.
  void Process(int pid, int sid, long utime, long stime, long cutime, long cstime) {
    fs::create_directories(root_ / std::to_string(pid));
    std::ofstream(root_ / std::to_string(pid) / "stat")
        << pid << " (py ) (x) S 1 " << sid << " " << sid << " 0 -1 4194560 100 0 0 0 " << utime << " " << stime << " "
        << cutime << " " << cstime << " 20 0 1 0 100 1000 10\n";
  }
  fs::path root_;
};

TEST_F(FakeProc, SessionCpuTicksSumsTheLiveProcessesOfTheSessionOnly) {
  Process(100, 100, 10, 5, 3, 2);   // the shim: 20 ticks, its reaped children's included
  Process(101, 100, 40, 0, 0, 0);   // the shell's child
  Process(200, 200, 999, 0, 0, 0);  // another member
  fs::create_directories(root_ / "self");
  EXPECT_EQ(SessionCpuTicks(100, root_.string()), 60u);
  EXPECT_EQ(SessionCpuTicks(200, root_.string()), 999u);
  EXPECT_EQ(SessionCpuTicks(300, root_.string()), 0u);
}

TEST_F(FakeProc, UtilisationIsCpuSecondsPerSecondSpreadOverTheMembersGpus) {
  const long hz = sysconf(_SC_CLK_TCK);
  EmulatedUtilization util(root_.string());
  const MonoTime t0{seconds(1000)};
  Process(100, 100, 0, 0, 0, 0);
  Process(200, 200, 0, 0, 0, 0);
  const std::vector<GpuHolder> holders = {{.session = 100, .devices = {0, 1}}, {.session = 200, .devices = {3}}};
  // First sight: no interval yet, 0%.
  auto first = util.Sample(holders, t0);
  EXPECT_EQ(first, (std::map<int, uint32_t>{{0, 0}, {1, 0}, {3, 0}}));
  // Two seconds later: session 100 used 3 CPU-seconds on 2 GPUs (75% each); session 200 used 5 CPU
  // seconds on one GPU: capped at 100%.
  Process(100, 100, 2 * hz, hz, 0, 0);
  Process(200, 200, 5 * hz, 0, 0, 0);
  auto second = util.Sample(holders, t0 + seconds(2));
  EXPECT_EQ(second, (std::map<int, uint32_t>{{0, 75}, {1, 75}, {3, 100}}));
  // A second with no CPU used: 0%. A process that went away (its ticks fell) reads 0, never negative.
  fs::remove_all(root_ / "200");
  auto third = util.Sample(holders, t0 + seconds(3));
  EXPECT_EQ(third, (std::map<int, uint32_t>{{0, 0}, {1, 0}, {3, 0}}));
}

// On the real /proc: a child in a session of its own (as the executor starts every member) reads busy
// while it spins. The test's own session is not used: under a container runtime it can be 0 (a
// session led from outside the PID namespace), which no member ever has.
TEST(EmulatedUtilization, ABusyLoopReadsBusyOnTheRealProc) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setsid();
    const auto begin = std::chrono::steady_clock::now();
    volatile uint64_t x = 0;
    while (std::chrono::steady_clock::now() - begin < std::chrono::seconds(5)) x = x + 1;
    _exit(0);
  }
  // The child is its session's leader once setsid ran: wait for that before the first sample.
  for (int i = 0; i < 500 && getsid(child) != child; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(getsid(child), child);
  EmulatedUtilization util;
  const std::vector<GpuHolder> holders = {{.session = child, .devices = {0}}};
  const auto start = std::chrono::steady_clock::now();
  util.Sample(holders, MonoTime(start.time_since_epoch()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto end = std::chrono::steady_clock::now();
  auto busy = util.Sample(holders, MonoTime(end.time_since_epoch()));
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_EQ(busy.count(0), 1u);
  EXPECT_GE(busy[0], 1u);  // anything the scheduler gave the child in 300 ms of spinning counts
}

}  // namespace
}  // namespace gpugeek::agent
