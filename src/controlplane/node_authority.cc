#include "controlplane/node_authority.h"

#include <sodium.h>

#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "auth/api_token.h"
#include "common/file.h"
#include "common/status_macros.h"

namespace gpugeek::controlplane {
namespace {

std::string Hex(const auth::Digest& d) {
  std::string out;
  out.reserve(2 * d.size());
  for (uint8_t b : d) out += fmt::format("{:02x}", b);
  return out;
}

// The token after "Bearer " (RFC 7235: the scheme is case-insensitive); Unauthenticated without one.
absl::StatusOr<std::string> BearerToken(std::string_view authorization) {
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        "an agent must present its node credential (or, to join, a join token): 'Authorization: Bearer <token>'");
  }
  if (authorization.size() < 7 || !absl::EqualsIgnoreCase(std::string(authorization.substr(0, 7)), "bearer ")) {
    return absl::UnauthenticatedError("the Authorization header must be 'Bearer <token>'");
  }
  std::string token(authorization.substr(7));
  absl::StripAsciiWhitespace(&token);
  return token;
}

absl::Status AdminOnly(const Principal& who) {
  if (who.admin()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      fmt::format("join tokens need the admin role; you are {} ({})", who.user, auth::RoleName(who.role)));
}

constexpr int64_t kMaxUses = 100000;

}  // namespace

NodeAuthority::NodeAuthority(store::Store& store, Clock& clock, const auth::NodeKey& key)
    : store_(store), clock_(clock), key_(key) {}

absl::StatusOr<std::unique_ptr<NodeAuthority>> NodeAuthority::Open(store::Store& store, Clock& clock,
                                                                   const std::string& key_file) {
  auth::NodeKey key;
  if (std::filesystem::exists(key_file)) {
    ASSIGN_OR_RETURN(std::string text, ReadFileBounded(key_file, 256, "node credential key"));
    ASSIGN_OR_RETURN(key, auth::NodeKeyFromText(text, fmt::format("node credential key {}", key_file)));
  } else {
    key = auth::GenerateNodeKey();
    RETURN_IF_ERROR(WriteFilePrivate(key_file, auth::NodeKeyToText(key)));
    spdlog::info("node credentials: new signing key in {}", key_file);
  }
  auto a = std::unique_ptr<NodeAuthority>(new NodeAuthority(store, clock, key));
  ASSIGN_OR_RETURN(auto tokens, store.ListJoinTokens());
  ASSIGN_OR_RETURN(auto credentials, store.ListNodeCredentials());
  MutexLock lock(&a->mu_);
  for (auto& t : tokens) {
    std::string id = t.id;
    a->join_tokens_.emplace(std::move(id), std::move(t));
  }
  for (const store::NodeCredentialRecord& c : credentials) {
    a->generations_[c.node] = c.generation;
    if (!c.provider.empty()) a->providers_[c.node] = c.provider;
  }
  return a;
}

absl::StatusOr<NodeAuthority::CreatedJoinToken> NodeAuthority::CreateJoinToken(const Principal& who,
                                                                               const std::string& description,
                                                                               std::optional<Duration> ttl,
                                                                               int64_t uses,
                                                                               const std::string& provider) {
  RETURN_IF_ERROR(AdminOnly(who));
  if (uses < 1 || uses > kMaxUses) {
    return absl::InvalidArgumentError(fmt::format("uses: must be 1..{} (agents that may join with it)", kMaxUses));
  }
  if (ttl && *ttl <= Duration::zero()) return absl::InvalidArgumentError("expires_in_s: must be positive");
  if (description.size() > 256) return absl::InvalidArgumentError("description: at most 256 bytes");
  return IssueJoinToken(who.user, description, ttl, uses, provider);
}

absl::StatusOr<NodeAuthority::CreatedJoinToken> NodeAuthority::IssueJoinToken(const std::string& by,
                                                                              const std::string& description,
                                                                              std::optional<Duration> ttl, int64_t uses,
                                                                              const std::string& provider) {
  auth::ApiToken token = auth::GenerateJoinToken();
  store::JoinTokenRecord r;
  r.id = token.id;
  r.secret_sha256 = Hex(auth::SecretDigest(token.secret));
  r.description = description;
  r.created_by = by;
  r.created_at = clock_.Now();
  if (ttl) r.expires_at = r.created_at + *ttl;
  r.uses_left = uses;
  r.provider = provider;
  RETURN_IF_ERROR(store_.CreateJoinToken(r));
  {
    MutexLock lock(&mu_);
    join_tokens_.emplace(r.id, r);
  }
  r.secret_sha256.clear();
  return CreatedJoinToken{r, auth::JoinTokenText(token)};
}

absl::StatusOr<std::vector<store::JoinTokenRecord>> NodeAuthority::JoinTokens(const Principal& who) const {
  RETURN_IF_ERROR(AdminOnly(who));
  MutexLock lock(&mu_);
  std::vector<store::JoinTokenRecord> out;
  for (auto [id, t] : join_tokens_) {
    t.secret_sha256.clear();
    out.push_back(std::move(t));
  }
  return out;
}

absl::Status NodeAuthority::DeleteJoinToken(const Principal& who, const std::string& id) {
  RETURN_IF_ERROR(AdminOnly(who));
  {
    MutexLock lock(&mu_);
    if (!join_tokens_.contains(id)) return absl::NotFoundError(fmt::format("join token: '{}' not found", id));
  }
  RETURN_IF_ERROR(store_.DeleteJoinToken(id));
  MutexLock lock(&mu_);
  join_tokens_.erase(id);
  return absl::OkStatus();
}

absl::StatusOr<NodeAuthority::Admission> NodeAuthority::AdmitRegistration(std::string_view authorization,
                                                                          const std::string& node) const {
  ASSIGN_OR_RETURN(std::string token, BearerToken(authorization));
  if (token.starts_with(auth::kNodeCredentialPrefix)) {
    RETURN_IF_ERROR(AuthenticateNode(authorization, node));
    MutexLock lock(&mu_);
    auto p = providers_.find(node);
    return Admission{.provider = p == providers_.end() ? "" : p->second};
  }
  ASSIGN_OR_RETURN(auth::ApiToken join, auth::ParseJoinToken(token));
  const std::string digest = Hex(auth::SecretDigest(join.secret));
  const auto invalid = [] {
    return absl::UnauthenticatedError("the join token is not valid (unknown, wrong secret, used up or expired)");
  };
  MutexLock lock(&mu_);
  auto it = join_tokens_.find(join.id);
  // Both are hex of a SHA-256: equal lengths; compared in constant time.
  if (it == join_tokens_.end() || it->second.secret_sha256.size() != digest.size() ||
      sodium_memcmp(it->second.secret_sha256.data(), digest.data(), digest.size()) != 0) {
    return invalid();
  }
  if (it->second.uses_left <= 0) return invalid();
  if (it->second.expires_at && clock_.Now() >= *it->second.expires_at) return invalid();
  const std::string provider = it->second.provider;
  if (generations_.contains(node) || joining_.contains(node)) {
    return absl::AlreadyExistsError(fmt::format(
        "node name '{}' is taken by a node that joined already: an agent re-registers with its own node credential "
        "(in its data directory); to give the name to a new machine, remove the node first (gpugeek remove-node {})",
        node, node));
  }
  return Admission{true, join.id, provider};
}

absl::StatusOr<std::string> NodeAuthority::Join(const Admission& admission, const std::string& node) {
  if (!admission.join) return std::string();
  {
    MutexLock lock(&mu_);
    if (generations_.contains(node) || !joining_.insert(node).second) {
      return absl::AlreadyExistsError(fmt::format("node name '{}' is taken by a node that joined already", node));
    }
  }
  const auto done = [&] {
    MutexLock lock(&mu_);
    joining_.erase(node);
  };
  const uint64_t generation = auth::RandomGeneration();
  // One transaction: the use is taken exactly when the credential is recorded.
  if (absl::Status st = store_.ConsumeJoinToken(admission.join_token_id, node, generation); !st.ok()) {
    done();
    if (st.code() == absl::StatusCode::kFailedPrecondition || st.code() == absl::StatusCode::kNotFound) {
      return absl::UnauthenticatedError("the join token is not valid (unknown, wrong secret, used up or expired)");
    }
    return st;
  }
  MutexLock lock(&mu_);
  joining_.erase(node);
  generations_[node] = generation;
  if (!admission.provider.empty()) providers_[node] = admission.provider;
  if (auto it = join_tokens_.find(admission.join_token_id); it != join_tokens_.end()) --it->second.uses_left;
  return auth::SignNodeCredential(key_, node, generation);
}

absl::Status NodeAuthority::AuthenticateNode(std::string_view authorization, const std::string& node) const {
  ASSIGN_OR_RETURN(std::string token, BearerToken(authorization));
  ASSIGN_OR_RETURN(auth::NodeCredential c, auth::ParseNodeCredential(token));
  if (!auth::VerifyNodeCredential(key_, c)) {
    return absl::UnauthenticatedError("the node credential is not valid (not signed by this server)");
  }
  {
    MutexLock lock(&mu_);
    auto it = generations_.find(c.node);
    if (it == generations_.end() || it->second != c.generation) {
      return absl::UnauthenticatedError(fmt::format(
          "the node credential of '{}' was revoked (the node was removed); join again with a new join token", c.node));
    }
  }
  if (c.node != node) {
    return absl::PermissionDeniedError(
        fmt::format("the node credential of '{}' cannot act for node '{}'", c.node, node));
  }
  return absl::OkStatus();
}

std::map<std::string, std::string> NodeAuthority::NodeProviders() const {
  MutexLock lock(&mu_);
  std::map<std::string, std::string> out;
  for (const auto& [node, generation] : generations_) {
    auto p = providers_.find(node);
    out[node] = p == providers_.end() ? "" : p->second;
  }
  return out;
}

absl::Status NodeAuthority::Revoke(const std::string& node) {
  RETURN_IF_ERROR(store_.DeleteNodeCredential(node));
  MutexLock lock(&mu_);
  generations_.erase(node);
  providers_.erase(node);
  return absl::OkStatus();
}

absl::StatusOr<std::string> NodeAuthority::LocalJoinToken() {
  ASSIGN_OR_RETURN(CreatedJoinToken t,
                   IssueJoinToken("gpugeek up", "the in-process agent of gpugeek up", std::chrono::minutes(10), 1, ""));
  return t.text;
}

}  // namespace gpugeek::controlplane
