// Who may call what, over a real server on loopback: every route of the OpenAPI document x every kind of
// caller gets the status access.h documents, and another tenant's objects read exactly as absent ones.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "archive/digest.h"
#include "archive/pack.h"
#include "common/clock.h"
#include "controlplane/access.h"
#include "controlplane/openapi.h"
#include "controlplane/server.h"
#include "controlplane/testing/agent_caller.h"
#include "data/version_transfer.h"
#include "http/client.h"
#include "http/status_http.h"
#include "hw/emulate_spec.h"
#include "hw/emulated_discovery.h"

namespace gpugeek::controlplane {
namespace {

using nlohmann::json;

// The callers of the matrix. Tenant team-a owns the objects the routes name.
enum Caller { kNone, kViewerA, kMemberA, kMemberB, kNodeA, kNodeB, kAdmin, kCallers };
constexpr const char* kCallerNames[] = {"no token",
                                        "viewer of team-a",
                                        "member of team-a",
                                        "member of team-b",
                                        "node-a's credential",
                                        "node-b's credential",
                                        "admin"};

struct Result {
  int status = 0;
  json body;
};

class AccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("gpugeek_access_test_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    auto s = ControlPlaneServer::Start(
        {.port = 0, .agent_port = 0, .data_dir = dir_.string(), .lease = std::chrono::minutes(5)});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    std::ifstream in(server_->admin_token_file());
    std::getline(in, tokens_[kAdmin]);
    ASSERT_EQ(tokens_[kAdmin].size(), 64u);
    ASSERT_EQ(Call(kAdmin, "POST", "/v1/tenants", {{"name", "team-a"}}).status, 201);
    ASSERT_EQ(Call(kAdmin, "POST", "/v1/tenants", {{"name", "team-b"}}).status, 201);
    for (auto [caller, name, tenant, role] :
         {std::tuple{kViewerA, "viewer-a", "team-a", "viewer"}, std::tuple{kMemberA, "member-a", "team-a", "member"},
          std::tuple{kMemberB, "member-b", "team-b", "member"}}) {
      ASSERT_EQ(Call(kAdmin, "POST", "/v1/users", {{"name", name}, {"tenant", tenant}, {"role", role}}).status, 201);
      Result t = Call(kAdmin, "POST", "/v1/tokens", {{"user", name}});
      ASSERT_EQ(t.status, 201) << t.body;
      tokens_[caller] = t.body["token"];
    }
  }
  void TearDown() override {
    agents_.reset();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  // `raw`, when not empty, is sent as an application/octet-stream body instead of `body`.
  Result Call(Caller who, const std::string& method, const std::string& path, const json& body = nullptr,
              const std::string& raw = "") {
    httplib::Client c(server_->url());
    c.set_read_timeout(10, 0);
    httplib::Headers headers;
    if (who != kNone) headers.emplace("Authorization", "Bearer " + tokens_[who]);
    const std::string text = !raw.empty() ? raw : body.is_null() ? std::string() : body.dump();
    const char* type = raw.empty() ? "application/json" : "application/octet-stream";
    httplib::Result r = method == "GET"    ? c.Get(path, headers)
                        : method == "HEAD" ? c.Head(path, headers)
                        : method == "POST" ? c.Post(path, headers, text, type)
                        : method == "PUT"  ? c.Put(path, headers, text, type)
                                           : c.Delete(path, headers);
    if (!r) return {};
    Result out{r->status, json()};
    out.body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
    if (out.body.is_discarded()) out.body = r->body;
    return out;
  }

  void RegisterNode(const std::string& node, const std::string& gpus = "8xH100-SXM-80GB") {
    api::Registration r;
    r.node = node;
    r.address = "127.0.0.1";
    r.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec(gpus), node, {node, 32, uint64_t{256} << 30, 1, ""});
    if (agents_ == nullptr) agents_ = std::make_unique<testing::AgentCaller>(*server_);
    auto reply = agents_->Post("/v1/agents/register", api::ToJson(r));
    ASSERT_TRUE(reply.ok()) << reply.status();
  }

  // A fresh PENDING job of team-a.
  std::string NewJobOfA() {
    Result r = Call(kMemberA, "POST", "/v1/jobs",
                    {{"spec_yaml", "name: t\nresources: {accelerators: A100-SXM-80GB:1}\nrun: sleep 1\n"}});
    EXPECT_EQ(r.status, 201) << r.body;
    return r.body.value("id", "");
  }

  // A running experiment of team-a with its first trial asked (the controller's loop asks it at once).
  static constexpr char kExperimentSpec[] =
      "name: e\nspace: [{name: lr, type: float, low: 0.1, high: 1}]\nbudget: {trials: 2}\n"
      "trial:\n  resources: {accelerators: A100-SXM-80GB:1}\n  run: sleep 1 {{lr}}\n";
  // A fresh service of team-a (docs/service-spec.md), named svc-N.
  static std::string ServiceSpec(int n) {
    return fmt::format(
        "kind: service\nname: svc-{}\nreplicas: {{initial: 0}}\nresources: {{accelerators: "
        "A100-SXM-80GB:1}}\nrun: serve\n",
        n);
  }
  std::string NewServiceOfA(int n) {
    Result r = Call(kMemberA, "POST", "/v1/services", {{"spec_yaml", ServiceSpec(n)}});
    EXPECT_EQ(r.status, 201) << r.body;
    return r.body.value("name", "");
  }
  std::string NewExperimentOfA() {
    Result r = Call(kMemberA, "POST", "/v1/experiments", {{"spec_yaml", kExperimentSpec}});
    EXPECT_EQ(r.status, 201) << r.body;
    const std::string id = r.body.value("id", "");
    for (int i = 0; i < 200 && Call(kAdmin, "GET", "/v1/experiments/" + id + "/trials/0").status != 200; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    return id;
  }

  // Dataset and model `corpus` with one version, the same commit in team-a's stores and the admin's
  // (default): its digest. Made once.
  std::string DatasetOfA() {
    if (!dataset_commit_.empty()) return dataset_commit_;
    const std::string src = (dir_ / "dataset-src").string();
    std::filesystem::create_directories(src);
    std::ofstream(src + "/a.txt") << "a dataset file\n";
    // Sent as a client does (each object accepted as its kind), into both stores.
    auto local = data::VersionStore::Open((dir_ / "dataset-local").string(), RealClock()).value();
    dataset_commit_ = local->Push(src, {.dataset = "corpus", .message = "m"}).value().commit;
    absl::StatusOr<std::vector<data::VersionObject>> objects = data::ListVersionObjects(*local, dataset_commit_);
    EXPECT_TRUE(objects.ok()) << objects.status();
    for (DatasetStores* stores : {&server_->datasets(), &server_->models()}) {
      for (const char* tenant : {"team-a", "default"}) {
        data::VersionStore* store = stores->For(tenant).value();
        for (const data::VersionObject& o : objects.value_or(std::vector<data::VersionObject>{})) {
          EXPECT_TRUE(data::AcceptObject(*store, o.kind, o.digest, local->objects().Get(o.digest).value()).ok());
        }
        EXPECT_TRUE(store->SetBranch("corpus", "main", dataset_commit_, "").ok());
      }
    }
    return dataset_commit_;
  }

  std::string dataset_commit_;
  std::filesystem::path dir_;
  std::unique_ptr<ControlPlaneServer> server_;
  std::string tokens_[kCallers];
  std::unique_ptr<testing::AgentCaller> agents_;
  int fresh_ = 0;
};

// A valid workdir archive of one small file.
std::string SmallArchive() {
  const std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("gpugeek_access_ar_{}", ::getpid())).string();
  std::filesystem::create_directories(dir + "/src");
  std::ofstream(dir + "/src/a.py") << "print(1)\n";
  auto packed = archive::PackWorkdir(dir + "/src", dir + "/a.tar.zst");
  std::ifstream in(dir + "/a.tar.zst", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove_all(dir);
  return packed.ok() ? bytes : std::string();
}

// The status `who` must get from a route of `access`, when the object it names belongs to team-a and to
// member-a (`user_scoped`: tokens are their user's, not their tenant's). `ok` is the route's success.
int Expected(Access access, Caller who, bool object_scoped, bool user_scoped, int ok) {
  if (access == Access::kPublic) return ok;
  // A node credential is not an API token: it speaks on the agents' listener only.
  if (who == kNone || who == kNodeA || who == kNodeB) return 401;
  const int rank = who == kAdmin ? 2 : who == kViewerA ? 0 : 1;
  const int needed = access == Access::kAdmin ? 2 : access == Access::kMember ? 1 : 0;
  if (rank < needed) return 403;
  if (object_scoped && who == kMemberB) return 404;
  if (user_scoped && (who == kMemberB || who == kViewerA)) return 404;
  return ok;
}

TEST_F(AccessTest, EveryRouteAnswersEveryCallerAsDocumented) {
  // The matrix is generated from the served OpenAPI document: its operations are the table's.
  Result doc = Call(kNone, "GET", "/v1/openapi.json");
  ASSERT_EQ(doc.status, 200);
  std::set<std::pair<std::string, std::string>> documented, declared;
  for (const auto& [path, ops] : doc.body["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      if (method == "parameters") continue;
      std::string upper = method;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      documented.insert({upper, path});
      ASSERT_TRUE(op.contains("x-gpugeek-access")) << method << " " << path;
    }
  }
  for (const RouteAccess& r : RouteAccessTable()) declared.insert({std::string(r.method), std::string(r.pattern)});
  ASSERT_EQ(documented, declared);

  RegisterNode("node-a");
  RegisterNode("node-b");
  // The jobs of the matrix ask for an A100: a cordoned A100 node admits them (it could host them) and
  // keeps them PENDING.
  RegisterNode("node-parked", "1xA100-SXM-80GB");
  ASSERT_EQ(Call(kAdmin, "POST", "/v1/nodes/node-parked/cordon").status, 200);
  tokens_[kNodeA] = agents_->credential("node-a");
  tokens_[kNodeB] = agents_->credential("node-b");
  int checked = 0;
  for (const auto& [method, pattern] : documented) {
    std::string lower = method;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const json& op = doc.body["paths"][pattern][lower];
    const std::string access_name = op["x-gpugeek-access"];
    const bool dataset_node_route =
        absl::StrContains(pattern, "/datasets/") || absl::StartsWith(pattern, "/v1/agents/{node}/models/");
    if (access_name == "node" && (absl::StrContains(pattern, "/archives/") || dataset_node_route)) {
      // An archive, dataset or model object reaches a node only for a job assigned to it
      // (archive_routes_test.cc, dataset_routes_test.cc, model_registry_test.cc have the 200): here node-a
      // holds none, so its own credential reads 404.
      const std::string path = dataset_node_route
                                   ? fmt::format("/v1/agents/node-a/{}/{}/objects/{}",
                                                 absl::StrContains(pattern, "/models/") ? "models" : "datasets",
                                                 std::string(64, 'a'), std::string(64, 'b'))
                                   : "/v1/agents/node-a/archives/" + std::string(64, 'a');
      for (int c = 0; c < kCallers; ++c) {
        auto client = *http::Client::Create(
            {.base_url = server_->agent_url(), .ca_file = server_->ca_file(), .bearer_token = tokens_[c]});
        auto reply = client->GetText(path);
        const int got = reply.ok() ? 200 : http::HttpStatusFor(reply.status());
        const int want = c == kNodeA ? 404 : c == kNodeB ? 403 : 401;
        EXPECT_EQ(got, want) << method << " " << path << " as " << kCallerNames[c] << ": " << reply.status();
        EXPECT_TRUE(op["responses"].contains(std::to_string(got))) << method << " " << pattern << " answered " << got;
        ++checked;
      }
      continue;
    }
    if (access_name == "node") {
      // The agents' listener, as node-a: only node-a's own credential is heard (node_authority_test.cc
      // has the join and takeover cases).
      const bool reclaim = pattern == "/v1/agents/{node}/reclaim";
      const std::string path = method == "POST" && pattern == "/v1/agents/register" ? pattern
                               : reclaim                                            ? "/v1/agents/node-a/reclaim"
                                                                                    : "/v1/agents/node-a/heartbeat";
      api::Registration reg;
      reg.node = "node-a";
      reg.address = "127.0.0.1";
      reg.inventory = hw::BuildEmulatedInventory(*hw::ParseEmulateSpec("8xH100-SXM-80GB"), "node-a",
                                                 {"node-a", 32, uint64_t{256} << 30, 1, ""});
      const json body = path == pattern ? api::ToJson(reg)
                        : reclaim       ? json{{"deadline_s", 30}}
                                        : json{{"node", "node-a"}};
      for (int c = 0; c < kCallers; ++c) {
        auto client = *http::Client::Create(
            {.base_url = server_->agent_url(), .ca_file = server_->ca_file(), .bearer_token = tokens_[c]});
        auto reply = client->Post(path, body);
        const int got = reply.ok() ? 200 : http::HttpStatusFor(reply.status());
        const int want = c == kNodeA ? 200 : c == kNodeB ? 403 : 401;
        EXPECT_EQ(got, want) << method << " " << path << " as " << kCallerNames[c] << ": " << reply.status();
        EXPECT_TRUE(op["responses"].contains(std::to_string(got))) << method << " " << pattern << " answered " << got;
        ++checked;
      }
      continue;
    }
    const Access access = AccessOf(method, pattern);
    ASSERT_EQ(access_name, AccessName(access));
    const bool job_scoped = absl::StartsWith(pattern, "/v1/jobs/{id}");
    const bool experiment_scoped = absl::StartsWith(pattern, "/v1/experiments/{id}");
    const bool token_scoped = pattern == "/v1/tokens/{id}";
    // A service of team-a.
    const bool service_scoped = absl::StartsWith(pattern, "/v1/services/{name}");
    // A secret of team-a (and of the admin's own tenant: secrets are the caller's tenant's).
    const bool secret_scoped = pattern == "/v1/secrets/{name}" && method != "PUT";
    // A reservation of team-a.
    const bool reservation_scoped = absl::StartsWith(pattern, "/v1/reservations/{id}");
    // An archive of team-a (and of the admin's own tenant), as secrets; a PUT uploads the caller's own copy.
    const bool archive_scoped = pattern == "/v1/archives/{digest}" && method != "PUT";
    // A dataset or model of team-a (and of the admin's own tenant); an object PUT stores the caller's own
    // copy. The same routes serve both (dataset_routes.h, model_routes.h).
    const bool model_route =
        absl::StartsWith(pattern, "/v1/models/{name}") || absl::StartsWith(pattern, "/v1/model-objects/");
    const bool dataset_route = model_route || absl::StartsWith(pattern, "/v1/datasets/{name}") ||
                               absl::StartsWith(pattern, "/v1/dataset-objects/");
    const std::string objects_path = model_route ? "/v1/model-objects" : "/v1/dataset-objects";
    const bool dataset_scoped = dataset_route && pattern != objects_path + "/missing" &&
                                !(pattern == objects_path + "/{digest}" && method == "PUT");
    // exec, ports: the fresh job is PENDING, so a caller allowed to reach its members gets to the state
    // check (409); port-forward: a plain POST (no Upgrade headers) is 426 once the caller may see the job.
    const int ok =
        pattern == "/v1/jobs/{id}/port-forward"                               ? 426
        : pattern == "/v1/jobs/{id}/exec" || pattern == "/v1/jobs/{id}/ports" ? 409
        // Nothing is owed to the provider yet: the payout is refused.
        : pattern == "/v1/providers/{name}/payouts"                                         ? 409
        : pattern == "/v1/tenants/{name}/top-ups" || pattern == "/v1/tenants/{name}/grants" ? 201
        : method == "POST" && pattern == "/v1/reservations"                                 ? 201
        : (method == "POST" && (pattern == "/v1/jobs" || pattern == "/v1/experiments" || pattern == "/v1/services" ||
                                pattern == "/v1/tenants" || pattern == "/v1/users" || pattern == "/v1/tokens" ||
                                pattern == "/v1/join-tokens"))
            ? 201
            : 200;
    for (int c = 0; c < kCallers; ++c) {
      const Caller who = static_cast<Caller>(c);
      // Fresh objects per call, so one caller's success (a cancel, a removal) does not change the next one's.
      const int n = ++fresh_;
      std::string path = pattern;
      json body = nullptr;
      if (job_scoped) path = absl::StrReplaceAll(path, {{"{id}", NewJobOfA()}});
      if (experiment_scoped) path = absl::StrReplaceAll(path, {{"{id}", NewExperimentOfA()}, {"{number}", "0"}});
      if (service_scoped) path = absl::StrReplaceAll(path, {{"{name}", NewServiceOfA(n)}});
      if (pattern == "/v1/join-tokens/{id}") {
        Result t = Call(kAdmin, "POST", "/v1/join-tokens", json::object());
        path = absl::StrReplaceAll(path, {{"{id}", t.body["id"].get<std::string>()}});
      }
      if (token_scoped) {
        Result t = Call(kAdmin, "POST", "/v1/tokens", {{"user", "member-a"}});
        path = absl::StrReplaceAll(path, {{"{id}", t.body["id"].get<std::string>()}});
      }
      if (absl::StartsWith(pattern, "/v1/secrets/")) {
        const std::string name = fmt::format("s-{}", n);
        for (const char* tenant : {"team-a", "default"}) {
          ASSERT_TRUE(server_->control_plane().secrets().Put(tenant, name, "v").ok());
        }
        path = absl::StrReplaceAll(path, {{"{name}", name}});
        if (method == "PUT") body = {{"value", "v2"}};
      }
      std::string raw;
      if (pattern == "/v1/archives/{digest}") {
        const std::string tar = SmallArchive();
        const std::string digest = archive::Sha256Hex(tar);
        for (const char* tenant : {"team-a", "default"}) {
          ASSERT_TRUE(server_->archives().Put(tenant, digest, 0, tar.size(), tar).ok());
        }
        path = absl::StrReplaceAll(path, {{"{digest}", digest}});
        if (method == "PUT") {
          path += fmt::format("?offset=0&total={}", tar.size());
          raw = tar;
        }
      }
      if (dataset_route) {
        const std::string commit = DatasetOfA();
        const bool branch = absl::StrContains(pattern, "{branch}"), tag = absl::StrContains(pattern, "{tag}");
        const std::string ref = fmt::format("{}-{}", branch ? "b" : "t", n);
        if (method == "DELETE") {
          for (const char* tenant : {"team-a", "default"}) {
            data::VersionStore* store = (model_route ? server_->models() : server_->datasets()).For(tenant).value();
            ASSERT_TRUE(
                (branch ? store->CreateBranch("corpus", ref, "main") : store->CreateTag("corpus", ref, "main")).ok());
          }
        }
        // A grant goes to team-b (the owner cannot grant itself).
        path = absl::StrReplaceAll(path, {{"{name}", "corpus"},
                                          {"{rev}", "main"},
                                          {"{branch}", ref},
                                          {"{tag}", ref},
                                          {"{digest}", commit},
                                          {"{tenant}", "team-b"}});
        if (absl::StrContains(pattern, "/grants/") && method == "PUT") body = {{"rights", {"pull"}}};
        if (absl::EndsWith(pattern, "/pulls") && method == "POST") body = json::object();
        if (method == "PUT" && branch) body = {{"commit", commit}, {"expected", ""}};
        if (method == "PUT" && tag) body = {{"commit", commit}};
        if (absl::EndsWith(pattern, "/diff")) path += "?from=main&to=main";
        if (pattern == objects_path + "/missing") body = {{"digests", {commit}}};
        if (pattern == objects_path + "/{digest}" && method == "PUT") {
          raw = fmt::format("chunk {}", n);
          path = fmt::format("{}/{}?kind=chunk", objects_path, archive::Sha256Hex(raw));
        }
      }
      if (pattern == "/v1/tenants/{name}/top-ups" || pattern == "/v1/tenants/{name}/grants" ||
          pattern == "/v1/providers/{name}/payouts") {
        path = absl::StrReplaceAll(path, {{"{name}", "team-a"}});
      }
      if (pattern == "/v1/tenants/{name}/budget" || pattern == "/v1/users/{name}/budget") {
        const bool of_user = pattern == "/v1/users/{name}/budget";
        path = absl::StrReplaceAll(path, {{"{name}", of_user ? "member-a" : "team-a"}});
        if (method == "PUT") body = {{"monthly_limit", "10.00"}, {"alert_percents", {50, 100}}};
        // A budget to delete, for every caller's try.
        if (method == "DELETE") {
          ASSERT_TRUE(server_->control_plane()
                          .billing()
                          .budgets()
                          .Set({.tenant = "team-a", .user = of_user ? "member-a" : "", .monthly_limit_micros = 1})
                          .ok());
        }
      }
      if (reservation_scoped) {
        const TimePoint now = server_->control_plane().clock().Now();
        auto r = server_->control_plane().billing().reservations().Create({.tenant = "team-a",
                                                                           .gpu_model = "H100-SXM-80GB",
                                                                           .gpus = 1,
                                                                           .price_micros = 1,
                                                                           .start = now,
                                                                           .end = now + std::chrono::hours(1)});
        ASSERT_TRUE(r.ok()) << r.status();
        path = absl::StrReplaceAll(path, {{"{id}", r->id}});
      }
      if (pattern == "/v1/reservations" && method == "POST") {
        // 8 GPUs of a fresh node to reserve, once the pool shows it.
        const std::string node = fmt::format("node-{}", n);
        RegisterNode(node);
        for (int i = 0; i < 500 && !server_->control_plane().snapshot()->nodes.contains(node); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
      if (pattern == "/v1/tenants/{name}/quota") {
        path = absl::StrReplaceAll(path, {{"{name}", "team-a"}});
        body = {{"max_jobs", n}};
      }
      if (absl::StrContains(path, "{name}")) {
        const std::string node = fmt::format("node-{}", n);
        RegisterNode(node);
        // A node leaves the pool only when down or cordoned with nothing on it.
        if (method == "DELETE") {
          ASSERT_EQ(Call(kAdmin, "POST", "/v1/nodes/" + node + "/cordon").status, 200);
        }
        path = absl::StrReplaceAll(path, {{"{name}", node}});
      }
      if (method == "POST" && !dataset_route) {
        if (pattern == "/v1/keys/rotate") {
          body = {{"retire", false}};
        } else if (pattern == "/v1/jobs") {
          body = {{"spec_yaml", "name: m\nresources: {accelerators: A100-SXM-80GB:1}\nrun: sleep 1\n"}};
        } else if (pattern == "/v1/experiments") {
          body = {{"spec_yaml", kExperimentSpec}};
        } else if (pattern == "/v1/services") {
          body = {{"spec_yaml", ServiceSpec(n)}};
        } else if (pattern == "/v1/services/load") {
          body = {{"gateway", "gw-1"}, {"services", {{"svc-1", {{"in_flight", 1}, {"queued", 0}}}}}};
        } else if (pattern == "/v1/services/{name}/traffic") {
          body = {{"weights", {{"v1", 100}}}};
        } else if (pattern == "/v1/services/{name}/scale") {
          body = {{"replicas", {{"v1", 1}}}};
        } else if (pattern == "/v1/tenants") {
          body = {{"name", fmt::format("t-{}", n)}};
        } else if (pattern == "/v1/tenants/{name}/top-ups" || pattern == "/v1/providers/{name}/payouts") {
          body = {{"amount", "1.50"}, {"id", fmt::format("k-{}", n)}};
        } else if (pattern == "/v1/reservations") {
          body = {{"tenant", "team-a"}, {"gpu_model", "H100-SXM-80GB"}, {"gpus", 8}, {"price", "1.20"}, {"hours", 24}};
        } else if (pattern == "/v1/tenants/{name}/grants") {
          body = {{"grant", fmt::format("g-{}", n)}, {"amount", "2.00"}};
        } else if (pattern == "/v1/nodes/{name}/reclaim") {
          body = {{"deadline_s", 30}};
        } else if (pattern == "/v1/jobs/{id}/exec") {
          body = {{"argv", {"true"}}};
        } else if (pattern == "/v1/users") {
          body = {{"name", fmt::format("u-{}", n)}, {"tenant", "team-a"}, {"role", "viewer"}};
        } else if (pattern == "/v1/plans") {
          body = {{"model_config",
                   {{"model_type", "llama"},
                    {"hidden_size", 512},
                    {"intermediate_size", 1024},
                    {"num_attention_heads", 8},
                    {"num_hidden_layers", 2},
                    {"vocab_size", 1000},
                    {"num_key_value_heads", 8},
                    {"max_position_embeddings", 1024},
                    {"torch_dtype", "bfloat16"}}},
                  {"task", {{"kind", "inference"}, {"seq", 512}}}};
        } else {
          body = json::object();
        }
      }
      const int want = Expected(access, who,
                                job_scoped || experiment_scoped || service_scoped || secret_scoped || archive_scoped ||
                                    dataset_scoped || reservation_scoped,
                                token_scoped, ok);
      Result got = Call(who, method, path, body, raw);
      EXPECT_EQ(got.status, want) << method << " " << path << " as " << kCallerNames[c] << ": " << got.body;
      // The answer is one the document lists for the operation.
      EXPECT_TRUE(op["responses"].contains(std::to_string(got.status)))
          << method << " " << pattern << " answered " << got.status << ", not in the document";
      ++checked;
    }
  }
  EXPECT_EQ(checked, static_cast<int>(declared.size()) * kCallers);  // every route x every caller
}

TEST_F(AccessTest, TheServedDocumentIsTheDumpedOneAndNamesEveryOperation) {
  // `gpugeek openapi` prints OpenApiDocument(): what CI lints is what the server serves.
  Result doc = Call(kNone, "GET", "/v1/openapi.json");
  ASSERT_EQ(doc.status, 200);
  EXPECT_EQ(doc.body, OpenApiDocument());
  EXPECT_TRUE(doc.body["components"]["securitySchemes"].contains("bearerAuth"));
  std::set<std::string> ids;
  for (const auto& [path, ops] : doc.body["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      if (method == "parameters") continue;
      EXPECT_TRUE(op.contains("operationId") && op["operationId"].is_string()) << method << " " << path;
      EXPECT_TRUE(ids.insert(op.value("operationId", "")).second) << "duplicate operationId " << op["operationId"];
      EXPECT_FALSE(op.value("summary", "").empty()) << method << " " << path;
      EXPECT_FALSE(op.value("tags", json::array()).empty()) << method << " " << path;
      ASSERT_TRUE(op.contains("security") && op["security"].is_array()) << method << " " << path;
      // Public routes declare no scheme (an empty list overrides the default); agent routes nodeCredential.
      const std::string access = op["x-gpugeek-access"];
      EXPECT_EQ(op["security"].empty(), access == "public") << method << " " << path;
      bool has_4xx = false;
      for (const auto& [code, response] : op["responses"].items()) has_4xx |= code.size() == 3 && code[0] == '4';
      EXPECT_TRUE(has_4xx) << method << " " << path;
    }
  }
}

// Every state-changing call is on record, whatever its answer; reads are not; no token is stored.
TEST_F(AccessTest, TheAuditLogRecordsEveryStateChangingCallAndNoSecret) {
  const json before = Call(kAdmin, "GET", "/v1/audit?limit=1000").body;
  ASSERT_TRUE(before.contains("records")) << before;
  const int64_t after = before["records"].empty() ? 0 : before["records"].back()["seq"].get<int64_t>();
  const std::string id = NewJobOfA();
  ASSERT_EQ(Call(kMemberA, "POST", "/v1/jobs/" + id + "/cancel").status, 200);
  ASSERT_EQ(Call(kAdmin, "POST", "/v1/users", {{"name", "carol"}, {"tenant", "team-b"}, {"role", "viewer"}}).status,
            201);
  ASSERT_EQ(Call(kViewerA, "POST", "/v1/jobs/" + id + "/cancel").status, 403);
  ASSERT_EQ(Call(kNone, "POST", "/v1/tenants", {{"name", "nope"}}).status, 401);
  ASSERT_EQ(Call(kMemberA, "GET", "/v1/jobs/" + id).status, 200);  // a read: not recorded
  {
    httplib::Client c(server_->url());
    auto r = c.Post("/v1/tenants", {{"Authorization", "Bearer " + tokens_[kAdmin]}, {"X-Request-Id", "req-42"}},
                    json({{"name", "team-c"}}).dump(), "application/json");
    ASSERT_TRUE(r && r->status == 201);
  }
  // Only an admin reads the log.
  EXPECT_EQ(Call(kViewerA, "GET", "/v1/audit").status, 403);
  EXPECT_EQ(Call(kMemberA, "GET", "/v1/audit").status, 403);
  EXPECT_EQ(Call(kNone, "GET", "/v1/audit").status, 401);

  Result page = Call(kAdmin, "GET", fmt::format("/v1/audit?after={}", after));
  ASSERT_EQ(page.status, 200) << page.body;
  const json& records = page.body["records"];
  ASSERT_EQ(records.size(), 6u) << records.dump(2);
  struct Want {
    std::string user, tenant, role, method, route, path;
    int status;
  };
  const Want want[] = {
      {"member-a", "team-a", "member", "POST", "/v1/jobs", "/v1/jobs", 201},
      {"member-a", "team-a", "member", "POST", "/v1/jobs/{id}/cancel", "/v1/jobs/" + id + "/cancel", 200},
      {"admin", "default", "admin", "POST", "/v1/users", "/v1/users", 201},
      {"viewer-a", "team-a", "viewer", "POST", "/v1/jobs/{id}/cancel", "/v1/jobs/" + id + "/cancel", 403},
      {"", "", "", "POST", "/v1/tenants", "/v1/tenants", 401},
      {"admin", "default", "admin", "POST", "/v1/tenants", "/v1/tenants", 201},
  };
  int64_t last_seq = after;
  for (size_t i = 0; i < records.size(); ++i) {
    const json& a = records[i];
    SCOPED_TRACE(a.dump());
    EXPECT_GT(a["seq"].get<int64_t>(), last_seq);
    last_seq = a["seq"];
    EXPECT_EQ(a["user"], want[i].user);
    EXPECT_EQ(a["tenant"], want[i].tenant);
    EXPECT_EQ(a["role"], want[i].role);
    EXPECT_EQ(a["method"], want[i].method);
    EXPECT_EQ(a["route"], want[i].route);
    EXPECT_EQ(a["path"], want[i].path);
    EXPECT_EQ(a["status"], want[i].status);
    EXPECT_TRUE(absl::StartsWith(a["remote_address"].get<std::string>(), "127.0.0.1:")) << a["remote_address"];
    EXPECT_FALSE(a["time"].get<std::string>().empty());
  }
  EXPECT_EQ(records[0]["token_id"], tokens_[kMemberA].substr(4, 16));
  EXPECT_EQ(records[4]["token_id"], "");
  EXPECT_EQ(records[5]["request_id"], "req-42");
  // Filters and paging.
  Result by_member = Call(kAdmin, "GET", fmt::format("/v1/audit?after={}&user=member-a", after));
  EXPECT_EQ(by_member.body["records"].size(), 2u);
  Result by_tenant = Call(kAdmin, "GET", fmt::format("/v1/audit?after={}&tenant=team-a&limit=2", after));
  ASSERT_EQ(by_tenant.body["records"].size(), 2u);
  EXPECT_EQ(by_tenant.body["next_after"], by_tenant.body["records"][1]["seq"]);
  EXPECT_EQ(Call(kAdmin, "GET", "/v1/audit?limit=0").status, 400);
  EXPECT_EQ(Call(kAdmin, "GET", "/v1/audit?after=x").status, 400);

  // The raw database (and its write-ahead log) holds no token and no secret.
  server_.reset();
  std::string bytes;
  for (const char* file : {"gpugeek.db", "gpugeek.db-wal"}) {
    std::ifstream in(dir_ / file, std::ios::binary);
    bytes += std::string(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_NE(bytes.find("/v1/jobs/" + id + "/cancel"), std::string::npos) << "the audit rows are in these files";
  for (const std::string& token : tokens_) {
    if (token.empty()) continue;  // kNone
    ASSERT_EQ(token.size(), 64u);
    EXPECT_EQ(bytes.find(token), std::string::npos);
    EXPECT_EQ(bytes.find(token.substr(21)), std::string::npos) << "a token's secret is stored";
  }
  EXPECT_EQ(bytes.find("Bearer "), std::string::npos);
}

TEST_F(AccessTest, AnotherTenantsJobReadsExactlyAsAnAbsentOne) {
  const std::string id = NewJobOfA();
  Result absent = Call(kMemberB, "GET", "/v1/jobs/j-99999999");
  Result foreign = Call(kMemberB, "GET", "/v1/jobs/" + id);
  ASSERT_EQ(absent.status, 404);
  ASSERT_EQ(foreign.status, 404);
  EXPECT_EQ(foreign.body["message"],
            absl::StrReplaceAll(absent.body["message"].get<std::string>(), {{"j-99999999", id}}));
  EXPECT_EQ(Call(kMemberB, "GET", "/v1/jobs/" + id + "/logs").body, foreign.body);
  EXPECT_EQ(Call(kMemberB, "POST", "/v1/jobs/" + id + "/cancel").body, foreign.body);
  // Listings leave it out, whatever the filter says.
  EXPECT_TRUE(Call(kMemberB, "GET", "/v1/jobs").body["jobs"].empty());
  EXPECT_TRUE(Call(kMemberB, "GET", "/v1/jobs?tenant=team-a").body["jobs"].empty());
  EXPECT_TRUE(Call(kMemberB, "GET", "/v1/events").body["events"].empty());
  EXPECT_TRUE(Call(kMemberB, "GET", "/v1/events?job=" + id).body["events"].empty());
  EXPECT_EQ(Call(kViewerA, "GET", "/v1/jobs").body["jobs"].size(), 1u);
  EXPECT_EQ(Call(kAdmin, "GET", "/v1/jobs?tenant=team-a").body["jobs"].size(), 1u);
  // A member cannot submit into another tenant.
  Result into_a =
      Call(kMemberB, "POST", "/v1/jobs",
           {{"spec_yaml", "name: x\nresources: {accelerators: A100-SXM-80GB:1}\nrun: true\n"}, {"tenant", "team-a"}});
  EXPECT_EQ(into_a.status, 403);
  EXPECT_EQ(Call(kMemberA, "GET", "/v1/jobs").body["jobs"].size(), 1u);
  // The job is team-a's and its submitter's tenant, not a free label.
  EXPECT_EQ(Call(kMemberA, "GET", "/v1/jobs/" + id).body["tenant"], "team-a");
}

TEST_F(AccessTest, AnotherTenantsServiceReadsAsAbsentAndOnlyAnAdminSeesEveryEndpoint) {
  const std::string name = NewServiceOfA(1);
  Result absent = Call(kMemberB, "GET", "/v1/services/svc-none");
  Result foreign = Call(kMemberB, "GET", "/v1/services/" + name);
  ASSERT_EQ(absent.status, 404);
  ASSERT_EQ(foreign.status, 404);
  EXPECT_EQ(foreign.body["message"], "no service 'svc-1'");
  EXPECT_EQ(Call(kMemberB, "POST", "/v1/services/" + name + "/scale", {{"replicas", {{"v1", 1}}}}).body, foreign.body);
  EXPECT_EQ(Call(kMemberB, "DELETE", "/v1/services/" + name).body, foreign.body);
  // Listings leave it out, whatever the filter says.
  EXPECT_TRUE(Call(kMemberB, "GET", "/v1/services").body["services"].empty());
  EXPECT_TRUE(Call(kMemberB, "GET", "/v1/services?tenant=team-a").body["services"].empty());
  EXPECT_EQ(Call(kViewerA, "GET", "/v1/services").body["services"].size(), 1u);
  EXPECT_EQ(Call(kAdmin, "GET", "/v1/services").body["services"].size(), 1u);
  // Its name is taken for every tenant: gateways route by it.
  Result taken = Call(kMemberB, "POST", "/v1/services", {{"spec_yaml", ServiceSpec(1)}});
  EXPECT_EQ(taken.status, 409) << taken.body;
  EXPECT_EQ(taken.body["message"], "name: another tenant's service is named 'svc-1'; choose another name");
  // The gateways' routes: the admin's only.
  EXPECT_EQ(Call(kMemberA, "GET", "/v1/endpoints").status, 403);
  Result routes = Call(kAdmin, "GET", "/v1/endpoints");
  ASSERT_EQ(routes.status, 200);
  ASSERT_EQ(routes.body["routes"].size(), 1u);
  EXPECT_EQ(routes.body["routes"][0]["service"], "svc-1");
  // A bad traffic split names the field.
  Result bad = Call(kMemberA, "POST", "/v1/services/" + name + "/traffic", {{"weights", {{"v1", 90}}}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.body["message"], "weights: sum to 90; they must sum to 100");
}

TEST_F(AccessTest, QuotasAreSetByTheAdminAndReadByEachTenantForItselfOnly) {
  Result set = Call(kAdmin, "PUT", "/v1/tenants/team-a/quota",
                    {{"weight", 2}, {"max_jobs", 3}, {"max_gpus_by_model", {{"H100-SXM-80GB", 4}}}});
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(set.body["tenant"], "team-a");
  EXPECT_EQ(set.body["weight"], 2.0);
  EXPECT_EQ(set.body["max_gpus_by_model"], json({{"H100-SXM-80GB", 4}}));
  EXPECT_EQ(Call(kMemberA, "PUT", "/v1/tenants/team-a/quota", {{"max_jobs", 100}}).status, 403);
  EXPECT_EQ(Call(kAdmin, "PUT", "/v1/tenants/no-such/quota", {{"max_jobs", 1}}).status, 404);
  EXPECT_EQ(Call(kAdmin, "PUT", "/v1/tenants/team-a/quota", {{"weight", 0}}).status, 400);
  EXPECT_EQ(Call(kAdmin, "PUT", "/v1/tenants/team-a/quota", {{"max_jobs", -1}}).status, 400);
  EXPECT_EQ(Call(kAdmin, "PUT", "/v1/tenants/team-a/quota", {{"max_gpus_by_model", {{"NO-SUCH-GPU", 1}}}}).status, 400);
  EXPECT_EQ(Call(kAdmin, "PUT", "/v1/tenants/team-a/quota", {{"colour", "red"}}).status, 400);

  // A viewer of team-a sees team-a's row only.
  Result a = Call(kViewerA, "GET", "/v1/quota");
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(a.body["tenants"].size(), 1u) << a.body;
  EXPECT_EQ(a.body["tenants"][0]["tenant"], "team-a");
  EXPECT_EQ(a.body["tenants"][0]["max_jobs"], 3);
  EXPECT_EQ(a.body["tenants"][0]["fair_share_factor"], 1.0);
  EXPECT_EQ(a.body["half_life_s"], 7 * 24 * 3600.0);
  // team-b's member sees its own, and team-a's reads as none.
  Result b = Call(kMemberB, "GET", "/v1/quota");
  ASSERT_EQ(b.body["tenants"].size(), 1u) << b.body;
  EXPECT_EQ(b.body["tenants"][0]["tenant"], "team-b");
  EXPECT_EQ(b.body["tenants"][0]["max_jobs"], 0);
  Result foreign = Call(kMemberB, "GET", "/v1/quota?tenant=team-a");
  EXPECT_EQ(foreign.status, 200);
  EXPECT_TRUE(foreign.body["tenants"].empty()) << foreign.body;
  // The admin sees every tenant, paged by name.
  Result all = Call(kAdmin, "GET", "/v1/quota");
  std::vector<std::string> names;
  for (const json& row : all.body["tenants"]) names.push_back(row["tenant"]);
  EXPECT_EQ(names, (std::vector<std::string>{"default", "team-a", "team-b"}));
  Result page = Call(kAdmin, "GET", "/v1/quota?limit=1&after=default");
  ASSERT_EQ(page.body["tenants"].size(), 1u);
  EXPECT_EQ(page.body["tenants"][0]["tenant"], "team-a");
  EXPECT_EQ(page.body["next_after"], "team-a");
  // Stored: a restart keeps it.
  server_.reset();
  auto s = ControlPlaneServer::Start({.port = 0, .agent_port = 0, .data_dir = dir_.string()});
  ASSERT_TRUE(s.ok()) << s.status();
  server_ = std::move(*s);
  EXPECT_EQ(Call(kViewerA, "GET", "/v1/quota").body["tenants"][0]["max_jobs"], 3);
}

TEST_F(AccessTest, TokensAreCheckedRevokedAndExpire) {
  // A forged token with a real id and a wrong secret; garbage; the wrong scheme.
  const std::string real = tokens_[kMemberA];
  const std::string forged =
      real.substr(0, real.size() - 4) + (real.substr(real.size() - 4) == "AAAA" ? "BBBB" : "AAAA");
  httplib::Client c(server_->url());
  for (const std::string& header : {"Bearer " + forged, std::string("Bearer nonsense"), "Basic " + real}) {
    auto r = c.Get("/v1/whoami", {{"Authorization", header}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << header;
    EXPECT_FALSE(absl::StrContains(r->body, real.substr(21))) << "the secret must not be echoed";
  }
  Result me = Call(kMemberA, "GET", "/v1/whoami");
  EXPECT_EQ(me.body,
            json({{"user", "member-a"}, {"tenant", "team-a"}, {"role", "member"}, {"token_id", real.substr(4, 16)}}));
  // Revoked: refused from the next call on.
  ASSERT_EQ(Call(kMemberA, "DELETE", "/v1/tokens/" + real.substr(4, 16)).status, 200);
  Result after = Call(kMemberA, "GET", "/v1/whoami");
  EXPECT_EQ(after.status, 401);
  EXPECT_TRUE(absl::StrContains(after.body["message"].get<std::string>(), "was revoked")) << after.body;
  // The hash at rest is argon2id: the store holds no token.
  server_.reset();
  auto store = store::SqliteStore::Open({.path = (dir_ / "gpugeek.db").string()});
  ASSERT_TRUE(store.ok());
  absl::StatusOr<std::vector<store::TokenRecord>> stored = (*store)->ListTokens();
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->size(), 4u);  // the admin's and the three of SetUp
  for (const store::TokenRecord& t : *stored) {
    EXPECT_TRUE(absl::StartsWith(t.secret_hash, "$argon2id$v=19$")) << t.secret_hash;
    for (const std::string& token : tokens_) {
      if (token.size() == 64) {
        EXPECT_FALSE(absl::StrContains(t.secret_hash, token.substr(21)));
      }
    }
  }
}

TEST_F(AccessTest, TheBootstrapTokenIsMadeOnceAndPrivate) {
  struct stat st {};
  ASSERT_EQ(::stat(server_->admin_token_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string first = tokens_[kAdmin];
  server_.reset();
  auto s = ControlPlaneServer::Start({.port = 0, .agent_port = 0, .data_dir = dir_.string()});
  ASSERT_TRUE(s.ok());
  server_ = std::move(*s);
  std::ifstream in(server_->admin_token_file());
  std::string again;
  std::getline(in, again);
  EXPECT_EQ(again, first);  // a restart makes no second admin
  Result who = Call(kAdmin, "GET", "/v1/whoami");
  EXPECT_EQ(who.body["user"], "admin") << who.status << " " << who.body;
  EXPECT_EQ(Call(kAdmin, "GET", "/v1/users").body["users"].size(), 4u);  // admin + the three of SetUp
}

}  // namespace
}  // namespace gpugeek::controlplane
