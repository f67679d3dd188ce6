#include "controlplane/accounts.h"

#include <fmt/format.h>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "api/names.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/api_views.h"

namespace gpugeek::controlplane {
namespace {

absl::Status AdminOnly(const Principal& who, std::string_view what) {
  if (who.admin()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      fmt::format("{} needs the admin role; you are {} ({})", what, who.user, auth::RoleName(who.role)));
}

store::TokenRecord WithoutHash(store::TokenRecord t) {
  t.secret_hash.clear();
  return t;
}

// Releases a verification slot on scope exit.
class SlotGuard {
 public:
  explicit SlotGuard(std::atomic<int>& n) : n_(n) {}
  ~SlotGuard() { n_.fetch_sub(1); }
  SlotGuard(const SlotGuard&) = delete;
  SlotGuard& operator=(const SlotGuard&) = delete;

 private:
  std::atomic<int>& n_;
};

}  // namespace

Accounts::Accounts(store::Store& store, Clock& clock, const AccountsOptions& options)
    : store_(store), clock_(clock), options_(options) {}

absl::StatusOr<std::unique_ptr<Accounts>> Accounts::Open(store::Store& store, Clock& clock,
                                                         const AccountsOptions& options) {
  auto a = std::unique_ptr<Accounts>(new Accounts(store, clock, options));
  ASSIGN_OR_RETURN(auto tenants, store.ListTenants());
  ASSIGN_OR_RETURN(auto users, store.ListUsers());
  ASSIGN_OR_RETURN(auto tokens, store.ListTokens());
  MutexLock lock(&a->mu_);
  // Keys are copied first: the map node is built after the value has been moved from.
  for (auto& t : tenants) {
    std::string id = t.id;
    a->tenants_.emplace(std::move(id), std::move(t));
  }
  for (auto& u : users) {
    if (!auth::ParseRole(u.role)) {
      return absl::DataLossError(fmt::format("accounts: user '{}' has unknown role '{}'", u.name, u.role));
    }
    std::string name = u.name;
    a->users_.emplace(std::move(name), std::move(u));
  }
  for (auto& t : tokens) {
    std::string id = t.id;
    a->tokens_.emplace(std::move(id), TokenEntry{std::move(t), std::nullopt});
  }
  return a;
}

absl::StatusOr<std::optional<std::string>> Accounts::Bootstrap() {
  bool have_tenant;
  {
    MutexLock lock(&mu_);
    if (!users_.empty()) return std::optional<std::string>();
    have_tenant = tenants_.contains(options_.default_tenant);
  }
  const TimePoint now = clock_.Now();
  if (!have_tenant) {
    store::TenantRecord t{options_.default_tenant, now};
    RETURN_IF_ERROR(store_.CreateTenant(t));
    MutexLock lock(&mu_);
    tenants_.emplace(t.id, t);
  }
  store::UserRecord admin{options_.bootstrap_admin, options_.default_tenant,
                          std::string(auth::RoleName(auth::Role::kAdmin)), now};
  RETURN_IF_ERROR(store_.CreateUser(admin));
  {
    MutexLock lock(&mu_);
    users_.emplace(admin.name, admin);
  }
  ASSIGN_OR_RETURN(CreatedToken token, IssueToken(admin.name, "bootstrap admin token", std::nullopt));
  return std::optional<std::string>(token.text);
}

absl::StatusOr<Principal> Accounts::Authenticate(std::string_view authorization) const {
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "this call needs an API token: send 'Authorization: Bearer <token>' (`gpugeek login` stores one for the CLI)");
  }
  // RFC 7235: the scheme is case-insensitive.
  if (authorization.size() < 7 || !absl::EqualsIgnoreCase(std::string(authorization.substr(0, 7)), "bearer ")) {
    return absl::UnauthenticatedError("the Authorization header must be 'Bearer <token>'");
  }
  std::string value(authorization.substr(7));
  absl::StripAsciiWhitespace(&value);
  ASSIGN_OR_RETURN(auth::ApiToken token, auth::ParseApiToken(value));
  const auth::Digest digest = auth::SecretDigest(token.secret);
  const auto invalid = [] {
    return absl::UnauthenticatedError("the API token is not valid (unknown or wrong secret)");
  };
  store::TokenRecord record;
  std::optional<auth::Digest> verified;
  {
    MutexLock lock(&mu_);
    auto it = tokens_.find(token.id);
    if (it == tokens_.end()) return invalid();
    record = it->second.record;
    verified = it->second.verified;
  }
  if (verified) {
    if (!auth::DigestEquals(*verified, digest)) return invalid();
  } else {
    if (verifying_.fetch_add(1) >= options_.max_concurrent_verifications) {
      verifying_.fetch_sub(1);
      return absl::UnavailableError("too many API tokens are being verified at once; retry in a moment");
    }
    SlotGuard slot(verifying_);
    slow_verifications_.fetch_add(1);
    if (!auth::VerifySecret(record.secret_hash, token.secret)) return invalid();
    MutexLock lock(&mu_);
    if (auto it = tokens_.find(token.id); it != tokens_.end()) it->second.verified = digest;
  }
  if (record.revoked_at) {
    return absl::UnauthenticatedError(
        fmt::format("the API token {} was revoked at {}", record.id, FormatTime(*record.revoked_at)));
  }
  if (record.expires_at && clock_.Now() >= *record.expires_at) {
    return absl::UnauthenticatedError(
        fmt::format("the API token {} expired at {}; create a new one with "
                    "`gpugeek tokens create`",
                    record.id, FormatTime(*record.expires_at)));
  }
  MutexLock lock(&mu_);
  auto user = users_.find(record.user);
  if (user == users_.end()) return invalid();
  Principal p;
  p.user = user->second.name;
  p.tenant = user->second.tenant;
  p.role = *auth::ParseRole(user->second.role);  // checked at Open and CreateUser
  p.token_id = record.id;
  return p;
}

absl::StatusOr<store::TenantRecord> Accounts::CreateTenant(const Principal& who, const std::string& id) {
  RETURN_IF_ERROR(AdminOnly(who, "creating a tenant"));
  RETURN_IF_ERROR(api::ValidateName("name", id, api::NameKind::kTenant));
  store::TenantRecord t{id, clock_.Now()};
  RETURN_IF_ERROR(store_.CreateTenant(t));
  {
    MutexLock lock(&mu_);
    tenants_.emplace(t.id, t);
  }
  if (options_.on_tenant_created) options_.on_tenant_created(t.id);
  return t;
}

absl::StatusOr<std::vector<store::TenantRecord>> Accounts::Tenants(const Principal& who) const {
  RETURN_IF_ERROR(AdminOnly(who, "listing tenants"));
  MutexLock lock(&mu_);
  std::vector<store::TenantRecord> out;
  for (const auto& [id, t] : tenants_) out.push_back(t);
  return out;
}

std::vector<std::string> Accounts::TenantIds() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [id, t] : tenants_) out.push_back(id);
  return out;
}

bool Accounts::HasTenant(const std::string& id) const {
  MutexLock lock(&mu_);
  return tenants_.contains(id);
}

absl::StatusOr<store::UserRecord> Accounts::CreateUser(const Principal& who, const std::string& name,
                                                       const std::string& tenant, const std::string& role) {
  RETURN_IF_ERROR(AdminOnly(who, "creating a user"));
  // User names follow the tenant rule (a DNS label): they appear in paths, logs and audit lines.
  RETURN_IF_ERROR(api::ValidateName("name", name, api::NameKind::kTenant));
  if (!auth::ParseRole(role)) {
    return absl::InvalidArgumentError(fmt::format("role: '{}' must be one of admin, member, viewer", role));
  }
  {
    MutexLock lock(&mu_);
    if (!tenants_.contains(tenant)) {
      return absl::NotFoundError(
          fmt::format("tenant: '{}' does not exist; create it first with `gpugeek tenants create {}`", tenant, tenant));
    }
  }
  store::UserRecord u{name, tenant, role, clock_.Now()};
  RETURN_IF_ERROR(store_.CreateUser(u));
  MutexLock lock(&mu_);
  users_.emplace(u.name, u);
  return u;
}

absl::StatusOr<std::vector<store::UserRecord>> Accounts::Users(const Principal& who) const {
  RETURN_IF_ERROR(AdminOnly(who, "listing users"));
  MutexLock lock(&mu_);
  std::vector<store::UserRecord> out;
  for (const auto& [name, u] : users_) out.push_back(u);
  return out;
}

absl::StatusOr<Accounts::CreatedToken> Accounts::CreateToken(const Principal& who, const std::string& user,
                                                             const std::string& description,
                                                             std::optional<Duration> ttl) {
  if (!who.authenticated()) return absl::UnauthenticatedError("creating a token needs an API token");
  const std::string owner = user.empty() ? who.user : user;
  if (owner != who.user && !who.admin()) {
    return absl::NotFoundError(fmt::format("user: '{}' not found", owner));
  }
  {
    MutexLock lock(&mu_);
    if (!users_.contains(owner)) return absl::NotFoundError(fmt::format("user: '{}' not found", owner));
  }
  if (ttl && *ttl <= Duration::zero()) {
    return absl::InvalidArgumentError("expires_in_s: must be a positive number of seconds (omit it for no expiry)");
  }
  if (description.size() > 256) {
    return absl::InvalidArgumentError("description: at most 256 bytes");
  }
  return IssueToken(owner, description, ttl);
}

absl::StatusOr<Accounts::CreatedToken> Accounts::IssueToken(const std::string& user, const std::string& description,
                                                            std::optional<Duration> ttl) {
  auth::ApiToken token = auth::GenerateApiToken();
  store::TokenRecord r;
  r.id = token.id;
  r.user = user;
  ASSIGN_OR_RETURN(r.secret_hash, auth::HashSecret(token.secret));
  r.description = description;
  r.created_at = clock_.Now();
  if (ttl) r.expires_at = r.created_at + *ttl;
  RETURN_IF_ERROR(store_.CreateToken(r));
  {
    MutexLock lock(&mu_);
    tokens_.emplace(r.id, TokenEntry{r, auth::SecretDigest(token.secret)});
  }
  return CreatedToken{WithoutHash(r), token.Text()};
}

absl::StatusOr<std::vector<store::TokenRecord>> Accounts::Tokens(const Principal& who) const {
  if (!who.authenticated()) return absl::UnauthenticatedError("listing tokens needs an API token");
  MutexLock lock(&mu_);
  std::vector<store::TokenRecord> out;
  for (const auto& [id, t] : tokens_) {
    if (who.admin() || t.record.user == who.user) out.push_back(WithoutHash(t.record));
  }
  return out;
}

absl::StatusOr<store::TokenRecord> Accounts::RevokeToken(const Principal& who, const std::string& id) {
  if (!who.authenticated()) return absl::UnauthenticatedError("revoking a token needs an API token");
  const auto not_found = [&] { return absl::NotFoundError(fmt::format("token: '{}' not found", id)); };
  {
    MutexLock lock(&mu_);
    auto it = tokens_.find(id);
    if (it == tokens_.end() || (!who.admin() && it->second.record.user != who.user)) return not_found();
  }
  const TimePoint now = clock_.Now();
  RETURN_IF_ERROR(store_.RevokeToken(id, now));
  MutexLock lock(&mu_);
  auto it = tokens_.find(id);
  if (it == tokens_.end()) return not_found();
  if (!it->second.record.revoked_at) it->second.record.revoked_at = now;
  return WithoutHash(it->second.record);
}

}  // namespace gpugeek::controlplane
