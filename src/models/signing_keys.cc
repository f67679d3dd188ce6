#include "models/signing_keys.h"

#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdlib>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "archive/digest.h"
#include "common/file.h"
#include "common/status_macros.h"

namespace gpugeek::models {
namespace {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

std::optional<KeyAlgorithm> AlgorithmOf(EVP_PKEY* pkey) {
  if (EVP_PKEY_is_a(pkey, "ED25519")) return KeyAlgorithm::kEd25519;
  if (!EVP_PKEY_is_a(pkey, "EC")) return std::nullopt;
  char group[64] = {0};
  size_t len = 0;
  if (EVP_PKEY_get_group_name(pkey, group, sizeof(group), &len) != 1) return std::nullopt;
  if (std::string_view(group) == "prime256v1" || std::string_view(group) == "P-256") return KeyAlgorithm::kEcdsaP256;
  return std::nullopt;
}

using PemWriter = int (*)(BIO*, EVP_PKEY*);
int WritePrivate(BIO* bio, EVP_PKEY* pkey) {
  return PEM_write_bio_PrivateKey(bio, pkey, nullptr, nullptr, 0, nullptr, nullptr);
}
int WritePublic(BIO* bio, EVP_PKEY* pkey) { return PEM_write_bio_PUBKEY(bio, pkey); }

std::string PemOf(EVP_PKEY* pkey, PemWriter write) {
  BIO* bio = BIO_new(BIO_s_mem());
  // Writing a valid key to a memory BIO fails only when allocation does: nothing to continue with.
  if (bio == nullptr || write(bio, pkey) != 1) std::abort();
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(n));
  BIO_free(bio);
  return pem;
}

enum class PemKind { kPrivate, kPublic };
PkeyPtr ReadPem(std::string_view pem, PemKind kind) {
  if (pem.size() > kMaxKeyFileBytes) return nullptr;
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  if (bio == nullptr) return nullptr;
  EVP_PKEY* pkey = kind == PemKind::kPrivate ? PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr)
                                             : PEM_read_bio_PUBKEY(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  return PkeyPtr(pkey);
}

absl::Status UnsupportedKey(std::string_view what) {
  return absl::InvalidArgumentError(
      fmt::format("{}: the key is neither Ed25519 nor ECDSA P-256; make one with gpugeek model keygen", what));
}

}  // namespace

// ---- keys -------------------------------------------------------------------------------------------------

std::string_view KeyAlgorithmName(KeyAlgorithm algorithm) {
  return algorithm == KeyAlgorithm::kEd25519 ? "ed25519" : "ecdsa-p256";
}

absl::StatusOr<KeyAlgorithm> ParseKeyAlgorithm(std::string_view name) {
  if (name == "ed25519") return KeyAlgorithm::kEd25519;
  if (name == "ecdsa-p256") return KeyAlgorithm::kEcdsaP256;
  return absl::InvalidArgumentError(
      fmt::format("key algorithm {} is unknown; use ed25519 or ecdsa-p256",
                  nlohmann::json(std::string(name)).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace)));
}

struct SigningKey::Pkey {
  PkeyPtr p;
};
struct VerifyingKey::Pkey {
  PkeyPtr p;
};

SigningKey::SigningKey(std::unique_ptr<Pkey> pkey, KeyAlgorithm algorithm)
    : pkey_(std::move(pkey)), algorithm_(algorithm) {}
SigningKey::~SigningKey() = default;
SigningKey::SigningKey(SigningKey&&) noexcept = default;
SigningKey& SigningKey::operator=(SigningKey&&) noexcept = default;

absl::StatusOr<SigningKey> SigningKey::Generate(KeyAlgorithm algorithm) {
  EVP_PKEY* pkey = algorithm == KeyAlgorithm::kEd25519 ? EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519")
                                                       : EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  if (pkey == nullptr) return absl::InternalError("OpenSSL could not generate a key");
  return SigningKey(std::make_unique<Pkey>(Pkey{PkeyPtr(pkey)}), algorithm);
}

absl::StatusOr<SigningKey> SigningKey::FromPem(std::string_view pem, std::string_view what) {
  PkeyPtr pkey = ReadPem(pem, PemKind::kPrivate);
  if (pkey == nullptr) {
    const bool is_public = pem.find("-----BEGIN PUBLIC KEY-----") != std::string_view::npos;
    return absl::InvalidArgumentError(
        is_public
            ? fmt::format("{} is a public key; signing needs the private key (gpugeek model keygen wrote both)", what)
            : fmt::format("{} is not an unencrypted PEM private key; make one with gpugeek model keygen", what));
  }
  std::optional<KeyAlgorithm> algorithm = AlgorithmOf(pkey.get());
  if (!algorithm) return UnsupportedKey(what);
  return SigningKey(std::make_unique<Pkey>(Pkey{std::move(pkey)}), *algorithm);
}

absl::StatusOr<SigningKey> SigningKey::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::string pem, ReadFileBounded(path, kMaxKeyFileBytes, "key file"));
  return FromPem(pem, path);
}

std::string SigningKey::PrivatePem() const { return PemOf(pkey_->p.get(), WritePrivate); }
std::string SigningKey::PublicPem() const { return PemOf(pkey_->p.get(), WritePublic); }
std::string SigningKey::KeyId() const { return archive::Sha256Hex(PublicPem()); }

absl::StatusOr<std::string> SigningKey::Sign(std::string_view message) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  // Ed25519 hashes internally (RFC 8032 PureEdDSA) and takes no digest; ECDSA P-256 pairs with SHA-256.
  const EVP_MD* md = algorithm_ == KeyAlgorithm::kEd25519 ? nullptr : EVP_sha256();
  size_t len = 0;
  std::string sig;
  bool ok = ctx != nullptr && EVP_DigestSignInit(ctx, nullptr, md, nullptr, pkey_->p.get()) == 1;
  const auto* msg = reinterpret_cast<const unsigned char*>(message.data());
  ok = ok && EVP_DigestSign(ctx, nullptr, &len, msg, message.size()) == 1;
  if (ok) sig.resize(len);
  ok = ok && EVP_DigestSign(ctx, reinterpret_cast<unsigned char*>(sig.data()), &len, msg, message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) return absl::InternalError("OpenSSL could not sign the manifest");
  sig.resize(len);
  return sig;
}

VerifyingKey::VerifyingKey(std::unique_ptr<Pkey> pkey, KeyAlgorithm algorithm, std::string key_id)
    : pkey_(std::move(pkey)), algorithm_(algorithm), key_id_(std::move(key_id)) {}
VerifyingKey::~VerifyingKey() = default;
VerifyingKey::VerifyingKey(VerifyingKey&&) noexcept = default;
VerifyingKey& VerifyingKey::operator=(VerifyingKey&&) noexcept = default;

absl::StatusOr<VerifyingKey> VerifyingKey::FromPem(std::string_view pem, std::string_view what) {
  PkeyPtr pkey = ReadPem(pem, PemKind::kPublic);
  if (pkey == nullptr) {
    const bool is_private = pem.find("PRIVATE KEY-----") != std::string_view::npos;
    return absl::InvalidArgumentError(
        is_private
            ? fmt::format("{} is a private key; verify with the public one (the .pub.pem file)", what)
            : fmt::format("{} is not a PEM public key; pass the .pub.pem file gpugeek model keygen wrote", what));
  }
  std::optional<KeyAlgorithm> algorithm = AlgorithmOf(pkey.get());
  if (!algorithm) return UnsupportedKey(what);
  std::string id = archive::Sha256Hex(PemOf(pkey.get(), WritePublic));
  return VerifyingKey(std::make_unique<Pkey>(Pkey{std::move(pkey)}), *algorithm, std::move(id));
}

absl::StatusOr<VerifyingKey> VerifyingKey::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::string pem, ReadFileBounded(path, kMaxKeyFileBytes, "public key file"));
  return FromPem(pem, path);
}

VerifyingKey VerifyingKey::Of(const SigningKey& key) {
  // The PEM a valid key writes always reads back.
  return std::move(FromPem(key.PublicPem()).value());
}

std::string VerifyingKey::KeyId() const { return key_id_; }

bool VerifyingKey::Verify(std::string_view message, std::string_view signature) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const EVP_MD* md = algorithm_ == KeyAlgorithm::kEd25519 ? nullptr : EVP_sha256();
  const bool ok = ctx != nullptr && EVP_DigestVerifyInit(ctx, nullptr, md, nullptr, pkey_->p.get()) == 1 &&
                  EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                                   reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

}  // namespace gpugeek::models
