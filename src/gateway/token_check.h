#pragma once
// TokenCheck: who calls a service whose route asks for tokens (`auth: {tenant: T}`, a service spec's
// `traffic.auth: token`). The caller sends a gpugeek API token, `Authorization: Bearer ggk_...` (auth/api_token.h;
// gRPC: the `authorization` metadata); the gateway asks the control plane who the token is (GET /v1/whoami with it,
// on threads of its own: the event loop never waits) and remembers the answer by the secret's SHA-256, so a
// token costs the control plane's argon2id check once per `valid_ttl`, not once per request.
//
// Answers are remembered: a valid token for `valid_ttl` (30 s: a revoked token stops working within that time), an
// invalid one for `invalid_ttl` (5 s), a failed lookup (control plane unreachable) for `unverifiable_ttl` (1 s). At
// most `max_cached` answers are kept (beyond, the expired ones go, then all). Lookups wait in a queue of at most
// `max_queue` distinct tokens; one token asked for by many requests at once is looked up once.
//
// A malformed token (not "ggk_" + 16 hex + "_" + 43 base64url) is invalid at once, without a lookup, so random
// strings cost nothing upstream.
//
// Thread-safety: every method may be called from any thread; `on_result` runs on a lookup thread.

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "http/client.h"

namespace gpugeek::gateway {

struct TokenCheckOptions {
  // The control plane: base URL(s) and CA (its bearer_token is not used: each lookup sends the caller's token).
  http::ClientOptions client;
  Duration valid_ttl = std::chrono::seconds(30);
  Duration invalid_ttl = std::chrono::seconds(5);
  Duration unverifiable_ttl = std::chrono::seconds(1);
  size_t max_queue = 1024;
  size_t max_cached = 100000;
  int threads = 2;
  // Called after each lookup (the gateway wakes its loop to resume the requests that waited).
  std::function<void()> on_result;
};

// Who a token is, as GET /v1/whoami says.
struct Caller {
  std::string user, tenant, role;
};

struct TokenVerdict {
  enum State {
    kPending,       // looked up now: ask again after on_result
    kValid,         // `caller` says who
    kInvalid,       // unknown, revoked or malformed: 401
    kUnverifiable,  // the control plane could not be asked, or the lookup queue is full: 503
  };
  State state = kPending;
  Caller caller;
  std::string reason;  // for kInvalid and kUnverifiable: what the client is told
};

// The token of an Authorization field's value "Bearer TOKEN" (RFC 6750 2.1: the scheme in any case, then spaces);
// empty for any other value.
std::string_view BearerToken(std::string_view authorization);

// Whether `caller` may call a route whose tokens must be of `tenant`: a user of that tenant (any role), or an admin.
bool MayCall(const Caller& caller, std::string_view tenant);

// Headers the replica gets naming the verified caller; the gateway drops any a client sends itself.
inline constexpr std::string_view kCallerUserHeader = "gpugeek-user";
inline constexpr std::string_view kCallerTenantHeader = "gpugeek-tenant";

// How long a request waits for its token's lookup before the gateway answers 503.
inline constexpr Duration kTokenCheckWait = std::chrono::seconds(10);

class TokenCheck {
 public:
  // Starts the lookup threads. InvalidArgument for bad client options (no URL; https without a CA).
  static absl::StatusOr<std::unique_ptr<TokenCheck>> Start(TokenCheckOptions options);
  ~TokenCheck();  // stops the threads (a lookup in progress ends with its read timeout at worst)
  TokenCheck(const TokenCheck&) = delete;
  TokenCheck& operator=(const TokenCheck&) = delete;

  // The answer for `token` (the text after "Bearer "; `now` monotonic), from what is remembered, or kPending after
  // queueing a lookup.
  TokenVerdict Check(std::string_view token, MonoTime now);
  // Lookups made (calls to the control plane) since start.
  uint64_t lookups() const;

 private:
  explicit TokenCheck(TokenCheckOptions options) : options_(std::move(options)) {}
  void Run();
  TokenVerdict Lookup(const std::string& token);

  struct Entry {
    TokenVerdict verdict;
    MonoTime expires{};
  };
  TokenCheckOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Entry> cache_;  // by SHA-256 of the secret (32 bytes); guarded by mu_
  std::set<std::string> queued_;        // digests waiting or being looked up; guarded by mu_
  std::deque<std::string> queue_;       // tokens to look up; guarded by mu_
  uint64_t lookups_ = 0;                // guarded by mu_
  bool stop_ = false;                   // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace gpugeek::gateway
