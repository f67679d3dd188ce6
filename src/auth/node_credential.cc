#include "auth/node_credential.h"

#include <sodium.h>

#include <fmt/format.h>

namespace gpugeek::auth {
namespace {

constexpr size_t kMacChars = 43;  // unpadded base64url of 32 bytes

std::string Mac(const NodeKey& key, std::string_view node, uint64_t generation) {
  const std::string message = fmt::format("{}\n{:016x}", node, generation);
  unsigned char mac[crypto_auth_hmacsha256_BYTES];
  crypto_auth_hmacsha256_state state;
  crypto_auth_hmacsha256_init(&state, key.data(), key.size());
  crypto_auth_hmacsha256_update(&state, reinterpret_cast<const unsigned char*>(message.data()), message.size());
  crypto_auth_hmacsha256_final(&state, mac);
  char b64[sodium_base64_ENCODED_LEN(sizeof mac, sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
  sodium_bin2base64(b64, sizeof b64, mac, sizeof mac, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
  return b64;
}

void EnsureSodium() {
  static const bool ready = sodium_init() >= 0;
  if (!ready) std::abort();  // no OS random source: nothing can be signed safely
}

}  // namespace

NodeKey GenerateNodeKey() {
  EnsureSodium();
  NodeKey key;
  randombytes_buf(key.data(), key.size());
  return key;
}

std::string NodeKeyToText(const NodeKey& key) {
  std::string hex(2 * key.size() + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), key.data(), key.size());
  hex.back() = '\n';
  return hex;
}

absl::StatusOr<NodeKey> NodeKeyFromText(std::string_view text, std::string_view what) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.remove_suffix(1);
  NodeKey key;
  size_t len = 0;
  if (text.size() != 2 * key.size() ||
      sodium_hex2bin(key.data(), key.size(), text.data(), text.size(), nullptr, &len, nullptr) != 0 ||
      len != key.size()) {
    return absl::InvalidArgumentError(
        fmt::format("{}: must hold 64 hex digits (a 256-bit key); restore it from backup", what));
  }
  return key;
}

std::string SignNodeCredential(const NodeKey& key, std::string_view node, uint64_t generation) {
  EnsureSodium();
  return fmt::format("{}{:016x}_{}_{}", kNodeCredentialPrefix, generation, Mac(key, node, generation), node);
}

absl::StatusOr<NodeCredential> ParseNodeCredential(std::string_view text) {
  const auto bad = [] {
    return absl::UnauthenticatedError("the bearer token is not a gpugeek node credential (ggn_<16 hex>_<mac>_<node>)");
  };
  if (text.substr(0, kNodeCredentialPrefix.size()) != kNodeCredentialPrefix) return bad();
  text.remove_prefix(kNodeCredentialPrefix.size());
  if (text.size() < 16 + 1 + kMacChars + 2 || text[16] != '_' || text[17 + kMacChars] != '_') return bad();
  NodeCredential c;
  for (char ch : text.substr(0, 16)) {
    int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
    if (v < 0) return bad();
    c.generation = (c.generation << 4) | static_cast<uint64_t>(v);
  }
  c.mac = std::string(text.substr(17, kMacChars));
  c.node = std::string(text.substr(18 + kMacChars));
  if (c.node.empty() || c.node.size() > 128) return bad();
  return c;
}

bool VerifyNodeCredential(const NodeKey& key, const NodeCredential& credential) {
  EnsureSodium();
  const std::string want = Mac(key, credential.node, credential.generation);
  return want.size() == credential.mac.size() && sodium_memcmp(want.data(), credential.mac.data(), want.size()) == 0;
}

uint64_t RandomGeneration() {
  EnsureSodium();
  uint64_t g = 0;
  while (g == 0) randombytes_buf(&g, sizeof g);
  return g;
}

}  // namespace gpugeek::auth
