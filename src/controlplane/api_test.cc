// The REST API end to end over loopback: a real ControlPlaneServer (SQLite, both listeners on port 0)
// and the JSON client; the test plays the agents on the agents' listener.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "controlplane/server.h"
#include "controlplane/testing/agent_caller.h"
#include "http/client.h"
#include "http/status_http.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"
#include "store/sqlite_store.h"

namespace gpugeek::controlplane {
namespace {

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("gpugeek_api_test_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    // The test heartbeats only when it plays an agent: a long lease keeps its nodes up meanwhile.
    auto s = ControlPlaneServer::Start(
        {.port = 0, .agent_port = 0, .data_dir = dir_.string(), .lease = std::chrono::minutes(5)});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    std::ifstream token_file(server_->admin_token_file());
    std::getline(token_file, admin_token_);
    auto c = http::Client::Create({.base_url = server_->url(), .bearer_token = admin_token_});
    ASSERT_TRUE(c.ok());
    client_ = std::move(*c);
    agent_ = std::make_unique<controlplane::testing::AgentCaller>(*server_);
  }
  void TearDown() override {
    client_.reset();  // close the keep-alive connections before the server waits for them
    agent_.reset();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  void RegisterNode(const std::string& node, const std::string& spec) {
    api::Registration r;
    r.node = node;
    r.address = "127.0.0.1";
    r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec(spec), node, {node, 32, uint64_t{256} << 30, 1, ""});
    auto reply = agent_->Post("/v1/agents/register", api::ToJson(r));
    ASSERT_TRUE(reply.ok()) << reply.status();
  }
  // Waits (bounded) until the job reaches `state`.
  bool WaitFor(const std::string& id, const std::string& state) {
    for (int i = 0; i < 100; ++i) {
      auto job = client_->Get("/v1/jobs/" + id);
      if (job.ok() && (*job)["state"] == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::filesystem::path dir_;
  std::unique_ptr<ControlPlaneServer> server_;
  std::string admin_token_;                                    // made by the server's first start
  std::unique_ptr<http::Client> client_;                       // the API (users), as the admin
  std::unique_ptr<controlplane::testing::AgentCaller> agent_;  // the agents' listener, as joined agents
};

TEST_F(ApiTest, SubmitScheduleHeartbeatAndFinish) {
  RegisterNode("node-a", "8xH100-SXM-80GB");
  ASSERT_TRUE(client_->Post("/v1/tenants", {{"name", "team-a"}}).ok());
  auto job = client_->Post(
      "/v1/jobs",
      {{"spec_yaml", "name: t\nresources: {accelerators: H100-SXM-80GB:2}\nrun: echo hi\n"}, {"tenant", "team-a"}});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = (*job)["id"];
  EXPECT_EQ((*job)["state"], "PENDING");
  ASSERT_TRUE(WaitFor(id, "SCHEDULED"));

  // The store says SCHEDULED a moment before the pass publishes the snapshot heartbeats are answered from:
  // the agent beats again, as a real one does every interval.
  api::Heartbeat hb;
  hb.node = "node-a";
  absl::StatusOr<api::HeartbeatReply> parsed;
  for (int i = 0; i < 100; ++i) {
    auto reply = agent_->Post("/v1/agents/node-a/heartbeat", api::ToJson(hb));
    ASSERT_TRUE(reply.ok()) << reply.status();
    parsed = api::HeartbeatReplyFromJson(*reply);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    if (!parsed->assignments.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(parsed->assignments.size(), 1u);
  EXPECT_EQ(parsed->assignments[0].gpu_uuids.size(), 2u);
  auto placed = client_->Get("/v1/jobs/" + id);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ((*placed)["allocation"]["members"][0]["gpu_uuids"], nlohmann::json(parsed->assignments[0].gpu_uuids));

  hb.workloads = {{id, 1, api::WorkloadPhase::kExited, 0}};
  hb.logs = {{id, 0, 0, "hi\n", 1}};
  ASSERT_TRUE(agent_->Post("/v1/agents/node-a/heartbeat", api::ToJson(hb)).ok());
  ASSERT_TRUE(WaitFor(id, "SUCCEEDED"));  // the report takes effect on the controllers' next pass
  auto done = client_->Get("/v1/jobs/" + id);
  EXPECT_EQ((*done)["exit_code"], 0);

  // Logs: a ranged, byte-exact read (JSON, the bytes base64); the job ended, so they are complete and
  // a long-poll at the end answers at once.
  auto log = client_->Get("/v1/jobs/" + id + "/logs");
  ASSERT_TRUE(log.ok()) << log.status();
  std::string bytes;
  ASSERT_TRUE(absl::Base64Unescape((*log)["data_b64"].get<std::string>(), &bytes)) << log->dump();
  EXPECT_EQ(bytes, "hi\n");
  EXPECT_EQ((*log)["next_offset"], 3);
  EXPECT_EQ((*log)["size"], 3);
  EXPECT_EQ((*log)["complete"], true);
  EXPECT_EQ((*log)["state"], "SUCCEEDED");
  EXPECT_EQ((*log)["epoch"], 1);
  const auto start = std::chrono::steady_clock::now();
  auto tail = client_->Get("/v1/jobs/" + id + "/logs?offset=3&wait_ms=5000");
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  EXPECT_EQ((*tail)["data_b64"], "");
  EXPECT_EQ((*tail)["complete"], true);

  auto events = client_->Get("/v1/events?job=" + id);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ((*events)["events"].size(), 4u);
  auto pool = client_->Get("/v1/pool");
  EXPECT_EQ((*pool)["gpu_milli_total"], 8000);
  auto nodes = client_->Get("/v1/nodes");
  EXPECT_EQ((*nodes)["nodes"][0]["name"], "node-a");
}

// An operator's pool reserved to some tenants: a node labelled reserved-for=team-a runs team-a's jobs
// only; another tenant's job waits and says why.
TEST_F(ApiTest, ANodeReservedToATenantRunsOnlyItsJobs) {
  api::Registration r;
  r.node = "reserved";
  r.address = "127.0.0.1";
  r.labels = {{"reserved-for", "team-a"}};
  r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec("4xH100-SXM-80GB"), r.node,
                                           {r.node, 32, uint64_t{256} << 30, 1, ""});
  ASSERT_TRUE(agent_->Post("/v1/agents/register", api::ToJson(r)).ok());
  for (const char* t : {"team-a", "team-b"}) ASSERT_TRUE(client_->Post("/v1/tenants", {{"name", t}}).ok());
  const std::string spec = "name: t\nresources: {accelerators: H100-SXM-80GB:2}\nrun: sleep 100\n";
  auto a = client_->Post("/v1/jobs", {{"spec_yaml", spec}, {"tenant", "team-a"}});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(WaitFor((*a)["id"], "SCHEDULED"));
  // The pool's only node will never take team-b's job: refused at submission, saying why.
  auto b = client_->Post("/v1/jobs", {{"spec_yaml", spec}, {"tenant", "team-b"}});
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(b.status().message(), ::testing::HasSubstr("1: reserved for team-a"));
}

TEST_F(ApiTest, BadInputIs4xxNamingTheField) {
  auto missing = client_->Post("/v1/jobs", {{"spec", "x"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(missing.status().message(), "spec: is not a known field")) << missing.status();

  auto bad_spec = client_->Post("/v1/jobs", {{"spec_yaml", "name: x\nrun: y\nresources: {accelerators: H100:0}\n"}});
  EXPECT_TRUE(absl::StartsWith(bad_spec.status().message(), "resources.accelerators:")) << bad_spec.status();

  httplib::Client raw(server_->url());
  raw.set_bearer_token_auth(admin_token_);
  auto not_json = raw.Post("/v1/jobs", "{oops", "application/json");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);

  EXPECT_EQ(client_->Get("/v1/jobs/j-99999999").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Get("/v1/jobs?state=sleeping").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Get("/v1/jobs?limit=0").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->Post("/v1/nodes/ghost/cordon", nlohmann::json::object()).status().code(),
            absl::StatusCode::kNotFound);

  RegisterNode("node-a", "1xL4");
  api::Heartbeat hb;
  hb.node = "node-b";
  auto mismatch = agent_->Post("/v1/agents/node-a/heartbeat", api::ToJson(hb));
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kInvalidArgument);
  auto bad_hb = agent_->Post("/v1/agents/node-a/heartbeat", {{"node", "node-a"}, {"workloads", 3}});
  EXPECT_TRUE(absl::StartsWith(bad_hb.status().message(), "heartbeat.workloads: must be a list")) << bad_hb.status();
  // A wrong method on a known path: 405, a JSON error.
  auto wrong_method = raw.Delete("/v1/jobs");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_TRUE(nlohmann::json::parse(wrong_method->body, nullptr, false).contains("message")) << wrong_method->body;
}

// Users and agents have a listener each: the agents' routes are not on the API, and the API's are not
// on the agents' listener.
TEST_F(ApiTest, AgentsAndUsersHaveSeparateListeners) {
  EXPECT_NE(server_->port(), server_->agent_port());
  api::Registration r;
  r.node = "node-a";
  r.address = "127.0.0.1";
  r.inventory =
      hw::BuildEmulatedInventory(*hw::ParseEmulateSpec("2xT4"), "node-a", {"node-a", 8, uint64_t{64} << 30, 1, ""});
  EXPECT_EQ(client_->Post("/v1/agents/register", api::ToJson(r)).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Post("/v1/agents/node-a/heartbeat", api::ToJson(api::Heartbeat{.node = "node-a"})).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(agent_->Get("/v1/jobs").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(agent_->Get("/v1/nodes").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*client_->Get("/v1/nodes"))["nodes"].size(), 0u);
  ASSERT_TRUE(agent_->Post("/v1/agents/register", api::ToJson(r)).ok());
  EXPECT_EQ((*client_->Get("/v1/nodes"))["nodes"].size(), 1u);
}

// GET /v1/nodes pages by name: ?limit= (1..1000, default 100) &after=NAME; next_after names the last
// node of a full page and is null on the last one.
TEST_F(ApiTest, NodesArePagedByName) {
  for (const std::string node : {"node-c", "node-a", "node-e", "node-b", "node-d"}) RegisterNode(node, "1xT4");
  auto names = [](const nlohmann::json& page) {
    std::vector<std::string> out;
    for (const auto& n : page["nodes"]) out.push_back(n["name"]);
    return out;
  };
  auto first = client_->Get("/v1/nodes?limit=2");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(names(*first), (std::vector<std::string>{"node-a", "node-b"}));
  EXPECT_EQ((*first)["next_after"], "node-b");
  auto second = client_->Get("/v1/nodes?limit=2&after=node-b");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(names(*second), (std::vector<std::string>{"node-c", "node-d"}));
  EXPECT_EQ((*second)["next_after"], "node-d");
  auto last = client_->Get("/v1/nodes?limit=2&after=node-d");
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(names(*last), (std::vector<std::string>{"node-e"}));
  EXPECT_TRUE((*last)["next_after"].is_null());
  // A page that ends exactly at the last node says so: nothing follows.
  auto exact = client_->Get("/v1/nodes?limit=5");
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(names(*exact).size(), 5u);
  EXPECT_TRUE((*exact)["next_after"].is_null());
  auto all = client_->Get("/v1/nodes");  // default limit 100
  EXPECT_EQ(names(*all), (std::vector<std::string>{"node-a", "node-b", "node-c", "node-d", "node-e"}));
  EXPECT_TRUE((*all)["next_after"].is_null());
  // `after` need not name a node: the page starts after it in name order.
  EXPECT_EQ(names(*client_->Get("/v1/nodes?after=node-bb")), (std::vector<std::string>{"node-c", "node-d", "node-e"}));
  EXPECT_TRUE(names(*client_->Get("/v1/nodes?after=zzz")).empty());
  for (const std::string bad : {"0", "1001", "-1", "x"}) {
    auto r = client_->Get("/v1/nodes?limit=" + bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(r.status().message(), "limit")) << r.status();
  }
}

TEST_F(ApiTest, CancelAndPaging) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(client_->Post("/v1/jobs", {{"spec_yaml", "name: p\nresources: {accelerators: T4:1}\nrun: x\n"}}).ok());
  }
  // Newest first by default.
  auto page = client_->Get("/v1/jobs?limit=2");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ((*page)["jobs"].size(), 2u);
  EXPECT_EQ((*page)["jobs"][0]["id"], "j-00000005");
  EXPECT_EQ((*page)["next_after"], "j-00000004");
  auto rest = client_->Get("/v1/jobs?after=j-00000004&limit=10");
  ASSERT_EQ((*rest)["jobs"].size(), 3u);
  EXPECT_EQ((*rest)["jobs"][2]["id"], "j-00000001");
  EXPECT_TRUE((*rest)["next_after"].is_null());
  // Oldest first on request.
  page = client_->Get("/v1/jobs?order=oldest&limit=2");
  ASSERT_EQ((*page)["jobs"].size(), 2u);
  EXPECT_EQ((*page)["jobs"][0]["id"], "j-00000001");
  EXPECT_EQ((*page)["next_after"], "j-00000002");
  rest = client_->Get("/v1/jobs?order=oldest&after=j-00000002&limit=10");
  ASSERT_EQ((*rest)["jobs"].size(), 3u);
  EXPECT_EQ((*rest)["jobs"][0]["id"], "j-00000003");
  EXPECT_EQ(client_->Get("/v1/jobs?order=random").status().code(), absl::StatusCode::kInvalidArgument);
  auto cancelled = client_->Post("/v1/jobs/j-00000001/cancel", {{"reason", "not needed"}});
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ((*cancelled)["state"], "CANCELLED");
  EXPECT_EQ((*cancelled)["reason"], "not needed");
  EXPECT_EQ(client_->Post("/v1/jobs/j-00000001/cancel", nlohmann::json::object()).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*client_->Get("/v1/jobs?state=CANCELLED"))["jobs"].size(), 1u);
}

TEST_F(ApiTest, ServesOpenApiAndPlans) {
  auto doc = client_->Get("/v1/openapi.json");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ((*doc)["openapi"], "3.0.3");
  EXPECT_TRUE((*doc)["paths"].contains("/v1/jobs/{id}/logs"));
  RegisterNode("node-a", "8xH100-SXM-80GB");
  nlohmann::json config = {{"model_type", "llama"},        {"hidden_size", 4096},
                           {"intermediate_size", 11008},   {"num_attention_heads", 32},
                           {"num_hidden_layers", 32},      {"vocab_size", 32000},
                           {"num_key_value_heads", 32},    {"max_position_embeddings", 4096},
                           {"tie_word_embeddings", false}, {"rms_norm_eps", 1e-5},
                           {"torch_dtype", "float16"}};
  auto plan = client_->Post("/v1/plans", {{"model_config", config}, {"task", {{"kind", "inference"}, {"seq", 4096}}}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_FALSE((*plan)["candidates"].empty());
  EXPECT_EQ((*plan)["candidates"][0]["gpu_model"], "H100-SXM-80GB");
  auto bad = client_->Post("/v1/plans", {{"model_config", config}, {"task", {{"kind", "dance"}}}});
  EXPECT_TRUE(absl::StartsWith(bad.status().message(), "task.kind:")) << bad.status();
}

TEST_F(ApiTest, ServesPrometheusMetricsOnTheApiPort) {
  RegisterNode("node-a", "8xH100-SXM-80GB");
  ASSERT_TRUE(client_->Get("/v1/healthz").ok());
  EXPECT_EQ(client_->Get("/v1/jobs/j-99999999").status().code(), absl::StatusCode::kNotFound);

  httplib::Client raw(server_->url());
  raw.set_bearer_token_auth(admin_token_);
  auto scrape = raw.Get("/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_EQ(scrape->status, 200);
  EXPECT_EQ(scrape->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  const std::string& text = scrape->body;
  // Latency by route pattern (not the path) and status code, each request once.
  EXPECT_THAT(text,
              ::testing::HasSubstr(
                  "\ngpugeek_http_request_duration_seconds_count{method=\"GET\",route=\"/v1/healthz\",code=\"200\"} "
                  "1\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("\ngpugeek_http_request_duration_seconds_count{method=\"GET\",route=\"/v1/"
                                         "jobs/{id}\",code=\"404\"} 1\n"));
  // Agents' requests too (their own listener, the same metrics).
  EXPECT_THAT(text, ::testing::HasSubstr("\ngpugeek_http_request_duration_seconds_count{method=\"POST\",route=\"/v1/"
                                         "agents/register\",code=\"200\"} 1\n"));
  EXPECT_THAT(text,
              ::testing::HasSubstr("\ngpugeek_pool_gpus{model=\"H100-SXM-80GB\",capacity_type=\"on-demand\"} 8\n"));
  EXPECT_THAT(text,
              ::testing::HasSubstr("\ngpugeek_node_up{node=\"node-a\",capacity_type=\"on-demand\",region=\"\"} 1\n"));
  EXPECT_THAT(text, ::testing::HasSubstr("\ngpugeek_build_info{version=\"0.1.0\"} 1\n"));
  EXPECT_TRUE((*client_->Get("/v1/openapi.json"))["paths"].contains("/metrics"));
}

TEST_F(ApiTest, PrometheusServiceDiscoveryListsAgentsThatServeMetrics) {
  auto reg = [&](const std::string& node, const std::string& metrics_address) {
    api::Registration r;
    r.node = node;
    // The metrics address must be the node's own (Registration decoding checks it).
    r.address = metrics_address.empty() ? "127.0.0.1" : metrics_address.substr(0, metrics_address.rfind(':'));
    r.capacity_type = "spot";
    r.region = "cn-east-1";
    r.metrics_address = metrics_address;
    r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec("2xT4"), node, {node, 8, uint64_t{64} << 30, 1, ""});
    ASSERT_TRUE(agent_->Post("/v1/agents/register", api::ToJson(r)).ok());
  };
  auto empty = client_->Get("/v1/prometheus/targets");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, nlohmann::json::array());

  reg("node-a", "10.0.0.7:9471");
  reg("node-b", "");  // serves no metrics
  auto targets = client_->Get("/v1/prometheus/targets");
  ASSERT_TRUE(targets.ok()) << targets.status();
  EXPECT_EQ(*targets, nlohmann::json::parse(R"([{"targets": ["10.0.0.7:9471"],
      "labels": {"node": "node-a", "capacity_type": "spot", "region": "cn-east-1"}}])"));
  httplib::Client raw(server_->url());
  raw.set_bearer_token_auth(admin_token_);
  auto sd = raw.Get("/v1/prometheus/targets");
  ASSERT_TRUE(sd);
  EXPECT_EQ(sd->get_header_value("Content-Type"), "application/json");
  EXPECT_TRUE((*client_->Get("/v1/openapi.json"))["paths"].contains("/v1/prometheus/targets"));
}

TEST_F(ApiTest, DeleteNodeRemovesItFromNodesTargetsAndMetrics) {
  auto reg = [&](const std::string& node, const std::string& metrics_address) {
    api::Registration r;
    r.node = node;
    r.address = metrics_address.substr(0, metrics_address.rfind(':'));  // the node's own address
    r.metrics_address = metrics_address;
    r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec("2xT4"), node, {node, 8, uint64_t{64} << 30, 1, ""});
    ASSERT_TRUE(agent_->Post("/v1/agents/register", api::ToJson(r)).ok());
  };
  reg("node-a", "10.0.0.7:9471");
  reg("node-b", "10.0.0.8:9471");

  auto up = client_->Delete("/v1/nodes/node-a");
  EXPECT_EQ(up.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(up.status().message(), "node node-a is up: drain it and stop its agent first"))
      << up.status();
  ASSERT_TRUE(client_->Post("/v1/nodes/node-a/cordon", nlohmann::json::object()).ok());
  auto removed = client_->Delete("/v1/nodes/node-a");
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ((*removed)["name"], "node-a");
  EXPECT_EQ((*removed)["state"], "cordoned");
  EXPECT_EQ(client_->Delete("/v1/nodes/node-a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client_->Get("/v1/nodes/node-a").status().code(), absl::StatusCode::kNotFound);

  auto nodes = client_->Get("/v1/nodes");
  ASSERT_EQ((*nodes)["nodes"].size(), 1u);
  EXPECT_EQ((*nodes)["nodes"][0]["name"], "node-b");
  auto targets = client_->Get("/v1/prometheus/targets");
  ASSERT_EQ(targets->size(), 1u);
  EXPECT_EQ((*targets)[0]["targets"], nlohmann::json::array({"10.0.0.8:9471"}));
  EXPECT_EQ((*client_->Get("/v1/pool"))["gpu_milli_total"], 2000);
  httplib::Client raw(server_->url());
  raw.set_bearer_token_auth(admin_token_);
  auto scrape = raw.Get("/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_THAT(scrape->body, ::testing::Not(::testing::HasSubstr("node=\"node-a\"")));
  EXPECT_THAT(scrape->body,
              ::testing::HasSubstr("\ngpugeek_node_up{node=\"node-b\",capacity_type=\"on-demand\",region=\"\"} 1\n"));
  EXPECT_THAT(scrape->body, ::testing::HasSubstr("\ngpugeek_http_request_duration_seconds_count{method=\"DELETE\","
                                                 "route=\"/v1/nodes/{name}\",code=\"200\"} 1\n"));
  EXPECT_TRUE((*client_->Get("/v1/openapi.json"))["paths"]["/v1/nodes/{name}"].contains("delete"));

  // Its credential went with it: its agent is refused and must join again, with a new join token.
  api::Heartbeat hb;
  hb.node = "node-a";
  auto reply = agent_->Post("/v1/agents/node-a/heartbeat", api::ToJson(hb));
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnauthenticated) << reply.status();
  EXPECT_THAT(std::string(reply.status().message()), ::testing::HasSubstr("was revoked"));
  agent_->Forget("node-a");
  reg("node-a", "10.0.0.7:9471");
  EXPECT_EQ((*client_->Get("/v1/nodes/node-a"))["state"], "ready");
  EXPECT_EQ(client_->Get("/v1/prometheus/targets")->size(), 2u);
}

}  // namespace
}  // namespace gpugeek::controlplane

namespace gpugeek::controlplane {
namespace {

// TLS modes: the local PKI is made on the first start and reused, both listeners serve it over https,
// the CA verifies it, ReloadCertificates works; without TLS there is nothing to reload; kFiles needs both
// files.
TEST(ServerTlsTest, LocalPkiServesBothListenersOverHttpsAndReloads) {
  const auto dir = std::filesystem::temp_directory_path() / ("gpugeek_server_tls_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::string first_ca;
  for (int start = 0; start < 2; ++start) {
    auto server = ControlPlaneServer::Start(
        {.port = 0, .agent_port = 0, .data_dir = dir.string(), .tls_mode = TlsMode::kLocalPki});
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_TRUE((*server)->tls());
    EXPECT_TRUE((*server)->url().starts_with("https://127.0.0.1:")) << (*server)->url();
    EXPECT_TRUE((*server)->agent_url().starts_with("https://127.0.0.1:")) << (*server)->agent_url();
    EXPECT_EQ((*server)->ca_file(), (dir / "tls" / "ca.crt").string());
    std::ifstream in((*server)->ca_file());
    const std::string ca((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (start == 0) first_ca = ca;
    EXPECT_EQ(ca, first_ca) << "a restart reuses the CA";
    auto client = *http::Client::Create(
        {.base_url = (*server)->url(), .ca_file = (*server)->ca_file(), .bearer_token = (*server)->admin_token()});
    auto who = client->Get("/v1/whoami");
    ASSERT_TRUE(who.ok()) << who.status();
    EXPECT_EQ((*who)["user"], "admin");
    EXPECT_TRUE((*server)->ReloadCertificates().ok());
    ASSERT_TRUE(client->Get("/v1/whoami").ok());
  }
  auto plain = ControlPlaneServer::Start({.port = 0, .agent_port = 0, .data_dir = (dir / "plain").string()});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE((*plain)->tls());
  EXPECT_TRUE((*plain)->url().starts_with("http://")) << (*plain)->url();
  EXPECT_EQ((*plain)->ca_file(), "");
  EXPECT_TRUE(absl::IsFailedPrecondition((*plain)->ReloadCertificates()));
  (*plain)->Stop();
  auto no_key = ControlPlaneServer::Start({.port = 0,
                                           .agent_port = 0,
                                           .data_dir = (dir / "files").string(),
                                           .tls_mode = TlsMode::kFiles,
                                           .tls = {.cert_file = (dir / "tls" / "server.crt").string()}});
  EXPECT_TRUE(absl::IsInvalidArgument(no_key.status())) << no_key.status();
  auto files = ControlPlaneServer::Start(
      {.port = 0,
       .agent_port = 0,
       .data_dir = (dir / "files").string(),
       .tls_mode = TlsMode::kFiles,
       .tls = {.cert_file = (dir / "tls" / "server.crt").string(), .key_file = (dir / "tls" / "server.key").string()},
       .tls_ca_file = (dir / "tls" / "ca.crt").string()});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ((*files)->ca_file(), (dir / "tls" / "ca.crt").string());
  EXPECT_FALSE(std::filesystem::exists(dir / "files" / "tls")) << "no local PKI with the operator's files";
  auto client = *http::Client::Create({.base_url = (*files)->url(), .ca_file = (*files)->ca_file()});
  EXPECT_TRUE(client->Get("/v1/healthz").ok());
  EXPECT_TRUE((*files)->ReloadCertificates().ok());
  (*files)->Stop();
  std::filesystem::remove_all(dir);
}

// A graceful stop lets requests in flight finish (here one whose body arrives slowly, past the
// fencing deadline). The controllers stop first, so that wait is not taken for silent nodes: the job
// placed on the node stays placed, not requeued.
TEST(ServerStopTest, DrainingConnectionsDoesNotMarkNodesDown) {
  const auto dir = std::filesystem::temp_directory_path() / ("gpugeek_stop_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  // A silent node is down after 100 + 100 + 300 ms.
  auto server = ControlPlaneServer::Start({.port = 0,
                                           .agent_port = 0,
                                           .data_dir = dir.string(),
                                           .heartbeat_interval = std::chrono::milliseconds(50),
                                           .lease = std::chrono::milliseconds(100),
                                           .fence_grace = std::chrono::milliseconds(100),
                                           .fence_margin = std::chrono::milliseconds(300),
                                           .reconcile_interval = std::chrono::milliseconds(10)});
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = *http::Client::Create({.base_url = (*server)->url(), .bearer_token = (*server)->admin_token()});
  auto agent = std::make_unique<testing::AgentCaller>(**server);
  api::Registration r;
  r.node = "n1";
  r.address = "127.0.0.1";
  r.inventory =
      hw::BuildEmulatedInventory(*hw::ParseEmulateSpec("2xH100-SXM-80GB"), "n1", {"n1", 32, 1ull << 38, 1, ""});
  ASSERT_TRUE(agent->Post("/v1/agents/register", api::ToJson(r)).ok());
  auto job = client->Post("/v1/jobs", {{"spec_yaml", "name: j\nresources: {accelerators: H100-SXM-80GB:1}\nrun: x\n"}});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = (*job)["id"];
  for (int i = 0; i < 100 && (*client->Get("/v1/jobs/" + id))["state"] != "SCHEDULED"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(agent->Post("/v1/agents/n1/heartbeat", api::ToJson(api::Heartbeat{.node = "n1"})).ok());
  client.reset();
  agent.reset();
  int fd = -1;
  {
    // A raw connection sending a request head and half its body.
    const std::string url = (*server)->url();
    const int port = std::stoi(url.substr(url.rfind(':') + 1));
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    const std::string head =
        "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{";
    ASSERT_EQ(::write(fd, head.data(), head.size()), static_cast<ssize_t>(head.size()));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // accepted, and reading the body
  // The rest of the body comes 700 ms into the stop; the request is answered (400: no spec_yaml) and
  // only then does the stop finish.
  std::thread slow([fd] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    (void)!::write(fd, "}", 1);
  });
  const auto start = std::chrono::steady_clock::now();
  (*server)->Stop();
  // Longer than the fencing deadline.
  EXPECT_GT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  slow.join();
  ::close(fd);
  server->reset();
  // Specs are sealed at rest: read them with the server's key file and keyring.
  auto provider = crypto::FileKeyProvider::Open((dir / "master.key").string());
  ASSERT_TRUE(provider.ok()) << provider.status();
  auto keyring = crypto::Keyring::Open((dir / "keyring.json").string(), **provider);
  ASSERT_TRUE(keyring.ok()) << keyring.status();
  KeyringSealer sealer(**keyring);
  auto store = store::SqliteStore::Open({.path = (dir / "gpugeek.db").string(), .sealer = &sealer});
  ASSERT_TRUE(store.ok()) << store.status();
  auto stored = (*store)->GetJob(id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state, api::JobState::kScheduled);
  EXPECT_EQ(stored->restarts, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpugeek::controlplane
