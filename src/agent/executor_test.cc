#include "agent/executor.h"

#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "absl/strings/ascii.h"
#include "agent/executor_test_util.h"
#include "common/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpugeek::agent {
namespace {

using ::gpugeek::agent::testing::BaseEnv;
using ::gpugeek::agent::testing::ProcessAlive;
using ::gpugeek::agent::testing::ReadAll;
using ::gpugeek::agent::testing::ReapChild;
using ::gpugeek::agent::testing::TempDir;
using ::gpugeek::agent::testing::WaitForDeath;
using ::gpugeek::agent::testing::WaitForExit;
using ::gpugeek::agent::testing::WaitForFile;
using ::gpugeek::agent::testing::WriteAll;
using ::testing::HasSubstr;

std::map<std::string, std::string> ParseEnvFile(const std::string& text) {
  std::map<std::string, std::string> env;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

TEST(BuildWorkloadEnvTest, NvidiaGangMember) {
  const EnvMap env = BuildWorkloadEnv({.job_id = "job-7",
                                       .node_rank = 1,
                                       .num_nodes = 2,
                                       .gpu_indices = {0, 3, 5, 6},
                                       .vendor = hw::Vendor::kNvidia,
                                       .master_addr = "10.0.0.4",
                                       .master_port = 29400,
                                       .checkpoint_dir = "/ckpt/job-7",
                                       .restart_count = 2,
                                       .tp = 4,
                                       .pp = 1,
                                       .dp = 2,
                                       .zero_stage = 1,
                                       .micro_batch = 4});
  EXPECT_EQ(env.at("GPUGEEK_JOB_ID"), "job-7");
  EXPECT_EQ(env.at("GPUGEEK_NODE_RANK"), "1");
  EXPECT_EQ(env.at("GPUGEEK_NUM_NODES"), "2");
  EXPECT_EQ(env.at("GPUGEEK_GPUS_PER_NODE"), "4");
  EXPECT_EQ(env.at("GPUGEEK_WORLD_SIZE"), "8");
  EXPECT_EQ(env.at("GPUGEEK_MASTER_ADDR"), "10.0.0.4");
  EXPECT_EQ(env.at("GPUGEEK_MASTER_PORT"), "29400");
  EXPECT_EQ(env.at("GPUGEEK_CHECKPOINT_DIR"), "/ckpt/job-7");
  EXPECT_EQ(env.at("GPUGEEK_RESTART_COUNT"), "2");
  EXPECT_EQ(env.at("GPUGEEK_TP"), "4");
  EXPECT_EQ(env.at("GPUGEEK_PP"), "1");
  EXPECT_EQ(env.at("GPUGEEK_DP"), "2");
  EXPECT_EQ(env.at("GPUGEEK_ZERO_STAGE"), "1");
  EXPECT_EQ(env.at("GPUGEEK_MICRO_BATCH"), "4");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "0,3,5,6");
  EXPECT_EQ(env.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  EXPECT_FALSE(env.contains("HIP_VISIBLE_DEVICES"));
  EXPECT_FALSE(env.contains("ROCR_VISIBLE_DEVICES"));
}

TEST(BuildWorkloadEnvTest, AmdUsesRocrForPhysicalAndHipForRelativeIndices) {
  const EnvMap env = BuildWorkloadEnv({.job_id = "j", .gpu_indices = {2, 3}, .vendor = hw::Vendor::kAmd});
  EXPECT_EQ(env.at("ROCR_VISIBLE_DEVICES"), "2,3");
  EXPECT_EQ(env.at("HIP_VISIBLE_DEVICES"), "0,1");
  EXPECT_FALSE(env.contains("CUDA_VISIBLE_DEVICES"));
  EXPECT_FALSE(env.contains("GPUGEEK_TP"));  // no plan, no layout
  EXPECT_FALSE(env.contains("GPUGEEK_ZERO_STAGE"));
  EXPECT_FALSE(env.contains("GPUGEEK_MICRO_BATCH"));
  EXPECT_EQ(env.at("GPUGEEK_WORLD_SIZE"), "2");
  // Defaults for a single-node job.
  EXPECT_EQ(env.at("GPUGEEK_MASTER_ADDR"), "127.0.0.1");
  EXPECT_EQ(env.at("GPUGEEK_MASTER_PORT"), "29500");
  EXPECT_FALSE(env.contains("GPUGEEK_CHECKPOINT_DIR"));
}

TEST(BuildWorkloadEnvTest, CpuOnlyJobSeesNoGpu) {
  const EnvMap env = BuildWorkloadEnv({.job_id = "cpu", .num_nodes = 3});
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "");
  EXPECT_EQ(env.at("HIP_VISIBLE_DEVICES"), "");
  EXPECT_EQ(env.at("GPUGEEK_GPUS_PER_NODE"), "0");
  EXPECT_EQ(env.at("GPUGEEK_WORLD_SIZE"), "3");
}

class ExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    work_dir_ = dir_ / "work";
    std::filesystem::create_directories(work_dir_);
    // The default RunAsOptions, spelled out: run as root (as here), each workload runs as its tenant's
    // uid (the default tenant's, for these requests); as another user, as that user. Nothing below
    // depends on which: commands write only below their working directory.
    auto executor = Executor::Create({.log_dir = dir_ / "logs",
                                      .default_grace = std::chrono::seconds(30),
                                      .clock = &clock_,
                                      .run_as = RunAsOptions{}});
    ASSERT_TRUE(executor.ok()) << executor.status();
    executor_ = std::move(*executor);
  }

  LaunchRequest Request(const std::string& id, const std::string& command) {
    return {.id = id, .command = command, .working_dir = work_dir_, .env = BaseEnv()};
  }

  TempDir dir_;
  std::string work_dir_;
  FakeClock clock_{TimePoint(std::chrono::seconds(1000))};
  std::unique_ptr<Executor> executor_;
};

TEST_F(ExecutorTest, EnvironmentVisibleDevicesAndWorkingDirReachTheProcess) {
  ::setenv("GPUGEEK_TEST_AGENT_ONLY", "leak", 1);  // must not be inherited
  LaunchRequest req = Request("envtest", "env > env.txt; pwd > pwd.txt");
  const EnvMap gg = BuildWorkloadEnv(
      {.job_id = "job-1", .node_rank = 0, .num_nodes = 2, .gpu_indices = {1, 2}, .master_addr = "node-a"});
  req.env.insert(gg.begin(), gg.end());
  req.env["HF_HOME"] = "/cache with spaces";
  ASSERT_TRUE(executor_->Start(req).ok());
  const auto exit = WaitForExit(*executor_, "envtest");
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->succeeded()) << exit->Describe();
  const auto env = ParseEnvFile(ReadAll(work_dir_ + "/env.txt"));
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "1,2");
  EXPECT_EQ(env.at("GPUGEEK_JOB_ID"), "job-1");
  EXPECT_EQ(env.at("GPUGEEK_WORLD_SIZE"), "4");
  EXPECT_EQ(env.at("GPUGEEK_MASTER_ADDR"), "node-a");
  EXPECT_EQ(env.at("HF_HOME"), "/cache with spaces");
  EXPECT_FALSE(env.contains("GPUGEEK_TEST_AGENT_ONLY"));
  EXPECT_EQ(ReadAll(work_dir_ + "/pwd.txt"), std::filesystem::canonical(work_dir_).string() + "\n");
  ::unsetenv("GPUGEEK_TEST_AGENT_ONLY");
}

TEST_F(ExecutorTest, WorkloadGetsTheOomScoreAdjustment) {
  ASSERT_TRUE(executor_->Start(Request("oom", "cat /proc/self/oom_score_adj > adj.txt")).ok());
  const auto exit = WaitForExit(*executor_, "oom");
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->succeeded()) << exit->Describe();
  EXPECT_EQ(ReadAll(work_dir_ + "/adj.txt"), "500\n");  // the default: raising needs no privilege
}

TEST_F(ExecutorTest, StdoutAndStderrGoToOneLogInOrderAndRestartsAppend) {
  ASSERT_TRUE(executor_->Start(Request("logs", "echo first; echo second >&2; cat; echo third")).ok());
  auto exit = WaitForExit(*executor_, "logs");
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->succeeded()) << exit->Describe();  // `cat` read /dev/null and did not hang
  EXPECT_EQ(ReadAll(executor_->LogPath("logs")), "first\nsecond\nthird\n");
  EXPECT_EQ(executor_->LogPath("logs"), dir_ / "logs/logs.log");

  ASSERT_TRUE(executor_->Start(Request("logs", "echo again")).ok());
  exit = WaitForExit(*executor_, "logs");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(ReadAll(executor_->LogPath("logs")), "first\nsecond\nthird\nagain\n");
}

TEST_F(ExecutorTest, ExitCodeReported) {
  clock_.Set(TimePoint(std::chrono::seconds(2000)));
  ASSERT_TRUE(executor_->Start(Request("exit3", "exit 3")).ok());
  clock_.Advance(std::chrono::seconds(5));
  const auto exit = WaitForExit(*executor_, "exit3");
  ASSERT_TRUE(exit.has_value());
  ASSERT_TRUE(exit->exit_code.has_value());
  EXPECT_EQ(*exit->exit_code, 3);
  EXPECT_EQ(exit->term_signal, 0);
  EXPECT_FALSE(exit->succeeded());
  EXPECT_FALSE(exit->cancelled);
  EXPECT_EQ(exit->Describe(), "exited with code 3");
  EXPECT_EQ(exit->started, TimePoint(std::chrono::seconds(2000)));
  EXPECT_EQ(exit->finished, TimePoint(std::chrono::seconds(2005)));
  EXPECT_FALSE(executor_->IsRunning("exit3"));
}

TEST_F(ExecutorTest, SignalDeathReported) {
  ASSERT_TRUE(executor_->Start(Request("sig", "kill -USR1 $$; sleep 5")).ok());
  const auto exit = WaitForExit(*executor_, "sig");
  ASSERT_TRUE(exit.has_value());
  EXPECT_FALSE(exit->exit_code.has_value());
  EXPECT_EQ(exit->term_signal, SIGUSR1);
  EXPECT_THAT(exit->Describe(), HasSubstr("killed by signal 10 (SIGUSR1)"));
}

TEST_F(ExecutorTest, CancelKillsTheWholeGroupIncludingAGrandchild) {
  const auto pid = executor_->Start(Request("tree", "sleep 1000 & echo $! > grandchild.pid; sleep 1000"));
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_TRUE(WaitForFile(work_dir_ + "/grandchild.pid"));
  const pid_t grandchild = std::stoi(ReadAll(work_dir_ + "/grandchild.pid"));
  ASSERT_TRUE(ProcessAlive(grandchild));
  EXPECT_EQ(::getpgid(grandchild), *pid) << "the grandchild is in the workload's process group";

  ASSERT_TRUE(executor_->Cancel("tree").ok());
  const auto exit = WaitForExit(*executor_, "tree");
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->cancelled);
  EXPECT_FALSE(exit->killed_after_grace);
  EXPECT_EQ(exit->term_signal, SIGTERM);
  EXPECT_TRUE(WaitForDeath(grandchild));
}

TEST_F(ExecutorTest, BackgroundProcessesLeftByAnExitedShellAreKilled) {
  ASSERT_TRUE(executor_->Start(Request("orphan", "sleep 1000 & echo $! > orphan.pid; exit 0")).ok());
  const auto exit = WaitForExit(*executor_, "orphan");
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->succeeded());
  const pid_t orphan = std::stoi(ReadAll(work_dir_ + "/orphan.pid"));
  EXPECT_TRUE(WaitForDeath(orphan));
}

TEST_F(ExecutorTest, TermTrappedAndHandledWithinGraceGetsNoSigkill) {
  ASSERT_TRUE(executor_
                  ->Start(Request("polite",
                                  "trap 'echo checkpointing; exit 0' TERM; echo 1 > ready; "
                                  "while :; do sleep 0.05; done"))
                  .ok());
  ASSERT_TRUE(WaitForFile(work_dir_ + "/ready"));
  ASSERT_TRUE(executor_->Cancel("polite", std::chrono::seconds(20)).ok());
  // The fake clock never reaches the deadline: only the workload itself can end it.
  const auto exit = WaitForExit(*executor_, "polite");
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->cancelled);
  EXPECT_FALSE(exit->killed_after_grace);
  ASSERT_TRUE(exit->exit_code.has_value()) << exit->Describe();
  EXPECT_EQ(*exit->exit_code, 0);
  EXPECT_EQ(exit->Describe(), "exited with code 0 after cancel");
  EXPECT_THAT(ReadAll(executor_->LogPath("polite")), HasSubstr("checkpointing"));
}

TEST_F(ExecutorTest, TermIgnoredIsKilledOnlyAfterTheGrace) {
  ASSERT_TRUE(executor_->Start(Request("stubborn", "trap '' TERM; echo 1 > ready; while :; do sleep 0.05; done")).ok());
  ASSERT_TRUE(WaitForFile(work_dir_ + "/ready"));
  ASSERT_TRUE(executor_->Cancel("stubborn", std::chrono::seconds(10)).ok());
  // Within the grace (clock not advanced): still running after SIGTERM, however often Poll runs.
  for (int i = 0; i < 30; ++i) {
    EXPECT_TRUE(executor_->Poll().empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(executor_->IsRunning("stubborn"));
  clock_.Advance(std::chrono::seconds(9));
  EXPECT_TRUE(executor_->Poll().empty());
  clock_.Advance(std::chrono::seconds(1));
  const auto exit = WaitForExit(*executor_, "stubborn");
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->killed_after_grace);
  EXPECT_EQ(exit->term_signal, SIGKILL);
  EXPECT_EQ(exit->Describe(), "killed by signal 9 (SIGKILL) after the cancel grace period");
}

// The SIGKILL deadline is on the monotonic clock: a wall-clock step (NTP, `date -s`) neither brings it
// forward nor delays it; start and end times stay on the wall clock, as users see them.
TEST_F(ExecutorTest, AWallClockStepDoesNotMoveACancelsSigkill) {
  ASSERT_TRUE(executor_->Start(Request("stepped", "trap '' TERM; echo 1 > ready; while :; do sleep 0.05; done")).ok());
  ASSERT_TRUE(WaitForFile(work_dir_ + "/ready"));
  ASSERT_TRUE(executor_->Cancel("stepped", std::chrono::seconds(10)).ok());
  clock_.StepWall(std::chrono::hours(1));  // the wall clock is now 1 h past the deadline
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(executor_->Poll().empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(executor_->IsRunning("stepped"));
  clock_.StepWall(-std::chrono::hours(2));  // and then 1 h before the cancel
  clock_.Advance(std::chrono::milliseconds(9999));
  EXPECT_TRUE(executor_->Poll().empty());
  EXPECT_TRUE(executor_->IsRunning("stepped"));
  clock_.Advance(std::chrono::milliseconds(1));
  const auto exit = WaitForExit(*executor_, "stepped");
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->killed_after_grace);
  EXPECT_EQ(exit->term_signal, SIGKILL);
  EXPECT_EQ(exit->started, TimePoint(std::chrono::seconds(1000)));
  EXPECT_EQ(exit->finished, TimePoint(std::chrono::seconds(1000 - 3600 + 10)));
}

// A leased workload that nobody renews is stopped by its shim when the lease runs out, as if its agent
// had died: SIGTERM (a plain sleep ends on it), no cancel involved.
TEST_F(ExecutorTest, WithoutRenewalsTheShimStopsTheWorkloadAtTheLease) {
  constexpr auto kLease = std::chrono::milliseconds(500);
  LaunchRequest req = Request("leased", "sleep 1000");
  req.lease = kLease;
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(executor_->Start(req).ok());
  const auto exit = WaitForExit(*executor_, "leased", std::chrono::seconds(5));
  const auto elapsed = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(exit.has_value());
  EXPECT_GE(elapsed, kLease);
  EXPECT_LT(elapsed, kLease + std::chrono::seconds(1));
  EXPECT_EQ(exit->term_signal, SIGTERM);
  EXPECT_FALSE(exit->cancelled);
  EXPECT_EQ(exit->Describe(), "killed by signal 15 (SIGTERM)");
}

// Renewals keep a leased workload running far past its lease; RenewLeases counts only leased workloads.
// Once they stop, the lease runs out from the last one.
TEST_F(ExecutorTest, RenewalsKeepALeasedWorkloadRunning) {
  constexpr auto kLease = std::chrono::milliseconds(300);
  LaunchRequest leased = Request("leased", "sleep 1000");
  leased.lease = kLease;
  ASSERT_TRUE(executor_->Start(leased).ok());
  ASSERT_TRUE(executor_->Start(Request("unleased", "sleep 1000")).ok());
  EXPECT_EQ(executor_->RenewLeases(Duration::zero()), 0u);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);  // 5 leases
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(executor_->RenewLeases(kLease), 1u);
    EXPECT_TRUE(executor_->Poll().empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(executor_->RenewLeases(kLease), 1u);
  const auto last_renewal = std::chrono::steady_clock::now();
  EXPECT_TRUE(executor_->IsRunning("leased"));
  const auto exit = WaitForExit(*executor_, "leased", std::chrono::seconds(5));
  const auto elapsed = std::chrono::steady_clock::now() - last_renewal;
  ASSERT_TRUE(exit.has_value());
  EXPECT_GE(elapsed, kLease);
  EXPECT_LT(elapsed, kLease + std::chrono::seconds(1));
  EXPECT_EQ(exit->term_signal, SIGTERM);
  EXPECT_TRUE(executor_->IsRunning("unleased")) << "no lease, no expiry";
  EXPECT_EQ(executor_->RenewLeases(kLease), 0u);
}

// A workload being cancelled (SIGTERM sent, SIGKILL due much later) whose lease then runs out gets no
// second SIGTERM from its shim (it could cut the checkpoint the first one started short), and is
// SIGKILLed after the shim's grace.
TEST(ExecutorShimTest, ALeaseRunningOutDuringACancelSendsNoSecondSigterm) {
  constexpr auto kLease = std::chrono::milliseconds(500);
  constexpr auto kGrace = std::chrono::milliseconds(500);
  TempDir dir;
  FakeClock clock;  // never advanced: the executor's own SIGKILL (30 s) never comes
  auto executor = Executor::Create({.log_dir = dir / "logs", .clock = &clock, .orphan_grace = kGrace});
  ASSERT_TRUE(executor.ok()) << executor.status();
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE((*executor)
                  ->Start({.id = "ckpt",
                           .command = "trap 'echo term >> terms' TERM; echo 1 > ready; while :; do sleep 0.05; done",
                           .working_dir = dir.path(),
                           .env = BaseEnv(),
                           .lease = kLease})
                  .ok());
  ASSERT_TRUE(WaitForFile(dir / "ready"));
  ASSERT_TRUE((*executor)->Cancel("ckpt", std::chrono::seconds(30)).ok());
  const auto exit = WaitForExit(**executor, "ckpt", std::chrono::seconds(5));
  const auto elapsed = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->term_signal, SIGKILL);
  EXPECT_FALSE(exit->killed_after_grace) << "the shim's SIGKILL, not the executor's";
  EXPECT_EQ(ReadAll(dir / "terms"), "term\n") << "exactly one SIGTERM";
  EXPECT_GE(elapsed, kLease + kGrace);
  EXPECT_LT(elapsed, kLease + kGrace + std::chrono::seconds(1));
}

TEST_F(ExecutorTest, ZeroGraceKillsAtOnce) {
  ASSERT_TRUE(executor_->Start(Request("now", "trap '' TERM; while :; do sleep 0.05; done")).ok());
  ASSERT_TRUE(executor_->Cancel("now", Duration::zero()).ok());
  const auto exit = WaitForExit(*executor_, "now");
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->term_signal, SIGKILL);
  EXPECT_TRUE(exit->killed_after_grace);
}

TEST_F(ExecutorTest, MissingWorkingDirectoryIsNotFound) {
  LaunchRequest req = Request("nodir", "true");
  req.working_dir = dir_ / "does/not/exist";
  const auto pid = executor_->Start(req);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(pid.status().message()), HasSubstr("working directory " + (dir_ / "does/not/exist")));
  EXPECT_FALSE(executor_->IsRunning("nodir"));
}

TEST_F(ExecutorTest, WorkingDirectoryThatIsAFileIsRefused) {
  WriteAll(dir_ / "plain", "x");
  LaunchRequest req = Request("filedir", "true");
  req.working_dir = dir_ / "plain";
  EXPECT_EQ(executor_->Start(req).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ExecutorTest, BadRequestsAreInvalidArguments) {
  EXPECT_EQ(executor_->Start(Request("bad/id", "true")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(executor_->Start(Request("", "true")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(executor_->Start(Request("empty", "")).status().code(), absl::StatusCode::kInvalidArgument);
  LaunchRequest req = Request("badenv", "true");
  req.env["A=B"] = "x";
  EXPECT_EQ(executor_->Start(req).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ExecutorTest, LimitsWithoutCgroupManagerAreRefused) {
  LaunchRequest req = Request("limited", "true");
  req.limits.memory_bytes = 1 << 30;
  EXPECT_EQ(executor_->Start(req).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(executor_->CgroupDescription(), "none: no cgroup manager configured");
}

TEST_F(ExecutorTest, DuplicateRunningIdIsRefusedAndCancelOfUnknownIsNotFound) {
  ASSERT_TRUE(executor_->Start(Request("dup", "sleep 1000")).ok());
  EXPECT_EQ(executor_->Start(Request("dup", "true")).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(executor_->Cancel("nope").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(executor_->running_count(), 1u);
  ASSERT_TRUE(executor_->Cancel("dup", Duration::zero()).ok());
  ASSERT_TRUE(WaitForExit(*executor_, "dup").has_value());
  EXPECT_EQ(executor_->running_count(), 0u);
}

TEST_F(ExecutorTest, DestructionKillsWhatStillRuns) {
  const auto pid = executor_->Start(Request("left", "sleep 1000"));
  ASSERT_TRUE(pid.ok());
  executor_.reset();
  EXPECT_FALSE(ProcessAlive(*pid));
}

TEST_F(ExecutorTest, FiftyConcurrentWorkloadsFromSeveralThreadsAreAllReaped) {
  constexpr int kThreads = 5;
  constexpr int kPerThread = 10;
  std::atomic<bool> starting{true};
  std::map<std::string, WorkloadExit> exits;
  std::mutex exits_mu;
  // One thread polls while the others start, as the agent's loop would.
  std::thread poller([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      std::vector<WorkloadExit> done = executor_->Poll();
      std::lock_guard<std::mutex> lock(exits_mu);
      for (WorkloadExit& e : done) exits[e.id] = std::move(e);
      if (!starting && exits.size() == kThreads * kPerThread) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::vector<std::thread> starters;
  for (int t = 0; t < kThreads; ++t) {
    starters.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int n = t * kPerThread + i;
        const auto pid = executor_->Start(Request(fmt::format("w{}", n), fmt::format("echo {}; exit {}", n, n % 7)));
        EXPECT_TRUE(pid.ok()) << pid.status();
      }
    });
  }
  for (std::thread& s : starters) s.join();
  starting = false;
  poller.join();
  ASSERT_EQ(exits.size(), static_cast<size_t>(kThreads * kPerThread));
  for (int n = 0; n < kThreads * kPerThread; ++n) {
    const WorkloadExit& e = exits.at(fmt::format("w{}", n));
    ASSERT_TRUE(e.exit_code.has_value());
    EXPECT_EQ(*e.exit_code, n % 7);
    EXPECT_EQ(ReadAll(executor_->LogPath(e.id)), fmt::format("{}\n", n));
  }
  EXPECT_EQ(executor_->running_count(), 0u);
}

TEST_F(ExecutorTest, CancelSigtermsTheWholeGroupThenSigkillsWhatIgnoredIt) {
  // The plain sleep keeps SIGTERM's default; the shell, and the grandchild it starts after the trap, ignore it.
  const auto pid = executor_->Start(Request("grace",
                                            "sleep 1000 & echo $! > plain.pid; trap '' TERM; "
                                            "sh -c 'echo $$ > stubborn.pid; exec sleep 1000' & "
                                            "while :; do sleep 0.05; done"));
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_TRUE(WaitForFile(work_dir_ + "/plain.pid"));
  ASSERT_TRUE(WaitForFile(work_dir_ + "/stubborn.pid"));
  const pid_t plain = std::stoi(ReadAll(work_dir_ + "/plain.pid"));
  const pid_t stubborn = std::stoi(ReadAll(work_dir_ + "/stubborn.pid"));
  EXPECT_EQ(::getpgid(plain), *pid);
  EXPECT_EQ(::getpgid(stubborn), *pid);

  ASSERT_TRUE(executor_->Cancel("grace", std::chrono::seconds(10)).ok());
  EXPECT_TRUE(WaitForDeath(plain)) << "SIGTERM reached the whole group";
  EXPECT_TRUE(executor_->Poll().empty());
  EXPECT_TRUE(ProcessAlive(stubborn));
  EXPECT_TRUE(executor_->IsRunning("grace"));
  clock_.Advance(std::chrono::seconds(10));
  const auto exit = WaitForExit(*executor_, "grace");
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->killed_after_grace);
  EXPECT_EQ(exit->term_signal, SIGKILL);
  EXPECT_EQ(exit->Describe(), "killed by signal 9 (SIGKILL) after the cancel grace period");
  EXPECT_TRUE(WaitForDeath(stubborn));
}

TEST_F(ExecutorTest, TheShellIsTheShimsChildInTheShimsGroup) {
  const auto pid = executor_->Start(Request("parent", "echo $PPID > ppid; cut -d' ' -f5 /proc/$$/stat > pgid"));
  ASSERT_TRUE(pid.ok()) << pid.status();
  const auto exit = WaitForExit(*executor_, "parent");
  ASSERT_TRUE(exit.has_value());
  EXPECT_TRUE(exit->succeeded()) << exit->Describe();
  EXPECT_EQ(exit->pid, *pid);
  EXPECT_EQ(ReadAll(work_dir_ + "/ppid"), fmt::format("{}\n", *pid));
  EXPECT_EQ(ReadAll(work_dir_ + "/pgid"), fmt::format("{}\n", *pid));
}

// A daemon that left the session (setsid) is orphaned to the shim, a subreaper, when the shell exits, and
// killed with the rest: no cgroup is needed to find it.
TEST_F(ExecutorTest, ADaemonThatLeftTheSessionDiesWhenTheShellExits) {
  ASSERT_TRUE(executor_
                  ->Start(Request("daemon",
                                  "setsid sh -c 'echo $$ > daemon.pid; exec sleep 1000' & "
                                  "while [ ! -s daemon.pid ]; do sleep 0.01; done; exit 4"))
                  .ok());
  const auto exit = WaitForExit(*executor_, "daemon");
  ASSERT_TRUE(exit.has_value());
  ASSERT_TRUE(exit->exit_code.has_value()) << exit->Describe();
  EXPECT_EQ(*exit->exit_code, 4);
  const pid_t daemon = std::stoi(ReadAll(work_dir_ + "/daemon.pid"));
  EXPECT_NE(::getsid(daemon), exit->pid);
  EXPECT_TRUE(WaitForDeath(daemon));
}

// The same commands with and without the shim end with the same report: exit code, signal, core dump.
TEST(ExecutorShimTest, ExitsAreReportedExactlyAsWithoutTheShim) {
  TempDir dir;
  FakeClock clock;
  auto with = Executor::Create({.log_dir = dir / "logs", .clock = &clock});
  auto without = Executor::Create({.log_dir = dir / "logs-noshim", .clock = &clock, .use_shim = false});
  ASSERT_TRUE(with.ok()) << with.status();
  ASSERT_TRUE(without.ok()) << without.status();
  const std::vector<std::string> commands = {
      "exit 0",
      "exit 3",
      "exit 255",
      "kill -USR1 $$",
      "kill -TERM $$",
      "kill -KILL $$",
      "kill -HUP $$; sleep 5",
      "ulimit -c 0; kill -ABRT $$",
      // Dumps core where the host allows it (then core_dumped is true both ways), writing `core` in its
      // working directory.
      "ulimit -c unlimited 2>/dev/null; kill -SEGV $$",
  };
  for (size_t i = 0; i < commands.size(); ++i) {
    const std::string id = fmt::format("c{}", i);
    const std::string with_dir = dir / ("with/" + id), without_dir = dir / ("without/" + id);
    std::filesystem::create_directories(with_dir);
    std::filesystem::create_directories(without_dir);
    ASSERT_TRUE((*with)->Start({.id = id, .command = commands[i], .working_dir = with_dir, .env = BaseEnv()}).ok());
    ASSERT_TRUE(
        (*without)->Start({.id = id, .command = commands[i], .working_dir = without_dir, .env = BaseEnv()}).ok());
    const auto a = WaitForExit(**with, id);
    const auto b = WaitForExit(**without, id);
    ASSERT_TRUE(a.has_value() && b.has_value()) << commands[i];
    EXPECT_EQ(a->exit_code, b->exit_code) << commands[i];
    EXPECT_EQ(a->term_signal, b->term_signal) << commands[i];
    EXPECT_EQ(a->core_dumped, b->core_dumped) << commands[i];
    EXPECT_EQ(a->Describe(), b->Describe()) << commands[i];
  }
  // And what they are: the same reports the executor gave before the shim.
  const std::vector<std::string> expected = {"exited with code 0",
                                             "exited with code 3",
                                             "exited with code 255",
                                             "killed by signal 10 (SIGUSR1)",
                                             "killed by signal 15 (SIGTERM)",
                                             "killed by signal 9 (SIGKILL)",
                                             "killed by signal 1 (SIGHUP)",
                                             "killed by signal 6 (SIGABRT)"};
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_TRUE((*with)
                    ->Start({.id = fmt::format("again{}", i),
                             .command = commands[i],
                             .working_dir = dir / fmt::format("with/c{}", i),
                             .env = BaseEnv()})
                    .ok());
    const auto e = WaitForExit(**with, fmt::format("again{}", i));
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(e->Describe(), expected[i]) << commands[i];
  }
}

// One process of the host, from /proc/<pid>/stat.
struct ProcEntry {
  pid_t pid = 0;
  std::string comm;
  char state = 0;
  pid_t ppid = 0;
  pid_t pgrp = 0;
  pid_t session = 0;
};

std::vector<ProcEntry> AllProcesses() {
  std::vector<ProcEntry> all;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = ReadAll(entry.path() / "stat");
    const size_t open = stat.find('(');
    const size_t close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    ProcEntry p;
    p.pid = std::stoi(name);
    p.comm = stat.substr(open + 1, close - open - 1);
    std::stringstream rest(stat.substr(close + 1));
    rest >> p.state >> p.ppid >> p.pgrp >> p.session;
    all.push_back(p);
  }
  return all;
}

// The live processes descended from `root`.
std::vector<ProcEntry> LiveDescendants(pid_t root) {
  const std::vector<ProcEntry> all = AllProcesses();
  std::map<pid_t, pid_t> parent;
  for (const ProcEntry& p : all) parent[p.pid] = p.ppid;
  std::vector<ProcEntry> found;
  for (const ProcEntry& p : all) {
    if (p.state == 'Z') continue;
    for (pid_t up = p.ppid; up > 1 && parent.contains(up); up = parent[up]) {
      if (up == root) {
        found.push_back(p);
        break;
      }
    }
  }
  return found;
}

// The requirement: an agent killed with SIGKILL leaves nothing running, cgroups or not. A forked child
// plays the agent: it starts a workload whose tree has two plain sleeps, a grandchild that ignores SIGTERM
// and a daemon that left the session (and ignores SIGTERM too), and is then SIGKILLed. The shim SIGTERMs
// the tree at once and SIGKILLs what is left when the grace has passed.
TEST(ExecutorShimTest, TheWorkloadTreeEndsWithinTheGraceWhenTheAgentIsKilled) {
  constexpr auto kGrace = std::chrono::milliseconds(1500);
  TempDir dir;
  std::filesystem::create_directories(dir / "work");
  pid_t agent = ::fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    auto executor = Executor::Create({.log_dir = dir / "logs", .orphan_grace = kGrace});
    if (!executor.ok()) ::_exit(10);
    const auto pid =
        (*executor)->Start({.id = "member",
                            .command = "sleep 1000 & sleep 1000 & sh -c 'trap \"\" TERM; exec sleep 1000' & "
                                       "setsid sh -c 'trap \"\" TERM; exec sleep 1000' & wait",
                            .working_dir = dir / "work",
                            .env = BaseEnv(),
                            .orphan_grace = std::chrono::seconds(30)});  // capped at the executor's orphan_grace
    if (!pid.ok()) ::_exit(11);
    for (;;) ::pause();
  }
  // The tree: shim -> sh -> 4 x sleep (2 plain, 1 ignoring SIGTERM, 1 in a session of its own).
  std::vector<ProcEntry> tree;
  // Whatever fails, nothing of the test outlives it.
  struct Cleanup {
    pid_t& agent;
    std::vector<ProcEntry>& tree;
    ~Cleanup() {
      if (agent > 0) ReapChild(agent);
      for (const ProcEntry& p : tree) {
        if (ProcessAlive(p.pid)) ::kill(p.pid, SIGKILL);
      }
    }
  } cleanup{agent, tree};
  const auto ready_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < ready_deadline) {
    tree = LiveDescendants(agent);
    if (std::count_if(tree.begin(), tree.end(), [](const ProcEntry& p) { return p.comm == "sleep"; }) == 4) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(tree.size(), 6u);
  pid_t shim = 0;
  for (const ProcEntry& p : tree) {
    if (p.ppid == agent) shim = p.pid;
  }
  ASSERT_NE(shim, 0);
  std::set<pid_t> term_ignoring;  // what only SIGKILL ends: sleeps whose SigIgn has SIGTERM (bit 15)
  for (const ProcEntry& p : tree) {
    if (p.comm != "sleep") continue;
    std::stringstream status(ReadAll(fmt::format("/proc/{}/status", p.pid)));
    for (std::string line; std::getline(status, line);) {
      if (line.starts_with("SigIgn:") && (std::stoull(line.substr(7), nullptr, 16) & (1ull << (SIGTERM - 1))) != 0) {
        term_ignoring.insert(p.pid);
      }
    }
    if (p.session != shim) {
      EXPECT_TRUE(term_ignoring.contains(p.pid)) << "the daemon ignores SIGTERM";
    }
  }
  ASSERT_EQ(term_ignoring.size(), 2u);

  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(agent, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(agent, &status, 0), agent);
  agent = 0;
  ASSERT_TRUE(WIFSIGNALED(status));
  std::map<pid_t, std::chrono::milliseconds> died_after;
  while (died_after.size() < tree.size() &&
         std::chrono::steady_clock::now() < killed_at + kGrace + std::chrono::seconds(3)) {
    for (const ProcEntry& p : tree) {
      if (!died_after.contains(p.pid) && !ProcessAlive(p.pid)) {
        died_after[p.pid] =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed_at);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (const ProcEntry& p : tree) {
    ASSERT_TRUE(died_after.contains(p.pid)) << p.comm << " " << p.pid << " outlived its agent";
    EXPECT_LE(died_after[p.pid], kGrace + std::chrono::seconds(1)) << p.comm << " " << p.pid;
    if (term_ignoring.contains(p.pid)) {
      EXPECT_GE(died_after[p.pid], kGrace) << "SIGKILLed only after the grace: " << p.pid;
    } else if (p.pid != shim) {
      EXPECT_LT(died_after[p.pid], kGrace) << "ended by the SIGTERM: " << p.comm << " " << p.pid;
    }
  }
}

// The requirement: a FROZEN agent's workloads stop too, before the control plane re-places them. A forked
// child plays the agent: it starts a workload whose tree has a plain sleep and a grandchild that ignores
// SIGTERM, renews the 1 s lease every 100 ms for 2 s (twice the lease: renewals keep it running), then
// stops itself (SIGSTOP) right after the last renewal. Its lifeline stays open, so only the lease ends the
// tree: SIGTERM at the lease, SIGKILL after the grace, while the agent process still exists.
TEST(ExecutorShimTest, TheWorkloadTreeEndsAfterTheLeaseWhenTheAgentIsFrozen) {
  constexpr auto kLease = std::chrono::milliseconds(1000);
  constexpr auto kGrace = std::chrono::milliseconds(1000);
  constexpr auto kTolerance = std::chrono::milliseconds(100);  // last renewal -> the test sees the stop
  TempDir dir;
  std::filesystem::create_directories(dir / "work");
  pid_t agent = ::fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {
    auto executor = Executor::Create({.log_dir = dir / "logs", .orphan_grace = kGrace});
    if (!executor.ok()) ::_exit(10);
    const auto pid = (*executor)->Start({.id = "member",
                                         .command = "sleep 1000 & sh -c 'trap \"\" TERM; exec sleep 1000' & wait",
                                         .working_dir = dir / "work",
                                         .env = BaseEnv(),
                                         .lease = kLease});
    if (!pid.ok()) ::_exit(11);
    const auto until = std::chrono::steady_clock::now() + 2 * kLease;
    for (;;) {
      if ((*executor)->RenewLeases(kLease) != 1) ::_exit(12);
      if (std::chrono::steady_clock::now() >= until) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::raise(SIGSTOP);  // frozen, right after the last renewal; the lifeline stays open
    for (;;) ::pause();
  }
  std::vector<ProcEntry> tree;  // shim -> sh -> 2 x sleep (one ignoring SIGTERM)
  struct Cleanup {
    pid_t& agent;
    std::vector<ProcEntry>& tree;
    ~Cleanup() {
      if (agent > 0) ReapChild(agent);  // SIGKILL ends a stopped process too
      for (const ProcEntry& p : tree) {
        if (ProcessAlive(p.pid)) ::kill(p.pid, SIGKILL);
      }
    }
  } cleanup{agent, tree};
  const auto ready_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < ready_deadline) {
    tree = LiveDescendants(agent);
    if (std::count_if(tree.begin(), tree.end(), [](const ProcEntry& p) { return p.comm == "sleep"; }) == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(tree.size(), 4u);
  pid_t term_ignoring = 0;
  for (const ProcEntry& p : tree) {
    if (p.comm != "sleep") continue;
    std::stringstream status(ReadAll(fmt::format("/proc/{}/status", p.pid)));
    for (std::string line; std::getline(status, line);) {
      if (line.starts_with("SigIgn:") && (std::stoull(line.substr(7), nullptr, 16) & (1ull << (SIGTERM - 1))) != 0) {
        term_ignoring = p.pid;
      }
    }
  }
  ASSERT_NE(term_ignoring, 0);

  int status = 0;
  ASSERT_EQ(::waitpid(agent, &status, WUNTRACED), agent);
  const auto stopped_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(WIFSTOPPED(status)) << "the agent exited with status " << status << " instead of stopping";
  for (const ProcEntry& p : tree) {
    EXPECT_TRUE(ProcessAlive(p.pid)) << p.comm << " " << p.pid << " ended while the lease was renewed";
  }
  std::map<pid_t, std::chrono::milliseconds> died_after;
  while (died_after.size() < tree.size() &&
         std::chrono::steady_clock::now() < stopped_at + kLease + kGrace + 3 * kLease) {
    for (const ProcEntry& p : tree) {
      if (!died_after.contains(p.pid) && !ProcessAlive(p.pid)) {
        died_after[p.pid] =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - stopped_at);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (const ProcEntry& p : tree) {
    ASSERT_TRUE(died_after.contains(p.pid)) << p.comm << " " << p.pid << " outlived its frozen agent";
    EXPECT_LE(died_after[p.pid], kLease + kGrace + std::chrono::seconds(1)) << p.comm << " " << p.pid;
    EXPECT_GE(died_after[p.pid], kLease - kTolerance) << "not before the lease ran out: " << p.comm << " " << p.pid;
    if (p.pid == term_ignoring) {
      EXPECT_GE(died_after[p.pid], kLease + kGrace - kTolerance) << "SIGKILLed only after the grace";
    } else if (p.comm == "sleep") {
      EXPECT_LT(died_after[p.pid], kLease + kGrace) << "ended by the SIGTERM";
    }
  }
  // The agent is still there, frozen: the lease did it, not EOF.
  const std::string stat = ReadAll(fmt::format("/proc/{}/stat", agent));
  ASSERT_NE(stat.rfind(')'), std::string::npos);
  EXPECT_EQ(stat[stat.rfind(')') + 2], 'T') << stat;
  ::kill(agent, SIGCONT);
}

TEST(ExecutorCreateTest, AMissingShimIsRefusedUnlessTurnedOff) {
  TempDir dir;
  const auto missing = Executor::Create({.log_dir = dir / "l", .shim_path = dir / "no-such-shim"});
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("gpugeek-shim is missing or not executable (looked at " + (dir / "no-such-shim") + ")"));
  WriteAll(dir / "not-executable", "#!/bin/sh\n");
  EXPECT_EQ(Executor::Create({.log_dir = dir / "l", .shim_path = dir / "not-executable"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Executor::Create({.log_dir = dir / "l", .shim_path = dir / "no-such-shim", .use_shim = false}).ok());
  EXPECT_EQ(Executor::Create({.log_dir = dir / "l", .orphan_grace = -std::chrono::seconds(1)}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ExecutorCreateTest, ALeaseOutsideOneMillisecondToADayIsRefused) {
  TempDir dir;
  auto executor = Executor::Create({.log_dir = dir / "l"});
  ASSERT_TRUE(executor.ok());
  for (Duration lease : {Duration::zero(), -Duration(std::chrono::seconds(1)),
                         Duration(std::chrono::hours(24) + std::chrono::milliseconds(1))}) {
    const auto pid =
        (*executor)->Start({.id = "x", .command = "true", .working_dir = dir.path(), .env = BaseEnv(), .lease = lease});
    EXPECT_EQ(pid.status().code(), absl::StatusCode::kInvalidArgument) << lease.count();
  }
  EXPECT_EQ((*executor)->running_count(), 0u);
}

// A shim that cannot run the shell reports why, as the executor did without it.
TEST(ExecutorCreateTest, AShellThatCannotBeExecutedIsReportedThroughTheShim) {
  TempDir dir;
  WriteAll(dir / "shell", "not a program\n");
  ASSERT_EQ(::chmod((dir / "shell").c_str(), 0755), 0);
  auto executor = Executor::Create({.log_dir = dir / "logs", .shell = dir / "shell"});
  ASSERT_TRUE(executor.ok()) << executor.status();
  const auto pid = (*executor)->Start({.id = "x", .command = "true", .working_dir = dir.path(), .env = BaseEnv()});
  ASSERT_EQ(pid.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(pid.status().message(),
            "workload x: exec of the shell (" + (dir / "shell") + ") failed: Exec format error");
  EXPECT_EQ((*executor)->running_count(), 0u);
}

TEST(ExecutorCreateTest, RejectsBadOptions) {
  TempDir dir;
  EXPECT_EQ(Executor::Create({.log_dir = ""}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Executor::Create({.log_dir = dir / "l", .shell = "sh"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Executor::Create({.log_dir = dir / "l", .shell = "/nonexistent/sh"}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Executor::Create({.log_dir = dir / "l", .oom_score_adj = 1001}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Executor::Create({.log_dir = dir / "deep/er/logs"}).ok());
  EXPECT_TRUE(std::filesystem::is_directory(dir / "deep/er/logs"));
}

// With a cgroup manager over a plain directory tree, the child writes its own pid into each group's
// cgroup.procs before it execs, the limits land in the files, and the groups go when it ends.
TEST(ExecutorCgroupTreeTest, ChildJoinsItsGroupsAndTheyAreRemovedAfterwards) {
  TempDir dir;
  WriteAll(dir / "cg/memory/memory.limit_in_bytes", "9223372036854771712\n");
  WriteAll(dir / "cg/cpu/cpu.cfs_quota_us", "-1\n");
  auto cgroups = CgroupManager::Create({.root = dir / "cg"});
  ASSERT_TRUE(cgroups.ok()) << cgroups.status();
  ASSERT_EQ((*cgroups)->mode(), CgroupMode::kV1);
  FakeClock clock;
  auto executor = Executor::Create({.log_dir = dir / "logs", .clock = &clock, .cgroups = cgroups->get()});
  ASSERT_TRUE(executor.ok());
  EXPECT_EQ((*executor)->CgroupDescription(), "cgroup v1");
  const auto pid = (*executor)->Start({.id = "limited",
                                       .command = "sleep 1000",
                                       .working_dir = dir.path(),
                                       .env = BaseEnv(),
                                       .limits = {.cpu_millis = 2500, .memory_bytes = 3ull << 30}});
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_EQ(ReadAll(dir / "cg/memory/gpugeek/limited/cgroup.procs"), std::to_string(*pid));
  EXPECT_EQ(ReadAll(dir / "cg/cpu/gpugeek/limited/cgroup.procs"), std::to_string(*pid));
  EXPECT_EQ(ReadAll(dir / "cg/memory/gpugeek/limited/memory.limit_in_bytes"), "3221225472");
  EXPECT_EQ(ReadAll(dir / "cg/cpu/gpugeek/limited/cpu.cfs_quota_us"), "250000");
  ASSERT_TRUE((*executor)->Cancel("limited").ok());
  ASSERT_TRUE(WaitForExit(**executor, "limited").has_value());
  EXPECT_FALSE(std::filesystem::exists(dir / "cg/memory/gpugeek/limited"));
  EXPECT_FALSE(std::filesystem::exists(dir / "cg/cpu/gpugeek/limited"));
}

// ---- Who workloads run as (RunAsOptions). Switching users needs root; each test skips without it. ----

// "Key:\tvalue" of /proc/<pid>/status text, the value with tabs kept.
std::string StatusLine(const std::string& status, const std::string& key) {
  std::stringstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with(key + ":")) return line.substr(key.size() + 1);
  }
  return "(missing)";
}

class RunAsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "switching users needs root (the agent runs workloads as itself otherwise)";
    // Tenants may pass through the test's directory to their own working directories, not list it.
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0711), 0);
  }

  ExecutorOptions Options(RunAsOptions run_as = {}) {
    if (!run_as.device_gids.has_value()) run_as.device_gids = std::vector<gid_t>{};  // the host's GPUs aside
    if (run_as.map_path.empty()) run_as.map_path = dir_ / "state/uids";
    return {.log_dir = dir_ / "logs", .run_as = std::move(run_as)};
  }

  std::string WorkDir(const std::string& name) {
    const std::string path = dir_ / name;
    std::filesystem::create_directories(path);
    return path;
  }

  // Runs `command` as a workload of `tenant` in WorkDir(id) and returns its log once it ended.
  std::string Run(Executor& executor, const std::string& id, const std::string& tenant, const std::string& command) {
    EnvMap env = BaseEnv();
    env["HOME"] = "/root";  // the agent's own: replaced by the working directory
    const auto pid =
        executor.Start({.id = id, .command = command, .working_dir = WorkDir(id), .env = env, .tenant = tenant});
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!pid.ok()) return "";
    const auto exit = WaitForExit(executor, id);
    EXPECT_TRUE(exit.has_value());
    return ReadAll(executor.LogPath(id));
  }

  TempDir dir_;
};

TEST_F(RunAsTest, AJobRunsAsItsTenantsUnprivilegedUserInItsOwnWorkingDirectory) {
  auto executor = Executor::Create(Options());
  ASSERT_TRUE(executor.ok()) << executor.status();
  const auto alice = (*executor)->IdentityFor("alice");
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_TRUE(alice->switched);
  EXPECT_GE(alice->uid, 200000u);
  EXPECT_LE(alice->uid, 265535u);
  EXPECT_EQ(alice->gid, alice->uid);

  const std::string log = Run(**executor, "alice-0", "alice", "id -u; id -g; id -G; pwd; echo $HOME");
  const std::string work = dir_ / "alice-0";
  const std::string uid = std::to_string(alice->uid);
  EXPECT_EQ(log, fmt::format("{0}\n{0}\n{0}\n{1}\n{2}\n", uid, std::filesystem::canonical(work).string(), work));
  struct stat st;
  ASSERT_EQ(::stat(work.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, alice->uid);
  EXPECT_EQ(st.st_gid, alice->gid);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST_F(RunAsTest, TwoTenantsGetDifferentUsersAndCannotReadEachOthersFiles) {
  auto executor = Executor::Create(Options());
  ASSERT_TRUE(executor.ok()) << executor.status();
  const auto alice = (*executor)->IdentityFor("alice");
  const auto bob = (*executor)->IdentityFor("bob");
  ASSERT_TRUE(alice.ok() && bob.ok());
  EXPECT_NE(alice->uid, bob->uid);

  EXPECT_EQ(Run(**executor, "a", "alice", "echo secret > mine.txt; cat mine.txt"), "secret\n");
  // Bob reaches his own directory by absolute path, so the parents are traversable: alice's 0700 is what
  // stops him.
  const std::string log = Run(**executor, "b", "bob",
                              fmt::format("cat {0}/mine.txt; echo rc=$?; ls {0}; echo rc=$?; echo hi > {1}/mine.txt; "
                                          "cat {1}/mine.txt",
                                          dir_ / "a", dir_ / "b"));
  EXPECT_EQ(log, fmt::format("cat: {0}/mine.txt: Permission denied\nrc=1\nls: cannot open directory '{0}': "
                             "Permission denied\nrc=2\nhi\n",
                             dir_ / "a"));
  // And the default tenant is a third user.
  const auto fallback = (*executor)->IdentityFor("");
  ASSERT_TRUE(fallback.ok());
  EXPECT_NE(fallback->uid, alice->uid);
  EXPECT_NE(fallback->uid, bob->uid);
}

// The attack: "an impostor server got an agent to run `id` as uid 0". Whatever the command, it runs as
// the tenant's user with no way back: every uid and gid switched, no supplementary group, no_new_privs
// (sudo, su and file capabilities stay powerless), with the shim and without it.
TEST_F(RunAsTest, TheWorkloadCannotRegainRoot) {
  for (const bool use_shim : {true, false}) {
    ExecutorOptions options = Options();
    options.use_shim = use_shim;
    options.log_dir = dir_ / (use_shim ? "logs-shim" : "logs-direct");
    auto executor = Executor::Create(options);
    ASSERT_TRUE(executor.ok()) << executor.status();
    const auto mallory = (*executor)->IdentityFor("mallory");
    ASSERT_TRUE(mallory.ok());
    const std::string id = use_shim ? "shim" : "direct";
    const std::string status = Run(**executor, id, "mallory", "id -u; cat /proc/self/status");
    const std::string u = std::to_string(mallory->uid);
    EXPECT_TRUE(status.starts_with(u + "\n")) << status;
    EXPECT_EQ(StatusLine(status, "Uid"), fmt::format("\t{0}\t{0}\t{0}\t{0}", u)) << id;
    EXPECT_EQ(StatusLine(status, "Gid"), fmt::format("\t{0}\t{0}\t{0}\t{0}", u)) << id;
    EXPECT_EQ(absl::StripAsciiWhitespace(StatusLine(status, "Groups")), "") << id;
    EXPECT_EQ(StatusLine(status, "NoNewPrivs"), "\t1") << id;
    EXPECT_EQ(StatusLine(status, "CapEff"), "\t0000000000000000") << id;
  }
}

// The shim stays root to supervise, so it must never see the job's environment: it gets none of its
// own, and the workload gets exactly the request's (HOME replaced).
TEST_F(RunAsTest, TheEnvironmentReachesTheWorkloadButNeverTheRootShim) {
  auto executor = Executor::Create(Options());
  ASSERT_TRUE(executor.ok()) << executor.status();
  EnvMap env = BaseEnv();
  env["LD_PRELOAD"] = "/nonexistent/hijack.so";  // refused in job specs; here only to see where it lands
  env["FOO"] = "bar baz";
  const std::string work = WorkDir("envs");
  const auto pid = (*executor)->Start(
      // "sleep 30; true": the shell stays (no exec of its last command), so its environ is what it was given.
      {.id = "envs", .command = "sleep 30; true", .working_dir = work, .env = env, .tenant = "alice"});
  ASSERT_TRUE(pid.ok()) << pid.status();
  const std::string shim = "/proc/" + std::to_string(*pid);
  EXPECT_EQ(StatusLine(ReadAll(shim + "/status"), "Uid"), "\t0\t0\t0\t0") << "the supervisor keeps the agent's user";
  EXPECT_EQ(ReadAll(shim + "/environ"), "");
  const std::string children = ReadAll(shim + "/task/" + std::to_string(*pid) + "/children");
  const std::string workload = "/proc/" + std::string(absl::StripAsciiWhitespace(children));
  std::string environ = ReadAll(workload + "/environ");
  std::replace(environ.begin(), environ.end(), '\0', '\n');
  EXPECT_EQ(environ, fmt::format("FOO=bar baz\nHOME={}\nLD_PRELOAD=/nonexistent/hijack.so\nPATH={}\n", work,
                                 BaseEnv().at("PATH")));
  ASSERT_TRUE((*executor)->Cancel("envs", std::chrono::seconds(0)).ok());
  ASSERT_TRUE(WaitForExit(**executor, "envs").has_value());
}

TEST_F(RunAsTest, AllowRootWorkloadsRunsThemAsRootStillWithoutNewPrivileges) {
  auto executor = Executor::Create(Options({.allow_root_workloads = true}));
  ASSERT_TRUE(executor.ok()) << executor.status();
  const auto identity = (*executor)->IdentityFor("alice");
  ASSERT_TRUE(identity.ok());
  EXPECT_FALSE(identity->switched);
  EXPECT_EQ(identity->uid, 0u);
  const std::string status = Run(**executor, "root", "alice", "cat /proc/self/status");
  EXPECT_EQ(StatusLine(status, "Uid"), "\t0\t0\t0\t0");
  EXPECT_EQ(StatusLine(status, "NoNewPrivs"), "\t1");
}

TEST_F(RunAsTest, UidsAreRecordedAndStableAcrossRestarts) {
  std::map<std::string, uid_t> first;
  {
    auto executor = Executor::Create(Options());
    ASSERT_TRUE(executor.ok()) << executor.status();
    for (const std::string tenant : {"alice", "bob", ""}) first[tenant] = (*executor)->IdentityFor(tenant)->uid;
  }
  EXPECT_EQ(ReadAll(dir_ / "state/uids"),
            fmt::format("{} alice\n{} bob\n{} -\n", first["alice"], first["bob"], first[""]));
  auto again = Executor::Create(Options());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->IdentityFor("bob")->uid, first["bob"]);
  EXPECT_EQ((*again)->IdentityFor("")->uid, first[""]);
  EXPECT_EQ((*again)->IdentityFor("alice")->uid, first["alice"]);
  // Without the record, the same tenant hashes to the same uid (other nodes agree unless they saw a
  // collision).
  auto fresh = Executor::Create(Options({.map_path = dir_ / "other/uids"}));
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ((*fresh)->IdentityFor("bob")->uid, first["bob"]);
}

TEST_F(RunAsTest, CollisionsTakeTheNextFreeUidAndAFullRangeIsExhausted) {
  auto executor = Executor::Create(Options({.first_uid = 300000, .count = 2}));
  ASSERT_TRUE(executor.ok()) << executor.status();
  const auto a = (*executor)->IdentityFor("a");
  const auto b = (*executor)->IdentityFor("b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(std::set<uid_t>({a->uid, b->uid}), std::set<uid_t>({300000, 300001}));
  const auto c = (*executor)->IdentityFor("c");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(c.status().message(),
            "no free uid for tenant \"c\": all 2 uids of 300000..300001 belong to other tenants or to accounts of this "
            "host; widen ExecutorOptions.run_as");
  const auto start = (*executor)->Start(
      {.id = "c-0", .command = "true", .working_dir = WorkDir("c-0"), .env = BaseEnv(), .tenant = "c"});
  EXPECT_EQ(start.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "logs/c-0.log"));
}

TEST_F(RunAsTest, UidsOfTheHostsAccountsAreNeverHandedOut) {
  if (::getpwuid(65534) == nullptr) GTEST_SKIP() << "no account with uid 65534 (nobody) on this host";
  auto executor = Executor::Create(Options({.first_uid = 65534, .count = 2}));
  ASSERT_TRUE(executor.ok()) << executor.status();
  if (::getpwuid(65535) != nullptr || ::getgrgid(65535) != nullptr) GTEST_SKIP() << "65535 is an account here";
  EXPECT_EQ((*executor)->IdentityFor("a")->uid, 65535u);
  EXPECT_EQ((*executor)->IdentityFor("b").status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(RunAsTest, BadRangesMapsAndTenantsAreRefused) {
  EXPECT_EQ(Executor::Create(Options({.first_uid = 0})).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Executor::Create(Options({.count = 0})).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Executor::Create(Options({.first_uid = 0xfffffff0u, .count = 100})).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto executor = Executor::Create(Options());
  ASSERT_TRUE(executor.ok());
  EXPECT_EQ((*executor)->IdentityFor("Bad_Name").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*executor)
                ->Start({.id = "x", .command = "true", .working_dir = WorkDir("x"), .env = BaseEnv(), .tenant = "../x"})
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);

  WriteAll(dir_ / "bad/uids", "200000 alice\nbob\n");
  const auto garbled = Executor::Create(Options({.map_path = dir_ / "bad/uids"}));
  EXPECT_EQ(garbled.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(garbled.status().message(), HasSubstr("line 2"));
  WriteAll(dir_ / "out/uids", "100 alice\n");
  EXPECT_EQ(Executor::Create(Options({.map_path = dir_ / "out/uids"})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  WriteAll(dir_ / "twice/uids", "200001 alice\n200001 bob\n");
  EXPECT_EQ(Executor::Create(Options({.map_path = dir_ / "twice/uids"})).status().code(), absl::StatusCode::kDataLoss);
}

// A symlink as the working directory would hand its target to the tenant's user: refused.
TEST_F(RunAsTest, ASymlinkedWorkingDirectoryIsNotGivenAway) {
  auto executor = Executor::Create(Options());
  ASSERT_TRUE(executor.ok());
  const std::string target = WorkDir("etc-like");
  std::filesystem::create_directory_symlink(target, dir_ / "link");
  const auto pid = (*executor)->Start(
      {.id = "l", .command = "true", .working_dir = dir_ / "link", .env = BaseEnv(), .tenant = "alice"});
  EXPECT_EQ(pid.status().code(), absl::StatusCode::kFailedPrecondition);
  struct stat st;
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
}

}  // namespace
}  // namespace gpugeek::agent
