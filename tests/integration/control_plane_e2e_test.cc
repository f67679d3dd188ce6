// End to end over loopback, with real processes: one `gpugeek server`, four `gpugeek agent`s
// emulating different pools (8 x H100-SXM-80GB twice, 4 x A100-PCIe-80GB, 8 x MI300X), and the
// `gpugeek` CLI submitting the examples/ specs. Checks that each example lands on GPUs the planner
// says fit, the 2-node gang starts both members with consistent rank, world size and master, logs
// stream, cancel kills the whole process group, and a server restarted mid-run still has every job
// while the running one finishes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
#include "common/testing/process.h"
#include "http/client.h"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using subprocess::Process;
using subprocess::ReadFile;
using subprocess::RunCli;
using subprocess::UseAdminToken;
using subprocess::UseServerCa;

class EndToEnd : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("gpugeek_e2e_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    StartServer(0, 0);
    // Node names carry the pid: test processes running side by side share this host's cgroups.
    const std::string suffix = "-" + std::to_string(::getpid());
    const std::vector<std::pair<std::string, std::string>> pools = {{"node-h100" + suffix, "8xH100-SXM-80GB"},
                                                                    {"node-h100b" + suffix, "8xH100-SXM-80GB"},
                                                                    {"node-a100" + suffix, "4xA100-PCIe-80GB"},
                                                                    {"node-mi300x" + suffix, "8xMI300X"}};
    for (const auto& [name, spec] : pools) {
      agents_->push_back(std::make_unique<Process>(
          std::vector<std::string>{GPUGEEK_BINARY, "agent", "--server", *agent_url_, "--ca-file", *ca_file_, "--name",
                                   name, "--emulate", spec, "--data-dir", (*dir_ / name).string()},
          *dir_ / (name + ".log")));
    }
    // All four registered.
    for (int i = 0; i < 200; ++i) {
      auto nodes = Client().Get("/v1/nodes");
      if (nodes.ok() && (*nodes)["nodes"].size() == 4) return;
      std::this_thread::sleep_for(milliseconds(50));
    }
    FAIL() << "agents did not register";
  }
  static void TearDownTestSuite() {
    agents_->clear();
    server_.reset();
    fs::remove_all(*dir_);
  }
  // Starts the server with its API on `port` and the agents' listener on `agent_port`; 0 = any, else
  // that port (a restart keeps both: the agents' URL and the CLI's). The lease is 20 s, not 2: a restart on a
  // loaded machine (the server stopping, starting and opening its store) must not outlast it, or the agents
  // fence their members and RestartedServerKeepsJobsAndRunningOnesFinish sees a requeue; no test here waits
  // for a node to go down.
  static void StartServer(int port, int agent_port) {
    server_ = std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "server", "--listen", "127.0.0.1:" + std::to_string(port),
                                 "--agent-listen", "127.0.0.1:" + std::to_string(agent_port), "--data-dir",
                                 (*dir_ / "server").string(), "--lease", "20s"},
        *dir_ / "server.log");
    const std::regex listening(
        "listening on (https://127\\.0\\.0\\.1:[0-9]+), agents on (https://127\\.0\\.0\\.1:[0-9]+)");
    for (int i = 0; i < 200; ++i) {
      std::smatch m;
      const std::string out = server_->output();
      if (std::regex_search(out, m, listening)) {
        *url_ = m[1];
        *agent_url_ = m[2];
        *admin_token_ = UseAdminToken(*dir_ / "server");
        *ca_file_ = UseServerCa(*dir_ / "server");
        // Agents join with one token for all (a restarted server keeps its join tokens and credentials).
        if (std::getenv("GPUGEEK_JOIN_TOKEN") == nullptr || *dir_ != *token_dir_) {
          auto join = Client().Post("/v1/join-tokens", {{"uses", 100}});
          ASSERT_TRUE(join.ok()) << join.status();
          subprocess::UseJoinToken((*join)["token"]);
          *token_dir_ = *dir_;
        }
        return;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    FAIL() << "server did not start: " << server_->output();
  }
  static http::Client& Client() {
    static std::unique_ptr<http::Client> c;
    c = *http::Client::Create({.base_url = *url_, .ca_file = *ca_file_, .bearer_token = *admin_token_});
    return *c;
  }
  std::pair<int, std::string> Cli(std::vector<std::string> args) {
    args.push_back("--server");
    args.push_back(*url_);
    return RunCli(args, *dir_ / "cli.log");
  }
  // Submits through the CLI; returns the job id.
  std::string Submit(const std::string& spec_path) {
    auto [code, out] = Cli({"submit", spec_path, "--json"});
    EXPECT_EQ(code, 0) << out;
    auto j = nlohmann::json::parse(out, nullptr, false);
    return j.is_object() && j.contains("id") ? j["id"].get<std::string>() : "";
  }
  nlohmann::json WaitFor(const std::string& id, const std::string& state, seconds timeout = seconds(60)) {
    nlohmann::json last;
    for (auto end = std::chrono::steady_clock::now() + timeout; std::chrono::steady_clock::now() < end;) {
      auto job = Client().Get("/v1/jobs/" + id);
      if (job.ok()) {
        last = *job;
        if (last["state"] == state) return last;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    ADD_FAILURE() << id << " did not reach " << state << ": " << last.dump();
    return last;
  }
  std::string Spec(const std::string& name, const std::string& text) {
    const fs::path p = *dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }

  static inline fs::path* dir_ = nullptr;
  static inline std::string* url_ = new std::string();
  static inline std::string* agent_url_ = new std::string();
  static inline std::string* admin_token_ = new std::string();
  static inline std::string* ca_file_ = new std::string();
  static inline fs::path* token_dir_ = new fs::path();
  static inline std::unique_ptr<Process> server_;
  static inline std::vector<std::unique_ptr<Process>>* agents_ = new std::vector<std::unique_ptr<Process>>();
};

const std::string kExamples = std::string(GPUGEEK_SOURCE_DIR) + "/examples/";

// The GPU model and count a job got must be one of the planner's alternatives.
void ExpectPlannedFit(const nlohmann::json& job) {
  ASSERT_TRUE(job["plan"].is_object()) << job.dump();
  const std::string model = job["allocation"]["gpu_model"];
  size_t gpus = 0;
  for (const auto& m : job["allocation"]["members"]) gpus += m["gpus"].size();
  bool listed = false;
  for (const auto& alt : job["plan"]["alternatives"]) {
    listed |= alt["gpu_model"] == model && alt["gpus"] == gpus;
  }
  EXPECT_TRUE(listed) << model << " x " << gpus << " is not in the plan " << job["plan"].dump();
}

TEST_F(EndToEnd, ExamplesRunWhereThePlannerSaysTheyFit) {
  const std::string llama = Submit(kExamples + "llama2-70b-lora.yaml");
  const std::string qwen = Submit(kExamples + "qwen2.5-7b-serve.yaml");
  ASSERT_FALSE(llama.empty());
  ASSERT_FALSE(qwen.empty());
  const nlohmann::json l = WaitFor(llama, "SUCCEEDED");
  ExpectPlannedFit(l);
  const nlohmann::json q = WaitFor(qwen, "SUCCEEDED");
  ExpectPlannedFit(q);
  auto [code, log] = Cli({"logs", llama});
  EXPECT_EQ(code, 0);
  EXPECT_TRUE(absl::StrContains(log, "checkpoint holds step 3")) << log;
  EXPECT_TRUE(absl::StrContains(log, "world_size")) << log;
}

TEST_F(EndToEnd, TwoNodeGangStartsTogetherWithConsistentRanks) {
  const std::string gang = Submit(kExamples + "gang-2-nodes.yaml");
  const nlohmann::json job = WaitFor(gang, "SUCCEEDED");
  const auto& members = job["allocation"]["members"];
  ASSERT_EQ(members.size(), 2u);
  EXPECT_NE(members[0]["node"], members[1]["node"]);
  const auto [c0, log0] = Cli({"logs", gang, "--rank", "0"});
  const auto [c1, log1] = Cli({"logs", gang, "--rank", "1"});
  const std::regex line("rank ([0-9]) of 2 nodes, world size 16, master ([0-9.]+:[0-9]+)");
  std::smatch m0, m1;
  ASSERT_TRUE(std::regex_search(log0, m0, line)) << log0;
  ASSERT_TRUE(std::regex_search(log1, m1, line)) << log1;
  EXPECT_EQ(m0[1], "0");
  EXPECT_EQ(m1[1], "1");
  EXPECT_EQ(m0[2], m1[2]);  // the same master address and port
}

TEST_F(EndToEnd, CancelKillsTheWholeProcessGroup) {
  // A unique sleep duration marks the job's processes: a grandchild in the background, a child in front.
  const std::string marker = "sleep 1000." + std::to_string(::getpid());
  // "slee[p]" matches the workload but not the shell running pgrep (whose command line holds "slee[p]").
  const std::string pattern = "slee[p] 1000." + std::to_string(::getpid());
  const std::string id = Submit(Spec("cancel.yaml",
                                     "name: cancel-me\nresources: {accelerators: A100-PCIe-80GB:1}\n"
                                     "checkpoint: {grace: 1s}\n"
                                     "run: |\n  sh -c '" +
                                         marker + "' &\n  " + marker + "\n"));
  WaitFor(id, "RUNNING");
  for (int i = 0; i < 50 && std::system(("pgrep -f '" + pattern + "' >/dev/null").c_str()) != 0; ++i) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_EQ(std::system(("pgrep -f '" + pattern + "' >/dev/null").c_str()), 0) << "workload never started";
  auto [code, out] = Cli({"cancel", id});
  EXPECT_EQ(code, 0) << out;
  WaitFor(id, "CANCELLED");
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = std::system(("pgrep -f '" + pattern + "' >/dev/null").c_str()) != 0;
    if (!gone) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_TRUE(gone) << "a process of the cancelled job survived";
}

TEST_F(EndToEnd, RestartedServerKeepsJobsAndRunningOnesFinish) {
  const std::string id = Submit(Spec("slow.yaml",
                                     "name: slow\nresources: {accelerators: MI300X:2}\n"
                                     "run: |\n  echo start\n  sleep 4\n  echo finished\n"));
  WaitFor(id, "RUNNING");
  auto before = Client().Get("/v1/jobs?limit=1000");
  ASSERT_TRUE(before.ok());
  const auto port_of = [](const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); };
  const std::string url = *url_;
  const std::string agent_url = *agent_url_;
  server_->Stop();
  StartServer(port_of(url), port_of(agent_url));
  ASSERT_EQ(*url_, url);
  ASSERT_EQ(*agent_url_, agent_url);
  auto after = Client().Get("/v1/jobs?limit=1000");
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ((*after)["jobs"].size(), (*before)["jobs"].size());
  for (size_t i = 0; i < (*after)["jobs"].size(); ++i) {
    EXPECT_EQ((*after)["jobs"][i]["id"], (*before)["jobs"][i]["id"]);
  }
  const nlohmann::json done = WaitFor(id, "SUCCEEDED");
  EXPECT_EQ(done["restarts"], 0);  // it kept running through the restart; not requeued
  auto [code, log] = Cli({"logs", id});
  EXPECT_TRUE(absl::StrContains(log, "finished")) << log;
  // MI300X is AMD: the workload saw ROCm's variables, not CUDA's.
  auto hip = Submit(Spec("hip.yaml",
                         "name: hip\nresources: {accelerators: MI300X:2}\n"
                         "run: echo \"ROCR=$ROCR_VISIBLE_DEVICES HIP=$HIP_VISIBLE_DEVICES\"\n"));
  WaitFor(hip, "SUCCEEDED");
  auto [c2, hip_log] = Cli({"logs", hip});
  EXPECT_TRUE(std::regex_search(hip_log, std::regex("ROCR=[0-7],[0-7] HIP=0,1"))) << hip_log;
}

}  // namespace
}  // namespace gpugeek
