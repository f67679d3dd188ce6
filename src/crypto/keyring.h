#pragma once
// Keyring: envelope encryption at rest. Each tenant's bytes (secrets, job specs' env, logs, artifacts)
// are sealed with AES-256-GCM under that tenant's own random 256-bit data key; the data keys are stored
// only wrapped by a master key (key_provider.h), in one small keyring file.
//
// Why envelopes: rotating the master key re-wraps the data keys (O(tenants), a few KB written) and
// leaves every sealed blob, log and artifact as it is (nothing O(data) is rewritten); a tenant's keys
// can be rotated or dropped on their own; and a KMS sees one unwrap per tenant at start, not one call
// per record.
//
// Sealed blob (kSealOverhead = 36 bytes more than the plaintext):
//   "ggk" | version 0x01 | data-key id (u32, big-endian) | nonce (12 random bytes) | ciphertext | tag (16)
// The GCM additional data is the 8-byte header, the tenant and the caller's `aad`, so a blob opens only
// for the tenant, data key and context (e.g. "secret:acme/hf-token") it was sealed for.
//
// Keyring file (JSON, mode 0600, replaced atomically and durably on every change):
//   {"format": "gpugeek-keyring", "version": 1, "data_keys": [
//     {"tenant": "acme", "id": 1, "master_key": "mk-20250314-1a2b3c4d", "wrapped": "<hex>"}, ...]}
// A tenant's active data key (used by Seal) is its highest id; its older ones still Open. A wrapped key's
// additional data binds tenant, data-key id and master-key id, so entries cannot be swapped.
//
// Lifetime: one Keyring owns a keyring file at a time (the server's), enforced by an flock on
// "<path>.lock" held while it is open: a second writer (an offline `gpugeek keys rotate` while the server
// runs) would otherwise overwrite the other's re-wrapped keys. The servers of an active/standby control
// plane share one (KeyringSharing::kShared): each write takes the lock and reads the file again first. Open reads the
// file and unwraps every data key, so a wrong or missing master key is an error at start, not garbage later.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "crypto/aead.h"
#include "crypto/durable_file.h"
#include "crypto/key_provider.h"

namespace gpugeek::crypto {

inline constexpr size_t kSealHeaderBytes = 8;
// Bytes a sealed blob adds to its plaintext: header, nonce and tag.
inline constexpr size_t kSealOverhead = kSealHeaderBytes + kNonceBytes + kTagBytes;

// One data key as the keyring file stores it.
struct WrappedDataKey {
  std::string tenant;
  uint32_t id = 0;         // unique in the keyring, >= 1
  std::string master_key;  // id of the master key that wrapped it
  std::string wrapped;     // the provider's wrapped form (raw bytes; hex in the file)
};

// Parses keyring file text. `path` names the file in messages. InvalidArgument naming the file and the
// JSON path of the first problem (bad JSON, wrong "format"/"version", a missing or mistyped field, an
// invalid tenant or key id, a repeated data-key id). At most 64 MiB.
absl::StatusOr<std::vector<WrappedDataKey>> ParseKeyringFile(std::string_view text, const std::string& path);
// The keyring file text for `keys` (ParseKeyringFile reads it back equal).
std::string FormatKeyringFile(const std::vector<WrappedDataKey>& keys);

// The fixed-size parts of a sealed blob, as views into it.
struct SealedBlobView {
  uint32_t data_key_id = 0;
  std::string_view header;  // the 8 header bytes (authenticated)
  std::string_view nonce;   // 12 bytes
  std::string_view sealed;  // ciphertext + tag
};
// Splits a sealed blob without decrypting it. InvalidArgument when it is shorter than kSealOverhead,
// does not start with "ggk" or has a version other than 1.
absl::StatusOr<SealedBlobView> ParseSealedBlob(std::string_view blob);

// OK when `tenant` is 1-128 of [A-Za-z0-9._-]; otherwise InvalidArgument saying the rule. (A superset of
// api's tenant names, so every valid tenant has a keyring entry name.)
absl::Status ValidateTenant(std::string_view tenant);

enum class KeyringSharing { kExclusive, kShared };

class Keyring {
 public:
  // Opens the keyring file at `path` (creating an empty one, mode 0600, when it does not exist) and
  // unwraps every data key with `provider`, which is borrowed and must outlive the keyring.
  // Errors, all at open, naming the files:
  //   FailedPrecondition "master key X cannot unwrap tenant T's data key N in keyring F: wrong key file?"
  //     when a wrapped key does not authenticate under the key of that id (another key file);
  //   FailedPrecondition when a data key names a master key the provider does not hold (a retired key,
  //     another key file);
  //   FailedPrecondition "... is held by another process" when another Keyring has the file open;
  //   InvalidArgument as ParseKeyringFile; the errors of reading or creating the file (NotFound for a
  //     missing directory, PermissionDenied); Unavailable from a KMS provider.
  // Cost: one Unwrap per data key.
  // kShared (servers of an active/standby control plane on one shared data directory, of which only the
  // leader writes, but a deposed leader may not have exited yet): "<path>.lock" is held only while a write
  // runs, and each write first reads the file again, so no process's keys are lost and a tenant's key made
  // by another process is used, not made twice; Open waits for a write under way instead of failing.
  static absl::StatusOr<std::unique_ptr<Keyring>> Open(const std::string& path, KeyProvider& provider,
                                                       KeyringSharing sharing = KeyringSharing::kExclusive);

  Keyring(const Keyring&) = delete;
  Keyring& operator=(const Keyring&) = delete;

  // Seals `plaintext` (any bytes, up to 64 GiB) for `tenant` under its active data key, binding `aad`
  // (what the bytes are, e.g. "secret:acme/hf-token"; the same aad must be given to Open). The tenant's
  // first Seal makes its data key, wraps it under the active master key and writes the keyring file
  // durably before returning, so a returned blob's key survives a crash. Returns the blob
  // (plaintext + kSealOverhead bytes). InvalidArgument for an invalid tenant; errors of the provider's
  // Wrap and of writing the keyring file (then nothing is sealed). Thread-safe: concurrent Seal/Open
  // run in parallel (only the key lookup is under a lock).
  absl::StatusOr<std::string> Seal(std::string_view tenant, std::string_view plaintext, std::string_view aad);

  // The plaintext of a blob Seal returned for `tenant` with the same `aad`. InvalidArgument when `blob`
  // is not a sealed blob (ParseSealedBlob); DataLoss when the tenant has no data key of the blob's id (a
  // blob of another tenant or keyring) or the blob does not authenticate (altered bytes, other aad). No
  // unauthenticated plaintext is ever returned. Thread-safe.
  absl::StatusOr<std::string> Open(std::string_view tenant, std::string_view blob, std::string_view aad) const;

  // Re-wraps every data key that is not yet under the provider's active master key with that key and
  // replaces the keyring file durably and atomically; sealed data is not touched. Returns how many keys
  // were re-wrapped (0: nothing written). On error the file and the keyring are as before. After it
  // returns OK, master keys no longer in master_key_ids() may be retired (RetireMasterKey).
  absl::StatusOr<size_t> Rewrap();

  // Gives `tenant` a new active data key (persisted as the first Seal does) and returns its id; blobs
  // sealed under its older keys still open. Use before a tenant's 2^32nd seal under one key (the bound
  // for random 96-bit GCM nonces, SP 800-38D section 8.3) or after a suspected leak of a data key.
  absl::StatusOr<uint32_t> RotateDataKey(std::string_view tenant);

  // The master key ids that wrap at least one data key in the keyring file, sorted.
  std::vector<std::string> master_key_ids() const;
  // Tenants with a data key, sorted.
  std::vector<std::string> tenants() const;
  const std::string& path() const { return path_; }

 private:
  struct DataKey {
    WrappedDataKey stored;
    SecretKey key;
  };
  using KeyMap = std::map<uint32_t, std::shared_ptr<const DataKey>>;

  Keyring(std::string path, KeyProvider& provider, std::unique_ptr<FileLock> lock)
      : path_(std::move(path)), provider_(provider), lock_(std::move(lock)) {}

  // Makes a data key for `tenant` wrapped under the active master key (not yet stored).
  absl::StatusOr<std::shared_ptr<const DataKey>> NewDataKey(std::string_view tenant, uint32_t id) const;
  // Adds a new data key for `tenant` and persists the keyring; with `reuse_active`, returns the tenant's
  // newest key instead when the current keys (CurrentKeysLocked) hold one. Requires write_mu_.
  absl::StatusOr<std::shared_ptr<const DataKey>> AddDataKeyLocked(std::string_view tenant, bool reuse_active)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // The keys a write starts from: this keyring's (exclusive), or, shared, the file's read again under its
  // lock, which `write` then holds until the caller's write ends.
  absl::StatusOr<KeyMap> CurrentKeysLocked(std::unique_ptr<FileLock>& write) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Writes `keys` as the keyring file, then makes them the keyring's keys. Requires write_mu_.
  absl::Status PersistAndPublishLocked(KeyMap keys) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Makes `keys` the keyring's keys (and each tenant's highest id its active one).
  absl::Status PublishLocked(KeyMap keys) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // The keyring file's keys, unwrapped; NotFound when there is no file; errors as Open's.
  static absl::StatusOr<KeyMap> Load(const std::string& path, KeyProvider& provider);
  std::shared_ptr<const DataKey> ActiveKey(std::string_view tenant) const;

  // Constant after construction.
  const std::string path_;
  KeyProvider& provider_;
  const std::unique_ptr<FileLock> lock_;  // "<path>.lock", held for the keyring's lifetime; nullptr = shared

  // Serializes the writers of the keyring file (new tenants, Rewrap, RotateDataKey), so each writes a
  // state that includes the others'; never held by Seal/Open of a known tenant. Acquired before mu_.
  Mutex write_mu_;
  // Guards the in-memory keys; held only to look up or swap, never across I/O or crypto.
  mutable Mutex mu_ ABSL_ACQUIRED_AFTER(write_mu_);
  KeyMap keys_ ABSL_GUARDED_BY(mu_);                                          // by data-key id
  std::map<std::string, uint32_t, std::less<>> active_ ABSL_GUARDED_BY(mu_);  // tenant -> highest id
};

// What RotateMasterKeyAndRewrap did.
struct MasterKeyRotation {
  std::string new_key_id;
  size_t rewrapped = 0;              // data keys moved to the new key
  std::vector<std::string> retired;  // master keys removed from the key file
};

// The whole master-key rotation, in the crash-safe order: (1) RotateMasterKey(provider.path()) appends a
// new active key and provider.Reload() loads it; (2) keyring.Rewrap() moves every data key to it; (3) when
// `retire_unused` is true, every other master key that keyring.master_key_ids() no longer names is
// removed from the key file (RetireMasterKey), then the provider reloads. `keyring` must have been opened
// with `provider`. Only pass retire_unused = true when this keyring is the only one using the key file:
// another keyring's data keys may still be wrapped by the keys it removes. A kill -9 at any moment
// leaves a key file and keyring file from which every data key unwraps; running it again completes
// the retirement. Errors: those of each step; the steps before it stay done.
absl::StatusOr<MasterKeyRotation> RotateMasterKeyAndRewrap(FileKeyProvider& provider, Keyring& keyring,
                                                           bool retire_unused);

}  // namespace gpugeek::crypto
