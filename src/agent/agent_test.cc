#include "agent/agent.h"

#include <signal.h>
#include <unistd.h>

#include <sys/stat.h>
#include <chrono>
#include <cmath>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "agent/executor_test_util.h"
#include "agent/workload_listener.h"
#include "api/agent_protocol.h"
#include "common/fake_clock.h"
#include "data/version_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http/client.h"
#include "http/server.h"
#include "hw/emulated_discovery.h"
#include "metrics/registry.h"
#include "pki/pki.h"

namespace gpugeek::agent {
namespace {

using ::gpugeek::agent::testing::ProcessAlive;
using ::gpugeek::agent::testing::ReadAll;
using ::gpugeek::agent::testing::ReapChild;
using ::gpugeek::agent::testing::SpawnLeftover;
using ::gpugeek::agent::testing::TempDir;
using ::gpugeek::agent::testing::WaitForDeath;
using ::gpugeek::agent::testing::WaitForFile;
using ::gpugeek::agent::testing::WriteAll;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::Not;
using namespace std::chrono_literals;

// The two agent endpoints of the control plane, with scripted replies: a test harness for the agent side.
// It decodes every request with the protocol's strict decoders (so the agent's encoding is checked too),
// records registrations and heartbeats, and reassembles each member's log from the chunks by offset.
// What the fake hands a joining agent, and the join token the tests' agents start with.
const std::string kFakeCredential = "ggn_00000000000000ff_" + std::string(43, 'M') + "_node-a";
const std::string kTestJoinToken = "ggj_0123456789abcdef_" + std::string(43, 'J');

class FakeControlPlane {
 public:
  explicit FakeControlPlane(int port = 0) { Start(port); }

  void Start(int port) {
    auto server = http::Server::Create({.host = "127.0.0.1", .port = port, .threads = 4});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    server_->Route("POST", "/v1/agents/register", [this](const http::Request& r) -> absl::StatusOr<http::Reply> {
      auto j = r.JsonBody();
      if (!j.ok()) return j.status();
      auto reg = api::RegistrationFromJson(*j);
      std::lock_guard<std::mutex> lock(mu_);
      if (!reg.ok()) {
        errors_.push_back(std::string(reg.status().message()));
        return reg.status();
      }
      registrations_.push_back(*reg);
      known_ = true;
      const std::string auth = r.headers.count("authorization") ? r.headers.at("authorization") : "";
      register_auth_.push_back(auth);
      // A join (with a join token) is answered with the node's credential, as the real server does.
      const bool join = auth.rfind("Bearer ggj_", 0) == 0;
      return http::Reply::Json(api::ToJson(api::RegistrationReply{.heartbeat_interval_ms = interval_ms_,
                                                                  .lease_ms = lease_ms_,
                                                                  .fence_grace_ms = fence_grace_ms_,
                                                                  .node_credential = join ? kFakeCredential : ""}));
    });
    server_->Route("POST", "/v1/agents/{node}/heartbeat",
                   [this](const http::Request& r) -> absl::StatusOr<http::Reply> {
                     std::function<void()> hook;
                     {
                       std::lock_guard<std::mutex> lock(mu_);
                       hook = on_heartbeat_;
                     }
                     if (hook) hook();  // outside mu_: it may take long (a slow server)
                     auto j = r.JsonBody();
                     if (!j.ok()) return j.status();
                     auto hb = api::HeartbeatFromJson(*j);
                     std::lock_guard<std::mutex> lock(mu_);
                     if (!hb.ok()) {
                       errors_.push_back(std::string(hb.status().message()));
                       return hb.status();
                     }
                     if (hb->node != r.param("node")) errors_.push_back("node in path and body differ");
                     heartbeat_auth_ = r.headers.count("authorization") ? r.headers.at("authorization") : "";
                     if (!known_) return absl::NotFoundError("no node " + r.param("node"));
                     heartbeats_.push_back(*hb);
                     for (const api::LogChunk& c : hb->logs) AddChunk(c);
                     if (fail_heartbeats_ > 0) {
                       --fail_heartbeats_;
                       return absl::UnavailableError("scripted failure after receiving the heartbeat");
                     }
                     api::HeartbeatReply reply{.assignments = assignments_};
                     if (reregister_once_) {
                       reply.reregister = true;
                       reregister_once_ = false;
                     }
                     return http::Reply::Json(api::ToJson(reply));
                   });
    // The node's dataset objects, from the store ServeDatasets names (404 for any object it lacks).
    server_->Route("GET", "/v1/agents/{node}/datasets/{commit}/objects/{digest}",
                   [this](const http::Request& r) -> absl::StatusOr<http::Reply> {
                     std::lock_guard<std::mutex> lock(mu_);
                     dataset_gets_.push_back({r.param("commit"), r.param("digest"),
                                              r.headers.count("authorization") ? r.headers.at("authorization") : ""});
                     if (datasets_ == nullptr) return absl::NotFoundError("no datasets here");
                     absl::StatusOr<std::string> bytes = datasets_->objects().Get(r.param("digest"));
                     if (!bytes.ok()) return absl::NotFoundError("no object " + r.param("digest"));
                     return http::Reply{.content_type = "application/octet-stream", .body = std::move(*bytes)};
                   });
    server_->Route("POST", "/v1/agents/{node}/reclaim", [this](const http::Request& r) -> absl::StatusOr<http::Reply> {
      std::lock_guard<std::mutex> lock(mu_);
      reclaims_.push_back(r.param("node") + " " + r.body);
      return http::Reply::Json({{"node", r.param("node")}});
    });
    ASSERT_TRUE(server_->Start().ok());
    // http::Server::Stop() right after Start() can hang (cpp-httplib 0.11 ignores stop() until its
    // listen loop runs), so wait until the server answers: any answer, here a 404, will do.
    auto client = http::Client::Create({.base_url = server_->url()});
    ASSERT_TRUE(client.ok());
    for (int i = 0; i < 500 && absl::IsUnavailable((*client)->Get("/ready").status()); ++i) {
      std::this_thread::sleep_for(10ms);
    }
  }
  void Stop() { server_->Stop(); }
  std::string url() const { return server_->url(); }
  int port() const { return server_->port(); }

  // Serves dataset objects from `store` (borrowed; must outlive the server).
  void ServeDatasets(const data::VersionStore* store) {
    std::lock_guard<std::mutex> lock(mu_);
    datasets_ = store;
  }
  struct DatasetGet {
    std::string commit, digest, auth;
  };
  std::vector<DatasetGet> dataset_gets() const {
    std::lock_guard<std::mutex> lock(mu_);
    return dataset_gets_;
  }

  // The reclaim notices posted: "NODE BODY".
  std::vector<std::string> reclaims() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reclaims_;
  }
  void SetAssignments(std::vector<api::Assignment> a) {
    std::lock_guard<std::mutex> lock(mu_);
    assignments_ = std::move(a);
  }
  void SetIntervalMs(int64_t ms) {
    std::lock_guard<std::mutex> lock(mu_);
    interval_ms_ = ms;
  }
  void SetLease(int64_t lease_ms, int64_t fence_grace_ms) {
    std::lock_guard<std::mutex> lock(mu_);
    lease_ms_ = lease_ms;
    fence_grace_ms_ = fence_grace_ms;
  }
  // Runs `hook` at the start of handling each heartbeat (before the reply): a slow server, or a clock
  // that moves while the agent waits. Empty: none.
  void OnHeartbeat(std::function<void()> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    on_heartbeat_ = std::move(hook);
  }
  std::vector<std::string> register_auth() {
    std::lock_guard<std::mutex> lock(mu_);
    return register_auth_;
  }
  std::string heartbeat_auth() {
    std::lock_guard<std::mutex> lock(mu_);
    return heartbeat_auth_;
  }
  void ReregisterOnce() {
    std::lock_guard<std::mutex> lock(mu_);
    reregister_once_ = true;
  }
  // The server forgets the node: heartbeats get NotFound until it registers again.
  void ForgetNode() {
    std::lock_guard<std::mutex> lock(mu_);
    known_ = false;
  }
  // The next `n` heartbeats are recorded but answered 503, as if the reply were lost.
  void FailHeartbeats(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_heartbeats_ = n;
  }

  std::vector<api::Registration> registrations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }
  std::vector<api::Heartbeat> heartbeats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return heartbeats_;
  }
  std::optional<api::Heartbeat> last_heartbeat() const {
    std::lock_guard<std::mutex> lock(mu_);
    if (heartbeats_.empty()) return std::nullopt;
    return heartbeats_.back();
  }
  std::string log(const std::string& job, int rank = 0) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = logs_.find({job, rank});
    return it == logs_.end() ? "" : it->second;
  }
  int duplicate_chunks() const {
    std::lock_guard<std::mutex> lock(mu_);
    return duplicates_;
  }
  std::vector<std::string> errors() const {
    std::lock_guard<std::mutex> lock(mu_);
    return errors_;
  }

 private:
  void AddChunk(const api::LogChunk& c) {
    std::string& log = logs_[{c.job_id, c.node_rank}];
    if (c.offset > log.size()) {
      errors_.push_back(fmt::format("log gap: chunk at {} but {} bytes held", c.offset, log.size()));
      return;
    }
    if (c.offset < log.size()) {
      ++duplicates_;
      const std::string overlap = log.substr(c.offset, std::min(c.data.size(), log.size() - c.offset));
      if (c.data.compare(0, overlap.size(), overlap) != 0) errors_.push_back("re-sent log bytes differ");
      if (c.offset + c.data.size() > log.size()) log += c.data.substr(log.size() - c.offset);
      return;
    }
    log += c.data;
  }

  std::unique_ptr<http::Server> server_;
  mutable std::mutex mu_;
  std::vector<api::Assignment> assignments_;
  int64_t interval_ms_ = 1000;
  int64_t lease_ms_ = 3000;
  int64_t fence_grace_ms_ = 2000;
  std::function<void()> on_heartbeat_;
  bool reregister_once_ = false;
  std::vector<std::string> register_auth_;  // the Authorization header of each registration
  std::string heartbeat_auth_;              // of the last heartbeat
  bool known_ = false;
  int fail_heartbeats_ = 0;
  std::vector<api::Registration> registrations_;
  std::vector<std::string> reclaims_;
  const data::VersionStore* datasets_ = nullptr;
  std::vector<DatasetGet> dataset_gets_;
  std::vector<api::Heartbeat> heartbeats_;
  std::map<std::pair<std::string, int>, std::string> logs_;
  int duplicates_ = 0;
  std::vector<std::string> errors_;
};

api::Assignment MakeAssignment(const std::string& job, int64_t epoch, const std::string& run,
                               std::vector<std::string> gpu_uuids = {}, int64_t grace_ms = 2000) {
  return {.job_id = job, .epoch = epoch, .gpu_uuids = std::move(gpu_uuids), .run = run, .grace_ms = grace_ms};
}

// The UUIDs of the agent's GPUs at `indices` (how the server names them in an assignment).
std::vector<std::string> Gpus(const Agent& agent, const std::vector<int>& indices) {
  std::vector<std::string> uuids;
  for (int i : indices) uuids.push_back(agent.inventory().gpus.at(static_cast<size_t>(i)).uuid);
  return uuids;
}

// The value of the exact series `series` (name and labels) in `registry`'s text; "absent" when missing.
std::string SeriesValue(const metrics::Registry& registry, const std::string& series) {
  std::istringstream in(registry.Render());
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(series + " ")) return line.substr(series.size() + 1);
  }
  return "absent";
}

std::optional<api::WorkloadReport> ReportFor(const api::Heartbeat& hb, const std::string& job) {
  for (const api::WorkloadReport& w : hb.workloads) {
    if (w.job_id == job) return w;
  }
  return std::nullopt;
}

std::map<std::string, std::string> ParseEnv(const std::string& text) {
  std::map<std::string, std::string> env;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override { cp_ = std::make_unique<FakeControlPlane>(); }
  void TearDown() override { EXPECT_THAT(cp_->errors(), ::testing::IsEmpty()); }

  std::unique_ptr<Agent> MakeAgent(const std::string& spec = "8xH100-SXM-80GB",
                                   const std::function<void(AgentOptions&)>& tweak = {}) {
    auto discovery = hw::EmulatedDiscovery::Create({.spec = spec, .host_name = "node-a"});
    EXPECT_TRUE(discovery.ok()) << discovery.status();
    discovery_ = std::move(*discovery);
    AgentOptions options{.server_url = cp_->url(),
                         .node = "node-a",
                         .address = "10.0.0.7",
                         .capacity_type = "spot",
                         .region = "cn-east-1",
                         .labels = {{"rack", "r1"}},
                         .discovery = discovery_.get(),
                         .data_dir = dir_.path(),
                         .cgroup_limits = false};
    options.join_token = kTestJoinToken;
    if (tweak) tweak(options);
    auto agent = Agent::Create(std::move(options));
    EXPECT_TRUE(agent.ok()) << agent.status();
    return agent.ok() ? std::move(*agent) : nullptr;
  }

  // Ticks (each must succeed) every 20 ms until `done` holds; false after `timeout`.
  static bool TickUntil(Agent& agent, const std::function<bool()>& done, std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      const absl::Status s = agent.Tick();
      EXPECT_TRUE(s.ok()) << s;
      if (done()) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }

  // The state of `job` in the last heartbeat (nullopt when not reported).
  std::optional<api::WorkloadReport> LastReport(const std::string& job) const {
    auto hb = cp_->last_heartbeat();
    return hb.has_value() ? ReportFor(*hb, job) : std::nullopt;
  }

  std::string WorkDir(const std::string& id) const { return dir_ / ("work/" + id); }

  TempDir dir_;
  std::unique_ptr<FakeControlPlane> cp_;
  std::unique_ptr<hw::EmulatedDiscovery> discovery_;
};

TEST_F(AgentTest, RegistrationCarriesTheEmulatedInventoryAndHeartbeatsCarrySamples) {
  cp_->SetIntervalMs(250);
  auto agent = MakeAgent("8xH100-SXM-80GB");
  ASSERT_NE(agent, nullptr);
  EXPECT_FALSE(agent->registered());
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_TRUE(agent->registered());

  const auto regs = cp_->registrations();
  ASSERT_EQ(regs.size(), 1u);
  const api::Registration& r = regs[0];
  EXPECT_EQ(r.node, "node-a");
  EXPECT_EQ(r.address, "10.0.0.7");
  EXPECT_EQ(r.capacity_type, "spot");
  EXPECT_EQ(r.region, "cn-east-1");
  EXPECT_EQ(r.labels, (std::map<std::string, std::string>{{"rack", "r1"}}));
  ASSERT_EQ(r.inventory.gpus.size(), 8u);
  EXPECT_EQ(r.inventory.gpus[0].model_id, "H100-SXM-80GB");
  EXPECT_EQ(r.inventory.gpus[7].source, "emulated");
  EXPECT_EQ(r.inventory.links[0][5].kind, hw::LinkKind::kNvLink);
  EXPECT_EQ(r.inventory, agent->inventory());
  EXPECT_EQ(r.instance_id, agent->instance_id());
  EXPECT_EQ(agent->instance_id().size(), 32u);

  auto hb = cp_->last_heartbeat();
  ASSERT_TRUE(hb.has_value());
  EXPECT_EQ(hb->node, "node-a");
  EXPECT_EQ(hb->samples.size(), 8u);
  EXPECT_TRUE(hb->workloads.empty());
  EXPECT_EQ(agent->heartbeat_interval(), 250ms) << "the server's interval overrides the configured one";

  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_EQ(cp_->registrations().size(), 1u) << "registers once";
  EXPECT_EQ(cp_->heartbeats().size(), 2u);
  for (const api::Heartbeat& beat : cp_->heartbeats()) EXPECT_EQ(beat.instance_id, agent->instance_id());
  EXPECT_EQ(agent->lease(), 3s) << "RegistrationReply's default lease";
  EXPECT_EQ(agent->fence_grace(), 2s);

  // A restarted agent (a new Agent, as a new process creates) is a new instance under the same name.
  const std::string first = agent->instance_id();
  agent.reset();
  agent = MakeAgent("8xH100-SXM-80GB");
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_EQ(cp_->registrations().size(), 2u);
  EXPECT_EQ(cp_->registrations()[1].node, "node-a");
  EXPECT_EQ(cp_->registrations()[1].instance_id, agent->instance_id());
  EXPECT_NE(agent->instance_id(), first);
  EXPECT_EQ(cp_->last_heartbeat()->instance_id, agent->instance_id());
}

TEST_F(AgentTest, AssignmentStartsAProcessWithItsGpusEnvAndWorkingDirectory) {
  auto agent = MakeAgent("8xH100-SXM-80GB");
  ASSERT_NE(agent, nullptr);
  api::Assignment a = MakeAssignment("job-7", 3, "env > env.txt; pwd > pwd.txt; sleep 30", Gpus(*agent, {2, 5}));
  a.node_rank = 1;
  a.num_nodes = 2;
  a.master_addr = "10.0.0.1";
  a.master_port = 29400;
  a.checkpoint_dir = "/ckpt/job-7";
  a.restart_count = 2;
  a.env = {{"HF_HOME", "/cache"}};
  cp_->SetAssignments({a});

  ASSERT_TRUE(agent->Tick().ok());
  const std::string work = WorkDir("job-7-1");
  ASSERT_TRUE(WaitForFile(work + "/pwd.txt"));
  const auto env = ParseEnv(ReadAll(work + "/env.txt"));
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "2,5") << "the job spec cannot widen its GPUs";
  EXPECT_EQ(env.at("CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
  EXPECT_EQ(env.at("GPUGEEK_JOB_ID"), "job-7");
  EXPECT_EQ(env.at("GPUGEEK_NODE_RANK"), "1");
  EXPECT_EQ(env.at("GPUGEEK_NUM_NODES"), "2");
  EXPECT_EQ(env.at("GPUGEEK_GPUS_PER_NODE"), "2");
  EXPECT_EQ(env.at("GPUGEEK_WORLD_SIZE"), "4");
  EXPECT_EQ(env.at("GPUGEEK_MASTER_ADDR"), "10.0.0.1");
  EXPECT_EQ(env.at("GPUGEEK_MASTER_PORT"), "29400");
  EXPECT_EQ(env.at("GPUGEEK_CHECKPOINT_DIR"), "/ckpt/job-7");
  EXPECT_EQ(env.at("GPUGEEK_RESTART_COUNT"), "2");
  EXPECT_EQ(env.at("HF_HOME"), "/cache");
  EXPECT_FALSE(env.at("PATH").empty());
  EXPECT_THAT(env, Not(Contains(Key("ROCR_VISIBLE_DEVICES"))));
  EXPECT_EQ(ReadAll(work + "/pwd.txt"), std::filesystem::canonical(work).string() + "\n");

  ASSERT_TRUE(agent->Tick().ok());
  auto report = LastReport("job-7");
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->phase, api::WorkloadPhase::kRunning);
  EXPECT_EQ(report->epoch, 3);
  const auto held = agent->Workloads();
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].workload_id, "job-7-1");
  EXPECT_EQ(held[0].state, "running");
  EXPECT_TRUE(ProcessAlive(held[0].pid));
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_EQ(agent->Workloads()[0].pid, held[0].pid) << "a repeated listing does not start it twice";
}

// A member of a job with `dataset:` starts once the node has the version checked out: it sees
// GPUGEEK_DATASET=NAME@COMMIT and GPUGEEK_DATASET_DIR, the checkout in <data_dir>/datasets/versions, whose
// objects the agent fetched with the node's credential. A version the server does not give fails the
// start, naming it.
TEST_F(AgentTest, AMemberWithADatasetStartsOnItsCheckout) {
  auto server_store = data::VersionStore::Open(dir_ / "server-datasets", RealClock());
  ASSERT_TRUE(server_store.ok()) << server_store.status();
  std::filesystem::create_directories(dir_ / "src/sub");
  WriteAll(dir_ / "src/train.txt", "one\ntwo\n");
  WriteAll(dir_ / "src/sub/x.bin", "x");
  auto pushed = (*server_store)->Push(dir_ / "src", {.dataset = "corpus", .message = "v1"});
  ASSERT_TRUE(pushed.ok()) << pushed.status();
  const std::string commit = pushed->commit;
  cp_->ServeDatasets(server_store->get());

  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  if (::geteuid() == 0) {
    // A root agent runs the member as its tenant's uid, which must pass through every folder above the
    // cache by absolute path: the test's folder (0700) refuses it.
    api::Assignment walled = MakeAssignment("job-w", 1, "true");
    walled.dataset = "corpus";
    walled.dataset_commit = commit;
    cp_->SetAssignments({walled});
    ASSERT_TRUE(TickUntil(*agent, [&] {
      auto w = LastReport("job-w");
      return w.has_value() && w->phase == api::WorkloadPhase::kFailedToStart;
    }));
    EXPECT_THAT(
        LastReport("job-w")->message,
        ::testing::AllOf(::testing::StartsWith(fmt::format("dataset corpus@{}: the node's dataset cache "
                                                           "{}/datasets/versions is out of reach of the "
                                                           "member's user (uid ",
                                                           commit.substr(0, 12), dir_.path())),
                         HasSubstr(fmt::format("): {} (mode 700, owner uid 0) does not let it pass;", dir_.path()))));
    EXPECT_TRUE(cp_->dataset_gets().empty()) << "refused before anything was fetched";
    ASSERT_EQ(::chmod(dir_.path().c_str(), 0711), 0);
  }
  api::Assignment a = MakeAssignment("job-d", 1,
                                     "env > env.tmp && mv env.tmp env.txt; "
                                     "cat \"$GPUGEEK_DATASET_DIR/train.txt\" > seen.tmp && mv seen.tmp seen.txt; "
                                     "sleep 30");
  a.dataset = "corpus";
  a.dataset_commit = commit;
  api::Assignment missing = MakeAssignment("job-e", 1, "true");
  missing.dataset = "corpus";
  missing.dataset_commit = std::string(64, 'f');
  cp_->SetAssignments({a, missing});

  const std::string work = WorkDir("job-d-0");
  ASSERT_TRUE(TickUntil(*agent, [&] { return std::filesystem::exists(work + "/seen.txt"); }))
      << ReadAll(dir_ / "logs/job-d-0.log");
  const std::string checkout = dir_ / ("datasets/versions/" + commit);
  const auto env = ParseEnv(ReadAll(work + "/env.txt"));
  EXPECT_EQ(env.at("GPUGEEK_DATASET"), "corpus@" + commit);
  EXPECT_EQ(env.at("GPUGEEK_DATASET_DIR"), checkout);
  EXPECT_EQ(ReadAll(work + "/seen.txt"), "one\ntwo\n");
  EXPECT_EQ(ReadAll(checkout + "/sub/x.bin"), "x");

  // The commit, the two trees and the two files' chunks, each once, as the node; then job-e's commit.
  std::set<std::string> digests;
  for (const auto& g : cp_->dataset_gets()) {
    EXPECT_EQ(g.auth, "Bearer " + kFakeCredential);
    if (g.commit == commit) {
      EXPECT_TRUE(digests.insert(g.digest).second) << "asked twice: " << g.digest;
    } else {
      EXPECT_EQ(g.digest, missing.dataset_commit);
    }
  }
  EXPECT_EQ(digests.size(), 5u);
  EXPECT_TRUE(digests.contains(commit));

  ASSERT_TRUE(TickUntil(*agent, [&] {
    auto e = LastReport("job-e");
    return e.has_value() && e->phase == api::WorkloadPhase::kFailedToStart;
  }));
  EXPECT_THAT(LastReport("job-e")->message, ::testing::StartsWith("dataset corpus@ffffffffffff: downloading object " +
                                                                  missing.dataset_commit + ": "));
  EXPECT_EQ(LastReport("job-d")->phase, api::WorkloadPhase::kRunning);
}

// `curl -sS -o /dev/null -w '%{http_code}' ARGS...`: the HTTP status of a POST to the workload endpoint.
std::string CurlStatus(const std::string& args) {
  std::string out;
  FILE* p = popen(("curl -sS -o /dev/null -w '%{http_code}' " + args).c_str(), "r");
  if (p == nullptr) return "popen failed";
  char buf[64];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  return out;
}

// The checkpoint contract on the node (docs/checkpointing.md): a member reports "step 1200 is complete"
// with curl to GPUGEEK_AGENT_URL and its GPUGEEK_MEMBER_TOKEN; the agent's heartbeats carry the step,
// also with the member's exit. A forged token is 401, a bad body 400 naming the field, and the real
// token once the member has ended 409; nothing of those changes the reported step.
TEST_F(AgentTest, AMemberReportsItsCheckpointThroughTheWorkloadEndpoint) {
  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  auto listener = WorkloadListener::Start("127.0.0.1:0", agent.get());
  ASSERT_TRUE(listener.ok()) << listener.status();
  agent->SetWorkloadUrl((*listener)->url());
  EXPECT_FALSE(WorkloadListener::Start("0.0.0.0:0", agent.get()).ok()) << "loopback only";
  cp_->SetAssignments({MakeAssignment(
      "ckpt", 1,
      "printf '%s' \"$GPUGEEK_MEMBER_TOKEN\" > token.txt; "
      "code=$(curl -sS -o resp.json -w '%{http_code}' -H \"Authorization: Bearer $GPUGEEK_MEMBER_TOKEN\" "
      "-d '{\"step\": 1200}' \"$GPUGEEK_AGENT_URL/v1/checkpoint\"); echo \"$code\" > code.tmp; mv code.tmp code.txt; "
      "exec sleep 30")});
  ASSERT_TRUE(agent->Tick().ok());
  const std::string work = WorkDir("ckpt-0");
  ASSERT_TRUE(WaitForFile(work + "/code.txt"));
  EXPECT_EQ(ReadAll(work + "/code.txt"), "200\n");
  EXPECT_EQ(ReadAll(work + "/resp.json"), R"({"member":"ckpt rank 0 epoch 1","step":1200})");
  const std::string token = ReadAll(work + "/token.txt");
  EXPECT_EQ(token.size(), 32u);
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(LastReport("ckpt").has_value());
  EXPECT_EQ(LastReport("ckpt")->phase, api::WorkloadPhase::kRunning);
  EXPECT_EQ(LastReport("ckpt")->checkpoint_step, 1200);

  const std::string url = (*listener)->url() + "/v1/checkpoint";
  const std::string forged(32, 'a');
  EXPECT_EQ(CurlStatus("-H 'Authorization: Bearer " + forged + "' -d '{\"step\": 1300}' " + url), "401");
  EXPECT_EQ(CurlStatus("-d '{\"step\": 1300}' " + url), "401");
  EXPECT_EQ(CurlStatus("-H 'Authorization: Bearer " + token + "' -d '{\"step\": -1}' " + url), "400");
  EXPECT_EQ(CurlStatus("-H 'Authorization: Bearer " + token + "' -d '{\"stop\": 1}' " + url), "400");
  EXPECT_EQ(CurlStatus("-H 'Authorization: Bearer " + token + "' -d '[1300]' " + url), "400");
  EXPECT_EQ(CurlStatus("-H 'Authorization: Bearer " + token + "' -d '" + std::string(2000, ' ') + "{}' " + url), "413");
  EXPECT_EQ(agent->ReportCheckpoint(token, -1).status().message(),
            "step: -1 is out of range; a checkpoint's step is 0..9007199254740992");
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_EQ(LastReport("ckpt")->checkpoint_step, 1200);

  // The member ends (cancelled): its last report keeps the step; its token no longer counts.
  api::Assignment cancelled = MakeAssignment("ckpt", 1, "exec sleep 30");
  cancelled.cancel = true;
  cp_->SetAssignments({cancelled});
  ASSERT_TRUE(TickUntil(*agent, [&] {
    auto r = LastReport("ckpt");
    return r && r->phase == api::WorkloadPhase::kExited;
  }));
  EXPECT_EQ(LastReport("ckpt")->checkpoint_step, 1200);
  EXPECT_EQ(CurlStatus("-H 'Authorization: Bearer " + token + "' -d '{\"step\": 1300}' " + url), "409");
  // Its exit report, sent again on every beat until the server lets it go, says how long ago it ended
  // (by the agent's monotonic clock), so a server that hears of it late meters it to the exit.
  const int64_t first_ago = LastReport("ckpt")->ended_ms_ago;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_GE(LastReport("ckpt")->ended_ms_ago, first_ago + 300);
  EXPECT_LT(LastReport("ckpt")->ended_ms_ago, 60'000);
}

// A trial's metric reports (docs/hpo.md): posted with curl to POST /v1/report, carried by every heartbeat
// from the seq the server acknowledged (Assignment::metrics_stored) on, with the member's exit too; a
// forged token is 401, a value that is not a number 400; the reply says when the server asked it to stop.
TEST_F(AgentTest, AMemberReportsMetricsUntilTheServerHasStoredThem) {
  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  auto listener = WorkloadListener::Start("127.0.0.1:0", agent.get());
  ASSERT_TRUE(listener.ok()) << listener.status();
  agent->SetWorkloadUrl((*listener)->url());
  const std::string post =
      "curl -sS -H \"Authorization: Bearer $GPUGEEK_MEMBER_TOKEN\" \"$GPUGEEK_AGENT_URL/v1/report\" ";
  cp_->SetAssignments({MakeAssignment("trial", 1,
                                      "printf '%s' \"$GPUGEEK_MEMBER_TOKEN\" > token.txt; " + post +
                                          "-d '{\"step\": 1, \"value\": 2.5}' > r1.json; " + post +
                                          "-d '{\"step\": 2, \"value\": 1.25}' > r2.tmp; mv r2.tmp r2.json; "
                                          "exec sleep 30")});
  ASSERT_TRUE(agent->Tick().ok());
  const std::string work = WorkDir("trial-0");
  ASSERT_TRUE(WaitForFile(work + "/r2.json"));
  EXPECT_EQ(ReadAll(work + "/r1.json"), R"({"member":"trial rank 0 epoch 1","seq":0,"should_stop":false,"step":1})");
  EXPECT_EQ(ReadAll(work + "/r2.json"), R"({"member":"trial rank 0 epoch 1","seq":1,"should_stop":false,"step":2})");
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_EQ(LastReport("trial")->metrics.size(), 2u);
  EXPECT_EQ(LastReport("trial")->metrics[1].step, 2);
  EXPECT_EQ(LastReport("trial")->metrics[1].value, 1.25);

  // The server stored the first: only the second travels from now on.
  api::Assignment stored = MakeAssignment("trial", 1, "exec sleep 30");
  stored.metrics_stored = 1;
  cp_->SetAssignments({stored});
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_EQ(LastReport("trial")->metrics.size(), 1u);
  EXPECT_EQ(LastReport("trial")->metrics[0].seq, 1);

  const std::string token = ReadAll(work + "/token.txt");
  const std::string url = (*listener)->url() + "/v1/report";
  EXPECT_EQ(
      CurlStatus("-H 'Authorization: Bearer " + std::string(32, 'a') + "' -d '{\"step\": 3, \"value\": 1}' " + url),
      "401");
  EXPECT_EQ(CurlStatus("-H 'Authorization: Bearer " + token + "' -d '{\"step\": 3, \"value\": \"1\"}' " + url), "400");
  EXPECT_EQ(CurlStatus("-H 'Authorization: Bearer " + token + "' -d '{\"step\": 3}' " + url), "400");
  EXPECT_EQ(agent->ReportMetric(token, 3, std::nan("")).status().message(), "value: must be a finite number");

  // Asked to stop (a pruned trial): the reply says so, and the member's exit carries what is unstored.
  api::Assignment cancelled = stored;
  cancelled.cancel = true;
  cp_->SetAssignments({cancelled});
  ASSERT_TRUE(agent->Tick().ok());
  auto ack = agent->ReportMetric(token, 3, 0.75);
  if (ack.ok()) {
    EXPECT_TRUE(ack->stop);
    EXPECT_EQ(ack->seq, 2);
  } else {
    EXPECT_EQ(ack.status().code(), absl::StatusCode::kFailedPrecondition);  // already exited
  }
  ASSERT_TRUE(TickUntil(*agent, [&] {
    auto r = LastReport("trial");
    return r && r->phase == api::WorkloadPhase::kExited;
  }));
  ASSERT_GE(LastReport("trial")->metrics.size(), 1u);
  EXPECT_EQ(LastReport("trial")->metrics[0].seq, 1);
}

// A spot node's own reclaim notice (reclaim_notice.h): the provider's instance-action document, served by a
// real HTTP server standing in for the metadata service, is polled; nothing is posted while it answers 404;
// once it names a time 20 s ahead, the agent posts {"deadline_s": 20} to its server, once.
TEST_F(AgentTest, AReclaimNoticeFromTheInstanceMetadataIsPostedOnce) {
  std::mutex mu;
  std::string document;  // "" = 404
  auto metadata = http::Server::Create({.host = "127.0.0.1", .port = 0});
  ASSERT_TRUE(metadata.ok());
  (*metadata)->Route("GET", "/latest/meta-data/spot/instance-action",
                     [&](const http::Request&) -> absl::StatusOr<http::Reply> {
                       std::lock_guard<std::mutex> lock(mu);
                       if (document.empty()) return absl::NotFoundError("no notice");
                       return http::Reply::Text(document, "application/json");
                     });
  ASSERT_TRUE((*metadata)->Start().ok());
  auto source = InstanceActionNotice((*metadata)->url() + "/latest/meta-data/spot/instance-action");
  ASSERT_TRUE(source.ok()) << source.status();
  FakeClock clock(TimePoint(std::chrono::seconds(1'800'000'000)));
  auto agent = MakeAgent("8xH100-SXM-80GB", [&](AgentOptions& o) {
    o.reclaim_notice = source->get();
    o.clock = &clock;
  });
  ASSERT_NE(agent, nullptr);
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(agent->PollReclaimNotice().ok());
  EXPECT_TRUE(cp_->reclaims().empty());
  {
    std::lock_guard<std::mutex> lock(mu);
    document = R"({"action": "terminate", "time": "2027-01-15T08:00:20Z"})";  // 1'800'000'020 s
  }
  ASSERT_TRUE(agent->PollReclaimNotice().ok());
  ASSERT_TRUE(agent->PollReclaimNotice().ok());
  EXPECT_EQ(cp_->reclaims(), std::vector<std::string>{R"(node-a {"deadline_s":20})"});
  (*metadata)->Stop();
}

TEST(ReclaimNotice, TheInstanceActionDocument) {
  EXPECT_EQ(ParseInstanceAction(R"({"action": "terminate", "time": "2027-01-15T08:00:30Z"})")->time_since_epoch(),
            std::chrono::seconds(1'800'000'030));
  EXPECT_EQ(ParseInstanceAction(R"({"action": "stop"})").status().message(),
            "instance-action.time: required, an RFC 3339 time such as 2026-12-02T04:22:00Z");
  EXPECT_FALSE(ParseInstanceAction("<html>").ok());
  EXPECT_FALSE(ParseInstanceAction(R"({"time": "tomorrow"})").ok());
  const TimePoint now(std::chrono::seconds(1'800'000'000));
  EXPECT_EQ(NoticeSeconds(now + std::chrono::milliseconds(29'200), now), 30);
  EXPECT_EQ(NoticeSeconds(now - std::chrono::seconds(5), now), 1) << "late: at least 1 s";
  EXPECT_EQ(NoticeSeconds(now + std::chrono::hours(5), now), 3600);
  EXPECT_FALSE(InstanceActionNotice("https://169.254.169.254/x").ok());
  EXPECT_FALSE(InstanceActionNotice("http://169.254.169.254").ok());
  EXPECT_FALSE(InstanceActionNotice("http://host:99999/x").ok());
  EXPECT_TRUE(InstanceActionNotice("http://169.254.169.254/latest/meta-data/spot/instance-action").ok());
}

TEST_F(AgentTest, Mi300xNodeGetsRocrAndHipVisibleDevices) {
  auto agent = MakeAgent("8xMI300X");
  ASSERT_NE(agent, nullptr);
  cp_->SetAssignments({MakeAssignment("amd", 1, "env > env.txt", Gpus(*agent, {2, 3}))});
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(WaitForFile(WorkDir("amd-0") + "/env.txt"));
  ASSERT_TRUE(TickUntil(*agent, [&] {
    auto r = LastReport("amd");
    return r.has_value() && r->phase == api::WorkloadPhase::kExited;
  }));
  const auto env = ParseEnv(ReadAll(WorkDir("amd-0") + "/env.txt"));
  EXPECT_EQ(env.at("ROCR_VISIBLE_DEVICES"), "2,3");
  EXPECT_EQ(env.at("HIP_VISIBLE_DEVICES"), "0,1");
  EXPECT_THAT(env, Not(Contains(Key("CUDA_VISIBLE_DEVICES"))));
  EXPECT_EQ(env.at("GPUGEEK_GPUS_PER_NODE"), "2");
}

TEST_F(AgentTest, ExitCodesAreReportedUntilTheAssignmentIsUnlisted) {
  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  cp_->SetAssignments({MakeAssignment("ok", 1, "exit 0"), MakeAssignment("bad", 1, "exit 3")});
  ASSERT_TRUE(TickUntil(*agent, [&] {
    auto ok = LastReport("ok"), bad = LastReport("bad");
    return ok && bad && ok->phase == api::WorkloadPhase::kExited && bad->phase == api::WorkloadPhase::kExited;
  }));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(agent->Tick().ok());
    auto ok = LastReport("ok"), bad = LastReport("bad");
    ASSERT_TRUE(ok.has_value() && bad.has_value()) << "kept while listed, tick " << i;
    EXPECT_EQ(ok->phase, api::WorkloadPhase::kExited);
    EXPECT_EQ(ok->exit_code, 0);
    EXPECT_EQ(ok->epoch, 1);
    EXPECT_EQ(bad->exit_code, 3);
    EXPECT_EQ(bad->term_signal, 0);
    EXPECT_EQ(bad->message, "exited with code 3");
  }
  cp_->SetAssignments({MakeAssignment("bad", 1, "exit 3")});
  ASSERT_TRUE(agent->Tick().ok());  // the reply without "ok" arrives
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_FALSE(LastReport("ok").has_value());
  ASSERT_TRUE(LastReport("bad").has_value());
  EXPECT_EQ(LastReport("bad")->exit_code, 3) << "still listed: still reported, never restarted";
  cp_->SetAssignments({});
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_TRUE(cp_->last_heartbeat()->workloads.empty());
  EXPECT_TRUE(agent->Workloads().empty());
}

TEST_F(AgentTest, LogsAreShippedWithIncreasingOffsetsAndNoDuplication) {
  auto agent = MakeAgent("1xL4", [](AgentOptions& o) { o.max_log_bytes_per_workload = 100; });
  ASSERT_NE(agent, nullptr);
  // 20 lines of 20 bytes over ~0.4 s, then 1000 bytes at once: several heartbeats, some at the cap.
  cp_->SetAssignments({MakeAssignment("logs", 1,
                                      "for i in $(seq 10 29); do echo \"line $i of the log.\"; sleep 0.02; done; head "
                                      "-c 1000 /dev/zero | tr '\\0' x")});
  ASSERT_TRUE(TickUntil(*agent, [&] {
    auto r = LastReport("logs");
    return r && r->phase == api::WorkloadPhase::kExited && cp_->log("logs").size() == 1400;
  }));
  const std::string file = ReadAll(dir_ / "logs/logs-0.log");
  EXPECT_EQ(file.size(), 1400u);
  EXPECT_EQ(cp_->log("logs"), file);
  EXPECT_EQ(cp_->duplicate_chunks(), 0);
  uint64_t expected_offset = 0;
  int chunks = 0;
  for (const api::Heartbeat& hb : cp_->heartbeats()) {
    for (const api::LogChunk& c : hb.logs) {
      EXPECT_EQ(c.offset, expected_offset);
      EXPECT_LE(c.data.size(), 100u) << "per-workload cap";
      EXPECT_FALSE(c.data.empty());
      expected_offset += c.data.size();
      ++chunks;
    }
  }
  EXPECT_GE(chunks, 14);
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_TRUE(cp_->last_heartbeat()->logs.empty()) << "nothing new, nothing sent";
}

TEST_F(AgentTest, UnacknowledgedLogBytesAreSentAgainAtTheSameOffset) {
  auto agent = MakeAgent("1xL4");
  ASSERT_NE(agent, nullptr);
  cp_->SetAssignments({MakeAssignment("j", 1, "echo hello; sleep 30")});
  ASSERT_TRUE(TickUntil(*agent, [&] { return cp_->log("j") == "hello\n"; }));
  // More output; the server receives the next heartbeat but its reply is lost.
  std::ofstream(dir_ / "logs/j-0.log", std::ios::app) << "world\n";
  cp_->FailHeartbeats(1);
  EXPECT_EQ(agent->Tick().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(agent->Tick().ok());
  const auto hbs = cp_->heartbeats();
  ASSERT_GE(hbs.size(), 2u);
  const api::Heartbeat& lost = hbs[hbs.size() - 2];
  const api::Heartbeat& again = hbs.back();
  ASSERT_EQ(lost.logs.size(), 1u);
  ASSERT_EQ(again.logs.size(), 1u);
  EXPECT_EQ(lost.logs[0].offset, 6u);
  EXPECT_EQ(again.logs[0].offset, 6u);
  EXPECT_EQ(again.logs[0].data, "world\n");
  EXPECT_EQ(cp_->log("j"), "hello\nworld\n");
}

// The defect: log bytes went as JSON strings, so output that was not UTF-8 arrived altered (U+FFFD) and
// then partly dropped ("hello world" became "llo world": the offsets no longer matched). Chunks now
// carry raw bytes (base64 on the wire): the server's copy is the file, byte for byte.
TEST_F(AgentTest, NonUtf8OutputArrivesByteExact) {
  auto agent = MakeAgent("1xL4");
  ASSERT_NE(agent, nullptr);
  // dash's printf takes octal escapes: \377\376 are the bytes 0xff 0xfe (invalid UTF-8).
  cp_->SetAssignments({MakeAssignment("bytes", 1, "printf '\\377\\376hello world\\n'; printf 'caf\\303'")});
  const std::string expected = std::string("\xff\xfe") + "hello world\n" + "caf\xc3";
  ASSERT_TRUE(TickUntil(*agent, [&] {
    auto r = LastReport("bytes");
    return r && r->phase == api::WorkloadPhase::kExited && cp_->log("bytes").size() >= expected.size();
  }));
  EXPECT_EQ(ReadAll(dir_ / "logs/bytes-0.log"), expected);
  EXPECT_EQ(cp_->log("bytes"), expected);
  std::string shipped;
  for (const api::Heartbeat& hb : cp_->heartbeats()) {
    for (const api::LogChunk& c : hb.logs) {
      EXPECT_EQ(c.offset, shipped.size());
      shipped += c.data;
    }
  }
  EXPECT_EQ(shipped, expected);
  EXPECT_EQ(cp_->duplicate_chunks(), 0);
}

TEST_F(AgentTest, CancelTerminatesTheProcessGroupWithinTheGrace) {
  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  // A workload that ignores SIGTERM (so does its child): only the SIGKILL after the grace stops it.
  api::Assignment a = MakeAssignment("c", 1, "trap '' TERM; sleep 300 & echo $! > child.pid; wait", {}, 300);
  cp_->SetAssignments({a});
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(WaitForFile(WorkDir("c-0") + "/child.pid"));
  const pid_t child = std::stoi(ReadAll(WorkDir("c-0") + "/child.pid"));
  const pid_t shell = agent->Workloads().at(0).pid;
  ASSERT_TRUE(ProcessAlive(child));

  a.cancel = true;
  cp_->SetAssignments({a});
  const auto cancelled_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_EQ(agent->Workloads().at(0).state, "stopping");
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_TRUE(ProcessAlive(child)) << "SIGTERM is ignored; the grace has not run out";
  ASSERT_TRUE(TickUntil(*agent, [&] {
    auto r = LastReport("c");
    return r && r->phase == api::WorkloadPhase::kExited;
  }));
  const auto elapsed = std::chrono::steady_clock::now() - cancelled_at;
  EXPECT_GE(elapsed, 300ms);
  EXPECT_LT(elapsed, 2s);
  auto r = LastReport("c");
  EXPECT_EQ(r->term_signal, SIGKILL);
  EXPECT_FALSE(r->exit_code.has_value());
  EXPECT_THAT(r->message, HasSubstr("after the cancel grace period"));
  EXPECT_TRUE(WaitForDeath(child, 2s)) << "the whole group was killed";
  EXPECT_FALSE(ProcessAlive(shell));
}

TEST_F(AgentTest, AnAssignmentThatDisappearsIsStopped) {
  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  cp_->SetAssignments({MakeAssignment("gone", 1, "sleep 300")});
  ASSERT_TRUE(agent->Tick().ok());
  const pid_t pid = agent->Workloads().at(0).pid;
  ASSERT_TRUE(ProcessAlive(pid));
  cp_->SetAssignments({});
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(TickUntil(*agent, [&] { return agent->Workloads().empty(); }));
  EXPECT_TRUE(WaitForDeath(pid, 2s));
  EXPECT_TRUE(cp_->last_heartbeat()->workloads.empty()) << "an unlisted workload that ended is forgotten";
}

TEST_F(AgentTest, CancelledBeforeItStartedIsNeverRun) {
  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  api::Assignment a = MakeAssignment("never", 2, "touch ran");
  a.cancel = true;
  cp_->SetAssignments({a});
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(agent->Tick().ok());
  auto r = LastReport("never");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->phase, api::WorkloadPhase::kExited);
  EXPECT_EQ(r->epoch, 2);
  EXPECT_EQ(r->message, "cancelled before it started");
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(std::filesystem::exists(WorkDir("never-0") + "/ran"));
}

TEST_F(AgentTest, ABadAssignmentIsReportedFailedToStart) {
  auto agent = MakeAgent("2xL4");
  ASSERT_NE(agent, nullptr);
  const std::string l4 = agent->inventory().gpus[0].uuid;
  cp_->SetAssignments({MakeAssignment("unknown", 1, "touch ran", {l4, "GPU-8f3c0d1e-not-on-this-node"}),
                       MakeAssignment("twice", 1, "touch ran", {l4, l4}), MakeAssignment("bad/id", 1, "true")});
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(agent->Tick().ok());
  auto unknown = LastReport("unknown");
  ASSERT_TRUE(unknown.has_value());
  EXPECT_EQ(unknown->phase, api::WorkloadPhase::kFailedToStart);
  EXPECT_EQ(unknown->message, "GPU GPU-8f3c0d1e-not-on-this-node is not on node node-a (it has 2 GPUs)");
  auto twice = LastReport("twice");
  ASSERT_TRUE(twice.has_value());
  EXPECT_EQ(twice->phase, api::WorkloadPhase::kFailedToStart);
  EXPECT_EQ(twice->message, fmt::format("GPU {} is assigned twice", l4));
  EXPECT_FALSE(std::filesystem::exists(WorkDir("unknown-0") + "/ran"));
  EXPECT_FALSE(std::filesystem::exists(WorkDir("twice-0") + "/ran"));
  auto bad = LastReport("bad/id");
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->phase, api::WorkloadPhase::kFailedToStart);
  EXPECT_THAT(bad->message, HasSubstr("workload id"));
}

// Containers without podman behind them: the image list comes from `PODMAN images --format json` (a stand-in
// script here, whose answer the test changes), travels in the registration, and a change registers again;
// a member whose image the node lacks, or on an agent without podman, fails to start naming it.
TEST_F(AgentTest, ImagesAreRegisteredAndAMissingImageFailsTheStart) {
  const std::string script = dir_.path() + "/fake-podman.sh";
  const std::string list = dir_.path() + "/images.json";
  std::ofstream(script) << "case \"$1\" in images) cat " << list << " ;; ps) ;; *) exit 1 ;; esac\n";
  std::ofstream(list) << R"([{"Names": ["localhost/busybox:latest"]}])";
  auto agent = MakeAgent("2xL4", [&](AgentOptions& o) {
    o.podman = {"/bin/sh", script};
    o.image_refresh = 50ms;
  });
  ASSERT_NE(agent, nullptr);
  api::Assignment other = MakeAssignment("other", 1, "touch ran");
  other.image = "localhost/other:latest";
  cp_->SetAssignments({other});
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_EQ(cp_->registrations().size(), 1u);
  EXPECT_EQ(cp_->registrations()[0].images, std::vector<std::string>{"localhost/busybox:latest"});
  auto r = LastReport("other");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->phase, api::WorkloadPhase::kFailedToStart);
  EXPECT_EQ(r->message,
            "image localhost/other:latest is not on node node-a (podman images lists "
            "[localhost/busybox:latest])");
  EXPECT_FALSE(std::filesystem::exists(WorkDir("other-0") + "/ran"));

  // The node gains an image: the agent registers again (same instance) with the new list.
  std::ofstream(list) << R"([{"Names": ["localhost/other:latest", "localhost/busybox:latest"]}])";
  ASSERT_TRUE(TickUntil(*agent, [&] { return cp_->registrations().size() == 2; }));
  EXPECT_EQ(cp_->registrations()[1].images,
            (std::vector<std::string>{"localhost/busybox:latest", "localhost/other:latest"}));
  EXPECT_EQ(cp_->registrations()[1].instance_id, agent->instance_id());

  // An agent without podman runs no containers.
  agent.reset();
  auto plain = MakeAgent("2xL4");
  ASSERT_NE(plain, nullptr);
  api::Assignment boxed = MakeAssignment("boxed", 1, "touch ran");
  boxed.image = "localhost/busybox:latest";
  cp_->SetAssignments({boxed});
  ASSERT_TRUE(plain->Tick().ok());
  ASSERT_TRUE(plain->Tick().ok());
  auto b = LastReport("boxed");
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->phase, api::WorkloadPhase::kFailedToStart);
  EXPECT_EQ(b->message,
            "image localhost/busybox:latest: node node-a runs no containers (start its agent with --podman)");
  EXPECT_EQ(cp_->registrations().back().images, std::vector<std::string>{});
}

TEST_F(AgentTest, AnAssignmentWithALowerEpochThanOneSeenIsNeverStarted) {
  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  cp_->SetAssignments({MakeAssignment("f", 5, "echo epoch5 >> marks")});
  ASSERT_TRUE(TickUntil(*agent, [&] {
    auto r = LastReport("f");
    return r && r->phase == api::WorkloadPhase::kExited;
  }));
  cp_->SetAssignments({});
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_TRUE(agent->Workloads().empty());

  // A stale reply (e.g. from before a requeue) lists the job at an older epoch, then at the same one.
  cp_->SetAssignments({MakeAssignment("f", 4, "echo epoch4 >> marks")});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent->Tick().ok());
  cp_->SetAssignments({MakeAssignment("f", 5, "echo epoch5-again >> marks")});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent->Tick().ok());
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(ReadAll(WorkDir("f-0") + "/marks"), "epoch5\n");
  EXPECT_TRUE(agent->Workloads().empty());
  EXPECT_FALSE(LastReport("f").has_value());

  // While epoch 7 runs, a stale epoch 6 listed beside it does not disturb it.
  cp_->SetAssignments({MakeAssignment("f", 7, "echo epoch7 >> marks; sleep 300")});
  ASSERT_TRUE(agent->Tick().ok());
  const pid_t pid = agent->Workloads().at(0).pid;
  cp_->SetAssignments(
      {MakeAssignment("f", 6, "echo epoch6 >> marks"), MakeAssignment("f", 7, "echo epoch7 >> marks; sleep 300")});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent->Tick().ok());
  EXPECT_EQ(agent->Workloads().at(0).pid, pid);
  EXPECT_EQ(agent->Workloads().at(0).state, "running");
  // epoch 7's shell may not have written its mark yet on a loaded machine: wait for it (bounded).
  for (int i = 0; i < 100 && ReadAll(WorkDir("f-0") + "/marks") != "epoch5\nepoch7\n"; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(ReadAll(WorkDir("f-0") + "/marks"), "epoch5\nepoch7\n");
}

TEST_F(AgentTest, AHigherEpochReplacesTheRunningWorkload) {
  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  cp_->SetAssignments(
      {MakeAssignment("r", 1, "echo start-$GPUGEEK_RESTART_COUNT >> marks; sleep 300", Gpus(*agent, {0}))});
  ASSERT_TRUE(agent->Tick().ok());
  const pid_t old_pid = agent->Workloads().at(0).pid;
  ASSERT_TRUE(WaitForFile(WorkDir("r-0") + "/marks"));

  api::Assignment next =
      MakeAssignment("r", 2, "echo start-$GPUGEEK_RESTART_COUNT >> marks; sleep 300", Gpus(*agent, {1}));
  next.restart_count = 1;
  cp_->SetAssignments({next});
  ASSERT_TRUE(TickUntil(*agent, [&] {
    auto w = agent->Workloads();
    return w.size() == 1 && w[0].epoch == 2 && w[0].state == "running";
  }));
  EXPECT_TRUE(WaitForDeath(old_pid, 2s));
  EXPECT_NE(agent->Workloads().at(0).pid, old_pid);
  ASSERT_TRUE(TickUntil(*agent, [&] { return ReadAll(WorkDir("r-0") + "/marks") == "start-0\nstart-1\n"; }));
  auto r = LastReport("r");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->epoch, 2);
  EXPECT_EQ(r->phase, api::WorkloadPhase::kRunning);
}

// The defect: after a node loss a job ran twice at once: the cut-off agent kept its workload running
// (11.7 s of two writers on one checkpoint after a freeze; without end if the agent never heard back)
// while the server re-placed the job. Now the agent fences itself at lease_ms after the SEND of its last
// answered heartbeat (on the monotonic clock), SIGKILLs what is left by lease + fence grace, starts
// nothing while fenced, and un-fences on the first answer that comes within the lease.
TEST_F(AgentTest, FencesItselfWhenNoHeartbeatIsAnsweredWithinTheLease) {
  FakeClock clock(TimePoint(std::chrono::seconds(1'700'000'000)));
  metrics::Registry registry;
  auto agent = MakeAgent("2xH100-SXM-80GB", [&](AgentOptions& o) {
    o.clock = &clock;
    o.metrics = &registry;
  });
  ASSERT_NE(agent, nullptr);
  // "polite" ends on SIGTERM; "stubborn" and its child ignore it. Both have a grace (30 s) longer than
  // the fence grace (2 s), which caps it.
  const api::Assignment polite = MakeAssignment("polite", 1, "sleep 300", {}, 30000);
  const api::Assignment stubborn =
      MakeAssignment("stubborn", 1, "trap '' TERM; sleep 300 & echo $! > child.pid; wait", {}, 30000);
  cp_->SetAssignments({polite, stubborn});
  ASSERT_TRUE(agent->Tick().ok());  // sent at t = 0 and answered
  ASSERT_TRUE(WaitForFile(WorkDir("stubborn-0") + "/child.pid"));
  const pid_t child = std::stoi(ReadAll(WorkDir("stubborn-0") + "/child.pid"));
  ASSERT_EQ(agent->Workloads().size(), 2u);
  const pid_t polite_pid = agent->Workloads()[0].pid;
  const pid_t stubborn_pid = agent->Workloads()[1].pid;
  EXPECT_EQ(SeriesValue(registry, R"(gpugeek_agent_fenced_total{node="node-a"})"), "0");

  clock.Advance(1s);
  ASSERT_TRUE(agent->Tick().ok());  // sent at t = 1 s and answered: the lease runs to t = 4 s
  cp_->FailHeartbeats(1000);        // from now on no answer reaches the agent
  clock.Advance(2900ms);            // t = 3.9 s
  EXPECT_EQ(agent->Tick().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(agent->fenced());
  EXPECT_TRUE(ProcessAlive(polite_pid));
  EXPECT_EQ(agent->Workloads()[0].state, "running");

  clock.Advance(100ms);  // t = 4 s: lease_ms after the last answered send
  EXPECT_EQ(agent->Tick().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(agent->fenced());
  EXPECT_EQ(SeriesValue(registry, R"(gpugeek_agent_fenced_total{node="node-a"})"), "1");
  EXPECT_TRUE(WaitForDeath(polite_pid, 5s)) << "SIGTERM when the lease ran out";
  EXPECT_TRUE(ProcessAlive(child)) << "it ignores SIGTERM; the fence grace has not run out";

  clock.Advance(1900ms);  // t = 5.9 s
  EXPECT_EQ(agent->Tick().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(ProcessAlive(child)) << "SIGKILL only at lease + fence grace";
  EXPECT_EQ(agent->Workloads()[1].state, "stopping");
  clock.Advance(100ms);  // t = 6 s = last answered send + lease + fence grace
  EXPECT_EQ(agent->Tick().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(WaitForDeath(child, 5s)) << "SIGKILLed by lease + fence grace, not after its own 30 s grace";
  EXPECT_TRUE(WaitForDeath(stubborn_pid, 5s));
  EXPECT_EQ(SeriesValue(registry, R"(gpugeek_agent_fenced_total{node="node-a"})"), "1") << "one fencing, counted once";

  // An answer arrives, but 3.5 s after its heartbeat was sent: past the lease even from that send, so
  // the agent stays fenced and starts nothing the reply lists.
  cp_->FailHeartbeats(0);
  cp_->SetAssignments({polite, stubborn, MakeAssignment("fresh", 1, "echo up > started; sleep 300")});
  cp_->OnHeartbeat([&] { clock.Advance(3500ms); });
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_TRUE(agent->fenced());
  for (const WorkloadStatus& w : agent->Workloads()) EXPECT_NE(w.job_id, "fresh") << "started while fenced";
  EXPECT_FALSE(std::filesystem::exists(WorkDir("fresh-0")));

  // Answered within the lease: un-fenced, and the reply is reconciled as usual.
  cp_->OnHeartbeat(nullptr);
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_FALSE(agent->fenced());
  ASSERT_TRUE(WaitForFile(WorkDir("fresh-0") + "/started"));
  ASSERT_TRUE(agent->Tick().ok());
  auto fresh = LastReport("fresh");
  ASSERT_TRUE(fresh.has_value());
  EXPECT_EQ(fresh->phase, api::WorkloadPhase::kRunning);
  // The fenced ones stay ended (their epoch is never started twice), reported as fenced, not failed.
  auto p = LastReport("polite"), st = LastReport("stubborn");
  ASSERT_TRUE(p.has_value() && st.has_value());
  EXPECT_EQ(p->phase, api::WorkloadPhase::kExited);
  EXPECT_EQ(p->term_signal, SIGTERM);
  EXPECT_TRUE(p->message.starts_with("fenced: the agent lost contact with the server for its 3000 ms lease; "))
      << p->message;
  EXPECT_EQ(st->term_signal, SIGKILL);
  EXPECT_TRUE(st->message.starts_with("fenced: ")) << st->message;
  EXPECT_EQ(SeriesValue(registry, R"(gpugeek_agent_fenced_total{node="node-a"})"), "1");
}

TEST_F(AgentTest, AWallClockStepDoesNotFence) {
  FakeClock clock(TimePoint(std::chrono::seconds(1'700'000'000)));
  auto agent = MakeAgent("1xL4", [&](AgentOptions& o) { o.clock = &clock; });
  ASSERT_NE(agent, nullptr);
  cp_->SetAssignments({MakeAssignment("steady", 1, "sleep 300")});
  ASSERT_TRUE(agent->Tick().ok());  // sent at monotonic t = 0 and answered
  const pid_t pid = agent->Workloads().at(0).pid;
  clock.StepWall(1h);
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_FALSE(agent->fenced());

  cp_->FailHeartbeats(1000);
  clock.StepWall(1h);  // NTP, or `date -s`: two hours ahead of the last answer on the wall clock
  EXPECT_EQ(agent->Tick().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(agent->fenced());
  clock.StepWall(-3h);  // and then an hour behind it
  EXPECT_EQ(agent->Tick().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(agent->fenced());
  EXPECT_TRUE(ProcessAlive(pid));
  EXPECT_EQ(agent->Workloads().at(0).state, "running");

  clock.Advance(2999ms);  // real time passing is what counts
  EXPECT_EQ(agent->Tick().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(agent->fenced());
  clock.Advance(1ms);
  EXPECT_EQ(agent->Tick().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(agent->fenced());
  EXPECT_TRUE(WaitForDeath(pid, 5s));
}

// Each answered heartbeat renews the workloads' shim leases, so a workload outlives many leases while the
// server answers. An agent that then stops running (frozen: here, simply never ticked again, so it does
// not fence itself either) leaves it to the shim, which stops it by last send + lease + 200 ms slack +
// the fence grace (the shim's grace: min(grace_ms, fence grace), not the assignment's 30 s). When the
// agent runs again it fences first and reports the workload as fenced, not failed.
TEST_F(AgentTest, AnsweredHeartbeatsRenewTheShimLeaseAndAFrozenAgentsWorkloadStillStops) {
  cp_->SetLease(300, 200);
  auto agent = MakeAgent("1xL4");
  ASSERT_NE(agent, nullptr);
  cp_->SetAssignments({MakeAssignment("j", 1, "trap '' TERM; sleep 300 & echo $! > child.pid; wait", {}, 30000)});
  ASSERT_TRUE(TickUntil(*agent, [&] { return std::filesystem::exists(WorkDir("j-0") + "/child.pid"); }));
  ASSERT_TRUE(WaitForFile(WorkDir("j-0") + "/child.pid"));
  const pid_t child = std::stoi(ReadAll(WorkDir("j-0") + "/child.pid"));
  const pid_t shim = agent->Workloads().at(0).pid;
  EXPECT_EQ(agent->lease(), 300ms);

  // 1.5 s of answered heartbeats: five leases.
  const auto until = std::chrono::steady_clock::now() + 1500ms;
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_TRUE(agent->Tick().ok());
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(agent->Tick().ok());
  const auto frozen_at = std::chrono::steady_clock::now();  // after the last send
  EXPECT_TRUE(ProcessAlive(child)) << "the lease was renewed";
  EXPECT_EQ(agent->Workloads().at(0).state, "running");

  EXPECT_TRUE(WaitForDeath(child, 3s)) << "the shim did not stop the frozen agent's workload";
  const auto died_after = std::chrono::steady_clock::now() - frozen_at;
  EXPECT_GE(died_after, 600ms) << "SIGKILL before send + lease + slack + fence grace (700 ms)";
  EXPECT_LT(died_after, 1700ms);
  EXPECT_TRUE(WaitForDeath(shim, 2s));
  EXPECT_FALSE(agent->fenced()) << "a frozen agent does not fence itself";

  // The agent runs again: it fences at once (its lease ran out long ago) and reports the exit as fenced.
  ASSERT_TRUE(TickUntil(*agent, [&] {
    auto r = LastReport("j");
    return r && r->phase == api::WorkloadPhase::kExited;
  }));
  auto r = LastReport("j");
  EXPECT_EQ(r->term_signal, SIGKILL);
  EXPECT_TRUE(r->message.starts_with("fenced: the agent lost contact with the server for its 300 ms lease; "))
      << r->message;
}

// A heartbeat can block for the whole request timeout (10 s) when the server is cut off mid-request;
// the lease must still be enforced on time. Run's watchdog fences and delivers the SIGKILL meanwhile.
TEST_F(AgentTest, RunFencesOnTimeWhileAHeartbeatHangs) {
  cp_->SetIntervalMs(50);
  cp_->SetLease(300, 200);
  auto agent = MakeAgent("1xL4");
  ASSERT_NE(agent, nullptr);
  cp_->SetAssignments({MakeAssignment("hang", 1, "trap '' TERM; sleep 300 & echo $! > child.pid; wait", {}, 30000)});
  std::jthread runner([&](std::stop_token stop) { EXPECT_TRUE(agent->Run(stop).ok()); });
  ASSERT_TRUE(WaitForFile(WorkDir("hang-0") + "/child.pid"));
  const pid_t child = std::stoi(ReadAll(WorkDir("hang-0") + "/child.pid"));
  EXPECT_EQ(agent->lease(), 300ms);
  EXPECT_FALSE(agent->fenced());

  cp_->OnHeartbeat([] { std::this_thread::sleep_for(4s); });  // the server stops answering, mid-request
  const auto hung_at = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitForDeath(child, 4s));
  const auto killed_after = std::chrono::steady_clock::now() - hung_at;
  // Last answered send <= ~60 ms after hung_at; fence at +300 ms, SIGKILL at +500 ms (+ a 100 ms poll).
  EXPECT_LT(killed_after, 2500ms) << "the fence waited for the hung request";
  EXPECT_GE(killed_after, 200ms) << "SIGKILL came before lease + fence grace";
  EXPECT_TRUE(agent->fenced());

  cp_->OnHeartbeat(nullptr);  // answers again: un-fenced at the next heartbeat
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (agent->fenced() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(agent->fenced());
  runner.request_stop();
}

TEST_F(AgentTest, UnreachableServerIsUnavailableAndTheNextTickAfterItIsBackWorks) {
  const int port = cp_->port();
  cp_->Stop();
  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  EXPECT_EQ(agent->Tick().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(agent->registered());

  cp_ = std::make_unique<FakeControlPlane>(port);
  cp_->SetAssignments({MakeAssignment("j", 1, "sleep 300")});
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_EQ(cp_->registrations().size(), 1u);
  EXPECT_EQ(agent->Workloads().size(), 1u);

  // Lost again while the workload runs: it keeps running; contact resumes on the same registration.
  cp_->Stop();
  EXPECT_EQ(agent->Tick().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(ProcessAlive(agent->Workloads().at(0).pid));
  cp_->Start(port);
  cp_->SetAssignments({MakeAssignment("j", 1, "sleep 300")});
  ASSERT_TRUE(agent->Tick().ok());
}

TEST_F(AgentTest, ReregistersWhenAskedOrWhenTheServerForgotTheNode) {
  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  cp_->SetAssignments({MakeAssignment("j", 1, "sleep 300")});
  ASSERT_TRUE(agent->Tick().ok());
  const pid_t pid = agent->Workloads().at(0).pid;
  EXPECT_EQ(cp_->registrations().size(), 1u);

  cp_->ReregisterOnce();
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_EQ(cp_->registrations().size(), 2u);

  cp_->ForgetNode();
  cp_->SetAssignments({});  // a server that lost the node has nothing listed for it
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_EQ(cp_->registrations().size(), 3u);
  EXPECT_EQ(agent->Workloads().at(0).state, "running") << "a NotFound reply is not a desired state";
  EXPECT_TRUE(ProcessAlive(pid));
  ASSERT_TRUE(agent->Tick().ok());
  EXPECT_EQ(cp_->registrations().size(), 3u);
  EXPECT_EQ(agent->Workloads().at(0).state, "stopping") << "the first real reply is reconciled";
}

TEST_F(AgentTest, CpuAndMemoryLimitsGoToTheWorkloadsCgroups) {
  TempDir cgroot;
  WriteAll(cgroot / "memory/memory.limit_in_bytes", "9223372036854771712\n");
  WriteAll(cgroot / "cpu/cpu.cfs_quota_us", "-1\n");
  auto agent = MakeAgent("1xL4", [&](AgentOptions& o) {
    o.cgroup_limits = true;
    o.cgroups.root = cgroot.path();
  });
  ASSERT_NE(agent, nullptr);
  EXPECT_EQ(agent->CgroupDescription(), "cgroup v1");
  api::Assignment a = MakeAssignment("lim", 1, "sleep 300");
  a.cpu_milli = 1500;
  a.memory_bytes = 64ull << 20;
  cp_->SetAssignments({a});
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_EQ(agent->Workloads().at(0).state, "running") << agent->Workloads().at(0).message;
  EXPECT_EQ(ReadAll(cgroot / "memory/gpugeek/node-a/lim-0/memory.limit_in_bytes"), std::to_string(64ull << 20));
  EXPECT_EQ(ReadAll(cgroot / "cpu/gpugeek/node-a/lim-0/cpu.cfs_quota_us"), "150000");
  EXPECT_EQ(ReadAll(cgroot / "memory/gpugeek/node-a/lim-0/cgroup.procs"), std::to_string(agent->Workloads().at(0).pid));
  cp_->SetAssignments({});
  ASSERT_TRUE(TickUntil(*agent, [&] { return agent->Workloads().empty(); }));
}

// The defect: after `kill -9` of an agent and a restart with the same name, its old workload kept running
// unsupervised in its cgroup, and the job placed back on the node failed to start ("cgroup ... already
// exists"). The restarted agent ends the leftover before it registers, and the job starts.
TEST_F(AgentTest, ARestartedAgentEndsWhatThePreviousOneLeftInItsCgroups) {
  TempDir cgroot;
  WriteAll(cgroot / "memory/memory.limit_in_bytes", "9223372036854771712\n");
  WriteAll(cgroot / "cpu/cpu.cfs_quota_us", "-1\n");
  // What the killed agent left: `sleep` of job j-00000001 in node-a's groups, and another node's group.
  const pid_t leftover = SpawnLeftover({cgroot / "memory/gpugeek/node-a/j-00000001-0/cgroup.procs",
                                        cgroot / "cpu/gpugeek/node-a/j-00000001-0/cgroup.procs"});
  std::filesystem::create_directories(cgroot / "memory/gpugeek/node-b/other-0");
  auto with_cgroups = [&](AgentOptions& o) {
    o.cgroup_limits = true;
    o.cgroups.root = cgroot.path();
  };
  auto agent = MakeAgent("2xH100-SXM-80GB", with_cgroups);
  ASSERT_NE(agent, nullptr);
  EXPECT_TRUE(cp_->registrations().empty()) << "reaped before it registers";
  EXPECT_TRUE(WaitForDeath(leftover)) << "the previous agent's workload was left running";
  ReapChild(leftover);
  EXPECT_FALSE(std::filesystem::exists(cgroot / "memory/gpugeek/node-a/j-00000001-0"));
  EXPECT_FALSE(std::filesystem::exists(cgroot / "cpu/gpugeek/node-a/j-00000001-0"));
  EXPECT_TRUE(std::filesystem::exists(cgroot / "memory/gpugeek/node-b/other-0")) << "another node's";

  api::Assignment a = MakeAssignment("j-00000001", 1, "sleep 300", Gpus(*agent, {0}));
  a.memory_bytes = 64ull << 20;
  cp_->SetAssignments({a});
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_EQ(agent->Workloads().at(0).state, "running") << agent->Workloads().at(0).message;
  const pid_t pid = agent->Workloads().at(0).pid;
  EXPECT_EQ(ReadAll(cgroot / "memory/gpugeek/node-a/j-00000001-0/cgroup.procs"), std::to_string(pid));

  // While it lives, no second agent of node-a on this host (it would reap the first one's workloads).
  auto discovery = hw::EmulatedDiscovery::Create({.spec = "1xL4"});
  ASSERT_TRUE(discovery.ok());
  TempDir other_data;
  AgentOptions twin{
      .server_url = cp_->url(), .join_token = kTestJoinToken, .node = "node-a", .discovery = discovery->get()};
  twin.data_dir = other_data.path();
  with_cgroups(twin);
  const auto second = Agent::Create(twin);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("another agent named node-a"));
  EXPECT_TRUE(ProcessAlive(pid));

  // Leaving (here without a graceful stop) kills its workload and removes node-a's group.
  agent.reset();
  EXPECT_TRUE(WaitForDeath(pid));
  EXPECT_FALSE(std::filesystem::exists(cgroot / "memory/gpugeek/node-a"));
  EXPECT_FALSE(std::filesystem::exists(cgroot / "cpu/gpugeek/node-a"));
  EXPECT_TRUE(std::filesystem::exists(cgroot / "memory/gpugeek/node-b/other-0"));
  // The name is free again: an agent of node-a can start.
  EXPECT_TRUE(Agent::Create(twin).ok());
}

TEST_F(AgentTest, RunRegistersHeartbeatsAndStopsWorkloadsOnStop) {
  cp_->SetIntervalMs(50);
  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  cp_->SetAssignments({MakeAssignment("run", 1, "sleep 300", {}, 5000)});
  absl::Status result = absl::UnknownError("not returned");
  std::jthread runner([&](std::stop_token stop) { result = agent->Run(stop); });
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  pid_t pid = 0;
  while (std::chrono::steady_clock::now() < deadline && pid == 0) {
    for (const WorkloadStatus& w : agent->Workloads()) pid = w.pid;
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_NE(pid, 0);
  EXPECT_TRUE(ProcessAlive(pid));
  const size_t beats = cp_->heartbeats().size();
  std::this_thread::sleep_for(300ms);
  EXPECT_GE(cp_->heartbeats().size(), beats + 3) << "heartbeats at the server's 50 ms interval";

  const auto stopped_at = std::chrono::steady_clock::now();
  runner.request_stop();
  runner.join();
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_LT(std::chrono::steady_clock::now() - stopped_at, 4s) << "sleep ends on SIGTERM, well within its grace";
  EXPECT_FALSE(ProcessAlive(pid));
  // The job did not fail: the agent left. Its exit is not reported, so the server handles the node as
  // lost (requeue elsewhere, or resume when the agent returns) rather than marking the job FAILED.
  for (const api::Heartbeat& hb : cp_->heartbeats()) {
    auto report = ReportFor(hb, "run");
    EXPECT_FALSE(report.has_value() && report->phase != api::WorkloadPhase::kRunning)
        << "no exit reported for a workload the shutdown stopped";
  }
}

TEST_F(AgentTest, RunKeepsRetryingUntilTheServerAppearsAndStopsPromptly) {
  const int port = cp_->port();
  cp_->Stop();
  auto agent = MakeAgent();
  ASSERT_NE(agent, nullptr);
  std::jthread runner([&](std::stop_token stop) { EXPECT_TRUE(agent->Run(stop).ok()); });
  std::this_thread::sleep_for(700ms);
  EXPECT_FALSE(agent->registered());
  cp_ = std::make_unique<FakeControlPlane>(port);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline && cp_->heartbeats().empty()) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(agent->registered());
  EXPECT_FALSE(cp_->heartbeats().empty());
  const auto stopped_at = std::chrono::steady_clock::now();
  agent->Stop();
  runner.join();
  EXPECT_LT(std::chrono::steady_clock::now() - stopped_at, 2s);
}

TEST_F(AgentTest, AnAssignmentThatSteersTheLoaderOrItsGpusNeverStarts) {
  // What a server that skipped the spec's checks (or an impostor) might send.
  auto agent = MakeAgent("8xH100-SXM-80GB");
  api::Assignment preload = MakeAssignment("job-p", 1, "touch ran.txt", Gpus(*agent, {0}));
  preload.env = {{"LD_PRELOAD", "/tmp/evil.so"}};
  api::Assignment widen = MakeAssignment("job-w", 1, "touch ran.txt", Gpus(*agent, {1}));
  widen.env = {{"CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"}};
  cp_->SetAssignments({preload, widen});
  ASSERT_TRUE(agent->Tick().ok());
  std::map<std::string, WorkloadStatus> by_job;
  for (const WorkloadStatus& w : agent->Workloads()) by_job[w.job_id] = w;
  ASSERT_EQ(by_job.size(), 2u);
  EXPECT_EQ(by_job["job-p"].state, "failed-to-start");
  EXPECT_THAT(by_job["job-p"].message, HasSubstr("env.LD_PRELOAD"));
  EXPECT_EQ(by_job["job-w"].state, "failed-to-start");
  EXPECT_THAT(by_job["job-w"].message, HasSubstr("env.CUDA_VISIBLE_DEVICES"));
  EXPECT_FALSE(std::filesystem::exists(WorkDir("job-p-0") + "/ran.txt"));
}

TEST_F(AgentTest, JoinsOnceThenPresentsItsOwnCredentialAlsoAfterARestart) {
  auto agent = MakeAgent();
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_TRUE(agent->Tick().ok());
  ASSERT_EQ(cp_->register_auth().size(), 1u);
  EXPECT_EQ(cp_->register_auth()[0], "Bearer " + kTestJoinToken);
  EXPECT_EQ(cp_->heartbeat_auth(), "Bearer " + kFakeCredential);
  const std::filesystem::path kept = std::filesystem::path(dir_.path()) / "node.credential";
  EXPECT_EQ(ReadAll(kept), kFakeCredential + "\n");
  struct stat st {};
  ASSERT_EQ(::stat(kept.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // A restarted agent (no join token given this time) registers with the kept credential.
  agent.reset();
  auto again = MakeAgent("8xH100-SXM-80GB", [](AgentOptions& o) { o.join_token.clear(); });
  ASSERT_NE(again, nullptr);
  ASSERT_TRUE(again->Tick().ok());
  ASSERT_EQ(cp_->register_auth().size(), 2u);
  EXPECT_EQ(cp_->register_auth()[1], "Bearer " + kFakeCredential);
}

// The attack of issue 10: "a 25-line impostor server got an agent to run `id` as uid 0". The impostor
// answers every registration and hands out an assignment; it serves TLS with a certificate of its own CA
// (or plain HTTP). The agent pins the real server's CA: it never registers there and runs nothing.
TEST(AgentImpostorTest, AnAgentThatPinsItsServersCaObeysNoImpostor) {
  TempDir dir;
  auto real = pki::EnsureLocalPki({.dir = dir.path() + "/real", .add_hostname = false});
  auto fake = pki::EnsureLocalPki({.dir = dir.path() + "/impostor", .add_hostname = false});
  ASSERT_TRUE(real.ok() && fake.ok());
  std::atomic<int> calls{0};
  const std::string marker = dir.path() + "/ran-id.txt";
  auto serve = [&](http::TlsOptions tls) {
    auto server = http::Server::Create({.host = "127.0.0.1", .port = 0, .threads = 2, .tls = tls});
    EXPECT_TRUE(server.ok()) << server.status();
    (*server)->Route("POST", "/v1/agents/register", [&](const http::Request&) -> absl::StatusOr<http::Reply> {
      ++calls;
      return http::Reply::Json(api::ToJson(api::RegistrationReply{.node_credential = kFakeCredential}));
    });
    (*server)->Route("POST", "/v1/agents/{node}/heartbeat", [&](const http::Request&) -> absl::StatusOr<http::Reply> {
      ++calls;
      api::HeartbeatReply reply;
      reply.assignments = {MakeAssignment("job-x", 1, "id > " + marker)};
      return http::Reply::Json(api::ToJson(reply));
    });
    EXPECT_TRUE((*server)->Start().ok());
    return std::move(*server);
  };
  auto tls_impostor = serve({.cert_file = fake->server_cert_file, .key_file = fake->server_key_file});
  auto discovery = hw::EmulatedDiscovery::Create({.spec = "1xL4"});
  ASSERT_TRUE(discovery.ok());
  AgentOptions o{.server_url = tls_impostor->url(),
                 .ca_file = real->ca_cert_file,
                 .join_token = kTestJoinToken,
                 .node = "victim",
                 .discovery = discovery->get(),
                 .data_dir = dir.path() + "/agent",
                 .cgroup_limits = false};
  auto agent = Agent::Create(o);
  ASSERT_TRUE(agent.ok()) << agent.status();
  for (int i = 0; i < 3; ++i) {
    const absl::Status tick = (*agent)->Tick();
    EXPECT_EQ(tick.code(), absl::StatusCode::kUnavailable) << tick;
  }
  EXPECT_FALSE((*agent)->registered());
  EXPECT_EQ(calls.load(), 0) << "the TLS handshake fails before any request reaches the impostor";
  // A plain-http impostor: an https agent never speaks plain HTTP to its server.
  auto plain_impostor = serve({});
  o.server_url = "https://" + plain_impostor->url().substr(std::string("http://").size());
  o.data_dir = dir.path() + "/agent2";
  agent.value().reset();
  auto second = Agent::Create(o);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE((*second)->Tick().ok());
  EXPECT_EQ(calls.load(), 0);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "no command of an impostor ran";
}

TEST(AgentCreateTest, BadOptionsAreInvalidArguments) {
  TempDir dir;
  auto discovery = hw::EmulatedDiscovery::Create({.spec = "1xL4"});
  ASSERT_TRUE(discovery.ok());
  const AgentOptions good{.server_url = "http://127.0.0.1:1",
                          .join_token = kTestJoinToken,
                          .node = "n",
                          .discovery = discovery->get(),
                          .data_dir = dir.path(),
                          .cgroup_limits = false};
  ASSERT_TRUE(Agent::Create(good).ok());
  auto with = [&](const std::function<void(AgentOptions&)>& f) {
    AgentOptions o = good;
    f(o);
    return Agent::Create(o).status();
  };
  EXPECT_EQ(with([](AgentOptions& o) { o.server_url = ""; }).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](AgentOptions& o) { o.server_url = "ftp://x"; }).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](AgentOptions& o) { o.discovery = nullptr; }).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](AgentOptions& o) { o.data_dir = ""; }).code(), absl::StatusCode::kInvalidArgument);
  // Neither a kept credential nor a join token: it could never register.
  const absl::Status no_token = with([](AgentOptions& o) { o.join_token = ""; });
  EXPECT_EQ(no_token.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_token.message()), HasSubstr("gpugeek join-token create"));
  EXPECT_EQ(with([](AgentOptions& o) { o.node = "a b"; }).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](AgentOptions& o) { o.capacity_type = "preemptible"; }).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](AgentOptions& o) { o.heartbeat_interval = Duration::zero(); }).code(),
            absl::StatusCode::kInvalidArgument);
  AgentOptions unnamed = good;
  unnamed.node.clear();
  auto agent = Agent::Create(unnamed);
  ASSERT_TRUE(agent.ok());
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_EQ((*agent)->node(), host);
}

}  // namespace
}  // namespace gpugeek::agent
