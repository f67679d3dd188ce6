#pragma once
// NodeAuthority: which agents may speak for which nodes (auth/node_credential.h).
//
// The problem: anyone who can reach the agents' listener could register a node (and receive jobs and
// their environment), take over a real node's name (and redirect its gang's master address), or send a
// heartbeat that ends another node's job. So an agent joins once with an admin's join token and receives
// a node credential bound to its node name; every later registration and heartbeat must carry it, and a
// credential speaks for its own node only. A name that has a credential cannot be registered with a
// join token again (no takeover); removing the node (DELETE /v1/nodes/{name}) revokes its credential.
//
// Cost: a heartbeat's check is one HMAC-SHA256 and a map lookup under a mutex held for the lookup only,
// never across I/O. Join tokens are checked against a SHA-256 of their secret (store.h JoinTokenRecord).
//
// Keys: <data_dir>/node-credentials.key (256 bits, mode 0600) is made on the first start; a damaged key
// file is a clear error at start. Losing it invalidates every node's credential (they must join again).
// Thread-safety: every method may be called concurrently.

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "auth/node_credential.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "controlplane/accounts.h"
#include "store/store.h"

namespace gpugeek::controlplane {

class NodeAuthority {
 public:
  // Loads (or on the first start creates) `key_file` and loads the join tokens and credentials.
  // InvalidArgument naming the file for a damaged key; the store's errors.
  static absl::StatusOr<std::unique_ptr<NodeAuthority>> Open(store::Store& store, Clock& clock,
                                                             const std::string& key_file);

  struct CreatedJoinToken {
    store::JoinTokenRecord record;  // without the hash
    std::string text;               // "ggj_...": shown once
  };
  // Admin only (PermissionDenied). `uses` 1..100000 agents may join with it (InvalidArgument otherwise),
  // until `ttl` passes (none: no expiry). Its nodes are `provider`'s ("" = the platform's own; a provider
  // is a tenant, checked by the caller): their usage is owed to it (billing.h), whatever they claim.
  absl::StatusOr<CreatedJoinToken> CreateJoinToken(const Principal& who, const std::string& description,
                                                   std::optional<Duration> ttl, int64_t uses,
                                                   const std::string& provider = "");
  absl::StatusOr<std::vector<store::JoinTokenRecord>> JoinTokens(const Principal& who) const;
  // Admin only; NotFound for an unknown id.
  absl::Status DeleteJoinToken(const Principal& who, const std::string& id);

  // Who may register `node`. With "Bearer ggn_..." (a credential): its node must be `node` (else
  // PermissionDenied) and current (else Unauthenticated); nothing to hand out. With "Bearer ggj_..." (a
  // join token): valid, unexpired, with a use left (else Unauthenticated), and `node` must not have a
  // credential already (AlreadyExists: the name is taken; re-register with its credential or remove the
  // node first). Without a header: Unauthenticated. Consumes nothing: call Join after the registration
  // is stored.
  struct Admission {
    bool join = false;  // a join token: call Join
    std::string join_token_id;
    std::string provider;  // whose node it is: the join token's, or the credential's ("" = the platform's)
  };
  absl::StatusOr<Admission> AdmitRegistration(std::string_view authorization, const std::string& node) const;
  // Takes one use of the admission's join token and issues `node`'s credential (its text). The token
  // may have run out meanwhile (FailedPrecondition) or the name been taken (AlreadyExists).
  absl::StatusOr<std::string> Join(const Admission& admission, const std::string& node);

  // OK when `authorization` is a current credential of `node`. Unauthenticated (missing, malformed,
  // forged or revoked) or PermissionDenied (another node's credential).
  absl::Status AuthenticateNode(std::string_view authorization, const std::string& node) const;

  // Every node with a credential, with the provider its join token bound it to ("" = the platform's own).
  std::map<std::string, std::string> NodeProviders() const;

  // The node left the pool: its credential stops working and its name may join again.
  absl::Status Revoke(const std::string& node);

  // A join token for one agent, made without a principal: for `gpugeek up`'s own in-process agent.
  absl::StatusOr<std::string> LocalJoinToken();

 private:
  NodeAuthority(store::Store& store, Clock& clock, const auth::NodeKey& key);
  absl::StatusOr<CreatedJoinToken> IssueJoinToken(const std::string& by, const std::string& description,
                                                  std::optional<Duration> ttl, int64_t uses,
                                                  const std::string& provider);

  store::Store& store_;
  Clock& clock_;
  const auth::NodeKey key_;

  mutable Mutex mu_;
  std::map<std::string, uint64_t> generations_ ABSL_GUARDED_BY(mu_);   // node -> credential generation
  std::map<std::string, std::string> providers_ ABSL_GUARDED_BY(mu_);  // node -> its provider, when one
  std::map<std::string, store::JoinTokenRecord> join_tokens_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> joining_ ABSL_GUARDED_BY(mu_);  // names between the check and the store write
};

}  // namespace gpugeek::controlplane
