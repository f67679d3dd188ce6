#include "agent/cgroup.h"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include "agent/executor.h"

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
using ::gpugeek::agent::testing::SpawnLeftover;
using ::gpugeek::agent::testing::TempDir;
using ::gpugeek::agent::testing::WaitForDeath;
using ::gpugeek::agent::testing::WaitForExit;
using ::gpugeek::agent::testing::WaitForFile;
using ::gpugeek::agent::testing::WriteAll;
using ::testing::HasSubstr;

// A plain directory tree shaped like a v1 host: memory and cpu hierarchies.
void MakeV1Tree(const TempDir& dir) {
  WriteAll(dir / "memory/memory.limit_in_bytes", "9223372036854771712\n");
  WriteAll(dir / "cpu/cpu.cfs_quota_us", "-1\n");
}

TEST(CgroupManagerTest, V1TreeGetsLimitsInItsFiles) {
  TempDir dir;
  MakeV1Tree(dir);
  auto manager = CgroupManager::Create({.root = dir.path()});
  ASSERT_TRUE(manager.ok()) << manager.status();
  EXPECT_EQ((*manager)->mode(), CgroupMode::kV1);
  EXPECT_EQ((*manager)->Describe(), "cgroup v1");
  EXPECT_TRUE(std::filesystem::is_directory(dir / "memory/gpugeek"));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "cpu/gpugeek"));

  const auto group = (*manager)->CreateGroup("job-1.r0", {.cpu_millis = 1500, .memory_bytes = 1ull << 30});
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(group->dirs, (std::vector<std::string>{dir / "memory/gpugeek/job-1.r0", dir / "cpu/gpugeek/job-1.r0"}));
  EXPECT_EQ(group->procs_files, (std::vector<std::string>{dir / "memory/gpugeek/job-1.r0/cgroup.procs",
                                                          dir / "cpu/gpugeek/job-1.r0/cgroup.procs"}));
  EXPECT_EQ(ReadAll(dir / "memory/gpugeek/job-1.r0/memory.limit_in_bytes"), "1073741824");
  EXPECT_EQ(ReadAll(dir / "cpu/gpugeek/job-1.r0/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(ReadAll(dir / "cpu/gpugeek/job-1.r0/cpu.cfs_quota_us"), "150000");

  // A group already there is a leftover: taken over (afresh, without the old limits).
  const auto again = (*manager)->CreateGroup("job-1.r0", {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->dirs, group->dirs);
  EXPECT_FALSE(std::filesystem::exists(dir / "memory/gpugeek/job-1.r0/memory.limit_in_bytes"));
  ASSERT_TRUE((*manager)->Remove(*group).ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "memory/gpugeek/job-1.r0"));
  EXPECT_FALSE(std::filesystem::exists(dir / "cpu/gpugeek/job-1.r0"));
  EXPECT_TRUE((*manager)->Remove(*group).ok()) << "removing a removed group is fine";
}

TEST(CgroupManagerTest, TinyCpuShareIsRaisedToTheKernelMinimumQuotaAndZeroMeansNoLimit) {
  TempDir dir;
  MakeV1Tree(dir);
  auto manager = CgroupManager::Create(
      {.root = dir.path(), .parent = "agents/gpugeek", .cpu_period = std::chrono::milliseconds(50)});
  ASSERT_TRUE(manager.ok()) << manager.status();
  auto group = (*manager)->CreateGroup("tiny", {.cpu_millis = 1});
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(ReadAll(dir / "cpu/agents/gpugeek/tiny/cpu.cfs_period_us"), "50000");
  EXPECT_EQ(ReadAll(dir / "cpu/agents/gpugeek/tiny/cpu.cfs_quota_us"), "1000");
  EXPECT_FALSE(std::filesystem::exists(dir / "memory/agents/gpugeek/tiny/memory.limit_in_bytes"));
}

TEST(CgroupManagerTest, V2TreeEnablesControllersAndWritesMaxFiles) {
  TempDir dir;
  WriteAll(dir / "cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n");
  auto manager = CgroupManager::Create({.root = dir.path()});
  ASSERT_TRUE(manager.ok()) << manager.status();
  EXPECT_EQ((*manager)->mode(), CgroupMode::kV2);
  EXPECT_EQ((*manager)->Describe(), "cgroup v2");
  EXPECT_EQ(ReadAll(dir / "cgroup.subtree_control"), "+memory +cpu");
  EXPECT_EQ(ReadAll(dir / "gpugeek/cgroup.subtree_control"), "+memory +cpu");

  const auto group = (*manager)->CreateGroup("w", {.cpu_millis = 500, .memory_bytes = 64ull << 20});
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ(group->dirs, std::vector<std::string>{dir / "gpugeek/w"});
  EXPECT_EQ(ReadAll(dir / "gpugeek/w/memory.max"), "67108864");
  EXPECT_EQ(ReadAll(dir / "gpugeek/w/cpu.max"), "50000 100000");
  WriteAll(dir / "gpugeek/w/memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\n");
  EXPECT_EQ((*manager)->OomKills(*group), 2u);
  ASSERT_TRUE((*manager)->Remove(*group).ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "gpugeek/w"));
}

TEST(CgroupManagerTest, HybridHostWithoutV2ControllersFallsBackToV1) {
  TempDir dir;
  WriteAll(dir / "unified/cgroup.controllers", "\n");
  MakeV1Tree(dir);
  auto manager = CgroupManager::Create({.root = dir.path()});
  ASSERT_TRUE(manager.ok());
  EXPECT_EQ((*manager)->mode(), CgroupMode::kV1);
}

TEST(CgroupManagerTest, NoUsableHierarchySaysWhy) {
  TempDir dir;
  WriteAll(dir / "unified/cgroup.controllers", "pids\n");
  auto manager = CgroupManager::Create({.root = dir.path()});
  ASSERT_TRUE(manager.ok());
  EXPECT_EQ((*manager)->mode(), CgroupMode::kNone);
  const std::string why = (*manager)->Describe();
  EXPECT_THAT(why, HasSubstr("none: cgroup v2 at " + (dir / "unified") + " lacks the memory, cpu controllers"));
  EXPECT_THAT(why, HasSubstr("no cgroup v1 memory hierarchy at " + (dir / "memory")));

  const auto limited = (*manager)->CreateGroup("w", {.memory_bytes = 1 << 20});
  EXPECT_EQ(limited.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(limited.status().message()), HasSubstr("offers no cgroups"));
  const auto unlimited = (*manager)->CreateGroup("w", {});
  ASSERT_TRUE(unlimited.ok());
  EXPECT_TRUE(unlimited->dirs.empty());
  EXPECT_TRUE((*manager)->Remove(*unlimited).ok());
  EXPECT_EQ((*manager)->KillAll(*unlimited), 0);
}

// An agent killed with SIGKILL leaves its workloads running in their groups; the next agent of the node
// (a new manager for the same parent) ends them and removes the groups, nested ones included.
TEST(CgroupManagerTest, ReapOrphansKillsWhatAPreviousManagerLeftAndRemovesTheGroups) {
  TempDir dir;
  MakeV1Tree(dir);
  auto previous = CgroupManager::Create({.root = dir.path(), .parent = "gpugeek/m1"});
  ASSERT_TRUE(previous.ok()) << previous.status();
  auto group = (*previous)->CreateGroup("j-00000001-0", {.memory_bytes = 1ull << 30});
  ASSERT_TRUE(group.ok()) << group.status();
  const pid_t leader = SpawnLeftover(group->procs_files);
  const pid_t nested = SpawnLeftover({dir / "memory/gpugeek/m1/j-00000001-0/inner/cgroup.procs"});
  std::filesystem::create_directories(dir / "cpu/gpugeek/m1/empty-1");  // a group with no process
  ASSERT_TRUE(ProcessAlive(leader));
  ASSERT_TRUE(ProcessAlive(nested));
  auto other_node = CgroupManager::Create({.root = dir.path(), .parent = "gpugeek/m2"});
  ASSERT_TRUE(other_node.ok());
  ASSERT_TRUE((*other_node)->CreateGroup("keep", {}).ok());

  auto manager = CgroupManager::Create({.root = dir.path(), .parent = "gpugeek/m1"});
  ASSERT_TRUE(manager.ok()) << manager.status();
  const std::vector<ReapedGroup> reaped = (*manager)->ReapOrphans(std::chrono::seconds(5));
  ASSERT_EQ(reaped.size(), 2u);
  EXPECT_EQ(reaped[0].id, "empty-1");
  EXPECT_EQ(reaped[0].killed, 0);
  EXPECT_EQ(reaped[0].dirs, std::vector<std::string>{dir / "cpu/gpugeek/m1/empty-1"});
  EXPECT_TRUE(reaped[0].status.ok()) << reaped[0].status;
  EXPECT_EQ(reaped[1].id, "j-00000001-0");
  EXPECT_EQ(reaped[1].killed, 2);
  EXPECT_EQ(reaped[1].dirs, group->dirs);
  EXPECT_TRUE(reaped[1].status.ok()) << reaped[1].status;
  EXPECT_TRUE(WaitForDeath(leader));
  EXPECT_TRUE(WaitForDeath(nested));
  ReapChild(leader);
  ReapChild(nested);
  EXPECT_FALSE(std::filesystem::exists(dir / "memory/gpugeek/m1/j-00000001-0"));
  EXPECT_FALSE(std::filesystem::exists(dir / "cpu/gpugeek/m1/j-00000001-0"));
  EXPECT_FALSE(std::filesystem::exists(dir / "cpu/gpugeek/m1/empty-1"));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "memory/gpugeek/m1")) << "the node's own group stays";
  EXPECT_TRUE(std::filesystem::is_directory(dir / "memory/gpugeek/m2/keep")) << "another node's group is not touched";
  EXPECT_TRUE((*manager)->ReapOrphans().empty());

  // An agent leaving removes its node's group, not the parent other nodes share, and only once empty.
  auto held = (*manager)->CreateGroup("held", {});
  ASSERT_TRUE(held.ok());
  EXPECT_EQ((*manager)->RemoveParent().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((*manager)->Remove(*held).ok());
  EXPECT_TRUE((*manager)->RemoveParent().ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "memory/gpugeek/m1"));
  EXPECT_FALSE(std::filesystem::exists(dir / "cpu/gpugeek/m1"));
  EXPECT_TRUE(std::filesystem::is_directory(dir / "memory/gpugeek"));
  EXPECT_TRUE((*manager)->RemoveParent().ok()) << "already gone";
}

// The reported failure: "failed to start: cgroup .../j-00000001-0 already exists (workload j-00000001-0
// still present)". A group left with a live process is now ended and its name reused.
TEST(CgroupManagerTest, StartingAWorkloadWhoseGroupWasLeftBehindEndsTheLeftoverAndStarts) {
  TempDir dir;
  MakeV1Tree(dir);
  auto manager = CgroupManager::Create({.root = dir.path(), .parent = "gpugeek/m1"});
  ASSERT_TRUE(manager.ok());
  auto left = (*manager)->CreateGroup("j-00000001-0", {});
  ASSERT_TRUE(left.ok());
  const pid_t leftover = SpawnLeftover(left->procs_files);
  FakeClock clock;
  auto executor = Executor::Create({.log_dir = dir / "logs", .clock = &clock, .cgroups = manager->get()});
  ASSERT_TRUE(executor.ok());
  const auto pid = (*executor)->Start({.id = "j-00000001-0",
                                       .command = "exec sleep 300",
                                       .working_dir = dir.path(),
                                       .env = BaseEnv(),
                                       .limits = {.memory_bytes = 1ull << 30}});
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_TRUE(WaitForDeath(leftover));
  ReapChild(leftover);
  EXPECT_EQ(ReadAll(dir / "memory/gpugeek/m1/j-00000001-0/cgroup.procs"), std::to_string(*pid));
  EXPECT_EQ(ReadAll(dir / "memory/gpugeek/m1/j-00000001-0/memory.limit_in_bytes"), "1073741824");
  ASSERT_TRUE((*executor)->Cancel("j-00000001-0", Duration::zero()).ok());
  ASSERT_TRUE(WaitForExit(**executor, "j-00000001-0").has_value());
}

// A leftover whose process does not die in time (here: a pid in a plain tree's file that never goes
// away, as a process stuck in the kernel would) is Unavailable, and nothing of the new workload remains.
TEST(CgroupManagerTest, ALeftoverThatOutlivesTheWaitIsUnavailable) {
  TempDir dir;
  MakeV1Tree(dir);
  auto manager = CgroupManager::Create({.root = dir.path()});
  ASSERT_TRUE(manager.ok());
  // The manager never signals init (nor itself), and init always runs.
  WriteAll(dir / "memory/gpugeek/stuck/cgroup.procs", "1\n");
  const auto group = (*manager)->CreateGroup("stuck", {}, std::chrono::milliseconds(50));
  EXPECT_EQ(group.status().code(), absl::StatusCode::kUnavailable) << group.status();
  EXPECT_THAT(std::string(group.status().message()), HasSubstr("still has processes"));
  EXPECT_FALSE(std::filesystem::exists(dir / "cpu/gpugeek/stuck"));
}

TEST(CgroupManagerTest, BadOptionsAndIdsAreInvalidArguments) {
  TempDir dir;
  MakeV1Tree(dir);
  for (const std::string parent : {"", "/abs", "a/../b", "a//b"}) {
    EXPECT_EQ(CgroupManager::Create({.root = dir.path(), .parent = parent}).status().code(),
              absl::StatusCode::kInvalidArgument)
        << parent;
  }
  EXPECT_EQ(CgroupManager::Create({.root = "relative"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CgroupManager::Create({.root = dir.path(), .cpu_period = std::chrono::seconds(2)}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto manager = CgroupManager::Create({.root = dir.path()});
  ASSERT_TRUE(manager.ok());
  for (const std::string& id : std::vector<std::string>{"", "..", ".hidden", "a/b", "sp ace", std::string(129, 'x')}) {
    EXPECT_EQ((*manager)->CreateGroup(id, {}).status().code(), absl::StatusCode::kInvalidArgument) << id;
  }
}

// The real host: needs root and a cgroup hierarchy with the memory and cpu controllers.
class RealCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to create cgroups (euid " << ::geteuid() << ")";
    parent_ = fmt::format("gpugeek-test-{}", ::getpid());
    auto manager = CgroupManager::Create({.parent = parent_});
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = std::move(*manager);
    if (manager_->mode() == CgroupMode::kNone) GTEST_SKIP() << "no cgroup controllers: " << manager_->Describe();
    auto executor = Executor::Create({.log_dir = dir_ / "logs", .clock = &clock_, .cgroups = manager_.get()});
    ASSERT_TRUE(executor.ok()) << executor.status();
    executor_ = std::move(*executor);
  }
  void TearDown() override {
    executor_.reset();
    if (manager_ == nullptr) return;
    for (const char* sub :
         {"/sys/fs/cgroup/memory/", "/sys/fs/cgroup/cpu/", "/sys/fs/cgroup/", "/sys/fs/cgroup/unified/"}) {
      ::rmdir((std::string(sub) + parent_).c_str());
    }
  }

  // The directory of workload `id`'s group in the hierarchy holding `controller` ("memory" or "cpu").
  std::string GroupDir(const std::string& controller, const std::string& id) const {
    if (manager_->mode() == CgroupMode::kV1) return fmt::format("/sys/fs/cgroup/{}/{}/{}", controller, parent_, id);
    const std::string root =
        std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers") ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified";
    return fmt::format("{}/{}/{}", root, parent_, id);
  }

  LaunchRequest Request(const std::string& id, const std::string& command, ResourceLimits limits) {
    return {.id = id, .command = command, .working_dir = dir_.path(), .env = BaseEnv(), .limits = limits};
  }

  TempDir dir_;
  FakeClock clock_;
  std::string parent_;
  std::unique_ptr<CgroupManager> manager_;
  std::unique_ptr<Executor> executor_;
};

TEST_F(RealCgroupTest, WorkloadRunsInsideItsGroupWhichIsRemovedAfterwards) {
  const auto pid = executor_->Start(Request("inside", "cat /proc/self/cgroup > cgroup.txt; exec sleep 1000",
                                            {.cpu_millis = 500, .memory_bytes = 256ull << 20}));
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_TRUE(WaitForFile(dir_ / "cgroup.txt"));
  const std::string cgroups = ReadAll(dir_ / "cgroup.txt");
  if (manager_->mode() == CgroupMode::kV1) {
    EXPECT_THAT(cgroups, HasSubstr(fmt::format(":memory:/{}/inside\n", parent_)));
    EXPECT_THAT(cgroups, HasSubstr(fmt::format(":cpu:/{}/inside\n", parent_)));
    EXPECT_EQ(ReadAll(GroupDir("memory", "inside") + "/memory.limit_in_bytes"), "268435456\n");
    EXPECT_EQ(ReadAll(GroupDir("cpu", "inside") + "/cpu.cfs_quota_us"), "50000\n");
  } else {
    EXPECT_THAT(cgroups, HasSubstr(fmt::format("0::/{}/inside\n", parent_)));
  }
  ASSERT_TRUE(executor_->Cancel("inside").ok());
  ASSERT_TRUE(WaitForExit(*executor_, "inside").has_value());
  // Removal may need a Poll or two while the killed processes leave the group.
  for (int i = 0; i < 100 && std::filesystem::exists(GroupDir("memory", "inside")); ++i) {
    executor_->Poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(std::filesystem::exists(GroupDir("memory", "inside")));
  EXPECT_FALSE(std::filesystem::exists(GroupDir("cpu", "inside")));
}

TEST_F(RealCgroupTest, MemoryLimitIsEnforced) {
  constexpr uint64_t kLimit = 64ull << 20;
  // dd allocates a buffer of `bs` bytes and fills it from /dev/zero, so it touches all of it.
  ASSERT_TRUE(
      executor_->Start(Request("under", "exec dd if=/dev/zero of=/dev/null bs=16M count=1", {.memory_bytes = kLimit}))
          .ok());
  ASSERT_TRUE(
      executor_->Start(Request("over", "exec dd if=/dev/zero of=/dev/null bs=256M count=1", {.memory_bytes = kLimit}))
          .ok());
  const auto under = WaitForExit(*executor_, "under", std::chrono::seconds(30));
  const auto over = WaitForExit(*executor_, "over", std::chrono::seconds(30));
  ASSERT_TRUE(under.has_value());
  // What the kernel says of a workload that did not end: its group's OOM state and its processes.
  ASSERT_TRUE(over.has_value()) << "memory.oom_control: " << ReadAll(GroupDir("memory", "over") + "/memory.oom_control")
                                << "memory.failcnt: " << ReadAll(GroupDir("memory", "over") + "/memory.failcnt")
                                << "processes: " << ReadAll(GroupDir("memory", "over") + "/cgroup.procs");
  EXPECT_TRUE(under->succeeded()) << under->Describe();
  EXPECT_EQ(under->oom_kills, 0u);
  // The OOM killer SIGKILLs dd, the workload's leader (the shell exec'd it).
  EXPECT_EQ(over->term_signal, SIGKILL) << over->Describe();
  EXPECT_GE(over->oom_kills, 1u) << over->Describe();
  EXPECT_THAT(over->Describe(), HasSubstr("out of memory"));
}

TEST_F(RealCgroupTest, CpuLimitThrottles) {
  ASSERT_TRUE(executor_->Start(Request("spin", "echo 1 > spinning; while :; do :; done", {.cpu_millis = 100})).ok());
  ASSERT_TRUE(WaitForFile(dir_ / "spinning"));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // 100 milli-CPU is 10 ms per 100 ms period: a busy loop exhausts the quota in every period.
  const std::string stat = ReadAll(GroupDir("cpu", "spin") + "/cpu.stat");
  std::stringstream in(stat);
  std::string key;
  uint64_t value = 0, throttled = 0, periods = 0;
  while (in >> key >> value) {
    if (key == "nr_throttled") throttled = value;
    if (key == "nr_periods") periods = value;
  }
  EXPECT_GE(periods, 3u) << stat;
  EXPECT_GE(throttled, 1u) << stat;  // unlimited, a busy loop is never throttled
  ASSERT_TRUE(executor_->Cancel("spin", Duration::zero()).ok());
  ASSERT_TRUE(WaitForExit(*executor_, "spin").has_value());
}

TEST_F(RealCgroupTest, KillAllReachesProcessesThatLeftTheProcessGroup) {
  // setsid puts the sleeper in a new session and group: only the cgroup still holds it.
  const auto pid = executor_->Start(
      Request("escape", "setsid sh -c 'echo $$ > escaped.pid; exec sleep 1000' & wait", {.memory_bytes = 1ull << 30}));
  ASSERT_TRUE(pid.ok()) << pid.status();
  ASSERT_TRUE(WaitForFile(dir_ / "escaped.pid"));
  const pid_t escaped = std::stoi(ReadAll(dir_ / "escaped.pid"));
  EXPECT_NE(::getpgid(escaped), *pid);
  ASSERT_TRUE(executor_->Cancel("escape", Duration::zero()).ok());
  ASSERT_TRUE(WaitForExit(*executor_, "escape").has_value());
  EXPECT_TRUE(testing::WaitForDeath(escaped));
}

// The defect this guards against: an agent killed with SIGKILL left `sleep` running in its group; the
// restarted agent (a new manager for the same node) must end it and remove the group.
TEST_F(RealCgroupTest, ANewManagerForTheSameParentEndsWhatThePreviousOneLeft) {
  auto group = manager_->CreateGroup("left", {.memory_bytes = 1ull << 30});
  ASSERT_TRUE(group.ok()) << group.status();
  const pid_t leftover = SpawnLeftover(group->procs_files);
  ASSERT_THAT(ReadAll(GroupDir("memory", "left") + "/cgroup.procs"), HasSubstr(std::to_string(leftover)));

  auto manager = CgroupManager::Create({.parent = parent_});
  ASSERT_TRUE(manager.ok()) << manager.status();
  const std::vector<ReapedGroup> reaped = (*manager)->ReapOrphans();
  ASSERT_EQ(reaped.size(), 1u);
  EXPECT_EQ(reaped[0].id, "left");
  EXPECT_EQ(reaped[0].killed, 1);
  EXPECT_TRUE(reaped[0].status.ok()) << reaped[0].status;
  EXPECT_TRUE(WaitForDeath(leftover));
  ReapChild(leftover);
  EXPECT_FALSE(std::filesystem::exists(GroupDir("memory", "left")));
  EXPECT_FALSE(std::filesystem::exists(GroupDir("cpu", "left")));
  EXPECT_TRUE((*manager)->RemoveParent().ok());
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(GroupDir("memory", "left")).parent_path()));
}

// Start() of an id whose group still holds a process (a race, or a leftover) ends it and starts.
TEST_F(RealCgroupTest, StartEndsALeftoverInTheWorkloadsGroup) {
  auto group = manager_->CreateGroup("again", {});
  ASSERT_TRUE(group.ok()) << group.status();
  const pid_t leftover = SpawnLeftover(group->procs_files);
  const auto pid =
      executor_->Start(Request("again", "echo $$ > again.pid; exec sleep 1000", {.memory_bytes = 256ull << 20}));
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_TRUE(WaitForDeath(leftover));
  ReapChild(leftover);
  ASSERT_TRUE(WaitForFile(dir_ / "again.pid"));
  // The group holds the workload's shim (the pid Start returned) and its shell, nothing else.
  std::stringstream procs(ReadAll(GroupDir("memory", "again") + "/cgroup.procs"));
  std::set<pid_t> members;
  for (pid_t member; procs >> member;) members.insert(member);
  EXPECT_EQ(members, (std::set<pid_t>{*pid, std::stoi(ReadAll(dir_ / "again.pid"))}));
  ASSERT_TRUE(executor_->Cancel("again", Duration::zero()).ok());
  ASSERT_TRUE(WaitForExit(*executor_, "again").has_value());
}

}  // namespace
}  // namespace gpugeek::agent
