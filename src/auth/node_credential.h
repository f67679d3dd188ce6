#pragma once
// Node credentials: how an agent proves, on every call, which node it is.
//
// The problem: the agents' listener must know that a heartbeat for node "gpu-07" comes from the agent
// that joined as gpu-07, a thousand times a second, without a store read. So a node credential is a
// signed statement: "ggn_" + generation (16 lowercase hex) + "_" + HMAC-SHA256(key, node "\n" generation)
// (43 unpadded base64url) + "_" + node name. The server keeps one 256-bit key (file, 0600) and the
// current generation per node; checking a credential is one HMAC (RFC 2104, FIPS 198-1) and one map
// lookup. A node that is removed loses its generation, so its credential stops working; a node that
// joins again gets a new random generation, so an old credential never comes back to life.
//
// A node gets its credential once, at its first registration, in exchange for a join token (an
// admin's, `gpugeek join-token create`; api_token.h's shape with the prefix "ggj_"). The agent keeps it
// in its data directory and presents it from then on, also to register again after a restart.
//
// Thread-safety: pure functions.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpugeek::auth {

inline constexpr std::string_view kNodeCredentialPrefix = "ggn_";

using NodeKey = std::array<uint8_t, 32>;

struct NodeCredential {
  std::string node;
  uint64_t generation = 0;
  std::string mac;  // 43 base64url characters
};

// A new key from the OS random source.
NodeKey GenerateNodeKey();
// The key's file form (64 hex digits and a newline) and back; InvalidArgument naming `what` for
// anything else.
std::string NodeKeyToText(const NodeKey& key);
absl::StatusOr<NodeKey> NodeKeyFromText(std::string_view text, std::string_view what);

// The credential text for (node, generation) under `key`.
std::string SignNodeCredential(const NodeKey& key, std::string_view node, uint64_t generation);

// Splits a credential's text. Unauthenticated when malformed (the message does not repeat the input).
absl::StatusOr<NodeCredential> ParseNodeCredential(std::string_view text);

// Whether `credential`'s MAC is `key`'s for its node and generation (constant time).
bool VerifyNodeCredential(const NodeKey& key, const NodeCredential& credential);

// A random generation, never 0.
uint64_t RandomGeneration();

}  // namespace gpugeek::auth
