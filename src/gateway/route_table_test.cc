#include "gateway/route_table.h"

#include <gtest/gtest.h>

#include "gateway/gateway.h"

namespace gpugeek::gateway {
namespace {

TEST(RouteTable, ParsesTheDocumentedExample) {
  auto t = ParseRouteTable(R"(
routes:
  - service: gpt-small
    hosts: [GPT-small.local]
    path_prefix: /
    sticky: {header: X-User}
    retries: 1
    activator: {queue: 50, timeout: 5s}
    pipelining: false
    versions:
      - name: v1
        weight: 90
        replicas: [{id: r1, address: 127.0.0.1:8001, capacity_milli: 2000}]
      - {name: v2, weight: 10}
)");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->routes.size(), 1u);
  const ServiceRoute& r = t->routes[0];
  EXPECT_EQ(r.hosts[0], "gpt-small.local");
  EXPECT_EQ(r.sticky.kind, StickyKind::kHeader);
  EXPECT_EQ(r.sticky.name, "X-User");
  EXPECT_EQ(r.retries, 1);
  EXPECT_EQ(r.activator_queue, 50u);
  EXPECT_EQ(r.activator_timeout, std::chrono::seconds(5));
  EXPECT_FALSE(r.pipelining);
  ASSERT_EQ(r.versions.size(), 2u);
  EXPECT_EQ(r.versions[0].replicas[0].port, 8001);
  EXPECT_EQ(r.versions[0].replicas[0].capacity_milli, 2000);
  EXPECT_TRUE(r.versions[1].replicas.empty());
}

TEST(RouteTable, ErrorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"routes: [{service: a, versions: [{name: v1, weight: 90}]}]", "routes[0].versions: weights sum to 90"},
      {"routes: [{service: A}]", "routes[0].service"},
      {"routes: [{service: a}, {service: a}]", "routes[1].service"},
      {"routes: [{service: a, path_prefix: x}]", "routes[0].path_prefix"},
      {"routes: [{service: a, sticky: {header: a, cookie: b}}]", "routes[0].sticky: give exactly one"},
      {"routes: [{service: a, sticky: {header: 'a b'}}]", "routes[0].sticky"},
      {"routes: [{service: a, retries: 9}]", "routes[0].retries"},
      {"routes: [{service: a, versions: [{name: v1, weight: 100, replicas: [{address: 'host:80'}]}]}]",
       "routes[0].versions[0].replicas[0].address"},
      {"routes: [{service: a, versions: [{name: v1, weight: 100, replicas: [{address: '1.2.3.4:0'}]}]}]",
       "routes[0].versions[0].replicas[0].address"},
      {"routes: [{service: a, bogus: 1}]", "routes[0]: unknown field \"bogus\""},
      {"routes: [{service: a, activator: {timeout: 2h}}]", "routes[0].activator.timeout"},
      {"routes: [{service: a, auth: {tenant: ''}}]", "routes[0].auth.tenant: must name the tenant"},
      {"routes: [{service: a, auth: {tenant: 'team a'}}]", "routes[0].auth.tenant: must be a tenant name"},
      {"routes: [{service: a, auth: {user: x}}]", "routes[0].auth: unknown field \"user\""},
  };
  for (const auto& [yaml, prefix] : cases) {
    auto t = ParseRouteTable(yaml);
    ASSERT_FALSE(t.ok()) << yaml;
    EXPECT_TRUE(absl::IsInvalidArgument(t.status())) << t.status();
    EXPECT_EQ(t.status().message().substr(0, std::string_view(prefix).size()), prefix) << t.status();
  }
}

TEST(RouteTable, AuthNamesTheTenantAndNeedsAGatewayThatVerifiesTokens) {
  auto t = ParseRouteTable("routes: [{service: a, auth: {tenant: team-a}, versions: [{name: v1, weight: 100}]}]");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->routes[0].auth_tenant, "team-a");
  auto refused = Gateway::Start(GatewayOptions{}, *t);  // no token_check: nobody could verify a token
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "routes[0].auth: this gateway cannot verify tokens; give it the control plane that issues them (gpugeek "
            "gateway --server URL, or --token-server URL with --routes)");
  auto open = Gateway::Start(GatewayOptions{}, RouteTable{});
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_FALSE((*open)->SetRoutes(*t).ok());
}

TEST(RouteTable, MatchByHostThenLongestPrefixAtSegmentBoundary) {
  RouteTable t;
  t.routes.push_back({.service = "any", .path_prefix = "/"});
  t.routes.push_back({.service = "gpt", .path_prefix = "/gpt"});
  t.routes.push_back({.service = "hosted", .hosts = {"a.example"}, .path_prefix = "/"});
  EXPECT_EQ(MatchRoute(t, "", "/x"), 0);
  EXPECT_EQ(MatchRoute(t, "", "/gpt/predict"), 1);
  EXPECT_EQ(MatchRoute(t, "", "/gpt?q=1"), 1);
  EXPECT_EQ(MatchRoute(t, "", "/gpt2"), 0);
  EXPECT_EQ(MatchRoute(t, "A.example:8080", "/gpt"), 2);
  RouteTable none;
  none.routes.push_back({.service = "only", .hosts = {"b"}, .path_prefix = "/"});
  EXPECT_EQ(MatchRoute(none, "c", "/"), -1);
}

}  // namespace
}  // namespace gpugeek::gateway
