#include "gateway/endpoint_sync.h"

#include <gtest/gtest.h>

#include <mutex>
#include <thread>

#include "http/client.h"
#include "http/server.h"

namespace gpugeek::gateway {
namespace {

using namespace std::chrono_literals;

TEST(RouteTableFromJson, ReadsTheEndpointsShapeAndNamesBadFields) {
  auto t = RouteTableFromJson(nlohmann::json::parse(R"({"routes": [{"service": "gpt", "hosts": ["gpt"],
      "sticky": {"cookie": "gv"}, "retries": 1, "activator": {"queue": 5, "timeout_ms": 2000},
      "versions": [{"name": "v1", "weight": 100,
                    "replicas": [{"id": "job-7", "address": "127.0.0.1:20001", "capacity_milli": 2000}]}]}]})"));
  ASSERT_TRUE(t.ok()) << t.status();
  const ServiceRoute& r = t->routes[0];
  EXPECT_EQ(r.sticky.kind, StickyKind::kCookie);
  EXPECT_EQ(r.activator_queue, 5u);
  EXPECT_EQ(r.activator_timeout, 2s);
  EXPECT_EQ(r.versions[0].replicas[0].port, 20001);
  EXPECT_EQ(r.versions[0].replicas[0].capacity_milli, 2000);
  auto bad = RouteTableFromJson(nlohmann::json::parse(R"({"routes": [{"service": "gpt",
      "versions": [{"name": "v1", "weight": 101}]}]})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("weight"), std::string::npos) << bad.status();
  EXPECT_FALSE(RouteTableFromJson(nlohmann::json::parse(R"({"routes": [], "extra": 1})")).ok());
}

// A control plane stand-in speaking the real protocol over HTTP (http::Server), and a replica.
TEST(EndpointSync, AppliesEndpointsAsTheyChangeAndReportsLoad) {
  auto replica = *http::Server::Create({});
  replica->Route("GET", "/{rest...}", [](const http::Request&) -> absl::StatusOr<http::Reply> {
    http::Reply reply = http::Reply::Text("replica");
    reply.headers.emplace_back("Gpugeek-Tokens", "7");
    return reply;
  });
  ASSERT_TRUE(replica->Start().ok());
  std::mutex mu;
  nlohmann::json endpoints = {{"routes", nlohmann::json::array()}};
  nlohmann::json last_load;
  auto cp = *http::Server::Create({});
  cp->Route("GET", "/v1/endpoints", [&](const http::Request&) -> absl::StatusOr<http::Reply> {
    std::lock_guard lock(mu);
    return http::Reply::Json(endpoints);
  });
  cp->Route("POST", "/v1/services/load", [&](const http::Request& r) -> absl::StatusOr<http::Reply> {
    std::lock_guard lock(mu);
    last_load = *r.JsonBody();
    return http::Reply::Json({{"ok", true}});
  });
  ASSERT_TRUE(cp->Start().ok());

  auto gw = *Gateway::Start(GatewayOptions{}, RouteTable{});
  EndpointSyncOptions o;
  o.client.base_url = cp->url();
  o.period = 100ms;
  o.gateway_id = "gw-1";
  auto sync = EndpointSync::Start(o, gw.get());
  ASSERT_TRUE(sync.ok()) << sync.status();

  auto client = *http::Client::Create({.base_url = "http://127.0.0.1:" + std::to_string(gw->port())});
  for (int i = 0; i < 100 && (*sync)->applied() == 0; ++i) std::this_thread::sleep_for(20ms);
  ASSERT_EQ((*sync)->applied(), 1u) << "the empty table";
  EXPECT_FALSE(client->GetText("/x").ok()) << "no route yet: 404";
  {
    std::lock_guard lock(mu);
    endpoints["routes"].push_back(
        {{"service", "gpt"},
         {"versions",
          {{{"name", "v1"},
            {"weight", 100},
            {"replicas", {{{"id", "r1"}, {"address", "127.0.0.1:" + std::to_string(replica->port())}}}}}}}});
  }
  absl::StatusOr<std::string> body;
  for (int i = 0; i < 50; ++i) {
    body = client->GetText("/x");
    if (body.ok()) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_EQ(*body, "replica");
  for (int i = 0; i < 50; ++i) {
    {
      std::lock_guard lock(mu);
      if (last_load.contains("services") && last_load["services"].contains("gpt") &&
          last_load["services"]["gpt"]["in_flight"] == 0 && last_load["services"]["gpt"]["tokens"].contains("v1")) {
        break;
      }
    }
    std::this_thread::sleep_for(50ms);
  }
  std::lock_guard lock(mu);
  EXPECT_EQ(last_load["gateway"], "gw-1");
  // The serverless meter's counters: one request answered by v1, its 7 tokens, under this instance's name.
  EXPECT_EQ(last_load["instance"], "gw-1/" + gw->instance());
  EXPECT_EQ(gw->instance().size(), 16u);
  EXPECT_EQ(last_load["services"]["gpt"]["versions"]["v1"], 1);
  EXPECT_EQ(last_load["services"]["gpt"]["tokens"]["v1"], 7);
  EXPECT_EQ(last_load["services"]["gpt"]["in_flight"], 0);
  EXPECT_EQ(last_load["services"]["gpt"]["queued"], 0);
  EXPECT_EQ((*sync)->applied(), 2u);
}

}  // namespace
}  // namespace gpugeek::gateway
