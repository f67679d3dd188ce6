// Secrets end to end over loopback (issue 10, items 5-6): a real ControlPlaneServer with its key file
// and keyring; the test plays the agents on the agents' listener and reads the files' raw bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "controlplane/server.h"
#include "controlplane/testing/agent_caller.h"
#include "crypto/key_provider.h"
#include "http/client.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"

namespace gpugeek::controlplane {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// What an attacker wants: a real-looking AWS secret key, and a plain env value of the same spec.
constexpr char kAwsSecret[] = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr char kPlainEnv[] = "plain-env-value-7f3a9c";

std::string FileBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every byte under `dir` but the logs (the database, its WAL, the keyring).
std::string StateBytes(const fs::path& dir) {
  std::string all;
  for (const char* f : {"gpugeek.db", "gpugeek.db-wal", "keyring.json"}) all += FileBytes(dir / f);
  return all;
}

class SecretsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpugeek_secrets_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    ASSERT_TRUE(Start({}).ok());
    admin_ = ClientFor(server_->admin_token());
    ASSERT_TRUE(admin_->Post("/v1/tenants", {{"name", "team-a"}}).ok());
    ASSERT_TRUE(admin_->Post("/v1/tenants", {{"name", "team-b"}}).ok());
    for (const char* t : {"a", "b"}) {
      const std::string user = std::string("member-") + t;
      ASSERT_TRUE(admin_->Post("/v1/users", {{"name", user}, {"tenant", std::string("team-") + t}}).ok());
      auto token = admin_->Post("/v1/tokens", {{"user", user}});
      ASSERT_TRUE(token.ok()) << token.status();
      (t[0] == 'a' ? a_ : b_) = ClientFor((*token)["token"]);
    }
  }
  void TearDown() override {
    a_.reset();
    b_.reset();
    admin_.reset();
    agent_.reset();
    server_.reset();
    fs::remove_all(dir_);
  }
  absl::Status Start(ServerOptions options) {
    options.port = 0;
    options.agent_port = 0;
    options.data_dir = dir_.string();
    options.lease = std::chrono::minutes(5);
    agent_.reset();
    server_.reset();
    auto s = ControlPlaneServer::Start(options);
    if (!s.ok()) return s.status();
    server_ = std::move(*s);
    agent_ = std::make_unique<testing::AgentCaller>(*server_);
    return absl::OkStatus();
  }
  std::unique_ptr<http::Client> ClientFor(const std::string& token) {
    return *http::Client::Create({.base_url = server_->url(), .bearer_token = token});
  }
  void RegisterNode(const std::string& node, const std::string& spec) {
    api::Registration r;
    r.node = node;
    r.address = "127.0.0.1";
    r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec(spec), node, {node, 32, uint64_t{256} << 30, 1, ""});
    ASSERT_TRUE(agent_->Post("/v1/agents/register", api::ToJson(r)).ok());
  }
  bool WaitFor(const std::string& id, const std::string& state) {
    for (int i = 0; i < 100; ++i) {
      auto job = a_->Get("/v1/jobs/" + id);
      if (job.ok() && (*job)["state"] == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  absl::StatusOr<json> Beat(const api::Heartbeat& hb) {
    return agent_->Post("/v1/agents/" + hb.node + "/heartbeat", api::ToJson(hb));
  }
  // `node`'s heartbeat reply once it carries an assignment (bounded): the store says SCHEDULED a moment
  // before the pass publishes the snapshot heartbeats are answered from, and an agent beats again, as a
  // real one does every interval.
  absl::StatusOr<api::HeartbeatReply> BeatUntilAssigned(const std::string& node) {
    absl::StatusOr<api::HeartbeatReply> reply = absl::DeadlineExceededError("no assignment");
    for (int i = 0; i < 100; ++i) {
      absl::StatusOr<json> raw = Beat({.node = node});
      if (!raw.ok()) return raw.status();
      reply = api::HeartbeatReplyFromJson(*raw);
      if (!reply.ok() || !reply->assignments.empty()) return reply;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return reply;
  }

  fs::path dir_;
  std::unique_ptr<ControlPlaneServer> server_;
  std::unique_ptr<http::Client> admin_, a_, b_;
  std::unique_ptr<testing::AgentCaller> agent_;  // the agents' listener, as joined agents
};

TEST_F(SecretsTest, SecretsAreTenantScopedAndNeverShown) {
  auto put = a_->Put("/v1/secrets/aws", {{"value", kAwsSecret}});
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ((*put)["name"], "aws");
  EXPECT_FALSE(absl::StrContains(put->dump(), kAwsSecret));
  auto list = a_->Get("/v1/secrets");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ((*list)["secrets"].size(), 1u);
  EXPECT_EQ((*list)["secrets"][0]["name"], "aws");
  EXPECT_FALSE(absl::StrContains(list->dump(), kAwsSecret));
  EXPECT_TRUE(a_->Get("/v1/secrets/aws").ok());

  // Tenant B: A's secret reads exactly as an absent one, and cannot be referred to.
  EXPECT_TRUE((*b_->Get("/v1/secrets"))["secrets"].empty());
  auto b_get = b_->Get("/v1/secrets/aws");
  EXPECT_EQ(b_get.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(b_->Delete("/v1/secrets/aws").status().code(), absl::StatusCode::kNotFound);
  auto b_job = b_->Post("/v1/jobs", {{"spec_yaml",
                                      "name: steal\nresources: {accelerators: H100-SXM-80GB:1}\n"
                                      "env: {AWS_SECRET_ACCESS_KEY: {secret: aws}}\nrun: env\n"}});
  EXPECT_EQ(b_job.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(b_job.status().message(), "env.AWS_SECRET_ACCESS_KEY")) << b_job.status();
  EXPECT_TRUE(a_->Get("/v1/secrets/aws").ok());  // B's delete did not touch it

  EXPECT_EQ(a_->Put("/v1/secrets/-bad", {{"value", "x"}}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a_->Put("/v1/secrets/empty", {{"value", ""}}).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(a_->Delete("/v1/secrets/aws").ok());
  EXPECT_EQ(a_->Get("/v1/secrets/aws").status().code(), absl::StatusCode::kNotFound);
}

// The secret-exfiltration attack of issue 10: another node receives a job's AWS_SECRET_ACCESS_KEY, or
// the API, the events, the logs or the database files serve it (or a plain env value) back.
TEST_F(SecretsTest, ExfiltrationAttackFails) {
  ASSERT_TRUE(a_->Put("/v1/secrets/aws", {{"value", kAwsSecret}}).ok());
  RegisterNode("node-a", "8xH100-SXM-80GB");
  RegisterNode("node-b", "1xH100-SXM-80GB");  // too small for the job: the other node
  auto job = a_->Post("/v1/jobs", {{"spec_yaml", std::string("name: train\nresources: {accelerators: H100-SXM-80GB:8}\n"
                                                             "env: {AWS_SECRET_ACCESS_KEY: {secret: aws}, PLAIN: ") +
                                                     kPlainEnv + "}\nrun: echo $AWS_SECRET_ACCESS_KEY\n"}});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = (*job)["id"];
  ASSERT_TRUE(WaitFor(id, "SCHEDULED"));

  // The job's own node gets the value in the member's assignment; the other node gets nothing of it.
  auto parsed = BeatUntilAssigned("node-a");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->assignments.size(), 1u);
  EXPECT_EQ(parsed->assignments[0].env.at("AWS_SECRET_ACCESS_KEY"), kAwsSecret);
  EXPECT_EQ(parsed->assignments[0].env.at("PLAIN"), kPlainEnv);
  const int64_t epoch = parsed->assignments[0].epoch;
  auto other = Beat({.node = "node-b"});
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(absl::StrContains(other->dump(), kAwsSecret));
  // Nor can node-b (or a fake node without a credential) ask for node-a's assignments.
  for (const std::string& bearer : {agent_->credential("node-b"), std::string()}) {
    auto impostor = *http::Client::Create(
        {.base_url = server_->agent_url(), .ca_file = server_->ca_file(), .bearer_token = bearer});
    auto as_a = impostor->Post("/v1/agents/node-a/heartbeat", api::ToJson(api::Heartbeat{.node = "node-a"}));
    ASSERT_FALSE(as_a.ok());
    EXPECT_EQ(as_a.status().code(),
              bearer.empty() ? absl::StatusCode::kUnauthenticated : absl::StatusCode::kPermissionDenied);
    EXPECT_FALSE(absl::StrContains(as_a.status().message(), kAwsSecret));
  }

  // The workload echoes the secret, split across two heartbeats; then exits.
  const std::string line = std::string("key=") + kAwsSecret + "\n";
  api::Heartbeat hb{.node = "node-a"};
  hb.workloads = {{id, epoch, api::WorkloadPhase::kRunning}};
  hb.logs = {{id, 0, 0, line.substr(0, 10), epoch}};
  ASSERT_TRUE(Beat(hb).ok());
  hb.logs = {{id, 0, 10, line.substr(10) + "done " + std::string(kAwsSecret).substr(0, 6), epoch}};
  hb.workloads = {{id, epoch, api::WorkloadPhase::kExited, 0, 0, std::string("exit: ") + kAwsSecret}};
  ASSERT_TRUE(Beat(hb).ok());
  ASSERT_TRUE(WaitFor(id, "SUCCEEDED"));

  // Stored redacted, and sealed: the file holds neither the value nor the redacted text.
  const fs::path log = dir_ / "logs" / id / ("rank-0.epoch-" + std::to_string(epoch) + ".sealed");
  const std::string sealed_log = FileBytes(log);
  EXPECT_FALSE(sealed_log.empty());
  EXPECT_FALSE(absl::StrContains(sealed_log, std::string(kAwsSecret).substr(0, 6)));
  EXPECT_FALSE(absl::StrContains(sealed_log, "[secret:aws]"));
  auto log_view = admin_->Get("/v1/jobs/" + id + "/logs?epoch=" + std::to_string(epoch));
  ASSERT_TRUE(log_view.ok()) << log_view.status();
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape((*log_view)["data_b64"].get<std::string>(), &bytes));
  EXPECT_EQ(bytes, "key=[secret:aws]\ndone " + std::string(kAwsSecret).substr(0, 6));

  // No API view or event carries the value; the spec keeps the reference.
  auto view = a_->Get("/v1/jobs/" + id);
  ASSERT_TRUE(view.ok());
  EXPECT_FALSE(absl::StrContains(view->dump(), kAwsSecret));
  auto events = admin_->Get("/v1/events?job=" + id);
  ASSERT_TRUE(events.ok());
  EXPECT_FALSE(absl::StrContains(events->dump(), kAwsSecret)) << events->dump();
  auto stored = server_->control_plane().GetJob(id);
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(absl::StrContains(stored->record.spec_yaml, "{secret: aws}"));
  EXPECT_FALSE(absl::StrContains(stored->record.spec_yaml, kAwsSecret));

  // At rest: the database (and its WAL) and the keyring hold neither the secret nor the plain env value.
  const std::string raw = StateBytes(dir_);
  ASSERT_GT(raw.size(), 4096u);
  EXPECT_FALSE(absl::StrContains(raw, kAwsSecret));
  EXPECT_FALSE(absl::StrContains(raw, kPlainEnv));
  EXPECT_FALSE(absl::StrContains(raw, "AWS_SECRET_ACCESS_KEY"));  // the whole spec is sealed
}

TEST_F(SecretsTest, RotationKeepsEverythingReadableAndARestartWorks) {
  ASSERT_TRUE(a_->Put("/v1/secrets/aws", {{"value", kAwsSecret}}).ok());
  auto job = a_->Post("/v1/jobs", {{"spec_yaml", std::string("name: t\nresources: {accelerators: H100-SXM-80GB:1}\n"
                                                             "env: {AWS_SECRET_ACCESS_KEY: {secret: aws}, PLAIN: ") +
                                                     kPlainEnv + "}\nrun: x\n"}});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = (*job)["id"];
  // Its member logs a line before the rotation (stored sealed under team-a's data key).
  RegisterNode("node-a", "8xH100-SXM-80GB");
  ASSERT_TRUE(WaitFor(id, "SCHEDULED"));
  auto reply = BeatUntilAssigned("node-a");
  ASSERT_TRUE(reply.ok() && reply->assignments.size() == 1u);
  const int64_t epoch = reply->assignments[0].epoch;
  api::Heartbeat hb{.node = "node-a"};
  hb.workloads = {{id, epoch, api::WorkloadPhase::kRunning}};
  hb.logs = {{id, 0, 0, "step=1 loss=2.25\n", epoch}};
  ASSERT_TRUE(Beat(hb).ok());
  const auto log_text = [&](http::Client& client) {
    auto view = client.Get("/v1/jobs/" + id + "/logs?epoch=" + std::to_string(epoch));
    std::string bytes;
    if (view.ok()) absl::Base64Unescape((*view)["data_b64"].get<std::string>(), &bytes);
    return bytes;
  };
  ASSERT_EQ(log_text(*a_), "step=1 loss=2.25\n");
  const fs::path log_file = dir_ / "logs" / id / ("rank-0.epoch-" + std::to_string(epoch) + ".sealed");
  const std::string sealed_before = FileBytes(log_file);

  const std::string key_file = server_->key_file();
  EXPECT_EQ(key_file, (dir_ / "master.key").string());
  EXPECT_EQ(fs::status(key_file).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);

  EXPECT_EQ(a_->Post("/v1/keys/rotate", json::object()).status().code(), absl::StatusCode::kPermissionDenied);
  auto rotated = admin_->Post("/v1/keys/rotate", {{"retire", true}});
  ASSERT_TRUE(rotated.ok()) << rotated.status();
  EXPECT_GE((*rotated)["rewrapped"].get<int>(), 1);
  EXPECT_EQ((*rotated)["retired"].size(), 1u);
  EXPECT_EQ(server_->control_plane().secrets().Value("team-a", "aws").value_or(""), kAwsSecret);
  EXPECT_TRUE(absl::StrContains(server_->control_plane().GetJob(id)->record.spec_yaml, kPlainEnv));

  // A restart with the rotated key file reads every secret and spec.
  a_.reset();
  b_.reset();
  admin_.reset();
  ASSERT_TRUE(Start({}).ok());
  EXPECT_EQ(server_->control_plane().secrets().Value("team-a", "aws").value_or(""), kAwsSecret);
  auto spec = server_->control_plane().GetJob(id);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(absl::StrContains(spec->record.spec_yaml, kPlainEnv));
  // And the log: its file was not rewritten (the data keys were re-wrapped), and it reads as before.
  EXPECT_EQ(FileBytes(log_file), sealed_before);
  admin_ = ClientFor(server_->admin_token());
  EXPECT_EQ(log_text(*admin_), "step=1 loss=2.25\n");
  server_.reset();
  agent_.reset();

  // A wrong key file: a clear error at start naming the file, nothing served.
  const std::string wrong = (dir_ / "other.key").string();
  ASSERT_TRUE(crypto::CreateMasterKeyFile(wrong).ok());
  absl::Status st = Start({.key_file = wrong});
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), wrong)) << st;
  // The key file gone while the keyring holds data keys: an error naming both and the fix.
  fs::rename(key_file, key_file + ".bak");
  st = Start({});
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), key_file)) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "restore")) << st;
  // An explicit key file that does not exist: NotFound saying how to make one.
  st = Start({.key_file = (dir_ / "nope.key").string()});
  EXPECT_FALSE(st.ok());
  fs::rename(key_file + ".bak", key_file);
  EXPECT_TRUE(Start({}).ok());
}

}  // namespace
}  // namespace gpugeek::controlplane
