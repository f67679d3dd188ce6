#pragma once
// Accounts: the tenants, users and API tokens of a control plane, and who each request acts as.
//
// The problem: every route must know, in microseconds and without touching the store, which user of
// which tenant is calling and with what role, while the tokens themselves are stored only as argon2id
// hashes (auth/api_token.h). So every account row is loaded into memory at Open and kept there (this
// object is the only writer of the account tables: each change is committed to the store first, then
// applied here; the store's keys settle two creations of one name, so no lock is held across I/O). A token's secret is
// checked with argon2id the first time it is seen; its SHA-256 is then remembered, so later calls cost one hash and a
// constant-time compare. At most `max_concurrent_verifications` argon2id checks run at once (each takes ~19 MiB and
// tens of ms): more are answered Unavailable, so a flood of forged tokens cannot take the server's memory or CPU.
//
// Rules (auth/role.h): a user belongs to one tenant with one role; admin is the operator and sees every
// tenant. Principal::CanSee is the one test of "may this caller learn that an object of tenant T
// exists": routes answer NotFound (404) when it fails, never PermissionDenied, so existence does not
// leak across tenants.
//
// Time: token expiry is wall time (Clock::Now), as shown to users.
// Thread-safety: every method may be called concurrently.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "auth/api_token.h"
#include "auth/role.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "store/store.h"

namespace gpugeek::controlplane {

// Who a request acts as.
struct Principal {
  std::string user;  // "" = not authenticated
  std::string tenant;
  auth::Role role = auth::Role::kViewer;
  std::string token_id;  // the token it presented

  bool authenticated() const { return !user.empty(); }
  bool admin() const { return authenticated() && role == auth::Role::kAdmin; }
  // Whether this principal may learn that an object owned by `object_tenant` exists.
  bool CanSee(const std::string& object_tenant) const {
    return admin() || (authenticated() && tenant == object_tenant);
  }
};

class AuditLog;

struct AccountsOptions {
  int max_concurrent_verifications = 2;  // argon2id checks at once; beyond, Unavailable
  std::string default_tenant = "default";
  std::string bootstrap_admin = "admin";
  // Where GuardedRoute (access.h) records every state-changing call; nullptr = none (tests of a bare
  // Accounts). Borrowed: must outlive the Accounts.
  AuditLog* audit_log = nullptr;
  // Called with each tenant's id once it is stored (CreateTenant, Bootstrap's default tenant): the
  // server grants its trial credit here (billing.h). Empty = none.
  std::function<void(const std::string& tenant)> on_tenant_created;
};

class Accounts {
 public:
  // Loads every account row. Internal/Unavailable when the store fails; DataLoss for a stored role
  // that is not one of auth/role.h.
  static absl::StatusOr<std::unique_ptr<Accounts>> Open(store::Store& store, Clock& clock,
                                                        const AccountsOptions& options = {});

  // First start: when no user exists, creates the default tenant, an admin user in it and a token
  // for that user, and returns the token's text (to hand to the operator once). nullopt when users
  // exist already.
  absl::StatusOr<std::optional<std::string>> Bootstrap();

  // The principal of an `Authorization` header value ("Bearer <token>"). Unauthenticated (401) when
  // the header is missing or malformed, the token unknown, its secret wrong, or it is revoked or
  // expired (the message says which, except that an unknown id and a wrong secret read the same);
  // Unavailable when too many tokens are being verified at once (retry).
  absl::StatusOr<Principal> Authenticate(std::string_view authorization) const;

  // Admin only (PermissionDenied otherwise). AlreadyExists when taken; InvalidArgument naming the field
  // for a bad name or role; NotFound for a user of an unknown tenant.
  absl::StatusOr<store::TenantRecord> CreateTenant(const Principal& who, const std::string& id);
  absl::StatusOr<std::vector<store::TenantRecord>> Tenants(const Principal& who) const;
  bool HasTenant(const std::string& id) const;
  // Every tenant's id, by id (internal callers; routes use Tenants).
  std::vector<std::string> TenantIds() const;
  absl::StatusOr<store::UserRecord> CreateUser(const Principal& who, const std::string& name, const std::string& tenant,
                                               const std::string& role);
  absl::StatusOr<std::vector<store::UserRecord>> Users(const Principal& who) const;

  struct CreatedToken {
    store::TokenRecord record;  // without the hash
    std::string text;           // the token: shown once, never stored
  };
  // A token for `user` ("" = the caller). A member or viewer may create tokens for itself only (another
  // user: NotFound unless admin). `ttl` none = never expires; InvalidArgument when not positive.
  absl::StatusOr<CreatedToken> CreateToken(const Principal& who, const std::string& user,
                                           const std::string& description, std::optional<Duration> ttl);
  // The caller's tokens (every user's for an admin), without hashes, by id.
  absl::StatusOr<std::vector<store::TokenRecord>> Tokens(const Principal& who) const;
  // Revokes a token of the caller's (any, for an admin): every later call with it is 401. NotFound for
  // an unknown id or another user's token.
  absl::StatusOr<store::TokenRecord> RevokeToken(const Principal& who, const std::string& id);

  // The audit log of AccountsOptions; nullptr when none.
  AuditLog* audit_log() const { return options_.audit_log; }

  // How many argon2id verifications ran (for tests of the digest cache).
  int64_t slow_verifications() const { return slow_verifications_.load(); }

 private:
  Accounts(store::Store& store, Clock& clock, const AccountsOptions& options);
  struct TokenEntry {
    store::TokenRecord record;
    std::optional<auth::Digest> verified;  // SHA-256 of the secret once argon2id accepted it
  };
  absl::StatusOr<CreatedToken> IssueToken(const std::string& user, const std::string& description,
                                          std::optional<Duration> ttl);

  store::Store& store_;
  Clock& clock_;
  const AccountsOptions options_;

  mutable Mutex mu_;
  std::map<std::string, store::TenantRecord> tenants_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, store::UserRecord> users_ ABSL_GUARDED_BY(mu_);
  mutable std::map<std::string, TokenEntry> tokens_ ABSL_GUARDED_BY(mu_);

  mutable std::atomic<int> verifying_{0};
  mutable std::atomic<int64_t> slow_verifications_{0};
};

}  // namespace gpugeek::controlplane
