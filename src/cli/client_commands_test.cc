// End-to-end tests of `gpugeek server` and the client commands (submit, jobs, job, logs, cancel,
// events, nodes, node, cordon, uncordon, drain, remove-node, pool): a real ControlPlaneServer on port 0 in this
// process, an emulated node registered on the agents' listener (this test plays its agent), and the
// built `gpugeek` binary run against the API with --server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "absl/strings/strip.h"
#include "controlplane/server.h"
#include "controlplane/testing/agent_caller.h"
#include "http/client.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"

namespace gpugeek::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `gpugeek args` through the shell, capturing stdout and stderr.
Result RunGpugeek(const std::string& args, const std::string& env = "") {
  static std::atomic<int> calls{0};
  const std::string err_path =
      ::testing::TempDir() + "gpugeek_client_stderr_" + std::to_string(getpid()) + "_" + std::to_string(calls++);
  const std::string cmd = env + " " + GPUGEEK_BINARY + " " + args + " 2>" + err_path;
  Result r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  std::remove(err_path.c_str());
  return r;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// "submitted j-00000001 (...)" -> "j-00000001".
std::string SubmittedId(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex("submitted (j-[0-9]+)")) ? m[1].str() : "";
}

class ClientCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpugeek_cli_client_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "specs" / "models");
    // The node heartbeats only when a test plays its agent: a long lease keeps it from being suspect
    // or down meanwhile. TLS with the local CA, as `gpugeek server` serves by default.
    auto s = controlplane::ControlPlaneServer::Start({.port = 0,
                                                      .agent_port = 0,
                                                      .data_dir = (dir_ / "data").string(),
                                                      .lease = std::chrono::minutes(5),
                                                      .tls_mode = controlplane::TlsMode::kLocalPki});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    std::ifstream token_file(server_->admin_token_file());
    std::getline(token_file, admin_token_);
    // The commands run as the admin through $GPUGEEK_TOKEN, and never read the user's own config.
    ::setenv("GPUGEEK_TOKEN", admin_token_.c_str(), 1);
    ::setenv("GPUGEEK_CONFIG", (dir_ / "config.yaml").c_str(), 1);
    ::setenv("GPUGEEK_CA_FILE", server_->ca_file().c_str(), 1);
    auto c =
        http::Client::Create({.base_url = server_->url(), .ca_file = server_->ca_file(), .bearer_token = admin_token_});
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
    ASSERT_TRUE(client_->Post("/v1/tenants", {{"name", "team-a"}}).ok());
    agent_ = std::make_unique<controlplane::testing::AgentCaller>(*server_);
    server_flag_ = " --server " + server_->url();
  }
  void TearDown() override {
    client_.reset();
    agent_.reset();
    server_.reset();
    fs::remove_all(dir_);
  }

  void RegisterNode(const std::string& node, const std::string& spec) {
    api::Registration r;
    r.node = node;
    r.address = "127.0.0.1";
    r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec(spec), node, {node, 32, uint64_t{256} << 30, 1, ""});
    auto reply = agent_->Post("/v1/agents/register", api::ToJson(r));
    ASSERT_TRUE(reply.ok()) << reply.status();
  }

  std::string WriteSpec(const std::string& name, const std::string& yaml) {
    const fs::path p = dir_ / "specs" / name;
    std::ofstream(p) << yaml;
    return p.string();
  }

  // Waits (bounded) until the job reaches `state`.
  bool WaitFor(const std::string& id, const std::string& state) {
    for (int i = 0; i < 200; ++i) {
      auto job = client_->Get("/v1/jobs/" + id);
      if (job.ok() && (*job)["state"] == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return false;
  }

  // Plays node `node`'s agent for one job: heartbeats until the job is assigned, reports it running
  // with `log`, then exited with `exit_code`.
  void RunAssignedJob(const std::string& node, const std::string& id, const std::string& log, int exit_code) {
    api::Heartbeat hb;
    hb.node = node;
    int64_t epoch = -1;
    for (int i = 0; i < 200 && epoch < 0; ++i) {
      auto reply = agent_->Post("/v1/agents/" + node + "/heartbeat", api::ToJson(hb));
      ASSERT_TRUE(reply.ok()) << reply.status();
      auto parsed = api::HeartbeatReplyFromJson(*reply);
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      for (const auto& a : parsed->assignments) {
        if (a.job_id == id) epoch = a.epoch;
      }
      if (epoch < 0) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    ASSERT_GE(epoch, 0) << "job " << id << " was never assigned to " << node;
    const size_t half = log.size() / 2;
    hb.workloads = {{.job_id = id, .epoch = epoch, .phase = api::WorkloadPhase::kRunning}};
    hb.logs = {{.job_id = id, .offset = 0, .data = log.substr(0, half), .epoch = epoch}};
    ASSERT_TRUE(agent_->Post("/v1/agents/" + node + "/heartbeat", api::ToJson(hb)).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the follower sees a running job
    hb.workloads = {{.job_id = id, .epoch = epoch, .phase = api::WorkloadPhase::kExited, .exit_code = exit_code}};
    hb.logs = {{.job_id = id, .offset = half, .data = log.substr(half), .epoch = epoch}};
    ASSERT_TRUE(agent_->Post("/v1/agents/" + node + "/heartbeat", api::ToJson(hb)).ok());
  }

  fs::path dir_;
  std::unique_ptr<controlplane::ControlPlaneServer> server_;
  std::string admin_token_;
  std::unique_ptr<http::Client> client_;                       // the API
  std::unique_ptr<controlplane::testing::AgentCaller> agent_;  // the agents' listener, as joined agents
  std::string server_flag_;
};

TEST_F(ClientCommandsTest, SubmitPlansLlama70bFromModelConfigThenListsIt) {
  RegisterNode("node-a", "8xA100-SXM-80GB");
  fs::copy_file(fs::path(GPUGEEK_SHARED_DIR) / "models/llama/Llama-2-70b-hf.json",
                dir_ / "specs" / "models" / "Llama-2-70b-hf.json");
  // `model:` is relative to the YAML file's directory, not to the working directory.
  const std::string spec = WriteSpec("llama.yaml",
                                     "name: llama2-70b-lora\nmodel: models/Llama-2-70b-hf.json\n"
                                     "task: {kind: lora, seq_len: 4096, micro_batch: 1}\nrun: python train.py\n");
  Result r = RunGpugeek("submit " + spec + " --tenant team-a" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const std::string id = SubmittedId(r.out);
  ASSERT_FALSE(id.empty()) << r.out;
  EXPECT_TRUE(Contains(r.out, "(llama2-70b-lora): PENDING")) << r.out;
  EXPECT_TRUE(Contains(r.out, "plan: ")) << r.out;
  EXPECT_TRUE(Contains(r.out, "A100-SXM-80GB")) << r.out;
  ASSERT_TRUE(WaitFor(id, "SCHEDULED"));

  r = RunGpugeek("jobs" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& want :
       {id, std::string("llama2-70b-lora"), std::string("team-a"), std::string("SCHEDULED"), std::string("node-a[")}) {
    EXPECT_TRUE(Contains(r.out, want)) << want << "\n" << r.out;
  }
  r = RunGpugeek("jobs --json --state SCHEDULED --tenant team-a" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json jobs = json::parse(r.out);
  ASSERT_EQ(jobs["jobs"].size(), 1u) << r.out;
  EXPECT_EQ(jobs["jobs"][0]["id"], id);
  EXPECT_EQ(jobs["jobs"][0]["allocation"]["gpu_model"], "A100-SXM-80GB");
  r = RunGpugeek("jobs --json --state RUNNING" + server_flag_);
  EXPECT_EQ(json::parse(r.out)["jobs"].size(), 0u) << r.out;

  r = RunGpugeek("job " + id + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& want : {"Job " + id + " (llama2-70b-lora)", std::string("state:     SCHEDULED"),
                                  std::string("Plan: "), std::string("Placement:"), std::string("rank 0: node-a GPUs"),
                                  std::string("Events:"), std::string("PENDING"), std::string("ago)")}) {
    EXPECT_TRUE(Contains(r.out, want)) << want << "\n" << r.out;
  }
  r = RunGpugeek("job " + id + " --json" + server_flag_);
  json job = json::parse(r.out);
  EXPECT_EQ(job["state"], "SCHEDULED");
  EXPECT_TRUE(job["plan"]["best"].get<std::string>().find("A100-SXM-80GB") != std::string::npos) << job["plan"];
  ASSERT_EQ(job["events"].size(), 2u) << job["events"];  // NONE -> PENDING, PENDING -> SCHEDULED
  EXPECT_EQ(job["events"][1]["to"], "SCHEDULED");
  const size_t gpus = job["allocation"]["members"][0]["gpus"].size();
  EXPECT_GE(gpus, 4u);  // Llama-2-70B LoRA needs at least 4 x 80 GB

  r = RunGpugeek("events --job " + id + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "SCHEDULED")) << r.out;
  EXPECT_TRUE(Contains(r.out, id)) << r.out;
  r = RunGpugeek("events --json --after 1" + server_flag_);
  json events = json::parse(r.out);
  ASSERT_EQ(events["events"].size(), 1u) << r.out;
  EXPECT_EQ(events["events"][0]["seq"], 2);

  r = RunGpugeek("pool" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& want :
       {std::string("A100-SXM-80GB"), std::string("on-demand"), std::string("TOTAL"), std::string("policy FGDFit")}) {
    EXPECT_TRUE(Contains(r.out, want)) << want << "\n" << r.out;
  }
  r = RunGpugeek("pool --json" + server_flag_);
  json pool = json::parse(r.out);
  EXPECT_EQ(pool["gpu_milli_total"], 8000);
  EXPECT_EQ(pool["gpu_milli_allocated"], static_cast<int64_t>(gpus) * 1000);

  r = RunGpugeek("nodes" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& want :
       {std::string("node-a"), std::string("ready"), std::string("8 x A100-SXM-80GB"), fmt::format("{}/8", gpus), id}) {
    EXPECT_TRUE(Contains(r.out, want)) << want << "\n" << r.out;
  }
  r = RunGpugeek("node node-a --json" + server_flag_);
  EXPECT_EQ(json::parse(r.out)["jobs"][0], id);
  r = RunGpugeek("node node-a" + server_flag_);
  EXPECT_TRUE(Contains(r.out, "80.0 GiB")) << r.out;
  EXPECT_TRUE(Contains(r.out, "256.0 GiB memory")) << r.out;
}

TEST_F(ClientCommandsTest, FollowPrintsPlacementLogsAndOutcome) {
  RegisterNode("node-a", "8xA100-SXM-80GB");
  const std::string spec =
      WriteSpec("ok.yaml", "name: hello\nresources: {accelerators: A100-SXM-80GB:2}\nrun: echo hello\n");
  auto follower = std::async(std::launch::async, [&] { return RunGpugeek("submit " + spec + " -f" + server_flag_); });
  // The job is j-00000001: the first one this server stores.
  RunAssignedJob("node-a", "j-00000001", "hello from rank 0\nstep 1 done\n", 0);
  Result r = follower.get();
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  for (const std::string& want :
       {std::string("submitted j-00000001 (hello)"), std::string("placed j-00000001"),
        std::string("rank 0: node-a GPUs "), std::string("(A100-SXM-80GB)"),
        std::string("hello from rank 0\nstep 1 done\n"), std::string("job j-00000001 SUCCEEDED (exit code 0)")}) {
    EXPECT_TRUE(Contains(r.out, want)) << want << "\n" << r.out;
  }

  r = RunGpugeek("logs j-00000001" + server_flag_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello from rank 0\nstep 1 done\n");
  r = RunGpugeek("logs j-00000001 -f --json" + server_flag_);  // ended: follow returns at once
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello from rank 0\nstep 1 done\n");

  // A failing job: --follow exits 1 with the final state; --json puts the final job on stdout.
  const std::string bad = WriteSpec("bad.yaml", "name: boom\nresources: {accelerators: A100-SXM-80GB:1}\nrun: x\n");
  follower =
      std::async(std::launch::async, [&] { return RunGpugeek("submit " + bad + " --follow --json" + server_flag_); });
  RunAssignedJob("node-a", "j-00000002", "Traceback: boom\n", 3);
  r = follower.get();
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  EXPECT_TRUE(Contains(r.err, "job j-00000002 FAILED (exit code 3)")) << r.err;
  EXPECT_TRUE(Contains(r.err, "Traceback: boom")) << r.err;
  json job = json::parse(r.out);
  EXPECT_EQ(job["state"], "FAILED");
  EXPECT_EQ(job["exit_code"], 3);
  // gpugeek logs exits with the job's exit code.
  r = RunGpugeek("logs j-00000002" + server_flag_);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.out, "Traceback: boom\n");
}

TEST_F(ClientCommandsTest, LogsAreByteExactPrefixedPerRankAndExitWithTheJobsCode) {
  RegisterNode("node-a", "8xA100-SXM-80GB");
  const std::string spec = WriteSpec("raw.yaml", "name: raw\nresources: {accelerators: A100-SXM-80GB:1}\nrun: x\n");
  Result r = RunGpugeek("submit " + spec + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id = SubmittedId(r.out);
  ASSERT_EQ(id, "j-00000001") << r.out;
  // Bytes that are not UTF-8, a NUL and a last line without its newline.
  const std::string log("ok \xff\xfe\xc3\x28 bytes\nnul \0 here\nno newline", 35);
  RunAssignedJob("node-a", id, log, 7);
  ASSERT_TRUE(WaitFor(id, "FAILED"));

  r = RunGpugeek("logs " + id + server_flag_);
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(r.out, log);
  r = RunGpugeek("logs " + id + " -f" + server_flag_);  // ended: returns at once with the job's code
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(r.out, log);
  r = RunGpugeek("logs " + id + " --rank all" + server_flag_);
  EXPECT_EQ(r.exit_code, 7) << r.err;
  EXPECT_EQ(r.out, std::string("[rank 0] ok \xff\xfe\xc3\x28 bytes\n[rank 0] nul \0 here\n[rank 0] no newline\n", 63));
  r = RunGpugeek("logs " + id + " --json" + server_flag_);
  EXPECT_EQ(r.exit_code, 7) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["state"], "FAILED");
  EXPECT_EQ(doc["exit_code"], 7);
  EXPECT_EQ(doc["log_b64"], "b2sg//7DKCBieXRlcwpudWwgACBoZXJlCm5vIG5ld2xpbmU=");
  r = RunGpugeek("logs " + id + " --rank x" + server_flag_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "gpugeek logs: --rank: must be 0..1023 or 'all', got 'x'")) << r.err;
}

TEST_F(ClientCommandsTest, CordonKeepsJobsPendingCancelAndUncordon) {
  RegisterNode("node-a", "8xA100-SXM-80GB");
  Result r = RunGpugeek("cordon node-a" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "node node-a: cordoned")) << r.out;
  const std::string spec =
      WriteSpec("wait.yaml", "name: waiter\nresources: {accelerators: A100-SXM-80GB:1}\nrun: sleep 1\n");
  r = RunGpugeek("submit " + spec + " --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id = json::parse(r.out)["id"];
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a few scheduling rounds
  r = RunGpugeek("job " + id + " --json" + server_flag_);
  EXPECT_EQ(json::parse(r.out)["state"], "PENDING") << r.out;

  r = RunGpugeek("cancel " + id + " --reason 'not needed'" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, id + " CANCELLED")) << r.out;
  EXPECT_TRUE(Contains(r.out, "not needed")) << r.out;
  r = RunGpugeek("cancel " + id + server_flag_);  // already ended
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "gpugeek cancel: ")) << r.err;
  r = RunGpugeek("events --job " + id + " --json" + server_flag_);
  json events = json::parse(r.out)["events"];
  ASSERT_EQ(events.size(), 2u) << r.out;
  EXPECT_EQ(events[1]["to"], "CANCELLED");
  EXPECT_TRUE(Contains(events[1]["reason"].get<std::string>(), "not needed")) << events[1];
  r = RunGpugeek("logs " + id + server_flag_);  // a cancelled job: 130, like a shell after Ctrl-C
  EXPECT_EQ(r.exit_code, 130) << r.err;
  EXPECT_EQ(r.out, "");

  r = RunGpugeek("uncordon node-a --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["state"], "ready");
  r = RunGpugeek("drain node-a" + server_flag_);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "cordoned")) << r.out;
  r = RunGpugeek("cordon ghost" + server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "gpugeek cordon: ")) << r.err;
  EXPECT_TRUE(Contains(r.err, "ghost")) << r.err;
}

TEST_F(ClientCommandsTest, RemoveNodeRefusesAnUpNodeThenRemovesADrainedOne) {
  RegisterNode("node-a", "8xA100-SXM-80GB");
  RegisterNode("node-b", "2xL4");
  Result r = RunGpugeek("remove-node node-a" + server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err,
                       "gpugeek remove-node: node node-a is up: drain it and stop its agent first (gpugeek "
                       "drain node-a)"))
      << r.err;
  ASSERT_EQ(RunGpugeek("drain node-a" + server_flag_).exit_code, 0);
  r = RunGpugeek("remove-node node-a" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "node node-a removed (was cordoned)\n");
  r = RunGpugeek("nodes" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(Contains(r.out, "node-a")) << r.out;
  EXPECT_TRUE(Contains(r.out, "node-b")) << r.out;
  r = RunGpugeek("pool --json" + server_flag_);
  EXPECT_EQ(json::parse(r.out)["gpu_milli_total"], 2000) << r.out;
  r = RunGpugeek("remove-node node-a" + server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "gpugeek remove-node: ")) << r.err;
  EXPECT_TRUE(Contains(r.err, "no node 'node-a'")) << r.err;

  ASSERT_EQ(RunGpugeek("cordon node-b" + server_flag_).exit_code, 0);
  r = RunGpugeek("remove-node node-b --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json n = json::parse(r.out);
  EXPECT_EQ(n["name"], "node-b");
  EXPECT_EQ(n["state"], "cordoned");
  r = RunGpugeek("nodes" + server_flag_);
  EXPECT_TRUE(Contains(r.out, "No nodes registered")) << r.out;
}

TEST_F(ClientCommandsTest, JobsPagesUpToTheLimit) {
  const std::string spec = WriteSpec("p.yaml", "name: p\nresources: {accelerators: A100-SXM-80GB:1}\nrun: x\n");
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(RunGpugeek("submit " + spec + server_flag_).exit_code, 0);
  }
  // With no nodes they stay PENDING; jobs follows next_after when the limit exceeds one page.
  Result r = RunGpugeek("jobs --json --limit 2" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["jobs"].size(), 2u);
  r = RunGpugeek("jobs --json --limit 1000" + server_flag_);
  json jobs = json::parse(r.out)["jobs"];
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0]["id"], "j-00000003");  // newest first
  r = RunGpugeek("jobs --json --oldest --limit 1000" + server_flag_);
  EXPECT_EQ(json::parse(r.out)["jobs"][0]["id"], "j-00000001");
  r = RunGpugeek("jobs" + server_flag_);
  EXPECT_TRUE(Contains(r.out, "PENDING")) << r.out;
  EXPECT_FALSE(Contains(r.out, "more jobs")) << r.out;
  r = RunGpugeek("jobs --limit 2" + server_flag_);
  EXPECT_TRUE(Contains(r.out, "(more jobs before j-00000002: gpugeek jobs --limit 4)")) << r.out;
  r = RunGpugeek("nodes" + server_flag_);
  EXPECT_TRUE(Contains(r.out, "No nodes registered")) << r.out;
}

TEST_F(ClientCommandsTest, ServeScaleTrafficReplicasEndpointsAndDelete) {
  const std::string spec = WriteSpec("svc.yaml", R"(kind: service
name: chat
replicas: {max: 4, initial: 2}
versions:
  - {name: v1, weight: 90, resources: {accelerators: A100-SXM-80GB:1}, run: serve --port $PORT}
  - {name: v2, weight: 10, resources: {accelerators: A100-SXM-80GB:1}, run: serve --port $PORT --v2}
)");
  Result r = RunGpugeek("serve " + spec + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "service chat (generation 1): v1 90% x1, v2 10% x1; gpugeek replicas chat\n");
  // The controller's loop starts both replicas (no node: they stay PENDING).
  json replicas;
  for (int i = 0; i < 200; ++i) {
    r = RunGpugeek("replicas chat --json" + server_flag_);
    replicas = json::parse(r.out, nullptr, false);
    if (replicas.is_array() && replicas.size() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(replicas.size(), 2u) << r.out << r.err;
  EXPECT_EQ(replicas[0]["version"], "v1");
  EXPECT_EQ(replicas[0]["state"], "PENDING");
  EXPECT_EQ(replicas[0]["port"], 20000);
  EXPECT_EQ(replicas[1]["version"], "v2");
  r = RunGpugeek("replicas chat" + server_flag_);
  EXPECT_TRUE(Contains(r.out, "VERSION")) << r.out;
  EXPECT_TRUE(Contains(r.out, "PENDING")) << r.out;

  r = RunGpugeek("scale chat v1=3" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "chat replicas: v1=3 v2=1\n");
  r = RunGpugeek("scale chat v1=9" + server_flag_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.err, "replicas.v1: 9 is not a count 0..4")) << r.err;
  r = RunGpugeek("scale chat v1" + server_flag_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.err, "'v1': give VERSION=N")) << r.err;

  r = RunGpugeek("traffic set chat v2=100" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "chat weights: v1=0 v2=100\n");
  r = RunGpugeek("traffic set chat v1=50 v2=40" + server_flag_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.err, "weights: sum to 90; they must sum to 100")) << r.err;

  r = RunGpugeek("services --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json services = json::parse(r.out);
  ASSERT_EQ(services.size(), 1u);
  EXPECT_EQ(services[0]["name"], "chat");
  EXPECT_EQ(services[0]["generation"], 2);
  EXPECT_EQ(services[0]["desired"], 4);
  r = RunGpugeek("services" + server_flag_);
  EXPECT_TRUE(Contains(r.out, "v1 0% x0, v2 100% x4")) << r.out;

  r = RunGpugeek("endpoints --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json routes = json::parse(r.out)["routes"];
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_EQ(routes[0]["hosts"], json({"chat"}));
  EXPECT_EQ(routes[0]["versions"][1]["weight"], 100);
  EXPECT_TRUE(routes[0]["versions"][1]["replicas"].empty());  // none ready
  r = RunGpugeek("endpoints" + server_flag_);
  EXPECT_TRUE(Contains(r.out, "no ready replica")) << r.out;

  r = RunGpugeek("service delete chat" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "service chat: DELETED (deleted by admin)")) << r.out;
  r = RunGpugeek("replicas chat" + server_flag_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(Contains(r.err, "no service 'chat'")) << r.err;
}

TEST_F(ClientCommandsTest, ErrorsSayWhatAndExitNonZero) {
  Result r = RunGpugeek("job j-99999999" + server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "gpugeek job: ")) << r.err;
  EXPECT_TRUE(Contains(r.err, "j-99999999")) << r.err;
  r = RunGpugeek("logs j-99999999" + server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "gpugeek logs: ")) << r.err;

  // Nothing listens on port 1; the environment variable is the fallback of --server.
  r = RunGpugeek("jobs --server http://127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "gpugeek jobs: cannot reach gpugeek server at http://127.0.0.1:1")) << r.err;
  r = RunGpugeek("pool", "GPUGEEK_SERVER=http://127.0.0.1:1");
  EXPECT_TRUE(Contains(r.err, "gpugeek pool: cannot reach gpugeek server at http://127.0.0.1:1")) << r.err;
  r = RunGpugeek("nodes --server 127.0.0.1:8470");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "must look like http://HOST:PORT")) << r.err;

  // Bad specs: the message names the file and the field.
  std::string spec = WriteSpec("bad-gpu.yaml", "name: x\nresources: {accelerators: Z80:1}\nrun: y\n");
  r = RunGpugeek("submit " + spec + server_flag_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "gpugeek submit: " + spec + ": resources.accelerators")) << r.err;
  EXPECT_TRUE(Contains(r.err, "Z80")) << r.err;
  spec = WriteSpec("typo.yaml", "name: x\nrun: y\nnum_nodse: 2\n");
  r = RunGpugeek("submit " + spec + server_flag_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "num_nodse")) << r.err;
  spec = WriteSpec("not-yaml.yaml", "name: [unclosed\n");
  r = RunGpugeek("submit " + spec + server_flag_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "gpugeek submit: " + spec + ": ")) << r.err;
  r = RunGpugeek("submit " + (dir_ / "missing.yaml").string() + server_flag_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "cannot read job spec " + (dir_ / "missing.yaml").string())) << r.err;
  // The model config is looked up next to the spec, and the error names the resolved path.
  spec = WriteSpec("nomodel.yaml", "name: x\nmodel: models/none.json\ntask: {kind: lora}\nrun: y\n");
  r = RunGpugeek("submit " + spec + server_flag_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "model 'models/none.json'")) << r.err;
  EXPECT_TRUE(Contains(r.err, (dir_ / "specs" / "models" / "none.json").string())) << r.err;
  // Server-side refusal: nothing in the (empty) pool to plan on.
  fs::copy_file(fs::path(GPUGEEK_SHARED_DIR) / "models/llama/Llama-2-70b-hf.json",
                dir_ / "specs" / "models" / "l.json");
  spec = WriteSpec("plan.yaml", "name: x\nmodel: models/l.json\ntask: {kind: lora}\nrun: y\n");
  r = RunGpugeek("submit " + spec + server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "gpugeek submit: no GPUs of a known model are registered")) << r.err;
}

TEST(ServerCommand, ServesUntilSigterm) {
  const fs::path dir = fs::temp_directory_path() / ("gpugeek_cli_server_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execl(GPUGEEK_BINARY, GPUGEEK_BINARY, "server", "--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0",
          "--data-dir", (dir / "data").c_str(), "--policy", "GpuPacking", nullptr);
    _exit(127);
  }
  close(out[1]);
  struct KillOnExit {  // a failed assertion must not leave the server running
    pid_t pid;
    ~KillOnExit() {
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  } guard{pid};
  FILE* f = fdopen(out[0], "r");
  char line[512] = {0};
  ASSERT_NE(fgets(line, sizeof(line), f), nullptr);
  std::smatch m;
  const std::string first(line);
  ASSERT_TRUE(std::regex_search(first, m,
                                std::regex("^gpugeek server listening on (https://127\\.0\\.0\\.1:[0-9]+), agents on "
                                           "(https://127\\.0\\.0\\.1:[0-9]+) \\(data: ")))
      << first;
  const std::string url = m[1].str();
  const std::string agent_url = m[2].str();
  EXPECT_NE(url, agent_url);
  EXPECT_TRUE(Contains(first, (dir / "data").string())) << first;
  EXPECT_TRUE(fs::exists(dir / "data"));
  // TLS by default: the local CA was made on the first start, and the CLI trusts it through --ca-file.
  const std::string ca = (dir / "data" / "tls" / "ca.crt").string();
  ASSERT_TRUE(fs::exists(ca));
  ASSERT_NE(fgets(line, sizeof(line), f), nullptr);
  EXPECT_TRUE(Contains(line, "TLS 1.3; clients trust " + ca)) << line;
  const std::string token = "GPUGEEK_TOKEN=$(head -1 " + (dir / "data" / "admin.token").string() + ")";

  Result r = RunGpugeek("pool --json --ca-file " + ca + " --server " + url, token);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["policy"], "GpuPacking") << r.out;
  // Without the CA the server's certificate is not trusted.
  r = RunGpugeek("pool --json --server " + url, token + " GPUGEEK_CA_FILE=");
  EXPECT_NE(r.exit_code, 0) << r.out;
  // The agents' listener serves registrations and heartbeats, not the API.
  r = RunGpugeek("pool --json --ca-file " + ca + " --server " + agent_url, token);
  EXPECT_EQ(r.exit_code, 1) << r.out;

  ASSERT_EQ(kill(pid, SIGTERM), 0);
  std::string rest;
  while (fgets(line, sizeof(line), f) != nullptr) rest += line;
  fclose(f);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  guard.pid = 0;
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(Contains(rest, "SIGTERM received, stopping")) << rest;
  EXPECT_TRUE(Contains(rest, "stopped")) << rest;
  r = RunGpugeek("pool --ca-file " + ca + " --server " + url, token);
  EXPECT_TRUE(Contains(r.err, "cannot reach gpugeek server")) << r.err;

  r = RunGpugeek("server --listen 127.0.0.1:0 --policy NoSuchPolicy --data-dir " + (dir / "data").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "gpugeek server: ")) << r.err;
  EXPECT_TRUE(Contains(r.err, "NoSuchPolicy")) << r.err;
  r = RunGpugeek("server --listen 127.0.0.1:0 --tls-cert " + ca);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "gpugeek server: --tls-cert and --tls-key go together")) << r.err;
  r = RunGpugeek("server --listen 127.0.0.1:0 --insecure-no-tls --tls-cert " + ca + " --tls-key " + ca);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "--insecure-no-tls contradicts")) << r.err;
  r = RunGpugeek("server --listen nowhere");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "gpugeek server: --listen 'nowhere' must be HOST:PORT")) << r.err;
  r = RunGpugeek("server --listen 127.0.0.1:0 --agent-listen nowhere");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "gpugeek server: --agent-listen: ")) << r.err;
  r = RunGpugeek("server --listen 127.0.0.1:0 --agent-listen 0.0.0.0:0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "--agent-listen must use the same host as --listen")) << r.err;
  fs::remove_all(dir);
}

TEST_F(ClientCommandsTest, LoginSavesAProfileAndAccountCommandsManageTenantsUsersAndTokens) {
  // No token anywhere: refused with the way out.
  Result r = RunGpugeek("whoami" + server_flag_, "GPUGEEK_TOKEN=");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("this call needs an API token"));
  // login checks the token and saves the profile (mode 0600); later commands need neither flag.
  r = RunGpugeek("login " + server_->url() + " --token-file " + server_->admin_token_file() + " --profile lab",
                 "GPUGEEK_TOKEN=");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("as admin (tenant default, role admin); profile 'lab' saved"));
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "config.yaml").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  r = RunGpugeek("whoami", "GPUGEEK_TOKEN=");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::StartsWith("admin (tenant default, role admin) with token " +
                                           admin_token_.substr(4, 16) + " on " + server_->url()));
  // The profile's token is not sent to another server.
  r = RunGpugeek("whoami --server http://127.0.0.1:1", "GPUGEEK_TOKEN=");
  EXPECT_EQ(r.exit_code, 1);

  ASSERT_EQ(RunGpugeek("tenants create team-b", "GPUGEEK_TOKEN=").exit_code, 0);
  r = RunGpugeek("users create bob --tenant team-b --role member", "GPUGEEK_TOKEN=");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Created user bob (tenant team-b, role member)\n");
  r = RunGpugeek("users create eve --tenant nowhere", "GPUGEEK_TOKEN=");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("tenant: 'nowhere' does not exist"));
  r = RunGpugeek("tokens create --user bob --description ci --expires 30d", "GPUGEEK_TOKEN=");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string bob = std::string(absl::StripAsciiWhitespace(r.out));
  ASSERT_EQ(bob.size(), 64u) << r.out;
  EXPECT_THAT(r.err, ::testing::HasSubstr("It is shown only now"));
  r = RunGpugeek("whoami --token " + bob, "GPUGEEK_TOKEN=");
  EXPECT_THAT(r.out, ::testing::StartsWith("bob (tenant team-b, role member)"));
  // A member sees its own tokens only, and cannot list users.
  r = RunGpugeek("tokens --json --token " + bob, "GPUGEEK_TOKEN=");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto mine = nlohmann::json::parse(r.out)["tokens"];
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0]["description"], "ci");
  EXPECT_FALSE(mine[0].contains("token"));
  r = RunGpugeek("users --token " + bob, "GPUGEEK_TOKEN=");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("needs the admin role"));
  r = RunGpugeek("tokens revoke " + bob.substr(4, 16) + " --token " + bob, "GPUGEEK_TOKEN=");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunGpugeek("whoami --token " + bob, "GPUGEEK_TOKEN=");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("was revoked"));
}

// Monthly budgets through the CLI: set by the admin for a tenant and a user, listed (a member sees its own
// tenant's), refused to a member, and a user over its budget refused a submission with the 402 message.
TEST_F(ClientCommandsTest, BudgetSetListUnsetAndASpentUserBudgetRefusesSubmissions) {
  RegisterNode("node-a", "8xH100-SXM-80GB");
  Result r = RunGpugeek("budget" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "No budgets. An operator sets one with `gpugeek budget set --tenant T --monthly AMOUNT`.\n");
  r = RunGpugeek("budget set --tenant team-a --monthly 500.00" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Budget of tenant team-a set: 500.00 a month; alerts at 50, 80, 100%\n");
  ASSERT_TRUE(client_->Post("/v1/users", {{"name", "carol"}, {"tenant", "team-a"}, {"role", "member"}}).ok());
  r = RunGpugeek("budget set --user carol --monthly 1.00 --alert-at 90,10" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Budget of user carol set: 1.00 a month; alerts at 10, 90%\n");
  r = RunGpugeek("budget set --monthly 1.00" + server_flag_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, ::testing::HasSubstr("give one of --tenant TENANT or --user USER"));
  r = RunGpugeek("budget set --user nobody --monthly 1.00" + server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("no user 'nobody'"));
  r = RunGpugeek("budget set --tenant team-a --monthly -3" + server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("monthly_limit: "));

  // carol has spent 2.00 this month (a charge of a job she submitted).
  ledger::Transaction charge{
      .id = "usage/j-x/e1/r0",
      .kind = ledger::Kind::kCharge,
      .at = server_->control_plane().clock().Now(),
      .tenant = "team-a",
      .job = "j-x",
      .user = "carol",
      .postings = {{"tenant:team-a:cash", ledger::Money::Units(-2)}, {"platform:revenue", ledger::Money::Units(2)}}};
  ASSERT_TRUE(server_->control_plane().billing().Post(charge).ok());
  auto token = client_->Post("/v1/tokens", {{"user", "carol"}});
  ASSERT_TRUE(token.ok()) << token.status();
  const std::string carol = " --token " + (*token)["token"].get<std::string>() + " --server " + server_->url();
  r = RunGpugeek("budget --json" + carol, "GPUGEEK_TOKEN=");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json listed = json::parse(r.out);
  ASSERT_EQ(listed["budgets"].size(), 2u) << r.out;
  EXPECT_EQ(listed["budgets"][0]["user"], "");
  EXPECT_EQ(listed["budgets"][0]["spent_micros"], 2'000'000);
  EXPECT_EQ(listed["budgets"][1]["user"], "carol");
  EXPECT_EQ(listed["budgets"][1]["spent_micros"], 2'000'000);
  EXPECT_DOUBLE_EQ(listed["budgets"][1]["used_percent"].get<double>(), 200.0);
  r = RunGpugeek("budget" + carol, "GPUGEEK_TOKEN=");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("team-a +carol +1.00 +2.00 +200.0% +10,90 "));
  r = RunGpugeek("budget set --user carol --monthly 100.00" + carol, "GPUGEEK_TOKEN=");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("admin"));
  const std::string spec =
      WriteSpec("b.yaml", "name: b\nresources: {accelerators: H100-SXM-80GB:1}\nrun: echo hello\n");
  r = RunGpugeek("submit " + spec + carol, "GPUGEEK_TOKEN=");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("budget: user 'carol' has spent 2.00 of its monthly budget of 1.00 in 20"));
  r = RunGpugeek("budget unset --user carol" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Budget of user carol removed\n");
  r = RunGpugeek("submit " + spec + carol, "GPUGEEK_TOKEN=");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunGpugeek("budget unset --user carol" + server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("no budget for user carol"));
}

TEST_F(ClientCommandsTest, QuotaSetChangesOnlyTheLimitsGivenAndQuotaShowsUseAgainstLimit) {
  RegisterNode("node-a", "8xH100-SXM-80GB");
  Result r =
      RunGpugeek("quota set team-a --gpus H100-SXM-80GB=8 --milli-gpus 16000 --jobs 10 --weight 2" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("H100-SXM-80GB 0/8"));
  r = RunGpugeek("quota set team-a --jobs 1 --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json row = json::parse(r.out);
  EXPECT_EQ(row["max_jobs"], 1);
  EXPECT_EQ(row["max_gpu_milli"], 16000);
  EXPECT_EQ(row["weight"], 2.0);
  EXPECT_EQ(row["max_gpus_by_model"], json({{"H100-SXM-80GB", 8}}));
  r = RunGpugeek("quota set team-a --gpus H100-SXM-80GB" + server_flag_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, ::testing::HasSubstr("must be MODEL=N"));

  const std::string spec = "name: q\nresources: {accelerators: H100-SXM-80GB:1}\nrun: sleep 1\n";
  auto first = client_->Post("/v1/jobs", {{"spec_yaml", spec}, {"tenant", "team-a"}});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(WaitFor((*first)["id"], "SCHEDULED"));
  auto second = client_->Post("/v1/jobs", {{"spec_yaml", spec}, {"tenant", "team-a"}});
  ASSERT_TRUE(second.ok()) << second.status();
  const std::string waiting = (*second)["id"];
  std::string reason;
  for (int i = 0; i < 200 && reason.find("over quota") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    reason = client_->Get("/v1/jobs/" + waiting)->value("pending_reason", std::string());
  }
  EXPECT_THAT(reason, ::testing::HasSubstr("over quota (tenant 'team-a'): 1 of 1 jobs running"));
  r = RunGpugeek("job " + waiting + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("over quota"));
  r = RunGpugeek("quota" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("H100-SXM-80GB 1/8"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("1000/16000"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("Waiting over quota:\n  " + waiting + ": over quota"));
  r = RunGpugeek("quota --tenant team-a --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json shown = json::parse(r.out);
  ASSERT_EQ(shown["tenants"].size(), 1u);
  EXPECT_EQ(shown["tenants"][0]["jobs"], 1);
  EXPECT_EQ(shown["tenants"][0]["over_quota_jobs"][0]["id"], waiting);
}

// The market (docs/billing.md): offers cheapest first, a top-up once per key, a grant, a job's charge taken
// from the credit first, the balance, the ledger, the month's bill and a payout to the node's provider.
TEST_F(ClientCommandsTest, ReservationsCreateHoldReportAndCancel) {
  Result r = RunGpugeek("reservations" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::StartsWith("No reservations."));
  RegisterNode("node-a", "8xH100-SXM-80GB");
  r = RunGpugeek("reservation create --tenant team-a --gpu H100-SXM-80GB --gpus 8 --price 1.20" + server_flag_);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, ::testing::HasSubstr("give the term: --hours H or --days D"));
  r = RunGpugeek("reservation create --tenant team-a --gpu H100-SXM-80GB --gpus 8 --price 1.2x --days 30" +
                 server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("price: "));
  r = RunGpugeek(
      "reservation create --tenant team-a --gpu H100-SXM-80GB --gpus 8 --price 1.20 --days 30 --start "
      "2001-01-01T00:00:00Z" +
      server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("start: must not lie in the past"));
  r = RunGpugeek("reservation create --tenant nobody --gpu H100-SXM-80GB --gpus 8 --price 1.20 --days 30" +
                 server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("no tenant 'nobody'"));
  r = RunGpugeek("reservation create --tenant team-a --gpu H100-SXM-80GB --gpus 8 --price 1.20 --days 30" +
                 server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::MatchesRegex("Reservation rsv-00000001: 8 x H100-SXM-80GB for team-a, .* to .* "
                                             "\\(active\\), at 1.20 per GPU-hour\n"));
  // The pool has no more H100s that no reservation holds in that term.
  r = RunGpugeek("reservation create --tenant team-a --gpu H100-SXM-80GB --gpus 1 --price 1.20 --hours 2" +
                 server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("gpus: 1 GPUs of H100-SXM-80GB asked; the pool has 0"));
  // Held by the next pass: team-a is offered it as reserved capacity at no further price, team-b not at all.
  json listed;
  for (int i = 0; i < 500; ++i) {
    r = RunGpugeek("reservations --json" + server_flag_);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    listed = json::parse(r.out)["reservations"];
    if (!listed.at(0)["nodes"].empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["nodes"], json::array({"node-a"}));
  EXPECT_EQ(listed[0]["state"], "active");
  EXPECT_EQ(listed[0]["price_micros"], 1'200'000);
  EXPECT_EQ(listed[0]["gpus"], 8);
  ASSERT_TRUE(client_->Post("/v1/tenants", {{"name", "team-b"}}).ok());
  for (const auto& [tenant, rows] : {std::pair{"team-a", 1u}, std::pair{"team-b", 0u}}) {
    ASSERT_TRUE(
        client_->Post("/v1/users", {{"name", std::string("u-") + tenant}, {"tenant", tenant}, {"role", "member"}})
            .ok());
    auto token = client_->Post("/v1/tokens", {{"user", std::string("u-") + tenant}});
    ASSERT_TRUE(token.ok()) << token.status();
    const std::string as = " --token " + (*token)["token"].get<std::string>() + " --server " + server_->url();
    r = RunGpugeek("offers --json" + as, "GPUGEEK_TOKEN=");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json offers = json::parse(r.out)["offers"];
    ASSERT_EQ(offers.size(), rows) << tenant << ": " << r.out;
    if (rows == 1) {
      EXPECT_EQ(offers[0]["capacity_type"], "reserved");
      EXPECT_EQ(offers[0]["price_micros_per_gpu_hour"], 0);
    }
    r = RunGpugeek("reservations --json" + as, "GPUGEEK_TOKEN=");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["reservations"].size(), rows) << tenant;
    r = RunGpugeek("reservation cancel rsv-00000001" + as, "GPUGEEK_TOKEN=");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_THAT(r.err, ::testing::HasSubstr("admin"));
  }
  r = RunGpugeek("reservation cancel rsv-00000001" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("(ended)"));
  r = RunGpugeek("reservations" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("rsv-00000001 +team-a +H100-SXM-80GB +8 +1.20 +ended "));
  r = RunGpugeek("reservation cancel rsv-00000009" + server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("no reservation 'rsv-00000009'"));
}

TEST_F(ClientCommandsTest, OffersTopUpGrantBalanceLedgerBillAndPayout) {
  // Provider p1 (a tenant) has its nodes join with a join token bound to it: that, not a label the agent
  // sends, makes them p1's (node-b claims another provider and is p1's all the same).
  ASSERT_TRUE(client_->Post("/v1/tenants", {{"name", "p1"}}).ok());
  Result joined = RunGpugeek("join-token create --uses 2 --provider p1 --json" + server_flag_);
  ASSERT_EQ(joined.exit_code, 0) << joined.err;
  EXPECT_EQ(json::parse(joined.out)["provider"], "p1");
  for (const char* node : {"node-a", "node-b"}) agent_->JoinWith(node, json::parse(joined.out)["token"]);
  Result refused = RunGpugeek("join-token create --provider nobody" + server_flag_);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.err, ::testing::HasSubstr("provider: 'nobody' is not a tenant"));
  for (const auto& [node, spec, capacity, price] : {std::tuple{"node-a", "8xH100-SXM-80GB", "on-demand", 2'000'000},
                                                    std::tuple{"node-b", "4xA100-SXM-80GB", "spot", 1'000'000}}) {
    api::Registration r;
    r.node = node;
    r.address = "127.0.0.1";
    r.region = "r1";
    r.capacity_type = capacity;
    r.price_micros_per_gpu_hour = price;
    if (capacity == std::string("spot")) r.min_rental_s = 600;
    if (capacity == std::string("spot")) r.labels["provider"] = "mallory";
    r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec(spec), node, {node, 32, uint64_t{256} << 30, 1, ""});
    ASSERT_TRUE(agent_->Post("/v1/agents/register", api::ToJson(r)).ok());
  }
  Result r = RunGpugeek("offers" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("A100-SXM-80GB +spot +r1 +p1 +1.00 +10m +4 +4 +1 +4\n"
                                              "H100-SXM-80GB +on-demand +r1 +p1 +2.00 +- +8 +8 +1 +8\n"));
  r = RunGpugeek("offers --gpu h100 --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json offers = json::parse(r.out)["offers"];
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(offers[0]["gpu_model"], "H100-SXM-80GB");
  EXPECT_EQ(offers[0]["price_micros_per_gpu_hour"], 2'000'000);
  r = RunGpugeek("offers --spot --min-gpus 5 --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out)["offers"].empty());

  r = RunGpugeek("top-up team-a 10.00 --id inv-1" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Topped up tenant team-a by 10.00 (top-up/team-a/inv-1)\n");
  r = RunGpugeek("top-up team-a 10.00 --id inv-1" + server_flag_);  // a retry: the same top-up
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunGpugeek("grant team-a promo 5.00 --days 30" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::StartsWith("Granted tenant team-a 5.00 of credit (grant/team-a/promo, expires "));
  r = RunGpugeek("top-up team-a lots" + server_flag_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, ::testing::HasSubstr("amount: "));

  auto job = client_->Post(
      "/v1/jobs",
      {{"spec_yaml", "name: paid\nresources: {accelerators: H100-SXM-80GB:1}\nrun: x\n"}, {"tenant", "team-a"}});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = (*job)["id"];
  RunAssignedJob("node-a", id, "hello\n", 0);
  ASSERT_TRUE(WaitFor(id, "SUCCEEDED"));
  r = RunGpugeek("ledger --tenant team-a --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json entries = json::parse(r.out)["entries"];
  ASSERT_EQ(entries.size(), 3u) << r.out;
  EXPECT_EQ(entries[0]["kind"], "top-up");
  EXPECT_EQ(entries[1]["kind"], "grant");
  EXPECT_EQ(entries[2]["id"], "usage/" + id + "/e1/r0");
  EXPECT_EQ(entries[2]["postings"][0]["account"], "tenant:team-a:credit:promo");
  const int64_t cost = -entries[2]["postings"][0]["micros"].get<int64_t>();
  EXPECT_GT(cost, 0);
  r = RunGpugeek("ledger --tenant team-a" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("charge +team-a +" + id + " +-0.0"));

  r = RunGpugeek("balance --tenant team-a" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::StartsWith("Tenant team-a: 14.99"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("cash 10.00)"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("tenant:team-a:credit:promo"));

  r = RunGpugeek("bill --tenant team-a --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json bill = json::parse(r.out);
  ASSERT_EQ(bill["lines"].size(), 1u) << r.out;
  EXPECT_EQ(bill["lines"][0]["gpu_model"], "H100-SXM-80GB");
  EXPECT_EQ(bill["lines"][0]["cost_micros"], cost);
  EXPECT_EQ(bill["usage_micros"], cost);
  EXPECT_EQ(bill["paid_from_credit_micros"], cost);
  EXPECT_EQ(bill["paid_from_cash_micros"], 0);
  EXPECT_EQ(bill["top_ups_micros"], 10'000'000);
  EXPECT_EQ(bill["grants_micros"], 5'000'000);
  EXPECT_EQ(bill["available_now_micros"], 15'000'000 - cost);
  r = RunGpugeek("bill --tenant team-a --period 2020-01" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::HasSubstr("Bill of tenant team-a for 2020-01 (UTC)"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("Paid from credit 0.0000"));
  r = RunGpugeek("bill --period 2020-13" + server_flag_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, ::testing::HasSubstr("must be a calendar month YYYY-MM"));

  // The cost report: the job's GPU time and cost (on the only on-demand H100 node: no saving), a chart.
  const std::string svg = (dir_ / "spend.svg").string();
  r = RunGpugeek("cost-report --tenant team-a --json --svg " + svg + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = json::parse(r.out);
  ASSERT_EQ(report["jobs"].size(), 1u) << r.out;
  EXPECT_EQ(report["jobs"][0]["job"], id);
  EXPECT_EQ(report["jobs"][0]["cost_micros"], cost);
  EXPECT_EQ(report["jobs"][0]["on_demand_micros"], cost);
  EXPECT_EQ(report["jobs"][0]["saving_micros"], 0);
  EXPECT_EQ(report["jobs"][0]["idle_gpu_milli_seconds"], 0);  // no utilisation reported: never idle
  EXPECT_EQ(report["jobs"][0]["refunded_micros"], 0);
  EXPECT_EQ(report["jobs"][0]["net_cost_micros"], cost);
  EXPECT_EQ(report["totals"]["cost_micros"], cost);
  int64_t daily = 0;
  for (const json& d : report["daily_cost_micros"]) daily += d.get<int64_t>();
  EXPECT_EQ(daily, cost);
  std::ifstream chart(svg);
  std::string head(4, '\0');
  chart.read(head.data(), 4);
  EXPECT_EQ(head, "<svg");
  r = RunGpugeek("cost-report --tenant team-a" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex(id + " +team-a +0.000 +0% +0.0"));

  // A dry run: the offers a 4-GPU job for 90 minutes would take (spot A100 first: cheaper), nothing submitted.
  const std::string spec = WriteSpec("dry.yaml",
                                     "name: dry\nresources: {accelerators: A100-SXM-80GB:4, capacity: [spot, "
                                     "on-demand]}\nmax_duration: 90m\nworkdir: .\nrun: x\n");
  r = RunGpugeek("submit " + spec + " --dry-run" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out,
              ::testing::ContainsRegex("A100-SXM-80GB +spot +r1 +p1 +1 x 4 +4.00 +yes +1h30m \\(max\\) +6.00\n"));
  EXPECT_THAT(r.out, ::testing::HasSubstr("Nothing was submitted."));
  EXPECT_EQ((*client_->Get("/v1/jobs"))["jobs"].size(), 1u) << "only the job run above";

  r = RunGpugeek("payout p1 1000 --id wire-1" + server_flag_);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, ::testing::HasSubstr("provider p1 is owed"));
  r = RunGpugeek("payout p1 0.000001 --id wire-1 --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["id"], "payout/p1/wire-1");
  // The provider's month: the job's charge was its sale (no platform fee on this server), one micro-unit paid.
  r = RunGpugeek("earnings --provider p1 --json" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json earned = json::parse(r.out);
  EXPECT_EQ(earned["sales_micros"], cost);
  EXPECT_EQ(earned["fees_micros"], 0);
  EXPECT_EQ(earned["earned_micros"], cost);
  EXPECT_EQ(earned["paid_out_micros"], 1);
  EXPECT_EQ(earned["owed_now_micros"], cost - 1);
  ASSERT_EQ(earned["lines"].size(), 1u);
  EXPECT_EQ(earned["lines"][0]["gpu_model"], "H100-SXM-80GB");
  r = RunGpugeek("earnings --provider p1" + server_flag_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::StartsWith("Earnings of provider p1 for "));
  r = RunGpugeek("earnings --provider nobody" + server_flag_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, ::testing::HasSubstr("no provider 'nobody'"));
}

}  // namespace
}  // namespace gpugeek::cli
