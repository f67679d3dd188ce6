#include "crypto/aead.h"

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <climits>
#include <memory>

#include <fmt/format.h>

#include "common/status_macros.h"

namespace gpugeek::crypto {
namespace {

// OpenSSL's reason for the last failure, for an Internal error; clears its error queue.
std::string OpenSslError(std::string_view what) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  char reason[256] = "unknown reason";
  if (code != 0) ERR_error_string_n(code, reason, sizeof(reason));
  return fmt::format("OpenSSL {} failed: {}", what, reason);
}

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* ctx) const { EVP_CIPHER_CTX_free(ctx); }
};
using Ctx = std::unique_ptr<EVP_CIPHER_CTX, CtxFree>;

// EVP_*Update takes an int length: larger inputs go through in pieces of at most 1 GiB.
constexpr size_t kChunk = size_t{1} << 30;
// SP 800-38D: at most 2^39 - 256 bits of plaintext under one (key, nonce).
constexpr uint64_t kMaxGcmBytes = (uint64_t{1} << 36) - 32;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

SecretKey::~SecretKey() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

absl::StatusOr<SecretKey> SecretKey::Generate() {
  SecretKey key;
  if (RAND_bytes(key.bytes_.data(), static_cast<int>(key.bytes_.size())) != 1) {
    return absl::InternalError(OpenSslError("RAND_bytes"));
  }
  return key;
}

absl::StatusOr<SecretKey> SecretKey::FromBytes(std::string_view raw) {
  if (raw.size() != kKeyBytes) {
    return absl::InvalidArgumentError(fmt::format("a key is {} bytes, not {}", kKeyBytes, raw.size()));
  }
  SecretKey key;
  for (size_t i = 0; i < kKeyBytes; ++i) key.bytes_[i] = static_cast<uint8_t>(raw[i]);
  return key;
}

absl::StatusOr<SecretKey> SecretKey::FromHex(std::string_view hex) {
  if (hex.size() != 2 * kKeyBytes) {
    return absl::InvalidArgumentError(
        fmt::format("a key is written as {} hex digits, not {}", 2 * kKeyBytes, hex.size()));
  }
  SecretKey key;
  for (size_t i = 0; i < kKeyBytes; ++i) {
    const int hi = HexValue(hex[2 * i]);
    const int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return absl::InvalidArgumentError("a key is written in hex digits only (0-9, a-f)");
    key.bytes_[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return key;
}

std::string SecretKey::ToHex() const { return HexEncode(view()); }

bool SecretKey::operator==(const SecretKey& other) const {
  return CRYPTO_memcmp(bytes_.data(), other.bytes_.data(), kKeyBytes) == 0;
}

absl::StatusOr<std::string> RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    return absl::InternalError(OpenSslError("RAND_bytes"));
  }
  return out;
}

absl::StatusOr<std::string> GcmSeal(const SecretKey& key, std::string_view nonce, std::string_view plaintext,
                                    std::string_view aad) {
  std::string out;
  RETURN_IF_ERROR(GcmSealAppend(key, nonce, plaintext, aad, out));
  return out;
}

absl::Status GcmSealAppend(const SecretKey& key, std::string_view nonce, std::string_view plaintext,
                           std::string_view aad, std::string& out) {
  if (nonce.size() != kNonceBytes) {
    return absl::InvalidArgumentError(fmt::format("a GCM nonce is {} bytes, not {}", kNonceBytes, nonce.size()));
  }
  if (plaintext.size() > kMaxGcmBytes) {
    return absl::InvalidArgumentError(
        fmt::format("{} bytes is more than AES-GCM may seal at once ({} bytes)", plaintext.size(), kMaxGcmBytes));
  }
  Ctx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return absl::InternalError(OpenSslError("EVP_CIPHER_CTX_new"));
  const auto* k = reinterpret_cast<const unsigned char*>(key.view().data());
  const auto* iv = reinterpret_cast<const unsigned char*>(nonce.data());
  // 12 bytes is EVP's default GCM IV length, so key and IV go in with the cipher in one call.
  if (EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, k, iv) != 1) {
    return absl::InternalError(OpenSslError("EVP_EncryptInit_ex"));
  }
  int len = 0;
  for (size_t at = 0; at < aad.size(); at += kChunk) {
    const size_t n = std::min(kChunk, aad.size() - at);
    if (EVP_EncryptUpdate(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(aad.data() + at),
                          static_cast<int>(n)) != 1) {
      return absl::InternalError(OpenSslError("EVP_EncryptUpdate (aad)"));
    }
  }
  const size_t start = out.size();
  out.resize(start + plaintext.size() + kTagBytes);
  auto* o = reinterpret_cast<unsigned char*>(out.data() + start);
  size_t written = 0;
  for (size_t at = 0; at < plaintext.size(); at += kChunk) {
    const size_t n = std::min(kChunk, plaintext.size() - at);
    if (EVP_EncryptUpdate(ctx.get(), o + written, &len, reinterpret_cast<const unsigned char*>(plaintext.data() + at),
                          static_cast<int>(n)) != 1) {
      return absl::InternalError(OpenSslError("EVP_EncryptUpdate"));
    }
    written += static_cast<size_t>(len);
  }
  if (EVP_EncryptFinal_ex(ctx.get(), o + written, &len) != 1) {
    return absl::InternalError(OpenSslError("EVP_EncryptFinal_ex"));
  }
  written += static_cast<size_t>(len);
  if (written != plaintext.size()) return absl::InternalError("AES-GCM wrote an unexpected ciphertext length");
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes), o + written) != 1) {
    return absl::InternalError(OpenSslError("EVP_CTRL_GCM_GET_TAG"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> GcmOpen(const SecretKey& key, std::string_view nonce, std::string_view sealed,
                                    std::string_view aad) {
  if (nonce.size() != kNonceBytes) {
    return absl::InvalidArgumentError(fmt::format("a GCM nonce is {} bytes, not {}", kNonceBytes, nonce.size()));
  }
  if (sealed.size() < kTagBytes) {
    return absl::InvalidArgumentError(
        fmt::format("sealed bytes are {} bytes, shorter than the {}-byte tag", sealed.size(), kTagBytes));
  }
  const std::string_view ciphertext = sealed.substr(0, sealed.size() - kTagBytes);
  std::string tag(sealed.substr(ciphertext.size()));
  Ctx ctx(EVP_CIPHER_CTX_new());
  if (!ctx) return absl::InternalError(OpenSslError("EVP_CIPHER_CTX_new"));
  if (EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr,
                         reinterpret_cast<const unsigned char*>(key.view().data()),
                         reinterpret_cast<const unsigned char*>(nonce.data())) != 1) {
    return absl::InternalError(OpenSslError("EVP_DecryptInit_ex"));
  }
  int len = 0;
  for (size_t at = 0; at < aad.size(); at += kChunk) {
    const size_t n = std::min(kChunk, aad.size() - at);
    if (EVP_DecryptUpdate(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(aad.data() + at),
                          static_cast<int>(n)) != 1) {
      return absl::InternalError(OpenSslError("EVP_DecryptUpdate (aad)"));
    }
  }
  std::string out(ciphertext.size(), '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  size_t written = 0;
  for (size_t at = 0; at < ciphertext.size(); at += kChunk) {
    const size_t n = std::min(kChunk, ciphertext.size() - at);
    if (EVP_DecryptUpdate(ctx.get(), o + written, &len, reinterpret_cast<const unsigned char*>(ciphertext.data() + at),
                          static_cast<int>(n)) != 1) {
      return absl::InternalError(OpenSslError("EVP_DecryptUpdate"));
    }
    written += static_cast<size_t>(len);
  }
  if (EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes), tag.data()) != 1) {
    return absl::InternalError(OpenSslError("EVP_CTRL_GCM_SET_TAG"));
  }
  if (EVP_DecryptFinal_ex(ctx.get(), o + written, &len) != 1) {
    ERR_clear_error();
    // Unauthenticated plaintext must not outlive the failed check.
    OPENSSL_cleanse(out.data(), out.size());
    return absl::DataLossError(
        "AES-GCM authentication failed: the bytes were altered, or they were sealed under another key or "
        "context");
  }
  return out;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 0xf]);
  }
  return out;
}

absl::StatusOr<std::string> HexDecode(std::string_view hex) {
  if (hex.size() % 2 != 0) return absl::InvalidArgumentError("hex text has an odd number of digits");
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = HexValue(hex[2 * i]);
    const int lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) {
      return absl::InvalidArgumentError(
          fmt::format("hex text has a non-hex digit at offset {}", hi < 0 ? 2 * i : 2 * i + 1));
    }
    out[i] = static_cast<char>(hi * 16 + lo);
  }
  return out;
}

}  // namespace gpugeek::crypto
