#pragma once
// Who may call each route: the one table the routes are registered from, the OpenAPI document declares
// (its `security` and `x-gpugeek-access` per operation) and the route-by-principal test matrix reads.
//
//   public  anyone, no token (health, this API's own document)
//   viewer  any user; reads are scoped to the caller's tenant (an admin sees every tenant)
//   member  a member or admin; changes objects of the caller's tenant
//   admin   the operator: nodes, tenants, users, metrics
//   node    an agent, on the agents' listener
//
// A caller without a valid token gets 401; a user below the route's role 403; an object of another
// tenant is answered 404, exactly as for one that does not exist (accounts.h, Principal::CanSee).

#include <string_view>
#include <vector>

#include "http/server.h"

namespace gpugeek::controlplane {

class Accounts;
struct Principal;

enum class Access { kPublic, kViewer, kMember, kAdmin, kNode };

std::string_view AccessName(Access access);  // "public", "viewer", "member", "admin", "node"

struct RouteAccess {
  std::string_view method;
  std::string_view pattern;  // as registered, e.g. "/v1/jobs/{id}"
  Access access;
};

// Every route of both listeners, in registration order.
const std::vector<RouteAccess>& RouteAccessTable();

// The access of a route in the table; aborts for a route missing from it (a route must be declared
// before it is registered, so no route is ever served without a rule).
Access AccessOf(std::string_view method, std::string_view pattern);

// A handler that runs as an authenticated principal.
using GuardedHandler = std::function<absl::StatusOr<http::Reply>(const Principal& who, const http::Request& r)>;

// Registers `handler` for (method, pattern) behind its rule in RouteAccessTable: authenticates the
// request's `Authorization` header with `accounts` (public routes run with an anonymous principal) and
// checks the role before the handler runs. Every call of a method other than GET and HEAD, whatever its outcome
// (401 and 403 included), is appended to accounts.audit_log() (audit_log.h) before its reply is sent:
// the principal, route, path, HTTP status, peer address and X-Request-Id; never the token or the body.
// `accounts` must outlive the server.
void GuardedRoute(http::Server& server, const Accounts& accounts, const std::string& method, const std::string& pattern,
                  GuardedHandler handler);

}  // namespace gpugeek::controlplane
