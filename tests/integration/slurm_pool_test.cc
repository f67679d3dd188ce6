// One pool of agent nodes and a Slurm cluster: a real `gpugeek server`, two emulated agents (1 x H100 each) and
// `gpugeek slurm-bridge` for a real Slurm 22.05 cluster of two nodes with 4 fake A100 GRES each
// (scripts/slurm-test-cluster.sh, the CTest fixture `slurm`). Jobs land on both kinds; a 2-node gang on Slurm
// gets consistent ranks and master address; `squeue` agrees with `gpugeek jobs`; a Slurm node set DOWN is a
// node failure and its job is placed again.

#include <cstdio>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "backends/slurm/testing/cluster_env.h"
#include "common/testing/services.h"
#include "pool_fixture.h"

namespace gpugeek::testing {
namespace {

using std::chrono::steady_clock;

using backends::slurm::testing::ClusterEnv;
using backends::slurm::testing::Shell;

class SlurmPoolTest : public PoolFixture {
 protected:
  void SetUp() override {
    env_ = ClusterEnv();
    if (env_["SLURMRESTD_URL"].empty()) {
      if (InCi()) {
        FAIL() << "no Slurm cluster (scripts/slurm-test-cluster.sh up failed)";
      }
      GTEST_SKIP() << "no Slurm cluster here (needs root and Debian's Slurm packages)";
    }
    ::setenv("SLURM_CONF", env_["SLURM_CONF"].c_str(), 1);
    ::setenv("SLURMRESTD_TOKEN", env_["SLURMRESTD_TOKEN"].c_str(), 1);
    const std::string agent_url = StartPool("slurm_pool", 4);
    ASSERT_FALSE(agent_url.empty());
    StartAgent(agent_url, "a1");
    StartAgent(agent_url, "a2");
    job_root_ = env_["SLURM_JOB_DIR"] + "/pool-" + std::to_string(::getpid());
    agent_url_ = agent_url;
    StartBridge();
    ASSERT_TRUE(WaitForNodes(4)) << bridge_->output();
  }
  // `gpugeek slurm-bridge` for the cluster, its state in dir_/bridge (kept across restarts).
  void StartBridge() {
    bridge_ = std::make_unique<subprocess::Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "slurm-bridge", "--server", agent_url_, "--ca-file", ca_, "--cluster",
                                 "hpc", "--slurmrestd", env_["SLURMRESTD_URL"], "--slurm-user", env_["SLURMRESTD_USER"],
                                 "--gpu-model", "a100=A100-SXM-80GB", "--job-root", job_root_, "--state-dir",
                                 (dir_ / "bridge").string()},
        dir_ / ("bridge-" + std::to_string(++bridges_) + ".log"));
  }
  // squeue's `format` line of the job named `name` ("" when Slurm lists none).
  std::string Squeue(const std::string& name, const std::string& format) {
    return Shell(fmt::format("squeue -h -n {} -o '{}'", name, format));
  }
  void TearDown() override {
    bridge_.reset();  // SIGTERM: cancels the Slurm jobs it started
    Shell("scancel --quiet --name-prefix=gpugeek- 2>/dev/null; scancel --quiet -u root 2>/dev/null");
    // Restarts a slurmd a test killed (slurm-up.sh starts only what is not running), then resumes the nodes.
    Shell(fmt::format("bash {}/infra/slurm-up.sh {} >/dev/null 2>&1", GPUGEEK_SHARED_DIR, env_["SLURM_STATE_DIR"]));
    for (const char* n : {"g1", "g2"}) Shell(fmt::format("scontrol update nodename={} state=resume 2>/dev/null", n));
    PoolFixture::TearDown();
    std::error_code ec;
    fs::remove_all(job_root_, ec);
  }

  std::string SubmitSpec(const std::string& spec) {
    auto job = Client().Post("/v1/jobs", {{"spec_yaml", spec}});
    EXPECT_TRUE(job.ok()) << job.status();
    return job.ok() ? (*job)["id"].get<std::string>() : "";
  }
  nlohmann::json Job(const std::string& id) {
    auto j = Client().Get("/v1/jobs/" + id);
    return j.ok() ? *j : nlohmann::json::object();
  }
  nlohmann::json WaitFor(const std::string& id, const std::function<bool(const nlohmann::json&)>& done,
                         std::chrono::seconds limit = std::chrono::seconds(60)) {
    nlohmann::json job;
    for (auto end = steady_clock::now() + limit; steady_clock::now() < end;) {
      job = Job(id);
      if (done(job)) return job;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << id << ": " << job.dump() << "\nbridge:\n" << bridge_->output();
    return job;
  }
  static std::vector<std::string> Members(const nlohmann::json& job) {
    std::vector<std::string> nodes;
    if (job.contains("allocation") && job["allocation"].is_object()) {
      for (const auto& m : job["allocation"]["members"]) nodes.push_back(m["node"]);
    }
    return nodes;
  }

  std::map<std::string, std::string> env_;
  std::string job_root_, agent_url_;
  int bridges_ = 0;
  std::unique_ptr<subprocess::Process> bridge_;
};

TEST_F(SlurmPoolTest, JobsLandOnBothKindsAndAGangOnSlurmHasConsistentRanks) {
  auto node = Client().Get("/v1/nodes/hpc-g1");
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ((*node)["region"], "slurm-hpc");

  const std::string on_agent = SubmitSpec("name: on-agent\nresources: {accelerators: H100-SXM-80GB:1}\nrun: echo hi\n");
  const std::string on_slurm =
      SubmitSpec("name: on-slurm\nresources: {accelerators: A100-SXM-80GB:4}\nrun: echo \"on $SLURMD_NODENAME\"\n");
  const std::string out = job_root_ + "/ranks";
  fs::create_directories(out);
  fs::permissions(out, fs::perms::all);
  const std::string gang =
      SubmitSpec(fmt::format("name: gang\nresources: {{accelerators: A100-SXM-80GB:4}}\nnum_nodes: 2\n"
                             "run: echo \"$SLURMD_NODENAME $RANK $WORLD_SIZE $MASTER_ADDR $GPUGEEK_NODE_RANK "
                             "$GPUGEEK_NUM_NODES\" > {}/rank-$RANK\n",
                             out));
  for (const std::string& id : {on_agent, on_slurm, gang}) {
    EXPECT_EQ(WaitEnded(id)["state"], "SUCCEEDED") << id << "\n" << bridge_->output();
  }
  EXPECT_TRUE(Members(Job(on_agent))[0] == "a1" || Members(Job(on_agent))[0] == "a2");
  EXPECT_EQ(Members(Job(on_slurm))[0].rfind("hpc-g", 0), 0u);
  EXPECT_NE(Log(on_slurm).find("on g"), std::string::npos) << Log(on_slurm);
  const std::vector<std::string> members = Members(Job(gang));
  ASSERT_EQ(members.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    std::ifstream in(fmt::format("{}/rank-{}", out, rank));
    std::string line;
    std::getline(in, line);
    // Rank r runs on the member of node rank r; every rank names rank 0's node's address as master.
    EXPECT_EQ(line, fmt::format("{} {} 2 127.0.0.1 {} 2", members[rank].substr(4), rank, rank)) << rank;
  }
}

TEST_F(SlurmPoolTest, SqueueAgreesWithGpugeekJobsAndACancelReachesSlurm) {
  const std::string gang =
      SubmitSpec("name: long-gang\nresources: {accelerators: A100-SXM-80GB:4}\nnum_nodes: 2\nrun: sleep 120\n");
  const nlohmann::json running =
      WaitFor(gang, [](const nlohmann::json& j) { return j.value("state", "") == "RUNNING"; });
  const std::string name = fmt::format("gpugeek-{}-e{}", gang, running.value("epoch", 0));
  std::string squeue;
  for (int i = 0; i < 100 && squeue.find("RUNNING") == std::string::npos; ++i) {
    squeue = Squeue(name, "%j %T %N");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(squeue, name + " RUNNING g[1-2]");
  std::vector<std::string> members = Members(running);
  std::sort(members.begin(), members.end());
  EXPECT_EQ(members, (std::vector<std::string>{"hpc-g1", "hpc-g2"}));
  auto [code, jobs] = Cli({"jobs"});
  EXPECT_EQ(code, 0);
  EXPECT_NE(jobs.find("RUNNING"), std::string::npos) << jobs;

  ASSERT_TRUE(Client().Post("/v1/jobs/" + gang + "/cancel", nlohmann::json::object()).ok());
  EXPECT_EQ(WaitEnded(gang)["state"], "CANCELLED");
  // SIGTERM first (the job's checkpoint chance), then gone from Slurm.
  for (int i = 0; i < 100 && !Squeue(name, "%i").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Squeue(name, "%i"), "");
}

TEST_F(SlurmPoolTest, ASlurmNodeDownIsANodeFailureAndTheJobIsPlacedAgain) {
  const std::string job = SubmitSpec("name: survivor\nresources: {accelerators: A100-SXM-80GB:4}\nrun: sleep 300\n");
  const nlohmann::json first = WaitFor(job, [](const nlohmann::json& j) { return j.value("state", "") == "RUNNING"; });
  const std::string lost = Members(first).at(0);
  const std::string other = lost == "hpc-g1" ? "hpc-g2" : "hpc-g1";
  const auto t0 = steady_clock::now();
  // The node's slurmd dies and Slurm marks the node DOWN (a real node failure: with its slurmd alive,
  // ReturnToService=2 would bring it straight back).
  const std::string slurm_node = lost.substr(4);
  Shell(fmt::format("kill -9 $(cat {}/run/slurmd-{}.pid)", env_["SLURM_STATE_DIR"], slurm_node));
  Shell(fmt::format("scontrol update nodename={} state=down reason=gpugeek-test", slurm_node));
  // Seen: the node leaves `ready` (suspect: no new placements), then the job runs again on the other node.
  double seen_s = -1;
  for (auto end = t0 + std::chrono::seconds(30); steady_clock::now() < end && seen_s < 0;) {
    auto n = Client().Get("/v1/nodes/" + lost);
    if (n.ok() && (*n)["state"] != "ready") seen_s = std::chrono::duration<double>(steady_clock::now() - t0).count();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GE(seen_s, 0) << bridge_->output();
  EXPECT_LE(seen_s, 10.0);  // a bound for a loaded machine; the figure is printed below
  const nlohmann::json again = WaitFor(job, [&](const nlohmann::json& j) {
    return j.value("state", "") == "RUNNING" && j.value("epoch", 0) > first.value("epoch", 0) &&
           Members(j).size() == 1 && Members(j)[0] == other;
  });
  const double replaced_s = std::chrono::duration<double>(steady_clock::now() - t0).count();
  fmt::print("Slurm node {} DOWN: not ready in {:.2f} s, the job RUNNING on {} in {:.2f} s\n", lost, seen_s, other,
             replaced_s);
  // Slurm may hold the new job PENDING for a scheduling cycle (gpugeek counts a member placed from its submit).
  const std::string name = fmt::format("gpugeek-{}-e{}", job, again.value("epoch", 0));
  std::string squeue;
  for (int i = 0; i < 100 && squeue != "RUNNING " + other.substr(4); ++i) {
    squeue = Squeue(name, "%T %N");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(squeue, "RUNNING " + other.substr(4));
}

// The workload's own exit status and a signal come back as such (Slurm keeps a wait status: exit 3 is 768).
TEST_F(SlurmPoolTest, ExitStatusesComeBackAsTheWorkloadsOwn) {
  const std::string three = SubmitSpec("name: three\nresources: {accelerators: A100-SXM-80GB:4}\nrun: exit 3\n");
  const nlohmann::json ended = WaitEnded(three);
  EXPECT_EQ(ended["state"], "FAILED") << bridge_->output();
  EXPECT_EQ(ended["exit_code"], 3) << ended.dump();
}

// A bridge SIGKILLed and started again is the same agent reconnecting: it adopts the Slurm job it started
// (found by its comment), runs nothing twice, and still stops it when the job is cancelled.
TEST_F(SlurmPoolTest, ARestartedBridgeAdoptsItsSlurmJobsAndRunsNothingTwice) {
  const std::string job = SubmitSpec("name: kept\nresources: {accelerators: A100-SXM-80GB:4}\nrun: sleep 300\n");
  const nlohmann::json running =
      WaitFor(job, [](const nlohmann::json& j) { return j.value("state", "") == "RUNNING"; });
  const std::string name = fmt::format("gpugeek-{}-e{}", job, running.value("epoch", 0));
  std::string slurm_id;
  for (int i = 0; i < 100 && slurm_id.empty(); ++i) {
    slurm_id = Squeue(name, "%i");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(slurm_id.empty());
  kill(bridge_->pid(), SIGKILL);
  bridge_->Stop();
  StartBridge();
  std::this_thread::sleep_for(std::chrono::seconds(6));  // past the nodes' lease: a lost node would be re-placed
  const nlohmann::json later = Job(job);
  EXPECT_EQ(later["state"], "RUNNING") << later.dump() << bridge_->output();
  EXPECT_EQ(later["epoch"], running["epoch"]);
  EXPECT_EQ(Shell("squeue -h -o '%i %j'"), slurm_id + " " + name);  // the same Slurm job, and only it
  EXPECT_NE(bridge_->output().find("adopted Slurm job " + slurm_id), std::string::npos) << bridge_->output();
  ASSERT_TRUE(Client().Post("/v1/jobs/" + job + "/cancel", nlohmann::json::object()).ok());
  EXPECT_EQ(WaitEnded(job)["state"], "CANCELLED");
  for (int i = 0; i < 100 && !Squeue(name, "%i").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(Squeue(name, "%i"), "");
}

}  // namespace
}  // namespace gpugeek::testing
