// The Slurm backend against a real Slurm 22.05 cluster (scripts/slurm-test-cluster.sh: 2 nodes g1, g2 with
// 4 fake A100 GRES each, slurmctld, slurmd, slurmrestd with JWT; started by the CTest fixture `slurm`).

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "backends/slurm/rest_client.h"
#include "backends/slurm/testing/cluster_env.h"
#include "common/file.h"
#include "common/testing/services.h"

namespace gpugeek::backends::slurm {
namespace {

using gpugeek::testing::InCi;
using testing::ClusterEnv;
using testing::Shell;

class SlurmClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = ClusterEnv();
    if (env_["SLURMRESTD_URL"].empty()) {
      if (InCi()) {
        FAIL() << "no Slurm cluster (scripts/slurm-test-cluster.sh up failed)";
      }
      GTEST_SKIP() << "no Slurm cluster here (needs root and Debian's Slurm packages)";
    }
    setenv("SLURM_CONF", env_["SLURM_CONF"].c_str(), 1);
    RestOptions o;
    o.url = env_["SLURMRESTD_URL"];
    o.api = env_["SLURMRESTD_API"];
    o.user = env_["SLURMRESTD_USER"];
    o.token = env_["SLURMRESTD_TOKEN"];
    auto rest = SlurmRest::Create(o);
    ASSERT_TRUE(rest.ok()) << rest.status();
    rest_ = *std::move(rest);
  }

  GangJob Gang(const std::string& id, std::vector<std::string> command) {
    GangJob j;
    j.job_id = id;
    j.epoch = 1;
    j.nodes = {"g2", "g1"};
    j.master_address = "127.0.0.1";
    j.gpu_type = "a100";
    j.gpus_per_node = 4;
    j.tasks_per_node = 2;
    j.workdir = env_["SLURM_JOB_DIR"] + "/" + id;
    std::filesystem::create_directories(j.workdir);
    std::filesystem::permissions(j.workdir, std::filesystem::perms::all);
    j.command = std::move(command);
    return j;
  }

  // Polls the job through slurmrestd until `done` holds (at most `seconds`).
  SlurmJob WaitFor(int64_t id, const std::function<bool(const SlurmJob&)>& done, int seconds = 30) {
    SlurmJob last;
    for (int i = 0; i < seconds * 10; ++i) {
      auto j = rest_->Job(id);
      if (j.ok()) {
        last = *j;
        if (done(last)) return last;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "job " << id << " stayed " << last.state << " (" << last.reason << ")";
    return last;
  }

  std::map<std::string, std::string> env_;
  std::unique_ptr<SlurmRest> rest_;
};

TEST_F(SlurmClusterTest, InventoryThroughSlurmrestd) {
  auto nodes = rest_->Nodes();
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  for (const SlurmNode& n : *nodes) {
    EXPECT_EQ(n.gpus, (std::vector<GpuGres>{{"a100", 4}})) << n.name;
    EXPECT_EQ(n.address, "127.0.0.1");
    EXPECT_EQ(n.Condition(), NodeCondition::kReady) << n.name << " " << n.state;
  }
  EXPECT_EQ((*nodes)[0].name, "g1");
  EXPECT_EQ((*nodes)[1].name, "g2");
}

// A 2-node gang pinned to [g2, g1]: Slurm runs it exactly there, squeue and slurmrestd agree with what was
// asked, and the four ranks get consistent env:// variables with rank 0 on g2 (the placement's first node,
// though Slurm numbers g1 first).
TEST_F(SlurmClusterTest, PinnedGangRunsWhereItWasPlacedWithConsistentRanks) {
  GangJob j = Gang("job-rank", {"/bin/sh", "-c",
                                "echo \"$SLURMD_NODENAME $RANK $LOCAL_RANK $NODE_RANK $WORLD_SIZE $MASTER_ADDR "
                                "$MASTER_PORT\" > rank-$RANK; sleep 3"});
  auto id = rest_->Submit(j);
  ASSERT_TRUE(id.ok()) << id.status();
  const SlurmJob running = WaitFor(*id, [](const SlurmJob& s) { return s.state == "RUNNING"; });
  EXPECT_EQ(running.name, "gpugeek-job-rank-e1");
  EXPECT_EQ(running.nodes, "g[1-2]");
  EXPECT_EQ(running.comment, "gpugeek:job-rank:1");
  EXPECT_EQ(Shell("squeue -h -j " + std::to_string(*id) + " -o '%j %T %N %b %D'"),
            "gpugeek-job-rank-e1 RUNNING g[1-2] gres:gpu:a100:4 2");
  const SlurmJob done = WaitFor(*id, [](const SlurmJob& s) { return s.state == "COMPLETED"; });
  EXPECT_EQ(done.exit_code, 0);
  const std::string expect[] = {"g2 0 0 0 4 127.0.0.1 29500", "g2 1 1 0 4 127.0.0.1 29500",
                                "g1 2 0 1 4 127.0.0.1 29500", "g1 3 1 1 4 127.0.0.1 29500"};
  for (int r = 0; r < 4; ++r) {
    auto line = ReadFileBounded(j.workdir + "/rank-" + std::to_string(r), 4096, "rank file");
    ASSERT_TRUE(line.ok()) << line.status();
    EXPECT_EQ(*line, expect[r] + "\n");
  }
}

TEST_F(SlurmClusterTest, RefusalsCarrySlurmsReasonAndCancelEndsTheJob) {
  GangJob greedy = Gang("job-greedy", {"/bin/true"});
  greedy.gpus_per_node = 5;  // the nodes have 4
  auto refused = rest_->Submit(greedy);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_NE(refused.status().message().find("Requested node configuration is not available"), std::string::npos)
      << refused.status();
  GangJob nowhere = Gang("job-nowhere", {"/bin/true"});
  nowhere.nodes = {"g9"};
  auto unknown = rest_->Submit(nowhere);
  ASSERT_EQ(unknown.status().code(), absl::StatusCode::kFailedPrecondition) << unknown.status();
  EXPECT_NE(unknown.status().message().find("Invalid node name specified"), std::string::npos) << unknown.status();

  auto id = rest_->Submit(Gang("job-cancel", {"/bin/sleep", "60"}));
  ASSERT_TRUE(id.ok()) << id.status();
  WaitFor(*id, [](const SlurmJob& s) { return s.state == "RUNNING"; });
  ASSERT_TRUE(rest_->Cancel(*id).ok());
  EXPECT_EQ(WaitFor(*id, [](const SlurmJob& s) { return s.state == "CANCELLED"; }).state, "CANCELLED");
  EXPECT_EQ(rest_->Job(999999).status().code(), absl::StatusCode::kNotFound);
}

// A node set DOWN is seen through slurmrestd within 5 s, and its job ends as a node failure (not requeued by
// Slurm: gpugeek re-places it).
TEST_F(SlurmClusterTest, NodeDownIsSeenAndItsJobIsNotRequeuedBySlurm) {
  auto id = rest_->Submit(Gang("job-down", {"/bin/sleep", "60"}));
  ASSERT_TRUE(id.ok()) << id.status();
  WaitFor(*id, [](const SlurmJob& s) { return s.state == "RUNNING"; });
  const auto t0 = std::chrono::steady_clock::now();
  Shell("scontrol update nodename=g2 state=down reason=gpugeek-test");
  bool seen = false;
  while (!seen && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    auto nodes = rest_->Nodes();
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    for (const SlurmNode& n : *nodes) seen |= n.name == "g2" && n.Condition() == NodeCondition::kDown;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(seen);
  const SlurmJob ended = WaitFor(
      *id, [](const SlurmJob& s) { return s.state != "RUNNING" && s.state != "PENDING" && s.state != "COMPLETING"; });
  EXPECT_EQ(ended.state, "NODE_FAIL") << ended.reason;
  // Back in service (slurm.conf ReturnToService=2 may bring it back by itself when slurmd answers).
  bool ready = false;
  for (int i = 0; i < 100 && !ready; ++i) {
    auto nodes = rest_->Nodes();
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    for (const SlurmNode& n : *nodes) ready |= n.name == "g2" && n.Condition() == NodeCondition::kReady;
    if (!ready) {
      Shell("scontrol update nodename=g2 state=resume 2>/dev/null");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  EXPECT_TRUE(ready);
  // Still ended: Slurm did not requeue it.
  EXPECT_EQ(WaitFor(
                *id, [](const SlurmJob& s) { return s.state == "NODE_FAIL"; }, 2)
                .state,
            "NODE_FAIL");
}

}  // namespace
}  // namespace gpugeek::backends::slurm
