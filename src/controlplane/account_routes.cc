#include "controlplane/account_routes.h"

#include <fmt/format.h>

#include "api/json_reader.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "controlplane/api_views.h"
#include "controlplane/audit_log.h"
#include "controlplane/paging.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;
using J = nlohmann::json;

J TimeOrNull(const std::optional<TimePoint>& t) { return t ? J(FormatTime(*t)) : J(); }

J TenantJson(const store::TenantRecord& t) { return {{"name", t.id}, {"created_at", FormatTime(t.created_at)}}; }
J UserJson(const store::UserRecord& u) {
  return {{"name", u.name}, {"tenant", u.tenant}, {"role", u.role}, {"created_at", FormatTime(u.created_at)}};
}
J TokenJson(const store::TokenRecord& t) {
  return {{"id", t.id},
          {"user", t.user},
          {"description", t.description},
          {"created_at", FormatTime(t.created_at)},
          {"expires_at", TimeOrNull(t.expires_at)},
          {"revoked_at", TimeOrNull(t.revoked_at)}};
}

// A page of `items` as the route's reply (paging.h).
template <typename T, typename KeyFn, typename JsonFn>
absl::StatusOr<Reply> PageReply(const Request& r, const std::string& field, const std::vector<T>& items, KeyFn key,
                                JsonFn to_json) {
  ASSIGN_OR_RETURN(J page, Page(r, field, items, key, to_json));
  return Reply::Json(page);
}

J AuditJson(const store::AuditRecord& a) {
  return {{"seq", a.seq},
          {"time", FormatTime(a.time)},
          {"user", a.user},
          {"tenant", a.tenant},
          {"token_id", a.token_id},
          {"role", a.role},
          {"method", a.method},
          {"route", a.route},
          {"path", a.path},
          {"status", a.status},
          {"remote_address", a.remote_address},
          {"request_id", a.request_id}};
}

// GET /v1/audit?after=SEQ&user=U&tenant=T&limit=N: a page of the audit log, oldest first; "next_after"
// is the last seq of a full page (null on the last page).
absl::StatusOr<Reply> ListAudit(const Accounts& accounts, const Request& r) {
  const AuditLog* log = accounts.audit_log();
  if (log == nullptr) return absl::FailedPreconditionError("audit: this server keeps no audit log");
  store::AuditFilter filter{
      .user = r.query_value("user"), .tenant = r.query_value("tenant"), .limit = kDefaultPageLimit};
  if (const std::string v = r.query_value("after"); !v.empty()) {
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    if (*end != '\0' || n < 0) {
      return absl::InvalidArgumentError(fmt::format("query parameter 'after' = '{}' must be an audit seq >= 0", v));
    }
    filter.after_seq = n;
  }
  ASSIGN_OR_RETURN(filter.limit, PageLimit(r));
  ASSIGN_OR_RETURN(std::vector<store::AuditRecord> records, log->List(filter));
  J list = J::array();
  for (const store::AuditRecord& a : records) list.push_back(AuditJson(a));
  const J next = static_cast<int>(records.size()) == filter.limit ? J(records.back().seq) : J();
  return Reply::Json({{"records", list}, {"next_after", next}});
}

}  // namespace

void RegisterAccountRoutes(http::Server& server, Accounts& accounts) {
  const auto route = [&](const std::string& method, const std::string& pattern, GuardedHandler handler) {
    GuardedRoute(server, accounts, method, pattern, std::move(handler));
  };
  route("GET", "/v1/whoami", [](const Principal& who, const Request&) -> absl::StatusOr<Reply> {
    return Reply::Json(
        {{"user", who.user}, {"tenant", who.tenant}, {"role", auth::RoleName(who.role)}, {"token_id", who.token_id}});
  });
  route("GET", "/v1/tenants", [&accounts](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(auto tenants, accounts.Tenants(who));
    return PageReply(
        r, "tenants", tenants, [](const store::TenantRecord& t) { return t.id; }, TenantJson);
  });
  route("POST", "/v1/tenants", [&accounts](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(J body, r.JsonBody());
    api::JsonReader reader(body, "");
    RETURN_IF_ERROR(reader.CheckObject({"name"}));
    ASSIGN_OR_RETURN(std::string name, reader.String("name"));
    ASSIGN_OR_RETURN(store::TenantRecord t, accounts.CreateTenant(who, name));
    return Reply::Json(TenantJson(t), 201);
  });
  route("GET", "/v1/users", [&accounts](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(auto users, accounts.Users(who));
    return PageReply(
        r, "users", users, [](const store::UserRecord& u) { return u.name; }, UserJson);
  });
  route("POST", "/v1/users", [&accounts](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(J body, r.JsonBody());
    api::JsonReader reader(body, "");
    RETURN_IF_ERROR(reader.CheckObject({"name", "tenant", "role"}));
    ASSIGN_OR_RETURN(std::string name, reader.String("name"));
    ASSIGN_OR_RETURN(std::string tenant, reader.String("tenant"));
    ASSIGN_OR_RETURN(std::string role, reader.String("role", std::string("member")));
    ASSIGN_OR_RETURN(store::UserRecord u, accounts.CreateUser(who, name, tenant, role));
    return Reply::Json(UserJson(u), 201);
  });
  route("GET", "/v1/tokens", [&accounts](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(auto tokens, accounts.Tokens(who));
    return PageReply(
        r, "tokens", tokens, [](const store::TokenRecord& t) { return t.id; }, TokenJson);
  });
  route("POST", "/v1/tokens", [&accounts](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    J body = J::object();
    if (!r.body.empty()) {
      ASSIGN_OR_RETURN(body, r.JsonBody());
    }
    api::JsonReader reader(body, "");
    RETURN_IF_ERROR(reader.CheckObject({"user", "description", "expires_in_s"}));
    ASSIGN_OR_RETURN(std::string user, reader.String("user", std::string()));
    ASSIGN_OR_RETURN(std::string description, reader.String("description", std::string()));
    std::optional<Duration> ttl;
    if (reader.Has("expires_in_s") && !body["expires_in_s"].is_null()) {
      // At most ten years: a token is a credential, and a bound keeps the time arithmetic in range.
      ASSIGN_OR_RETURN(int64_t seconds, reader.Int("expires_in_s", 0, 1, int64_t{10} * 366 * 24 * 3600));
      ttl = std::chrono::seconds(seconds);
    }
    ASSIGN_OR_RETURN(Accounts::CreatedToken t, accounts.CreateToken(who, user, description, ttl));
    J out = TokenJson(t.record);
    out["token"] = t.text;
    return Reply::Json(out, 201);
  });
  route("GET", "/v1/audit",
        [&accounts](const Principal&, const Request& r) -> absl::StatusOr<Reply> { return ListAudit(accounts, r); });
  route("DELETE", "/v1/tokens/{id}", [&accounts](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(store::TokenRecord t, accounts.RevokeToken(who, r.param("id")));
    return Reply::Json(TokenJson(t));
  });
}

namespace {

J JoinTokenJson(const store::JoinTokenRecord& t) {
  return {{"id", t.id},
          {"description", t.description},
          {"created_by", t.created_by},
          {"created_at", FormatTime(t.created_at)},
          {"expires_at", TimeOrNull(t.expires_at)},
          {"uses_left", t.uses_left},
          {"provider", t.provider}};
}

}  // namespace

void RegisterJoinTokenRoutes(http::Server& server, Accounts& accounts, NodeAuthority& nodes) {
  // (accounts: GuardedRoute, and a provider must be a tenant.)
  const auto route = [&](const std::string& method, const std::string& pattern, GuardedHandler handler) {
    GuardedRoute(server, accounts, method, pattern, std::move(handler));
  };
  route("GET", "/v1/join-tokens", [&nodes](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(auto tokens, nodes.JoinTokens(who));
    return PageReply(
        r, "join_tokens", tokens, [](const store::JoinTokenRecord& t) { return t.id; }, JoinTokenJson);
  });
  route("POST", "/v1/join-tokens",
        [&nodes, &accounts](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
          J body = J::object();
          if (!r.body.empty()) {
            ASSIGN_OR_RETURN(body, r.JsonBody());
          }
          api::JsonReader reader(body, "");
          RETURN_IF_ERROR(reader.CheckObject({"description", "expires_in_s", "uses", "provider"}));
          ASSIGN_OR_RETURN(std::string description, reader.String("description", std::string()));
          // A provider is a tenant (its users read what it is owed); its nodes' usage is paid to it.
          ASSIGN_OR_RETURN(std::string provider, reader.String("provider", std::string()));
          if (!provider.empty() && !accounts.HasTenant(provider)) {
            return reader.Error(
                "provider",
                fmt::format("'{}' is not a tenant; create it first (gpugeek tenants create {})", provider, provider));
          }
          ASSIGN_OR_RETURN(int64_t uses, reader.Int("uses", 1, 1, 100000));
          std::optional<Duration> ttl;
          if (reader.Has("expires_in_s") && !body["expires_in_s"].is_null()) {
            ASSIGN_OR_RETURN(int64_t seconds, reader.Int("expires_in_s", 0, 1, int64_t{366} * 24 * 3600));
            ttl = std::chrono::seconds(seconds);
          }
          ASSIGN_OR_RETURN(NodeAuthority::CreatedJoinToken t,
                           nodes.CreateJoinToken(who, description, ttl, uses, provider));
          J out = JoinTokenJson(t.record);
          out["token"] = t.text;
          return Reply::Json(out, 201);
        });
  route("DELETE", "/v1/join-tokens/{id}", [&nodes](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    RETURN_IF_ERROR(nodes.DeleteJoinToken(who, r.param("id")));
    return Reply::Json(J::object());
  });
}

}  // namespace gpugeek::controlplane
