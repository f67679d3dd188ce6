#pragma once
// API tokens: how a user proves who it is on every call (`Authorization: Bearer <token>`).
//
// Text form: "ggk_" + id + "_" + secret, e.g. "ggk_3f9c0a1b2d4e5f60_Xy...": id is 16 lowercase hex digits
// (64 random bits; public: it names the token in listings, revocations and the audit log) and secret is
// 43 characters of unpadded base64url (RFC 4648 section 5) of 32 random bytes (256 bits). The prefix lets
// secret scanners recognise a leaked token.
//
// Storage: only HashSecret(secret) is stored: an argon2id string (RFC 9106) with t = 2 passes over
// m = 19 MiB, p = 1, the OWASP Password Storage Cheat Sheet's argon2id minimum; the token is shown to
// its owner once, at creation. A stolen store therefore yields no usable token.
//
// Speed: argon2id costs tens of milliseconds by design, so callers verify a secret with VerifySecret
// once and then remember SecretDigest(secret) (SHA-256, 32 bytes) for later calls, comparing digests with
// DigestEquals (constant time). A 256-bit random secret needs no slow hash against guessing; the slow
// hash is for the store at rest.
//
// Thread-safety: every function may be called from any thread.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpugeek::auth {

inline constexpr std::string_view kApiTokenPrefix = "ggk_";
inline constexpr size_t kApiTokenIdChars = 16;
inline constexpr size_t kApiTokenSecretChars = 43;

struct ApiToken {
  std::string id;      // 16 lowercase hex digits
  std::string secret;  // 43 base64url characters
  // "ggk_<id>_<secret>".
  std::string Text() const;
};

// A new token from the OS random source.
ApiToken GenerateApiToken();

// Splits a token's text. Unauthenticated when it is not of the form above; the message never repeats
// the input (it may be a secret pasted in the wrong place).
absl::StatusOr<ApiToken> ParseApiToken(std::string_view text);

// Join tokens (node_credential.h) have the same shape with the prefix "ggj_".
inline constexpr std::string_view kJoinTokenPrefix = "ggj_";
std::string JoinTokenText(const ApiToken& token);
ApiToken GenerateJoinToken();
absl::StatusOr<ApiToken> ParseJoinToken(std::string_view text);

// The argon2id string to store for `secret` ("$argon2id$v=19$m=19456,t=2,p=1$..."). ResourceExhausted
// when the 19 MiB cannot be allocated.
absl::StatusOr<std::string> HashSecret(std::string_view secret);

// Whether `secret` matches `hash` (an argon2id string from HashSecret). False for a malformed hash.
bool VerifySecret(const std::string& hash, std::string_view secret);

using Digest = std::array<uint8_t, 32>;
// SHA-256 of `secret` (FIPS 180-4).
Digest SecretDigest(std::string_view secret);
// Constant-time equality of two digests.
bool DigestEquals(const Digest& a, const Digest& b);

// `bytes` random bytes from the OS random source as lowercase hex (2 * bytes characters).
std::string RandomHex(size_t bytes);

}  // namespace gpugeek::auth
