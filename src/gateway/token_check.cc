#include "gateway/token_check.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "auth/api_token.h"

namespace gpugeek::gateway {

namespace {

std::string DigestKey(std::string_view token) {
  const auth::Digest d = auth::SecretDigest(token);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

}  // namespace

std::string_view BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() || authorization[kScheme.size()] != ' ') return {};
  for (size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return {};
  }
  std::string_view token = authorization.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  return token;
}

bool MayCall(const Caller& caller, std::string_view tenant) {
  return caller.role == "admin" || caller.tenant == tenant;
}

absl::StatusOr<std::unique_ptr<TokenCheck>> TokenCheck::Start(TokenCheckOptions options) {
  if (options.client.base_url.empty()) return absl::InvalidArgumentError("token checks need the control plane's URL");
  if (options.threads < 1 || options.max_queue < 1 || options.max_cached < 1) {
    return absl::InvalidArgumentError("token checks need at least one thread, queue place and cache entry");
  }
  options.client.bearer_token.clear();
  // Validates the client options once (a URL and, for https, a CA), so lookups fail only for reasons of the moment.
  if (auto probe = http::Client::Create(options.client); !probe.ok()) return probe.status();
  std::unique_ptr<TokenCheck> check(new TokenCheck(std::move(options)));
  for (int i = 0; i < check->options_.threads; ++i) check->threads_.emplace_back([c = check.get()] { c->Run(); });
  return check;
}

TokenCheck::~TokenCheck() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

uint64_t TokenCheck::lookups() const {
  std::lock_guard lock(mu_);
  return lookups_;
}

TokenVerdict TokenCheck::Check(std::string_view token, MonoTime now) {
  if (!auth::ParseApiToken(token).ok()) {
    return {.state = TokenVerdict::kInvalid, .reason = "the bearer token is not a gpugeek API token (ggk_...)"};
  }
  const std::string key = DigestKey(token);
  std::lock_guard lock(mu_);
  if (auto it = cache_.find(key); it != cache_.end()) {
    if (now < it->second.expires) return it->second.verdict;
    cache_.erase(it);
  }
  if (queued_.count(key) == 0) {
    if (queue_.size() >= options_.max_queue) {
      return {.state = TokenVerdict::kUnverifiable, .reason = "too many tokens wait to be verified; try again"};
    }
    queued_.insert(key);
    queue_.emplace_back(token);
    cv_.notify_one();
  }
  return {.state = TokenVerdict::kPending};
}

void TokenCheck::Run() {
  for (;;) {
    std::string token;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      token = std::move(queue_.front());
      queue_.pop_front();
      ++lookups_;
    }
    TokenVerdict verdict = Lookup(token);                                     // no lock held across the call
    const MonoTime now(std::chrono::steady_clock::now().time_since_epoch());  // as the gateway's loop reads it
    const Duration ttl = verdict.state == TokenVerdict::kValid     ? options_.valid_ttl
                         : verdict.state == TokenVerdict::kInvalid ? options_.invalid_ttl
                                                                   : options_.unverifiable_ttl;
    const std::string key = DigestKey(token);
    {
      std::lock_guard lock(mu_);
      if (cache_.size() >= options_.max_cached) {
        std::erase_if(cache_, [&](const auto& e) { return e.second.expires <= now; });
        if (cache_.size() >= options_.max_cached) cache_.clear();
      }
      cache_[key] = Entry{.verdict = std::move(verdict), .expires = now + ttl};
      queued_.erase(key);
    }
    if (options_.on_result) options_.on_result();
  }
}

TokenVerdict TokenCheck::Lookup(const std::string& token) {
  http::ClientOptions o = options_.client;
  o.bearer_token = token;
  auto client = http::Client::Create(o);
  if (!client.ok()) {
    return {.state = TokenVerdict::kUnverifiable,
            .reason = fmt::format("cannot verify the token now: {}", std::string(client.status().message()))};
  }
  auto who = (*client)->Get("/v1/whoami");
  if (!who.ok()) {
    if (absl::IsUnauthenticated(who.status()) || absl::IsPermissionDenied(who.status())) {
      return {.state = TokenVerdict::kInvalid, .reason = "the bearer token is not valid: unknown, revoked or expired"};
    }
    return {.state = TokenVerdict::kUnverifiable,
            .reason = fmt::format("cannot verify the token now: {}", std::string(who.status().message()))};
  }
  const auto text = [&](const char* k) {
    return who->contains(k) && (*who)[k].is_string() ? (*who)[k].get<std::string>() : std::string();
  };
  Caller caller{.user = text("user"), .tenant = text("tenant"), .role = text("role")};
  const auto printable = [](const std::string& s) {
    return s.size() <= 256 && std::all_of(s.begin(), s.end(), [](char ch) { return ch >= 0x20 && ch != 0x7f; });
  };
  if (!printable(caller.user) || !printable(caller.tenant)) {  // they go into a header field
    return {.state = TokenVerdict::kUnverifiable, .reason = "cannot verify the token now: the answer is malformed"};
  }
  if (caller.tenant.empty() && caller.role != "admin") {
    return {.state = TokenVerdict::kUnverifiable, .reason = "cannot verify the token now: the answer names no tenant"};
  }
  return {.state = TokenVerdict::kValid, .caller = std::move(caller)};
}

}  // namespace gpugeek::gateway
