#include "crypto/keyring.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/absl_fmt.h"
#include "common/file.h"
#include "common/json_parse.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "crypto/durable_file.h"

namespace gpugeek::crypto {
namespace {

constexpr std::string_view kMagic = "ggk";
constexpr uint8_t kVersion = 1;
constexpr std::string_view kFormat = "gpugeek-keyring";
// ~200 bytes per data key: room for hundreds of thousands of tenants.
constexpr uint64_t kMaxKeyringBytes = uint64_t{64} << 20;
// A KMS's wrapped form is a few hundred bytes; FileKeyProvider's is 60.
constexpr size_t kMaxWrappedBytes = 4096;

void PutU32(std::string& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
}

uint32_t GetU32(std::string_view in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(in[i]);
  return v;
}

// What a wrapped data key is bound to: its tenant, id and master key. NUL cannot occur in a valid tenant
// or key id, so the encoding is unambiguous.
std::string WrapAad(const WrappedDataKey& k) {
  return fmt::format("gpugeek-keyring-v1{}{}{}{}{}{}", '\0', k.tenant, '\0', k.id, '\0', k.master_key);
}

// The GCM additional data of a blob: its header, the tenant (length-prefixed) and the caller's aad.
std::string BlobAad(std::string_view header, std::string_view tenant, std::string_view aad) {
  std::string out(header);
  PutU32(out, static_cast<uint32_t>(tenant.size()));
  out.append(tenant);
  out.append(aad);
  return out;
}

}  // namespace

absl::Status ValidateTenant(std::string_view tenant) {
  const auto allowed = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  };
  bool ok = !tenant.empty() && tenant.size() <= 128;
  for (char c : tenant) ok = ok && allowed(c);
  if (!ok) {
    return absl::InvalidArgumentError(
        fmt::format("tenant {} is not 1-128 letters, digits, '.', '_' or '-'", QuoteForMessage(tenant)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<WrappedDataKey>> ParseKeyringFile(std::string_view text, const std::string& path) {
  absl::StatusOr<nlohmann::json> parsed = ParseJsonBounded(text, {.max_bytes = kMaxKeyringBytes, .max_depth = 4});
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(fmt::format("keyring file {}: {}", path, parsed.status().message()));
  }
  const nlohmann::json& root = *parsed;
  const auto bad = [&](std::string_view where, std::string_view why) {
    return absl::InvalidArgumentError(fmt::format("keyring file {}: {}: {}", path, where, why));
  };
  if (!root.is_object()) return bad("(top level)", "is not a JSON object");
  const auto format = root.find("format");
  if (format == root.end() || !format->is_string() || format->get<std::string>() != kFormat) {
    return bad("/format", fmt::format("must be \"{}\": is this a keyring file?", kFormat));
  }
  const auto version = root.find("version");
  if (version == root.end() || !version->is_number_unsigned() || version->get<uint64_t>() != kVersion) {
    return bad("/version", fmt::format("must be {}; this build reads keyring version {} only", kVersion, kVersion));
  }
  const auto list = root.find("data_keys");
  if (list == root.end() || !list->is_array()) return bad("/data_keys", "must be an array");
  std::vector<WrappedDataKey> out;
  std::set<uint32_t> ids;
  for (size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& e = (*list)[i];
    const std::string where = fmt::format("/data_keys/{}", i);
    if (!e.is_object()) return bad(where, "is not an object");
    const auto string_field = [&](const char* name) -> absl::StatusOr<std::string> {
      const auto it = e.find(name);
      if (it == e.end() || !it->is_string()) return bad(where + "/" + name, "must be a string");
      return it->get<std::string>();
    };
    WrappedDataKey k;
    ASSIGN_OR_RETURN(k.tenant, string_field("tenant"));
    if (absl::Status s = ValidateTenant(k.tenant); !s.ok()) return bad(where + "/tenant", std::string(s.message()));
    const auto id = e.find("id");
    if (id == e.end() || !id->is_number_unsigned() || id->get<uint64_t>() == 0 || id->get<uint64_t>() > UINT32_MAX) {
      return bad(where + "/id", "must be an integer from 1 to 4294967295");
    }
    k.id = static_cast<uint32_t>(id->get<uint64_t>());
    if (!ids.insert(k.id).second) return bad(where + "/id", fmt::format("data key id {} appears twice", k.id));
    ASSIGN_OR_RETURN(k.master_key, string_field("master_key"));
    if (absl::Status s = ValidateKeyId(k.master_key); !s.ok())
      return bad(where + "/master_key", std::string(s.message()));
    ASSIGN_OR_RETURN(const std::string hex, string_field("wrapped"));
    absl::StatusOr<std::string> wrapped = HexDecode(hex);
    if (!wrapped.ok()) return bad(where + "/wrapped", std::string(wrapped.status().message()));
    if (wrapped->empty() || wrapped->size() > kMaxWrappedBytes) {
      return bad(where + "/wrapped", fmt::format("must be 1-{} bytes", kMaxWrappedBytes));
    }
    k.wrapped = *std::move(wrapped);
    out.push_back(std::move(k));
  }
  return out;
}

std::string FormatKeyringFile(const std::vector<WrappedDataKey>& keys) {
  nlohmann::json list = nlohmann::json::array();
  for (const WrappedDataKey& k : keys) {
    list.push_back(
        {{"tenant", k.tenant}, {"id", k.id}, {"master_key", k.master_key}, {"wrapped", HexEncode(k.wrapped)}});
  }
  const nlohmann::json root = {{"format", kFormat}, {"version", kVersion}, {"data_keys", std::move(list)}};
  return root.dump(1) + "\n";
}

absl::StatusOr<SealedBlobView> ParseSealedBlob(std::string_view blob) {
  if (blob.size() < kSealOverhead) {
    return absl::InvalidArgumentError(
        fmt::format("not a sealed blob: {} bytes, shorter than the {}-byte minimum", blob.size(), kSealOverhead));
  }
  if (blob.substr(0, kMagic.size()) != kMagic) {
    return absl::InvalidArgumentError("not a sealed blob: it does not start with \"ggk\"");
  }
  const auto version = static_cast<uint8_t>(blob[kMagic.size()]);
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        fmt::format("sealed blob version {} is not one this build reads (version {})", version, kVersion));
  }
  SealedBlobView view;
  view.header = blob.substr(0, kSealHeaderBytes);
  view.data_key_id = GetU32(blob.substr(kMagic.size() + 1, 4));
  view.nonce = blob.substr(kSealHeaderBytes, kNonceBytes);
  view.sealed = blob.substr(kSealHeaderBytes + kNonceBytes);
  return view;
}

absl::StatusOr<Keyring::KeyMap> Keyring::Load(const std::string& path, KeyProvider& provider) {
  absl::StatusOr<std::string> text = ReadFileBounded(path, kMaxKeyringBytes, "keyring file");
  if (!text.ok()) return text.status();
  ASSIGN_OR_RETURN(std::vector<WrappedDataKey> stored, ParseKeyringFile(*text, path));
  KeyMap keys;
  for (WrappedDataKey& w : stored) {
    absl::StatusOr<SecretKey> key = provider.Unwrap(w.master_key, w.wrapped, WrapAad(w));
    if (absl::IsNotFound(key.status())) {
      return absl::FailedPreconditionError(fmt::format(
          "tenant {}'s data key {} in keyring {} is wrapped by master key {}, which {} does not hold: wrong key "
          "file, or was that key retired before a rewrap? ({})",
          w.tenant, w.id, path, w.master_key, provider.Describe(), key.status().message()));
    }
    if (absl::IsDataLoss(key.status())) {
      return absl::FailedPreconditionError(fmt::format(
          "master key {} of {} cannot unwrap tenant {}'s data key {} in keyring {}: wrong key file? (a key of that "
          "id from another key file, or an altered keyring)",
          w.master_key, provider.Describe(), w.tenant, w.id, path));
    }
    if (!key.ok()) {
      return absl::Status(key.status().code(), fmt::format("unwrapping tenant {}'s data key {} in keyring {}: {}",
                                                           w.tenant, w.id, path, key.status().message()));
    }
    const uint32_t id = w.id;
    keys.emplace(id, std::make_shared<const DataKey>(DataKey{std::move(w), *std::move(key)}));
  }
  return keys;
}

absl::StatusOr<std::unique_ptr<Keyring>> Keyring::Open(const std::string& path, KeyProvider& provider,
                                                       KeyringSharing sharing) {
  std::unique_ptr<FileLock> owner;
  if (sharing == KeyringSharing::kExclusive) {
    ASSIGN_OR_RETURN(owner, FileLock::TryAcquire(path + ".lock"));
  }
  std::unique_ptr<Keyring> keyring(new Keyring(path, provider, std::move(owner)));
  // One process owns the file: a temporary file here is a write a crash cut short. (A shared keyring's
  // temporary file may be another process's write under way.)
  if (sharing == KeyringSharing::kExclusive) RemoveStaleTempFiles(path);
  MutexLock lock(&keyring->write_mu_);
  std::unique_ptr<FileLock> write;  // shared: held while the file is read (or made), as each write does
  if (sharing == KeyringSharing::kShared) {
    ASSIGN_OR_RETURN(write, FileLock::Acquire(path + ".lock"));
  }
  absl::StatusOr<KeyMap> keys = Load(path, provider);
  if (absl::IsNotFound(keys.status())) {
    // Written now, so a keyring directory that cannot be written is an error at start too.
    RETURN_IF_ERROR(keyring->PersistAndPublishLocked({}));
    return keyring;
  }
  if (!keys.ok()) return keys.status();
  RETURN_IF_ERROR(keyring->PublishLocked(*std::move(keys)));
  return keyring;
}

absl::StatusOr<Keyring::KeyMap> Keyring::CurrentKeysLocked(std::unique_ptr<FileLock>& write) {
  if (lock_ != nullptr) {  // exclusive: the file holds what this keyring wrote
    MutexLock lock(&mu_);
    return keys_;
  }
  // Shared: the file's lock for this write, and the file as other processes left it.
  ASSIGN_OR_RETURN(write, FileLock::Acquire(path_ + ".lock"));
  return Load(path_, provider_);
}

std::shared_ptr<const Keyring::DataKey> Keyring::ActiveKey(std::string_view tenant) const {
  MutexLock lock(&mu_);
  const auto it = active_.find(tenant);
  if (it == active_.end()) return nullptr;
  return keys_.at(it->second);  // active_ names only ids in keys_: both change together under mu_
}

absl::StatusOr<std::shared_ptr<const Keyring::DataKey>> Keyring::NewDataKey(std::string_view tenant,
                                                                            uint32_t id) const {
  ASSIGN_OR_RETURN(SecretKey key, SecretKey::Generate());
  WrappedDataKey stored{.tenant = std::string(tenant), .id = id, .master_key = provider_.active_key_id()};
  ASSIGN_OR_RETURN(stored.wrapped, provider_.Wrap(stored.master_key, key, WrapAad(stored)));
  return std::make_shared<const DataKey>(DataKey{std::move(stored), std::move(key)});
}

absl::StatusOr<std::shared_ptr<const Keyring::DataKey>> Keyring::AddDataKeyLocked(std::string_view tenant,
                                                                                  bool reuse_active) {
  std::unique_ptr<FileLock> write;
  ASSIGN_OR_RETURN(KeyMap keys, CurrentKeysLocked(write));
  if (reuse_active) {  // shared: another process may have given the tenant a key since this one loaded
    for (auto it = keys.rbegin(); it != keys.rend(); ++it) {
      if (it->second->stored.tenant == tenant) {
        std::shared_ptr<const DataKey> found = it->second;
        RETURN_IF_ERROR(PublishLocked(std::move(keys)));
        return found;
      }
    }
  }
  const uint32_t id = keys.empty() ? 1 : keys.rbegin()->first + 1;
  if (id == 0) return absl::ResourceExhaustedError("the keyring has used every 32-bit data key id");
  ASSIGN_OR_RETURN(std::shared_ptr<const DataKey> key, NewDataKey(tenant, id));
  keys.emplace(id, key);
  RETURN_IF_ERROR(PersistAndPublishLocked(std::move(keys)));
  return key;
}

absl::Status Keyring::PersistAndPublishLocked(KeyMap keys) {
  std::vector<WrappedDataKey> stored;
  for (const auto& [id, key] : keys) stored.push_back(key->stored);
  RETURN_IF_ERROR(WriteFileDurably(path_, FormatKeyringFile(stored), 0600));
  return PublishLocked(std::move(keys));
}

absl::Status Keyring::PublishLocked(KeyMap keys) {
  std::map<std::string, uint32_t, std::less<>> active;
  for (const auto& [id, key] : keys) active[key->stored.tenant] = id;  // ids ascend: the last is the highest
  MutexLock lock(&mu_);
  keys_ = std::move(keys);
  active_ = std::move(active);
  return absl::OkStatus();
}

absl::StatusOr<std::string> Keyring::Seal(std::string_view tenant, std::string_view plaintext, std::string_view aad) {
  RETURN_IF_ERROR(ValidateTenant(tenant));
  std::shared_ptr<const DataKey> key = ActiveKey(tenant);
  if (key == nullptr) {
    MutexLock write(&write_mu_);
    key = ActiveKey(tenant);  // another thread may have made it while this one waited
    if (key == nullptr) {
      ASSIGN_OR_RETURN(key, AddDataKeyLocked(tenant, /*reuse_active=*/lock_ == nullptr));
    }
  }
  std::string blob(kMagic);
  blob.push_back(static_cast<char>(kVersion));
  PutU32(blob, key->stored.id);
  ASSIGN_OR_RETURN(const std::string nonce, RandomBytes(kNonceBytes));
  const std::string blob_aad = BlobAad(blob, tenant, aad);
  blob.reserve(kSealOverhead + plaintext.size());
  blob += nonce;
  RETURN_IF_ERROR(GcmSealAppend(key->key, nonce, plaintext, blob_aad, blob));
  return blob;
}

absl::StatusOr<std::string> Keyring::Open(std::string_view tenant, std::string_view blob, std::string_view aad) const {
  ASSIGN_OR_RETURN(const SealedBlobView view, ParseSealedBlob(blob));
  std::shared_ptr<const DataKey> key;
  {
    MutexLock lock(&mu_);
    const auto it = keys_.find(view.data_key_id);
    if (it != keys_.end() && it->second->stored.tenant == tenant) key = it->second;
  }
  if (key == nullptr) {
    return absl::DataLossError(fmt::format(
        "tenant {} has no data key {} in keyring {}: the blob belongs to another tenant or keyring, or was altered",
        QuoteForMessage(tenant), view.data_key_id, path_));
  }
  absl::StatusOr<std::string> plaintext = GcmOpen(key->key, view.nonce, view.sealed, BlobAad(view.header, tenant, aad));
  if (!plaintext.ok()) {
    return absl::Status(plaintext.status().code(),
                        fmt::format("cannot open a blob of tenant {} (data key {}): {}", QuoteForMessage(tenant),
                                    view.data_key_id, plaintext.status().message()));
  }
  return plaintext;
}

absl::StatusOr<size_t> Keyring::Rewrap() {
  MutexLock write(&write_mu_);
  const std::string active = provider_.active_key_id();
  std::unique_ptr<FileLock> file_lock;
  ASSIGN_OR_RETURN(KeyMap keys, CurrentKeysLocked(file_lock));
  size_t rewrapped = 0;
  for (auto& [id, key] : keys) {
    if (key->stored.master_key == active) continue;
    WrappedDataKey stored{.tenant = key->stored.tenant, .id = id, .master_key = active};
    ASSIGN_OR_RETURN(stored.wrapped, provider_.Wrap(active, key->key, WrapAad(stored)));
    key = std::make_shared<const DataKey>(DataKey{std::move(stored), key->key});
    ++rewrapped;
  }
  if (rewrapped > 0) RETURN_IF_ERROR(PersistAndPublishLocked(std::move(keys)));
  return rewrapped;
}

absl::StatusOr<uint32_t> Keyring::RotateDataKey(std::string_view tenant) {
  RETURN_IF_ERROR(ValidateTenant(tenant));
  MutexLock write(&write_mu_);
  ASSIGN_OR_RETURN(std::shared_ptr<const DataKey> key, AddDataKeyLocked(tenant, /*reuse_active=*/false));
  return key->stored.id;
}

std::vector<std::string> Keyring::master_key_ids() const {
  std::set<std::string> ids;
  MutexLock lock(&mu_);
  for (const auto& [id, key] : keys_) ids.insert(key->stored.master_key);
  return {ids.begin(), ids.end()};
}

std::vector<std::string> Keyring::tenants() const {
  std::vector<std::string> out;
  MutexLock lock(&mu_);
  for (const auto& [tenant, id] : active_) out.push_back(tenant);
  return out;
}

absl::StatusOr<MasterKeyRotation> RotateMasterKeyAndRewrap(FileKeyProvider& provider, Keyring& keyring,
                                                           bool retire_unused) {
  MasterKeyRotation result;
  // (1) The new key is durable in the key file before any data key is wrapped under it.
  ASSIGN_OR_RETURN(result.new_key_id, RotateMasterKey(provider.path()));
  RETURN_IF_ERROR(provider.Reload());
  // (2) The keyring file names only the new key once this returns; the old keys are still in the file.
  ASSIGN_OR_RETURN(result.rewrapped, keyring.Rewrap());
  if (!retire_unused) return result;
  // (3) master_key_ids() reflects the keyring file as written (it is updated only after a durable write).
  const std::vector<std::string> in_use = keyring.master_key_ids();
  const std::string active = provider.active_key_id();
  for (const std::string& id : provider.key_ids()) {
    if (id == active || std::find(in_use.begin(), in_use.end(), id) != in_use.end()) continue;
    RETURN_IF_ERROR(RetireMasterKey(provider.path(), id));
    result.retired.push_back(id);
  }
  RETURN_IF_ERROR(provider.Reload());
  return result;
}

}  // namespace gpugeek::crypto
