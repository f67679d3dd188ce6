#include "auth/api_token.h"

#include <sodium.h>

#include <cstdlib>
#include <optional>

#include <fmt/format.h>

namespace gpugeek::auth {
namespace {

// OWASP Password Storage Cheat Sheet, argon2id: "m=19456 (19 MiB), t=2, p=1" (libsodium uses p = 1).
constexpr unsigned long long kOpsLimit = 2;
constexpr size_t kMemLimit = size_t{19} << 20;
constexpr size_t kSecretBytes = 32;

void EnsureSodium() {
  // sodium_init is idempotent and thread-safe; it fails only when the OS random source cannot be
  // opened, and then no token could be made or checked safely.
  static const bool ready = [] {
    if (sodium_init() < 0) {
      fmt::print(stderr, "gpugeek: libsodium cannot initialise (no OS random source?)\n");
      std::abort();
    }
    return true;
  }();
  (void)ready;
}

bool IsLowerHex(std::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsBase64Url(std::string_view s) {
  for (char c : s) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string ApiToken::Text() const { return fmt::format("{}{}_{}", kApiTokenPrefix, id, secret); }

std::string JoinTokenText(const ApiToken& token) {
  return fmt::format("{}{}_{}", kJoinTokenPrefix, token.id, token.secret);
}

std::string RandomHex(size_t bytes) {
  EnsureSodium();
  std::string raw(bytes, '\0');
  randombytes_buf(raw.data(), raw.size());
  std::string hex(2 * bytes + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), reinterpret_cast<const unsigned char*>(raw.data()), raw.size());
  hex.pop_back();  // the terminating NUL
  sodium_memzero(raw.data(), raw.size());
  return hex;
}

ApiToken GenerateApiToken() {
  EnsureSodium();
  ApiToken t;
  t.id = RandomHex(kApiTokenIdChars / 2);
  unsigned char raw[kSecretBytes];
  randombytes_buf(raw, sizeof raw);
  char b64[sodium_base64_ENCODED_LEN(kSecretBytes, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
  sodium_bin2base64(b64, sizeof b64, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  t.secret = b64;
  sodium_memzero(raw, sizeof raw);
  return t;
}

namespace {

// "<prefix><16 hex>_<43 base64url>"; nullopt for anything else.
std::optional<ApiToken> ParsePrefixed(std::string_view text, std::string_view prefix) {
  const size_t length = prefix.size() + kApiTokenIdChars + 1 + kApiTokenSecretChars;
  if (text.size() != length || text.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::string_view rest = text.substr(prefix.size());
  std::string_view id = rest.substr(0, kApiTokenIdChars);
  if (rest[kApiTokenIdChars] != '_') return std::nullopt;
  std::string_view secret = rest.substr(kApiTokenIdChars + 1);
  if (!IsLowerHex(id) || !IsBase64Url(secret)) return std::nullopt;
  return ApiToken{std::string(id), std::string(secret)};
}

}  // namespace

ApiToken GenerateJoinToken() { return GenerateApiToken(); }

absl::StatusOr<ApiToken> ParseJoinToken(std::string_view text) {
  std::optional<ApiToken> t = ParsePrefixed(text, kJoinTokenPrefix);
  if (!t) {
    return absl::UnauthenticatedError(
        "the join token is not a gpugeek join token (ggj_<16 hex>_<43 base64url>); an admin makes one with `gpugeek "
        "join-token create`");
  }
  return *t;
}

absl::StatusOr<ApiToken> ParseApiToken(std::string_view text) {
  std::optional<ApiToken> t = ParsePrefixed(text, kApiTokenPrefix);
  if (!t) {
    return absl::UnauthenticatedError(
        "the bearer token is not a gpugeek API token (ggk_<16 hex>_<43 base64url>); run `gpugeek login` or create "
        "one with `gpugeek tokens create`");
  }
  return *t;
}

absl::StatusOr<std::string> HashSecret(std::string_view secret) {
  EnsureSodium();
  char out[crypto_pwhash_STRBYTES];
  if (crypto_pwhash_str_alg(out, secret.data(), secret.size(), kOpsLimit, kMemLimit, crypto_pwhash_ALG_ARGON2ID13) !=
      0) {
    return absl::ResourceExhaustedError("auth: argon2id could not allocate its 19 MiB");
  }
  return std::string(out);
}

bool VerifySecret(const std::string& hash, std::string_view secret) {
  EnsureSodium();
  return crypto_pwhash_str_verify(hash.c_str(), secret.data(), secret.size()) == 0;
}

Digest SecretDigest(std::string_view secret) {
  EnsureSodium();
  Digest d;
  crypto_hash_sha256(d.data(), reinterpret_cast<const unsigned char*>(secret.data()), secret.size());
  return d;
}

bool DigestEquals(const Digest& a, const Digest& b) { return sodium_memcmp(a.data(), b.data(), a.size()) == 0; }

}  // namespace gpugeek::auth
