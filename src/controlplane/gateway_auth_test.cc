// Services with `traffic.auth: token` end to end: the real control plane (accounts, argon2id tokens, GET
// /v1/whoami) verifies the callers' tokens for a real gateway (gateway/token_check.h) in front of a replica that
// shows what it was sent.

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "controlplane/server.h"
#include "gateway/gateway.h"
#include "http/server.h"

namespace gpugeek::controlplane {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

class GatewayAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("gpugeek_gateway_auth_test_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    auto s = ControlPlaneServer::Start({.port = 0, .agent_port = 0, .data_dir = dir_.string()});
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    std::ifstream in(server_->admin_token_file());
    std::getline(in, admin_);
    ASSERT_EQ(Api(admin_, "POST", "/v1/tenants", {{"name", "team-a"}}).status, 201);
    ASSERT_EQ(Api(admin_, "POST", "/v1/tenants", {{"name", "team-b"}}).status, 201);
    for (auto [name, tenant, role] :
         {std::tuple{"viewer-a", "team-a", "viewer"}, std::tuple{"member-a", "team-a", "member"},
          std::tuple{"member-b", "team-b", "member"}}) {
      ASSERT_EQ(Api(admin_, "POST", "/v1/users", {{"name", name}, {"tenant", tenant}, {"role", role}}).status, 201);
      tokens_[name] = Api(admin_, "POST", "/v1/tokens", {{"user", name}}).body["token"];
    }
    // The replica answers with the fields that tell who called.
    replica_ = *http::Server::Create({});
    replica_->Route("GET", "/{rest...}", [](const http::Request& r) -> absl::StatusOr<http::Reply> {
      const auto field = [&](const char* name) {
        auto it = r.headers.find(name);
        return it == r.headers.end() ? std::string("-") : it->second;
      };
      return http::Reply::Text(
          fmt::format("{} {} {}", field("gpugeek-user"), field("gpugeek-tenant"), field("authorization")));
    });
    ASSERT_TRUE(replica_->Start().ok());
    gateway::GatewayOptions o;
    o.token_check = gateway::TokenCheckOptions{};
    o.token_check->client.base_url = server_->url();
    o.token_check->valid_ttl = 300ms;  // (30 s in service) a revocation shows within the test
    o.token_check->invalid_ttl = 300ms;
    o.token_check->unverifiable_ttl = 100ms;
    gateway::ServiceRoute route{.service = "gpt", .auth_tenant = "team-a"};
    route.versions.push_back(
        {.name = "v1",
         .weight_percent = 100,
         .replicas = {{.id = "r1", .host = "127.0.0.1", .port = static_cast<uint16_t>(replica_->port())}}});
    auto gw = gateway::Gateway::Start(o, gateway::RouteTable{.routes = {route}});
    ASSERT_TRUE(gw.ok()) << gw.status();
    gateway_ = std::move(*gw);
  }
  void TearDown() override {
    gateway_.reset();
    replica_.reset();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  struct Result {
    int status = 0;
    json body;
    std::string text;
    httplib::Headers headers;
  };
  Result Api(const std::string& token, const std::string& method, const std::string& path, const json& body = nullptr) {
    httplib::Client c(server_->url());
    httplib::Headers headers = {{"Authorization", "Bearer " + token}};
    httplib::Result r = method == "GET"    ? c.Get(path, headers)
                        : method == "POST" ? c.Post(path, headers, body.dump(), "application/json")
                                           : c.Delete(path, headers);
    if (!r) return {};
    return {r->status, json::parse(r->body, nullptr, false), r->body, r->headers};
  }
  // GET / through the gateway with these extra fields.
  Result Call(const httplib::Headers& headers) {
    httplib::Client c("127.0.0.1", gateway_->port());
    c.set_read_timeout(15, 0);
    httplib::Result r = c.Get("/predict", headers);
    if (!r) return {};
    return {r->status, json(), r->body, r->headers};
  }
  Result CallAs(const std::string& token) { return Call({{"Authorization", "Bearer " + token}}); }

  std::filesystem::path dir_;
  std::unique_ptr<ControlPlaneServer> server_;
  std::unique_ptr<http::Server> replica_;
  std::unique_ptr<gateway::Gateway> gateway_;
  std::string admin_;
  std::map<std::string, std::string> tokens_;
};

TEST_F(GatewayAuthTest, TheTenantsUsersAndAdminsCallOthersDoNot) {
  // No token, another scheme, a malformed token: 401 with the challenge, and nothing reaches the replica.
  for (const httplib::Headers& h :
       {httplib::Headers{}, httplib::Headers{{"Authorization", "Basic " + tokens_["member-a"]}},
        httplib::Headers{{"Authorization", "Bearer nonsense"}}}) {
    Result r = Call(h);
    EXPECT_EQ(r.status, 401) << r.text;
    EXPECT_EQ(r.headers.find("WWW-Authenticate")->second, "Bearer realm=\"gpugeek\"");
  }
  // A user of the service's tenant, any role: the replica learns who, never the token; a forged identity is dropped.
  Result member = Call({{"Authorization", "Bearer " + tokens_["member-a"]}, {"Gpugeek-User", "root"}});
  EXPECT_EQ(member.status, 200) << member.text;
  EXPECT_EQ(member.text, "member-a team-a -");
  EXPECT_EQ(CallAs(tokens_["viewer-a"]).text, "viewer-a team-a -");
  Result admin = CallAs(admin_);
  EXPECT_EQ(admin.status, 200) << admin.text;
  EXPECT_TRUE(admin.text.ends_with(" -")) << admin.text;
  // Another tenant's user: the service reads as absent, as in the API.
  Result other = CallAs(tokens_["member-b"]);
  EXPECT_EQ(other.status, 404) << other.text;
  // A real token id with a forged secret.
  std::string forged = tokens_["member-a"];
  forged.back() = forged.back() == 'A' ? 'B' : 'A';
  Result f = CallAs(forged);
  EXPECT_EQ(f.status, 401) << f.text;
  EXPECT_EQ(f.text, "the bearer token is not valid: unknown, revoked or expired\n");
}

TEST_F(GatewayAuthTest, ARevokedTokenStopsWorkingOnceItsAnswerExpires) {
  ASSERT_EQ(CallAs(tokens_["member-a"]).status, 200);
  const std::string id = tokens_["member-a"].substr(4, 16);
  ASSERT_EQ(Api(tokens_["member-a"], "DELETE", "/v1/tokens/" + id).status, 200);
  std::this_thread::sleep_for(400ms);  // valid_ttl 300 ms here
  EXPECT_EQ(CallAs(tokens_["member-a"]).status, 401);
}

TEST_F(GatewayAuthTest, AnUnreachableControlPlaneIs503NotAPass) {
  const std::string token = tokens_["viewer-a"];
  server_.reset();
  Result r = CallAs(token);
  EXPECT_EQ(r.status, 503) << r.text;
  EXPECT_NE(r.text.find("cannot verify the token now"), std::string::npos) << r.text;
}

}  // namespace
}  // namespace gpugeek::controlplane
