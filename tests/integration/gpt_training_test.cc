// The main job for real: examples/gpt submitted from its workdir with `launcher: torch` to a pool of two
// emulated nodes (two `gpugeek agent` processes, 2 GPUs each), so 4 PyTorch ranks train with DDP over
// gloo on the CPU. The loss falls; a rank killed mid-run fails its member, the job's retry policy
// restarts the whole group on both nodes, and it resumes from its last checkpoint.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "common/testing/process.h"
#include "http/client.h"
#include "pool_fixture.h"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using subprocess::Process;

std::string FileText(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class GptTraining : public testing::PoolFixture {
 protected:
  // Two emulated nodes of 2 GPUs; `flags` per node (capacity type, price, region) after the common ones.
  virtual std::vector<std::pair<std::string, std::vector<std::string>>> Nodes() const {
    return {{"gpt-a", {}}, {"gpt-b", {}}};
  }
  // More flags of `gpugeek server`.
  virtual std::vector<std::string> ServerArgs() const { return {}; }
  void SetUp() override {
    MakeScratch("gpt_e2e");
    const std::string agent_url = StartServer(static_cast<int>(Nodes().size()), ServerArgs());
    ASSERT_FALSE(agent_url.empty());
    for (const auto& [node, flags] : Nodes()) {
      std::vector<std::string> argv{
          GPUGEEK_BINARY, "agent", "--server",  agent_url,         "--ca-file",  ca_,
          "--name",       node,    "--emulate", "2xA100-SXM-80GB", "--data-dir", (dir_ / node).string()};
      argv.insert(argv.end(), flags.begin(), flags.end());
      agents_.push_back(std::make_unique<Process>(argv, dir_ / (node + ".log")));
    }
    ASSERT_TRUE(WaitForNodes(Nodes().size()));
    // Both nodes are this machine: the checkpoint folder stands for a shared file system. The
    // members run as the tenant's own unprivileged user, so it must be writable by them.
    out_ = dir_ / "ckpt";
    fs::create_directories(out_);
    fs::permissions(out_, fs::perms::all);
  }

  // Submits examples/gpt from its workdir: `nodes` nodes x 2 GPUs, one rank per GPU; `extra`: more spec
  // lines (each ending in a newline).
  std::string Submit(int steps, int ckpt_every, int nodes = 2, const std::string& capacity = "",
                     const std::string& extra = "") {
    const fs::path spec = dir_ / "gpt.yaml";
    std::ofstream(spec) << "name: gpt\n"
                        << "num_nodes: " << nodes << "\n"
                        << extra << "resources: {accelerators: A100-SXM-80GB:2"
                        << (capacity.empty() ? "" : ", capacity: " + capacity) << "}\n"
                        << "workdir: " << GPUGEEK_SOURCE_DIR << "/examples/gpt\n"
                        << "launcher: torch\n"
                        << "retry: {on: [error], limit: 2, backoff: 1s}\n"
                        << "checkpoint: {dir: " << out_.string() << "}\n"
                        << "run: /usr/bin/python3 train.py --steps " << steps
                        << " --batch-size 4 --seq-len 32 --log-every 5 --ckpt-every " << ckpt_every << "\n";
    auto [code, out] = Cli({"submit", spec.string()});
    EXPECT_EQ(code, 0) << out;
    std::smatch m;
    static const std::regex submitted("submitted (\\S+) ");
    return std::regex_search(out, m, submitted) ? m[1].str() : "";
  }
  std::string Diagnostics() {
    std::string all = server_->output();
    for (const auto& a : agents_) all += "\n---\n" + a->output();
    return all;
  }

  fs::path out_;
};

// 4 ranks over 2 nodes train 60 steps: the loss falls by at least 30 % (measured 51 % at these settings
// outside the platform, examples/gpt/tests/test_ddp_train.py), every rank took part.
TEST_F(GptTraining, FourRanksOnTwoNodesTrainAndTheLossFalls) {
  const std::string id = Submit(60, 20);
  ASSERT_FALSE(id.empty());
  const nlohmann::json job = WaitEnded(id, std::chrono::seconds(240));
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << "\n" << Log(id) << Diagnostics();
  const nlohmann::json summary = nlohmann::json::parse(FileText(out_ / "summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << FileText(out_ / "summary.json");
  EXPECT_EQ(summary["world_size"], 4);
  EXPECT_EQ(summary["steps"], 60);
  EXPECT_LT(summary["last_loss"].get<double>(), 0.7 * summary["first_loss"].get<double>()) << summary.dump();
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(fs::exists(out_ / ("samples-rank" + std::to_string(rank) + ".txt"))) << rank;
  }
  const std::string log = Log(id);
  EXPECT_TRUE(absl::StrContains(log, "world_size=4")) << log;
  EXPECT_TRUE(absl::StrContains(log, "done steps=60")) << log;
  // Each checkpoint was reported (docs/checkpointing.md); the last one, at the end, is what the job holds.
  EXPECT_EQ(job["checkpoint"]["step"], 60) << job.dump(2);
}

// A planned move: the node of a running one-node job is drained. Its ranks get SIGTERM, finish the step in
// flight, write and report a checkpoint at that step (not one of the every-50 ones) and exit; the job runs
// again on the other node and resumes at exactly that step: nothing trained is lost.
TEST_F(GptTraining, ADrainedJobCheckpointsOnSigtermAndResumesElsewhereLosingNoStep) {
  const std::string id = Submit(400, 50, /*nodes=*/1);
  ASSERT_FALSE(id.empty());
  std::string node;
  for (int i = 0; i < 1800; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    if (!std::regex_search(Log(id), std::regex("step=(1[5-9]|[2-9][0-9]) "))) continue;
    auto job = Client().Get("/v1/jobs/" + id);
    ASSERT_TRUE(job.ok()) << job.status();
    node = (*job)["allocation"]["members"][0]["node"].get<std::string>();
    break;
  }
  ASSERT_FALSE(node.empty()) << Log(id) << Diagnostics();
  auto [code, out] = Cli({"drain", node});
  ASSERT_EQ(code, 0) << out;
  const nlohmann::json job = WaitEnded(id, std::chrono::seconds(300));
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << "\n" << Log(id) << Diagnostics();
  EXPECT_EQ(job["epoch"], 2) << job.dump(2);
  EXPECT_NE(job["allocation"]["members"][0]["node"], node);
  // The first placement's log: where it stopped and the checkpoint it wrote there.
  const std::string before = Cli({"logs", id, "--epoch", "1"}).second;
  std::smatch stopped;
  ASSERT_TRUE(std::regex_search(before, stopped, std::regex("stopped step=([0-9]+) on SIGTERM")))
      << before << Diagnostics();
  const int at = std::stoi(stopped[1]);
  EXPECT_TRUE(absl::StrContains(before, "checkpoint step=" + std::to_string(at) + " ")) << before;
  const std::string after = Log(id);
  EXPECT_TRUE(absl::StrContains(after, "resumed step=" + std::to_string(at) + " ")) << after;
  EXPECT_TRUE(absl::StrContains(after, "done steps=400")) << after;
  EXPECT_EQ(job["checkpoint"]["step"], 400) << job.dump(2);
}

// SIGKILL of one rank after a checkpoint: its node's launcher stops the others and fails the member;
// retry.on: [error] restarts the group (epoch 2) on both nodes; it resumes from the checkpoint.
TEST_F(GptTraining, AKilledRankRestartsTheGroupFromTheCheckpoint) {
  const std::string id = Submit(80, 10);
  ASSERT_FALSE(id.empty());
  // Wait for the first checkpoint, then kill rank 3 (node gpt-b, local rank 1) by its environment.
  pid_t victim = 0;
  for (int i = 0; i < 1800 && victim == 0; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
    if (!absl::StrContains(Log(id), "checkpoint step=10")) continue;
    for (const auto& p : fs::directory_iterator("/proc")) {
      const std::string environ = FileText(p.path() / "environ");
      const std::string cmdline = FileText(p.path() / "cmdline");
      if (absl::StrContains(cmdline, "train.py") && absl::StrContains(environ, std::string("RANK=3\0", 7)) &&
          absl::StrContains(environ, "GPUGEEK_JOB_ID=" + id)) {
        victim = static_cast<pid_t>(std::stoi(p.path().filename().string()));
      }
    }
  }
  ASSERT_GT(victim, 0) << Log(id);
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  const nlohmann::json job = WaitEnded(id, std::chrono::seconds(300));
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << "\n" << Log(id) << Diagnostics();
  EXPECT_EQ(job["retries"], nlohmann::json({{"error", 1}}));
  EXPECT_GE(job["epoch"].get<int>(), 2);
  const std::string log = Log(id);  // the latest epoch's rank 0
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("resumed step=([0-9]+)"))) << log;
  const int resumed = std::stoi(m[1]);
  EXPECT_GE(resumed, 10) << log;  // never back past the checkpoint before the kill
  EXPECT_EQ(resumed % 10, 0) << log;
  EXPECT_TRUE(absl::StrContains(log, "done steps=80")) << log;
  EXPECT_EQ(job["checkpoint"]["step"], 80) << job.dump(2);
  auto events = Client().Get("/v1/events?job=" + id);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(absl::StrContains(events->dump(), "retry 1 of 2")) << events->dump(2);
}

// Spot capacity end to end: a spot node at 0.80 per GPU-hour (region r1) and an on-demand one at 2.50 (r2).
// The GPT example asks for [spot, on-demand] and runs on spot; a reclaim notice with a 10 s deadline makes
// it write and report a checkpoint at the step it is on before the deadline, and it resumes on the
// on-demand node at exactly that step (0 steps lost). The cost view shows both lines and the saving.
class SpotGpt : public GptTraining {
 protected:
  std::vector<std::pair<std::string, std::vector<std::string>>> Nodes() const override {
    return {{"spot-a", {"--capacity", "spot", "--region", "r1", "--gpu-hour-price", "0.80"}},
            {"od-b", {"--capacity", "on-demand", "--region", "r2", "--gpu-hour-price", "2.50"}}};
  }
};

TEST_F(SpotGpt, AReclaimedJobCheckpointsBeforeTheDeadlineAndResumesOnDemandLosingNoStep) {
  const std::string id = Submit(300, 50, /*nodes=*/1, "[spot, on-demand]");
  ASSERT_FALSE(id.empty());
  for (int i = 0; i < 1800 && !std::regex_search(Log(id), std::regex("step=(1[5-9]|[2-9][0-9]) ")); ++i) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  auto placed = Client().Get("/v1/jobs/" + id);
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_EQ((*placed)["allocation"]["members"][0]["node"], "spot-a") << placed->dump(2) << Diagnostics();
  const auto notice = std::chrono::steady_clock::now();
  auto [code, out] = Cli({"reclaim", "spot-a", "--deadline", "10s"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "node spot-a: cordoned, reclaimed in 10 s (moving: " + id + ")")) << out;
  // The checkpoint the SIGTERM asked for is reported before the deadline.
  int reported = -1;
  while (std::chrono::steady_clock::now() - notice < std::chrono::seconds(10)) {
    auto job = Client().Get("/v1/jobs/" + id);
    if (job.ok() && (*job)["checkpoint"].is_object()) {
      reported = (*job)["checkpoint"]["step"].get<int>();
      if (reported % 50 != 0) break;  // the just-in-time one, not a periodic one
      // Placed again: epoch 1 stopped, and its last checkpoint (still the job's until epoch 2 makes one, a
      // second after it starts) is the one it stopped at, even when that fell on a periodic step.
      if ((*job)["epoch"] != 1) break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  const auto within = std::chrono::steady_clock::now() - notice;
  EXPECT_LT(within, std::chrono::seconds(10)) << "reported step " << reported << "\n" << Diagnostics();
  const nlohmann::json job = WaitEnded(id, std::chrono::seconds(300));
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << "\n" << Log(id) << Diagnostics();
  EXPECT_EQ(job["allocation"]["members"][0]["node"], "od-b");
  const std::string before = Cli({"logs", id, "--epoch", "1"}).second;
  std::smatch stopped;
  ASSERT_TRUE(std::regex_search(before, stopped, std::regex("stopped step=([0-9]+) on SIGTERM"))) << before;
  EXPECT_EQ(std::stoi(stopped[1]), reported) << before;
  const std::string after = Log(id);
  EXPECT_TRUE(absl::StrContains(after, "resumed step=" + std::to_string(reported) + " ")) << after;
  EXPECT_TRUE(absl::StrContains(after, "done steps=300")) << after;
  // The cost view: spot at 0.80 against on-demand 2.50 saved 1.70 per GPU-hour of it.
  const nlohmann::json& usage = job["usage"];
  ASSERT_EQ(usage["lines"].size(), 2u) << usage.dump(2);
  EXPECT_EQ(usage["lines"][0]["capacity_type"], "on-demand");
  EXPECT_EQ(usage["lines"][1]["capacity_type"], "spot");
  const nlohmann::json& spot = usage["lines"][1];
  EXPECT_GT(spot["gpu_hours"].get<double>(), 0.0);
  EXPECT_NEAR(spot["cost_micros"].get<double>(), spot["gpu_hours"].get<double>() * 800'000, 2.0);
  EXPECT_NEAR(spot["on_demand_micros"].get<double>(), spot["gpu_hours"].get<double>() * 2'500'000, 2.0);
  EXPECT_EQ(usage["saving_micros"].get<int64_t>(),
            spot["on_demand_micros"].get<int64_t>() - spot["cost_micros"].get<int64_t>());
  const std::string shown = Cli({"job", id}).second;
  EXPECT_TRUE(std::regex_search(shown, std::regex("usage: +[0-9.]+ GPU-hours, cost [0-9.]+ \\(on-demand [0-9.]+; "
                                                  "saved [0-9.]+\\)")))
      << shown;
  EXPECT_TRUE(absl::StrContains(shown, "checkpoint: step 300")) << shown;
  std::cout << "[ spot ] just-in-time checkpoint at step " << reported << " reported "
            << std::chrono::duration_cast<std::chrono::milliseconds>(within).count() << " ms after the 10 s notice\n"
            << shown;
}

// An elastic gang of the GPT example (`elastic: {min_nodes: 1}`, 2 nodes x 2 ranks) on three nodes: the agent
// of rank 1's node is SIGKILLed after a checkpoint. Its member is stopped by its shim; rank 0's ranks, whose
// collectives broke, are held with their GPUs; once the node is down rank 1 is placed on the spare node and
// all four ranks start again at epoch 2 (rank 0 on the same node and GPUs), resume from the last checkpoint
// (never more than one interval back) and finish.
class ElasticGpt : public GptTraining {
 protected:
  std::vector<std::pair<std::string, std::vector<std::string>>> Nodes() const override {
    return {{"gpt-a", {}}, {"gpt-b", {}}, {"gpt-c", {}}};
  }
};

TEST_F(ElasticGpt, ALostNodesRanksAreReplacedAndTheSurvivorsResumeOnTheirGpus) {
  const std::string id = Submit(80, 10, 2, "", "elastic: {min_nodes: 1}\n");
  ASSERT_FALSE(id.empty());
  for (int i = 0; i < 1800 && !absl::StrContains(Log(id), "checkpoint step=20 "); ++i) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  auto before = Client().Get("/v1/jobs/" + id);
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_TRUE(absl::StrContains(Log(id), "checkpoint step=20 ")) << Log(id) << Diagnostics();
  const nlohmann::json members = (*before)["allocation"]["members"];
  const std::string survivor = members[0]["node"], lost = members[1]["node"];
  const auto killed = std::chrono::steady_clock::now();
  for (size_t i = 0; i < Nodes().size(); ++i) {
    if (Nodes()[i].first == lost) {
      ASSERT_EQ(::kill(agents_[i]->pid(), SIGKILL), 0);
      agents_[i]->Stop();
    }
  }
  nlohmann::json job;
  for (int i = 0; i < 600; ++i) {
    auto j = Client().Get("/v1/jobs/" + id);
    if (j.ok() && (*j)["epoch"] == 2 && (*j)["state"] == "RUNNING") {
      job = *j;
      break;
    }
    std::this_thread::sleep_for(milliseconds(100));
  }
  const auto running = std::chrono::steady_clock::now();
  ASSERT_FALSE(job.is_null()) << Log(id) << Diagnostics();
  EXPECT_EQ(job["allocation"]["members"][0]["node"], survivor);
  EXPECT_EQ(job["allocation"]["members"][0]["gpu_uuids"], members[0]["gpu_uuids"]);
  EXPECT_NE(job["allocation"]["members"][1]["node"], lost);
  EXPECT_NE(job["allocation"]["members"][1]["node"], survivor);
  job = WaitEnded(id, std::chrono::seconds(300));
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump(2) << "\n" << Log(id) << Diagnostics();
  EXPECT_EQ(job["epoch"], 2) << job.dump(2);
  EXPECT_EQ(job["retries"], nlohmann::json({{"node-failure", 1}}));
  const std::string log = Log(id);  // epoch 2's rank 0
  EXPECT_TRUE(absl::StrContains(log, "world_size=4")) << log;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex("resumed step=([0-9]+)"))) << log;
  const int resumed = std::stoi(m[1]);
  EXPECT_GE(resumed, 20) << log;  // never back past the checkpoint before the kill
  EXPECT_TRUE(absl::StrContains(log, "done steps=80")) << log;
  auto events = Client().Get("/v1/events?job=" + id);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(absl::StrContains(events->dump(), "re-formed (elastic): rank 1 on")) << events->dump(2);
  std::cout << "[ elastic ] kill -> RUNNING at epoch 2 in "
            << std::chrono::duration_cast<milliseconds>(running - killed).count() << " ms; resumed at step " << resumed
            << "\n";
}

// Budgets end to end (docs/billing.md): the default tenant's trial credit is 0.06; its node costs 3.60 per
// GPU-hour, so the GPT example's 2 GPUs spend 0.002 a second. A short run succeeds and is charged exactly
// its metered usage; a long one is stopped at the budget (SIGTERM: it writes and reports its checkpoint); the
// next submission is refused with 402 naming the balance.
class BudgetGpt : public GptTraining {
 protected:
  std::vector<std::pair<std::string, std::vector<std::string>>> Nodes() const override {
    return {{"paid-a", {"--gpu-hour-price", "3.60"}}};
  }
  std::vector<std::string> ServerArgs() const override { return {"--trial-credit", "0.06", "--enforce-budgets"}; }
};

TEST_F(BudgetGpt, JobsRunUntilTheCreditIsSpentThenTheRunningOneCheckpointsAndStopsAndTheNextIsRefused) {
  auto balance = Client().Get("/v1/balance");
  ASSERT_TRUE(balance.ok()) << balance.status();
  ASSERT_EQ((*balance)["available_micros"], 60'000) << balance->dump(2);

  const std::string first = Submit(20, 10, /*nodes=*/1);
  const nlohmann::json done = WaitEnded(first, std::chrono::seconds(120));
  ASSERT_EQ(done.value("state", ""), "SUCCEEDED") << done.dump(2) << Diagnostics();
  auto ledger = Client().Get("/v1/ledger");
  ASSERT_TRUE(ledger.ok()) << ledger.status();
  const nlohmann::json& entries = (*ledger)["entries"];
  ASSERT_EQ(entries.size(), 2u) << ledger->dump(2);
  EXPECT_EQ(entries[0]["id"], "grant/default/trial");
  EXPECT_EQ(entries[1]["id"], "usage/" + first + "/e1/r0");
  EXPECT_NEAR(entries[1]["gpu_milli_seconds"].get<double>() / 3.6e6,
              done["usage"]["lines"][0]["gpu_hours"].get<double>(), 1e-9)
      << ledger->dump(2);
  // The usage view rounds each segment to the nearest micro-unit, the ledger down (carrying the rest).
  EXPECT_NEAR(-entries[1]["postings"][0]["micros"].get<double>(), done["usage"]["cost_micros"].get<double>(), 1.0);

  const std::string second = Submit(100000, 25, /*nodes=*/1);
  const nlohmann::json stopped = WaitEnded(second, std::chrono::seconds(180));
  ASSERT_EQ(stopped.value("state", ""), "CANCELLED") << stopped.dump(2) << Diagnostics();
  EXPECT_TRUE(absl::StartsWith(stopped.value("reason", ""), "budget: tenant 'default' has spent its credit and cash"))
      << stopped.dump(2);
  // The job is CANCELLED at once; its member stops within its grace and ships its last lines.
  const std::string log = WaitForLog(second, " on SIGTERM");
  std::smatch step;
  ASSERT_TRUE(std::regex_search(log, step, std::regex("stopped step=([0-9]+) on SIGTERM"))) << log;
  nlohmann::json job;
  for (int i = 0; i < 100; ++i) {
    auto j = Client().Get("/v1/jobs/" + second);
    if (j.ok()) job = *j;
    if (job["checkpoint"].is_object() && job["checkpoint"]["step"] == std::stoi(step[1])) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(job["checkpoint"]["step"], std::stoi(step[1])) << job.dump(2);
  // Charged up to the member's exit (reported with the agent's next beat): the credit is gone and the cash
  // at most the SIGTERM grace below zero.
  for (int i = 0; i < 100; ++i) {
    ledger = Client().Get("/v1/ledger");
    if (ledger.ok() && (*ledger)["entries"].size() == 3) break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_EQ((*ledger)["entries"].size(), 3u) << ledger->dump(2) << Diagnostics();
  EXPECT_EQ((*ledger)["entries"][2]["id"], "usage/" + second + "/e1/r0");
  balance = Client().Get("/v1/balance");
  ASSERT_TRUE(balance.ok());
  EXPECT_EQ((*balance)["credit_micros"], 0) << balance->dump(2) << Diagnostics();
  EXPECT_LE((*balance)["cash_micros"].get<int64_t>(), 0);
  EXPECT_GT((*balance)["cash_micros"].get<int64_t>(), -20'000) << "more than 10 s of 2 GPUs past the budget";

  const fs::path spec = dir_ / "gpt.yaml";
  auto [code, out] = Cli({"submit", spec.string()});
  EXPECT_NE(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "to spend (credit 0.0000, cash -")) << out;
  std::cout << "[ budget ] stopped at step " << step[1] << "; balance " << balance->dump() << "\n";
}

}  // namespace
}  // namespace gpugeek
