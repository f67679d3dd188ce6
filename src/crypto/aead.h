#pragma once
// AES-256-GCM (NIST SP 800-38D) over OpenSSL's EVP interface, and the key type that holds 256-bit keys in
// memory. The building block of the rest of crypto/: master keys wrap data keys with it (key_provider.h),
// data keys seal tenants' bytes with it (keyring.h).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpugeek::crypto {

inline constexpr size_t kKeyBytes = 32;    // AES-256
inline constexpr size_t kNonceBytes = 12;  // the GCM IV length SP 800-38D recommends (96 bits)
inline constexpr size_t kTagBytes = 16;    // full 128-bit tag

// A 256-bit key. Zeroed (OPENSSL_cleanse) when destroyed or overwritten, so copies do not linger in freed
// memory. Copyable: a copy is another key to clean, and the destructor does it.
class SecretKey {
 public:
  SecretKey() { bytes_.fill(0); }
  ~SecretKey();
  SecretKey(const SecretKey& other) = default;
  SecretKey& operator=(const SecretKey& other) = default;

  // 32 bytes from OpenSSL's CSPRNG (RAND_bytes). Internal when the generator fails (it does not on a
  // seeded system; the error says OpenSSL's reason).
  static absl::StatusOr<SecretKey> Generate();
  // The key whose bytes are `raw`; InvalidArgument unless `raw` is exactly 32 bytes.
  static absl::StatusOr<SecretKey> FromBytes(std::string_view raw);
  // The key written as 64 hex digits (either case); InvalidArgument otherwise. The message never
  // repeats the text (it is key material).
  static absl::StatusOr<SecretKey> FromHex(std::string_view hex);

  // The raw bytes; keep the view no longer than the key.
  std::string_view view() const { return {reinterpret_cast<const char*>(bytes_.data()), bytes_.size()}; }
  std::string ToHex() const;  // 64 lowercase hex digits: key material, write only where the key belongs
  bool operator==(const SecretKey& other) const;  // constant time

 private:
  std::array<uint8_t, kKeyBytes> bytes_;
};

// `n` bytes from OpenSSL's CSPRNG; Internal when it fails.
absl::StatusOr<std::string> RandomBytes(size_t n);

// Encrypts `plaintext` under `key` with the 12-byte `nonce`, authenticating `aad` as well, and returns
// ciphertext (same length as plaintext) followed by the 16-byte tag. A nonce must never repeat under one
// key: callers draw it from RandomBytes, which keeps a collision below 2^-32 for up to 2^32 seals per key
// (SP 800-38D section 8.3). Internal only when OpenSSL fails. Any plaintext size up to 64 GiB.
absl::StatusOr<std::string> GcmSeal(const SecretKey& key, std::string_view nonce, std::string_view plaintext,
                                    std::string_view aad);

// As GcmSeal, appending ciphertext + tag to `out` (no copy of a large result). On error `out` may have
// grown by unspecified bytes.
absl::Status GcmSealAppend(const SecretKey& key, std::string_view nonce, std::string_view plaintext,
                           std::string_view aad, std::string& out);

// The inverse: `sealed` is ciphertext + tag as GcmSeal returned it. DataLoss when the tag does not verify
// (the bytes, the nonce or the aad were altered, or the key is another one: GCM cannot tell which);
// InvalidArgument when `sealed` is shorter than a tag or `nonce` is not 12 bytes. No plaintext is
// returned unless it authenticated.
absl::StatusOr<std::string> GcmOpen(const SecretKey& key, std::string_view nonce, std::string_view sealed,
                                    std::string_view aad);

// Lowercase hex of any bytes, and its inverse (InvalidArgument on an odd length or a non-hex digit).
std::string HexEncode(std::string_view bytes);
absl::StatusOr<std::string> HexDecode(std::string_view hex);

}  // namespace gpugeek::crypto
