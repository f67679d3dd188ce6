#pragma once
// RouteTable: what the gateway serves: for each service, which requests are its (hosts and a path prefix), its
// versions with their traffic weights and ready replicas, and its traffic policy (stickiness, retries, the
// activator's queue). The deployment controller publishes one as replicas become ready; `gpugeek gateway --routes
// FILE` reads one from YAML (docs/gateway.md):
//
//   routes:
//     - service: gpt-small
//       hosts: [gpt-small.local]           # Host values (port ignored, case-insensitive); none: any host
//       path_prefix: /                      # longest prefix wins among the routes whose hosts match
//       sticky: {header: X-User}            # or {cookie: gpugeek-version}
//       retries: 2                          # idempotent requests, on another replica
//       activator: {queue: 10000, timeout: 60s}
//       pipelining: true                    # idempotent requests without a body may share upstream connections
//       auth: {tenant: acme}                # callers send a gpugeek API token of this tenant (token_check.h)
//       versions:
//         - name: v1
//           weight: 90
//           replicas: [{id: r1, address: 127.0.0.1:8001, capacity_milli: 1000}]

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "gateway/balancer.h"

namespace gpugeek::gateway {

struct ServiceRoute {
  std::string service;
  std::vector<std::string> hosts;
  std::string path_prefix = "/";
  std::vector<VersionEndpoints> versions;
  StickyPolicy sticky;
  int retries = 2;
  // Knative's activator: requests wait while no replica is ready, up to `activator_queue` of them, each at most
  // `activator_timeout` (Knative serving's activator defaults: 10,000 requests, 60 s... its queue-proxy timeout).
  size_t activator_queue = 10000;
  Duration activator_timeout = std::chrono::seconds(60);
  bool pipelining = true;
  // Not empty: every request needs `Authorization: Bearer TOKEN` of a user of this tenant, or of an admin
  // (token_check.h); the gateway answers 401 without a valid one, and 404 for another tenant's (as the API does).
  std::string auth_tenant;
  bool operator==(const ServiceRoute&) const = default;
};

struct RouteTable {
  std::vector<ServiceRoute> routes;
  bool operator==(const RouteTable&) const = default;
};

// InvalidArgument naming the field ("routes[0].versions[1].weight: ...") when: a service name or version name is
// not [a-z0-9-]{1,63}, two routes share a service name, a path prefix does not start with '/', weights are outside
// 0..100 or do not sum to 100 (over a route with any version), a replica address is not a numeric IPv4 host:port,
// capacity_milli <= 0, retries outside 0..5, an activator queue outside 0..1,000,000 or timeout outside 1 s..1 h,
// a sticky header or cookie name not an HTTP token, an auth tenant above 64 characters or with a control character.
absl::Status ValidateRouteTable(const RouteTable& table);

// Parses the YAML above (bounded as every outside document: api/bounded_yaml.h) and validates it.
absl::StatusOr<RouteTable> ParseRouteTable(std::string_view yaml_text);

// The route for a request with this Host field (may be empty) and target, or -1.
int MatchRoute(const RouteTable& table, std::string_view host, std::string_view target);

// Whether `s` is an RFC 9110 token (header and cookie names).
bool IsHttpToken(std::string_view s);

}  // namespace gpugeek::gateway
