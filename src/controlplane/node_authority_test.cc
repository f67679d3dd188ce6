// The agents' listener as an attacker on the network meets it: a real ControlPlaneServer on loopback,
// agents played with http::Client and the credentials a real join hands out.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "absl/strings/escaping.h"
#include "controlplane/server.h"
#include "http/client.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"

namespace gpugeek::controlplane {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class NodeAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("gpugeek_node_auth_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    Start();
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Start() {
    auto s = ControlPlaneServer::Start(
        {.port = 0, .agent_port = 0, .data_dir = dir_.string(), .lease = std::chrono::minutes(5)});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    admin_ = *http::Client::Create({.base_url = server_->url(), .bearer_token = server_->admin_token()});
  }
  std::unique_ptr<http::Client> Agent(const std::string& bearer) {
    return *http::Client::Create({.base_url = server_->agent_url(), .bearer_token = bearer});
  }
  static json Registration(const std::string& node, const std::string& address = "127.0.0.1") {
    api::Registration r;
    r.node = node;
    r.address = address;
    r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec("2xA100-SXM-80GB"), node,
                                             {node, 16, uint64_t{64} << 30, 1, ""});
    return api::ToJson(r);
  }
  std::string JoinToken(int uses = 1) {
    auto t = admin_->Post("/v1/join-tokens", {{"uses", uses}, {"description", "test"}});
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? (*t)["token"].get<std::string>() : "";
  }
  // Joins `node` and returns its credential.
  std::string Join(const std::string& node) {
    auto reply = Agent(JoinToken())->Post("/v1/agents/register", Registration(node));
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? reply->value("node_credential", "") : "";
  }
  // Submits a 1-GPU job and waits until `node`'s heartbeat carries it; returns its id and epoch.
  std::pair<std::string, int64_t> RunJobOn(const std::string& node, const std::string& credential) {
    auto job = admin_->Post(
        "/v1/jobs", {{"spec_yaml", "name: victim\nresources: {accelerators: A100-SXM-80GB:1}\nrun: sleep 100\n"}});
    EXPECT_TRUE(job.ok()) << job.status();
    const std::string id = (*job)["id"];
    for (int i = 0; i < 100; ++i) {
      auto hb = Agent(credential)->Post(fmt::format("/v1/agents/{}/heartbeat", node), {{"node", node}});
      if (hb.ok() && !(*hb)["assignments"].empty()) {
        const int64_t epoch = (*hb)["assignments"][0]["epoch"];
        api::Heartbeat running{.node = node};
        running.workloads = {{id, epoch, api::WorkloadPhase::kRunning}};
        EXPECT_TRUE(Agent(credential)->Post(fmt::format("/v1/agents/{}/heartbeat", node), api::ToJson(running)).ok());
        return {id, epoch};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the job was not assigned to " << node;
    return {id, 0};
  }
  std::string State(const std::string& id) { return (*admin_->Get("/v1/jobs/" + id))["state"]; }

  std::filesystem::path dir_;
  std::unique_ptr<ControlPlaneServer> server_;
  std::unique_ptr<http::Client> admin_;
};

TEST_F(NodeAuthTest, NothingRegistersWithoutAJoinTokenAndAJoinTokenIsUsedOnce) {
  auto none = Agent("")->Post("/v1/agents/register", Registration("rogue"));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated) << none.status();
  auto user_token = Agent(server_->admin_token())->Post("/v1/agents/register", Registration("rogue"));
  EXPECT_EQ(user_token.status().code(), absl::StatusCode::kUnauthenticated) << user_token.status();
  const std::string token = JoinToken();
  auto first = Agent(token)->Post("/v1/agents/register", Registration("n1"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT((*first)["node_credential"].get<std::string>(), ::testing::StartsWith("ggn_"));
  auto again = Agent(token)->Post("/v1/agents/register", Registration("n2"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnauthenticated) << again.status();
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("used up"));
  // Nothing of the refused ones reached the pool.
  EXPECT_EQ((*admin_->Get("/v1/nodes"))["nodes"].size(), 1u);
  // A token for three agents lets three in.
  const std::string three = JoinToken(3);
  for (const char* n : {"a1", "a2", "a3"}) ASSERT_TRUE(Agent(three)->Post("/v1/agents/register", Registration(n)).ok());
  EXPECT_FALSE(Agent(three)->Post("/v1/agents/register", Registration("a4")).ok());
}

TEST_F(NodeAuthTest, ANodeNameCannotBeTakenOver) {
  const std::string cred_a = Join("node-a");
  const std::string cred_b = Join("node-b");
  // A new machine with a fresh join token claims node-a's name (to redirect its gang's master address).
  auto takeover = Agent(JoinToken())->Post("/v1/agents/register", Registration("node-a", "203.0.113.9"));
  EXPECT_EQ(takeover.status().code(), absl::StatusCode::kAlreadyExists) << takeover.status();
  EXPECT_THAT(std::string(takeover.status().message()), HasSubstr("remove the node first"));
  // Node-b's own credential cannot register as node-a either.
  auto with_b = Agent(cred_b)->Post("/v1/agents/register", Registration("node-a", "203.0.113.9"));
  EXPECT_EQ(with_b.status().code(), absl::StatusCode::kPermissionDenied) << with_b.status();
  EXPECT_EQ((*admin_->Get("/v1/nodes/node-a"))["address"], "127.0.0.1");
  // node-a itself re-registers with its credential (an agent restart) and gets no new one.
  auto own = Agent(cred_a)->Post("/v1/agents/register", Registration("node-a"));
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_FALSE(own->contains("node_credential"));
}

TEST_F(NodeAuthTest, AForgedHeartbeatEndsNobodysJob) {
  const std::string cred_a = Join("node-a");
  const std::string cred_b = Join("node-b");
  // Keep the job on node-a: node-b is cordoned.
  ASSERT_TRUE(admin_->Post("/v1/nodes/node-b/cordon", json::object()).ok());
  auto [id, epoch] = RunJobOn("node-a", cred_a);
  for (int i = 0; i < 100 && State(id) != "RUNNING"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_EQ(State(id), "RUNNING");
  api::Heartbeat forged{.node = "node-a"};
  forged.workloads = {{id, epoch, api::WorkloadPhase::kExited, 0}};
  // Without a credential, with a forged one, with node-b's for node-a's URL: refused before anything is read.
  EXPECT_EQ(Agent("")->Post("/v1/agents/node-a/heartbeat", api::ToJson(forged)).status().code(),
            absl::StatusCode::kUnauthenticated);
  std::string tampered = cred_a;
  tampered[25] = tampered[25] == 'A' ? 'B' : 'A';
  EXPECT_EQ(Agent(tampered)->Post("/v1/agents/node-a/heartbeat", api::ToJson(forged)).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(Agent(cred_b)->Post("/v1/agents/node-a/heartbeat", api::ToJson(forged)).status().code(),
            absl::StatusCode::kPermissionDenied);
  // Node-b, authenticated as itself, reports node-a's member exited: not its member, ignored.
  api::Heartbeat from_b{.node = "node-b"};
  from_b.workloads = {{id, epoch, api::WorkloadPhase::kExited, 0}};
  ASSERT_TRUE(Agent(cred_b)->Post("/v1/agents/node-b/heartbeat", api::ToJson(from_b)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // several controller passes
  EXPECT_EQ(State(id), "RUNNING");
}

TEST_F(NodeAuthTest, ANodeCannotWriteAnotherNodesLog) {
  const std::string cred_a = Join("node-a");
  const std::string cred_b = Join("node-b");
  ASSERT_TRUE(admin_->Post("/v1/nodes/node-b/cordon", json::object()).ok());
  auto [id, epoch] = RunJobOn("node-a", cred_a);
  api::Heartbeat from_b{.node = "node-b"};
  from_b.logs = {{.job_id = id, .node_rank = 0, .offset = 0, .data = "forged line\n", .epoch = epoch}};
  ASSERT_TRUE(Agent(cred_b)->Post("/v1/agents/node-b/heartbeat", api::ToJson(from_b)).ok());
  api::Heartbeat from_a{.node = "node-a"};
  from_a.logs = {{.job_id = id, .node_rank = 0, .offset = 0, .data = "real line\n", .epoch = epoch}};
  ASSERT_TRUE(Agent(cred_a)->Post("/v1/agents/node-a/heartbeat", api::ToJson(from_a)).ok());
  auto log = admin_->Get("/v1/jobs/" + id + "/logs");
  ASSERT_TRUE(log.ok()) << log.status();
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape((*log)["data_b64"].get<std::string>(), &bytes));
  EXPECT_EQ(bytes, "real line\n");
}

TEST_F(NodeAuthTest, CredentialsSurviveARestartAndDieWithTheNode) {
  const std::string cred = Join("node-a");
  server_.reset();
  Start();
  auto hb = Agent(cred)->Post("/v1/agents/node-a/heartbeat", {{"node", "node-a"}});
  ASSERT_TRUE(hb.ok()) << hb.status();
  // Removed from the pool: the credential is dead, and the name may join again (a new machine).
  ASSERT_TRUE(admin_->Post("/v1/nodes/node-a/cordon", json::object()).ok());
  ASSERT_TRUE(admin_->Delete("/v1/nodes/node-a").ok());
  auto dead = Agent(cred)->Post("/v1/agents/node-a/heartbeat", {{"node", "node-a"}});
  EXPECT_EQ(dead.status().code(), absl::StatusCode::kUnauthenticated);
  const std::string fresh = Join("node-a");
  EXPECT_NE(fresh, cred);
  EXPECT_TRUE(Agent(fresh)->Post("/v1/agents/node-a/heartbeat", {{"node", "node-a"}}).ok());
  // The signing key is private to the server's user.
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "node-credentials.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(NodeAuthTest, OnlyAnAdminMakesJoinTokens) {
  ASSERT_TRUE(admin_->Post("/v1/tenants", {{"name", "team-a"}}).ok());
  ASSERT_TRUE(admin_->Post("/v1/users", {{"name", "alice"}, {"tenant", "team-a"}, {"role", "member"}}).ok());
  auto alice_token = admin_->Post("/v1/tokens", {{"user", "alice"}});
  ASSERT_TRUE(alice_token.ok());
  auto alice = *http::Client::Create({.base_url = server_->url(), .bearer_token = (*alice_token)["token"]});
  EXPECT_EQ(alice->Post("/v1/join-tokens", json::object()).status().code(), absl::StatusCode::kPermissionDenied);
  auto list = admin_->Get("/v1/join-tokens");
  ASSERT_TRUE(list.ok());
  for (const json& t : (*list)["join_tokens"]) EXPECT_FALSE(t.contains("token")) << "a secret is never listed";
}

}  // namespace
}  // namespace gpugeek::controlplane
