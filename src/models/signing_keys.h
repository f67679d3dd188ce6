#pragma once
// The keys that sign and verify model manifests (signing.h): Ed25519 (RFC 8032) or ECDSA P-256 with SHA-256,
// as unencrypted PEM files, through OpenSSL 3's EVP interface.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpugeek::models {

// A PEM key is well under 1 KiB; a key file larger than this is the wrong file.
inline constexpr uint64_t kMaxKeyFileBytes = 64 << 10;

enum class KeyAlgorithm { kEd25519, kEcdsaP256 };
// "ed25519" / "ecdsa-p256", and back (InvalidArgument listing both for anything else).
std::string_view KeyAlgorithmName(KeyAlgorithm algorithm);
absl::StatusOr<KeyAlgorithm> ParseKeyAlgorithm(std::string_view name);

// A private key that signs manifests. Holds an OpenSSL EVP_PKEY; movable, not copyable; thread-compatible.
class SigningKey {
 public:
  ~SigningKey();
  SigningKey(SigningKey&&) noexcept;
  SigningKey& operator=(SigningKey&&) noexcept;

  // A fresh key from OpenSSL's CSPRNG. Internal only when OpenSSL fails.
  static absl::StatusOr<SigningKey> Generate(KeyAlgorithm algorithm);
  // An unencrypted PKCS#8 PEM private key ("-----BEGIN PRIVATE KEY-----") of either algorithm.
  // InvalidArgument, naming `what` (a file name), when the text is no such key, is a public key, or is
  // another algorithm or curve. The message never repeats the text.
  static absl::StatusOr<SigningKey> FromPem(std::string_view pem, std::string_view what = "key");
  // FromPem of a file (at most 64 KiB); NotFound / PermissionDenied naming the path.
  static absl::StatusOr<SigningKey> Load(const std::string& path);

  KeyAlgorithm algorithm() const { return algorithm_; }
  std::string PrivatePem() const;  // PKCS#8 PEM: key material, write it only with mode 0600
  std::string PublicPem() const;   // SubjectPublicKeyInfo PEM ("-----BEGIN PUBLIC KEY-----")
  std::string KeyId() const;       // SHA-256 hex of PublicPem()
  // The raw signature of `message` (64 bytes for Ed25519, DER for ECDSA). Internal when OpenSSL fails.
  absl::StatusOr<std::string> Sign(std::string_view message) const;

 private:
  struct Pkey;
  SigningKey(std::unique_ptr<Pkey> pkey, KeyAlgorithm algorithm);
  std::unique_ptr<Pkey> pkey_;
  KeyAlgorithm algorithm_;
};

// A public key that verifies signatures. As SigningKey: movable, thread-compatible.
class VerifyingKey {
 public:
  ~VerifyingKey();
  VerifyingKey(VerifyingKey&&) noexcept;
  VerifyingKey& operator=(VerifyingKey&&) noexcept;

  // A PEM public key ("-----BEGIN PUBLIC KEY-----") of either algorithm. InvalidArgument naming `what` when
  // the text is none, or is a private key ("pass the .pub.pem file"), or another algorithm or curve.
  static absl::StatusOr<VerifyingKey> FromPem(std::string_view pem, std::string_view what = "public key");
  static absl::StatusOr<VerifyingKey> Load(const std::string& path);  // as SigningKey::Load
  static VerifyingKey Of(const SigningKey& key);                      // the public half

  KeyAlgorithm algorithm() const { return algorithm_; }
  std::string KeyId() const;  // SHA-256 hex of the PEM text, as SigningKey::KeyId
  // Whether `signature` is this key's signature of `message`. Never fails: malformed signatures are false.
  bool Verify(std::string_view message, std::string_view signature) const;

 private:
  struct Pkey;
  VerifyingKey(std::unique_ptr<Pkey> pkey, KeyAlgorithm algorithm, std::string key_id);
  std::unique_ptr<Pkey> pkey_;
  KeyAlgorithm algorithm_;
  std::string key_id_;
};

}  // namespace gpugeek::models
