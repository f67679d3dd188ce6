#include "controlplane/access.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "controlplane/accounts.h"

namespace gpugeek::controlplane {

std::string_view AccessName(Access access) {
  switch (access) {
    case Access::kPublic:
      return "public";
    case Access::kViewer:
      return "viewer";
    case Access::kMember:
      return "member";
    case Access::kAdmin:
      return "admin";
    case Access::kNode:
      return "node";
  }
  return "admin";
}

const std::vector<RouteAccess>& RouteAccessTable() {
  static const auto* table = new std::vector<RouteAccess>{
      {"GET", "/v1/healthz", Access::kPublic},
      {"GET", "/v1/openapi.json", Access::kPublic},
      {"GET", "/v1/whoami", Access::kViewer},
      {"POST", "/v1/jobs", Access::kMember},
      {"GET", "/v1/jobs", Access::kViewer},
      {"GET", "/v1/jobs/{id}", Access::kViewer},
      {"POST", "/v1/jobs/{id}/cancel", Access::kMember},
      {"GET", "/v1/jobs/{id}/logs", Access::kViewer},
      {"GET", "/v1/events", Access::kViewer},
      {"GET", "/v1/nodes", Access::kViewer},
      {"GET", "/v1/nodes/{name}", Access::kViewer},
      {"DELETE", "/v1/nodes/{name}", Access::kAdmin},
      {"POST", "/v1/nodes/{name}/cordon", Access::kAdmin},
      {"POST", "/v1/nodes/{name}/uncordon", Access::kAdmin},
      {"POST", "/v1/nodes/{name}/drain", Access::kAdmin},
      {"GET", "/v1/pool", Access::kViewer},
      {"POST", "/v1/plans", Access::kViewer},
      {"GET", "/v1/tenants", Access::kAdmin},
      {"POST", "/v1/tenants", Access::kAdmin},
      {"GET", "/v1/users", Access::kAdmin},
      {"POST", "/v1/users", Access::kAdmin},
      {"GET", "/v1/tokens", Access::kViewer},
      {"POST", "/v1/tokens", Access::kViewer},
      {"DELETE", "/v1/tokens/{id}", Access::kViewer},
      {"GET", "/v1/quota", Access::kViewer},
      {"PUT", "/v1/tenants/{name}/quota", Access::kAdmin},
      {"GET", "/v1/prometheus/targets", Access::kAdmin},
      {"GET", "/metrics", Access::kAdmin},
      {"POST", "/v1/agents/register", Access::kNode},
      {"POST", "/v1/agents/{node}/heartbeat", Access::kNode},
  };
  return *table;
}

Access AccessOf(std::string_view method, std::string_view pattern) {
  for (const RouteAccess& r : RouteAccessTable()) {
    if (r.method == method && r.pattern == pattern) return r.access;
  }
  // Registration happens at start with literal routes: a missing row is a programming error that
  // every test starting a server would hit.
  std::fprintf(stderr, "gpugeek: route %.*s %.*s has no row in RouteAccessTable (access.cc)\n",
               static_cast<int>(method.size()), method.data(), static_cast<int>(pattern.size()), pattern.data());
  std::abort();
}

void GuardedRoute(http::Server& server, const Accounts& accounts, const std::string& method,
                  const std::string& pattern, GuardedHandler handler) {
  const Access access = AccessOf(method, pattern);
  server.Route(method, pattern,
               [&accounts, access, handler = std::move(handler)](const http::Request& r) -> absl::StatusOr<http::Reply> {
                 if (access == Access::kPublic) return handler(Principal{}, r);
                 auto it = r.headers.find("authorization");
                 absl::StatusOr<Principal> who =
                     accounts.Authenticate(it == r.headers.end() ? std::string_view() : std::string_view(it->second));
                 if (!who.ok()) return who.status();
                 const auth::Role needed = access == Access::kAdmin    ? auth::Role::kAdmin
                                           : access == Access::kMember ? auth::Role::kMember
                                                                       : auth::Role::kViewer;
                 if (!auth::Grants(who->role, needed)) {
                   return absl::PermissionDeniedError(fmt::format("this call needs the {} role; {} is {}",
                                                                  auth::RoleName(needed), who->user,
                                                                  auth::RoleName(who->role)));
                 }
                 return handler(*who, r);
               });
}

}  // namespace gpugeek::controlplane
