#include "controlplane/access.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/absl_fmt.h"
#include "controlplane/accounts.h"
#include "controlplane/audit_log.h"
#include "http/status_http.h"

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
      {"POST", "/v1/jobs/{id}/exec", Access::kMember},
      {"GET", "/v1/jobs/{id}/ports", Access::kMember},
      {"POST", "/v1/jobs/{id}/port-forward", Access::kMember},
      {"GET", "/v1/events", Access::kViewer},
      {"GET", "/v1/nodes", Access::kViewer},
      {"GET", "/v1/nodes/{name}", Access::kViewer},
      {"DELETE", "/v1/nodes/{name}", Access::kAdmin},
      {"POST", "/v1/nodes/{name}/cordon", Access::kAdmin},
      {"POST", "/v1/nodes/{name}/uncordon", Access::kAdmin},
      {"POST", "/v1/nodes/{name}/drain", Access::kAdmin},
      {"POST", "/v1/nodes/{name}/reclaim", Access::kAdmin},
      {"GET", "/v1/pool", Access::kViewer},
      {"POST", "/v1/plans", Access::kViewer},
      {"GET", "/v1/tenants", Access::kAdmin},
      {"POST", "/v1/tenants", Access::kAdmin},
      {"GET", "/v1/users", Access::kAdmin},
      {"POST", "/v1/users", Access::kAdmin},
      {"GET", "/v1/tokens", Access::kViewer},
      {"POST", "/v1/tokens", Access::kViewer},
      {"DELETE", "/v1/tokens/{id}", Access::kViewer},
      {"GET", "/v1/join-tokens", Access::kAdmin},
      {"POST", "/v1/join-tokens", Access::kAdmin},
      {"DELETE", "/v1/join-tokens/{id}", Access::kAdmin},
      {"GET", "/v1/audit", Access::kAdmin},
      {"PUT", "/v1/secrets/{name}", Access::kMember},
      {"GET", "/v1/secrets", Access::kViewer},
      {"GET", "/v1/secrets/{name}", Access::kViewer},
      {"DELETE", "/v1/secrets/{name}", Access::kMember},
      {"POST", "/v1/keys/rotate", Access::kAdmin},
      {"GET", "/v1/quota", Access::kViewer},
      {"POST", "/v1/experiments", Access::kMember},
      {"GET", "/v1/experiments", Access::kViewer},
      {"GET", "/v1/experiments/{id}", Access::kViewer},
      {"GET", "/v1/experiments/{id}/trials/{number}", Access::kViewer},
      {"GET", "/v1/experiments/{id}/export", Access::kViewer},
      {"POST", "/v1/experiments/{id}/stop", Access::kMember},
      {"POST", "/v1/services", Access::kMember},
      {"GET", "/v1/services", Access::kViewer},
      {"POST", "/v1/services/load", Access::kAdmin},
      {"GET", "/v1/services/{name}", Access::kViewer},
      {"DELETE", "/v1/services/{name}", Access::kMember},
      {"GET", "/v1/services/{name}/replicas", Access::kViewer},
      {"POST", "/v1/services/{name}/traffic", Access::kMember},
      {"POST", "/v1/services/{name}/scale", Access::kMember},
      {"GET", "/v1/endpoints", Access::kAdmin},
      {"PUT", "/v1/tenants/{name}/quota", Access::kAdmin},
      {"GET", "/v1/offers", Access::kViewer},
      {"GET", "/v1/balance", Access::kViewer},
      {"GET", "/v1/ledger", Access::kViewer},
      {"GET", "/v1/bill", Access::kViewer},
      {"GET", "/v1/earnings", Access::kViewer},
      {"GET", "/v1/cost-report", Access::kViewer},
      {"POST", "/v1/tenants/{name}/top-ups", Access::kAdmin},
      {"POST", "/v1/tenants/{name}/grants", Access::kAdmin},
      {"POST", "/v1/providers/{name}/payouts", Access::kAdmin},
      {"GET", "/v1/budgets", Access::kViewer},
      {"PUT", "/v1/tenants/{name}/budget", Access::kAdmin},
      {"DELETE", "/v1/tenants/{name}/budget", Access::kAdmin},
      {"PUT", "/v1/users/{name}/budget", Access::kAdmin},
      {"DELETE", "/v1/users/{name}/budget", Access::kAdmin},
      {"GET", "/v1/reservations", Access::kViewer},
      {"GET", "/v1/reservations/{id}", Access::kViewer},
      {"POST", "/v1/reservations", Access::kAdmin},
      {"POST", "/v1/reservations/{id}/cancel", Access::kAdmin},
      {"HEAD", "/v1/archives/{digest}", Access::kViewer},
      {"GET", "/v1/archives/{digest}", Access::kViewer},
      {"PUT", "/v1/archives/{digest}", Access::kMember},
      {"GET", "/v1/datasets", Access::kViewer},
      {"GET", "/v1/datasets/{name}", Access::kViewer},
      {"GET", "/v1/datasets/{name}/versions/{rev}", Access::kViewer},
      {"GET", "/v1/datasets/{name}/log", Access::kViewer},
      {"GET", "/v1/datasets/{name}/diff", Access::kViewer},
      {"PUT", "/v1/datasets/{name}/branches/{branch}", Access::kMember},
      {"PUT", "/v1/datasets/{name}/tags/{tag}", Access::kMember},
      {"DELETE", "/v1/datasets/{name}/branches/{branch}", Access::kMember},
      {"DELETE", "/v1/datasets/{name}/tags/{tag}", Access::kMember},
      {"POST", "/v1/dataset-objects/missing", Access::kMember},
      {"PUT", "/v1/dataset-objects/{digest}", Access::kMember},
      {"GET", "/v1/dataset-objects/{digest}", Access::kViewer},
      {"GET", "/v1/models", Access::kViewer},
      {"GET", "/v1/models/{name}", Access::kViewer},
      {"GET", "/v1/models/{name}/versions/{rev}", Access::kViewer},
      {"GET", "/v1/models/{name}/log", Access::kViewer},
      {"GET", "/v1/models/{name}/diff", Access::kViewer},
      {"PUT", "/v1/models/{name}/branches/{branch}", Access::kMember},
      {"PUT", "/v1/models/{name}/tags/{tag}", Access::kMember},
      {"DELETE", "/v1/models/{name}/branches/{branch}", Access::kMember},
      {"DELETE", "/v1/models/{name}/tags/{tag}", Access::kMember},
      {"POST", "/v1/model-objects/missing", Access::kMember},
      {"PUT", "/v1/model-objects/{digest}", Access::kMember},
      {"POST", "/v1/models/{name}/pulls", Access::kViewer},
      {"GET", "/v1/models/{name}/pulls", Access::kViewer},
      {"GET", "/v1/models/{name}/grants", Access::kViewer},
      {"PUT", "/v1/models/{name}/grants/{tenant}", Access::kMember},
      {"DELETE", "/v1/models/{name}/grants/{tenant}", Access::kMember},
      {"GET", "/v1/shared-models", Access::kViewer},
      {"GET", "/v1/model-objects/{digest}", Access::kViewer},
      {"GET", "/v1/prometheus/targets", Access::kAdmin},
      {"GET", "/metrics", Access::kAdmin},
      {"POST", "/v1/agents/register", Access::kNode},
      {"POST", "/v1/agents/{node}/heartbeat", Access::kNode},
      {"POST", "/v1/agents/{node}/reclaim", Access::kNode},
      {"GET", "/v1/agents/{node}/archives/{digest}", Access::kNode},
      {"GET", "/v1/agents/{node}/datasets/{commit}/objects/{digest}", Access::kNode},
      {"GET", "/v1/agents/{node}/models/{commit}/objects/{digest}", Access::kNode},
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

namespace {

// The client's X-Request-Id, bounded and printable: it is stored and shown as given.
std::string RequestId(const http::Request& r) {
  auto it = r.headers.find("x-request-id");
  if (it == r.headers.end()) return "";
  std::string id = it->second.substr(0, 128);
  for (char& c : id) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return id;
}

// Appends the call to the audit log before its reply goes out.
void Audit(const Accounts& accounts, const Principal& who, const http::Request& r, const std::string& pattern,
           int status) {
  AuditLog* log = accounts.audit_log();
  if (log == nullptr) return;
  store::AuditRecord record{.user = who.user,
                            .tenant = who.tenant,
                            .token_id = who.token_id,
                            .role = who.authenticated() ? std::string(auth::RoleName(who.role)) : std::string(),
                            .method = r.method,
                            .route = pattern,
                            .path = r.path,
                            .status = status,
                            .remote_address = r.remote_address,
                            .request_id = RequestId(r)};
  if (absl::Status st = log->Append(record); !st.ok()) {
    // The call's change (if any) is committed already: failing the reply would have the client retry a
    // change that happened. The record goes to the server's log instead, so it is not lost.
    spdlog::error(
        "audit: could not store the record of {} {} by user '{}' (tenant '{}', token {}) from {} answered {}: {}",
        record.method, record.path, record.user, record.tenant, record.token_id, record.remote_address, status, st);
  }
}

}  // namespace

void GuardedRoute(http::Server& server, const Accounts& accounts, const std::string& method, const std::string& pattern,
                  GuardedHandler handler) {
  const Access access = AccessOf(method, pattern);
  const auto guarded = [&accounts, access, handler = std::move(handler)](
                           const http::Request& r, Principal& who) -> absl::StatusOr<http::Reply> {
    if (access == Access::kPublic) return handler(who, r);
    auto it = r.headers.find("authorization");
    absl::StatusOr<Principal> authenticated =
        accounts.Authenticate(it == r.headers.end() ? std::string_view() : std::string_view(it->second));
    if (!authenticated.ok()) return authenticated.status();
    who = *std::move(authenticated);
    const auth::Role needed = access == Access::kAdmin    ? auth::Role::kAdmin
                              : access == Access::kMember ? auth::Role::kMember
                                                          : auth::Role::kViewer;
    if (!auth::Grants(who.role, needed)) {
      return absl::PermissionDeniedError(fmt::format("this call needs the {} role; {} is {}", auth::RoleName(needed),
                                                     who.user, auth::RoleName(who.role)));
    }
    return handler(who, r);
  };
  if (method == "GET" || method == "HEAD") {
    server.Route(method, pattern, [guarded](const http::Request& r) {
      Principal who;
      return guarded(r, who);
    });
    return;
  }
  server.Route(method, pattern, [&accounts, pattern, guarded](const http::Request& r) -> absl::StatusOr<http::Reply> {
    Principal who;  // anonymous until authenticated
    absl::StatusOr<http::Reply> reply = absl::InternalError("internal error");
    try {
      reply = guarded(r, who);
    } catch (...) {
      // A handler that throws is a bug the server answers 500 (http/server.h); the call is still on record.
      Audit(accounts, who, r, pattern, 500);
      throw;
    }
    Audit(accounts, who, r, pattern, reply.ok() ? reply->status : http::HttpStatusFor(reply.status()));
    return reply;
  });
}

}  // namespace gpugeek::controlplane
