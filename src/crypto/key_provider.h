#pragma once
// Master keys: the keys that wrap (encrypt) the per-tenant data keys of a Keyring (keyring.h) and never
// touch tenants' data themselves.
//
// KeyProvider is the plug-in point for where master keys live. FileKeyProvider keeps them in a local
// file; a KMS (AWS KMS, GCP KMS, Vault transit) fits the same interface by sending Wrap/Unwrap to the
// service, so the master key never enters the process. Only the keyring calls it: at open (Unwrap, once
// per data key), when a tenant's first data key is made (Wrap) and on Rewrap after a rotation.
//
// The master key file (FileKeyProvider): text, one key per line, oldest first, the LAST line active:
//   # comment lines and blank lines are ignored
//   mk-20250314-1a2b3c4d 4f0c...(64 hex digits = 256 bits)
//   mk-20250901-9e8d7c6b 77a1...
// A key id is 1-64 of [A-Za-z0-9._-] and unique in the file. The file must be a regular file of mode 0600
// (or stricter): a key file that others can read is refused at open, as ssh refuses a private key.
//
// Rotation, crash-safe at every step (RotateMasterKeyAndRewrap in keyring.h does all three):
//   1. RotateMasterKey appends a new active key; the old ones stay, so everything still unwraps.
//   2. Keyring::Rewrap re-wraps every data key under the new key and replaces the keyring file.
//   3. RetireMasterKey removes an old key, once no keyring file names it any more.
// A kill -9 between or inside any step leaves files from which every data key still unwraps.

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "crypto/aead.h"

namespace gpugeek::crypto {

// Where master keys live. Implementations are thread-safe: every method may be called from any thread.
class KeyProvider {
 public:
  virtual ~KeyProvider() = default;

  // The id of the master key that new wraps should use (e.g. "mk-20250901-9e8d7c6b").
  virtual std::string active_key_id() const = 0;

  // Encrypts the 256-bit `data_key` under master key `key_id`, authenticating `aad` with it (the keyring
  // passes the tenant, data-key id and master-key id, so a wrapped key cannot be moved to another slot).
  // Returns the provider's opaque wrapped form, to store and hand back to Unwrap unchanged. Errors:
  // NotFound when the provider holds no key `key_id`; Unavailable when a remote KMS cannot be reached
  // (retry later); Internal when the crypto library fails.
  virtual absl::StatusOr<std::string> Wrap(std::string_view key_id, const SecretKey& data_key,
                                           std::string_view aad) const = 0;

  // The data key that Wrap(key_id, ..., aad) returned `wrapped` for. Errors: NotFound when the provider
  // holds no key `key_id` (retired, or another key file); DataLoss when `wrapped` does not authenticate
  // under that key and `aad` (a different key under the same id, or altered bytes); Unavailable as Wrap.
  virtual absl::StatusOr<SecretKey> Unwrap(std::string_view key_id, std::string_view wrapped,
                                           std::string_view aad) const = 0;

  // Where the keys come from, for messages: "master key file /etc/gpugeek/master.key".
  virtual std::string Describe() const = 0;
};

// A master key file's keys in file order (oldest first); the last one is active.
struct MasterKeys {
  std::vector<std::pair<std::string, SecretKey>> keys;
};

// Parses master key file text (format above). `path` only names the file in messages. InvalidArgument
// naming the path and the 1-based line for a malformed line, a bad key id, a duplicate id or no key at
// all; messages never quote a line, since it holds key material.
absl::StatusOr<MasterKeys> ParseMasterKeyFile(std::string_view text, const std::string& path);
// The text of a master key file holding `keys` (a header comment, then one line per key).
std::string FormatMasterKeyFile(const MasterKeys& keys);
// OK when `id` is a valid key id (1-64 of [A-Za-z0-9._-]); otherwise InvalidArgument saying the rule.
absl::Status ValidateKeyId(std::string_view id);

// Reads and checks a master key file: NotFound when it does not exist (the message says how to create
// one, and to restore the old one from backup instead if data was already sealed); FailedPrecondition
// when it is not a regular file or its mode lets group or others in (the message names the file and
// says `chmod 600 <path>`); PermissionDenied when it cannot be read; InvalidArgument as
// ParseMasterKeyFile.
absl::StatusOr<MasterKeys> ReadMasterKeyFile(const std::string& path);

// Master keys from a file, loaded at Open and kept in memory. Thread-safe; Reload may run concurrently
// with Wrap/Unwrap. The wrapped form is nonce (12 bytes) + AES-256-GCM ciphertext (32) + tag (16).
class FileKeyProvider final : public KeyProvider {
 public:
  // Loads `path` with ReadMasterKeyFile (its errors, as they are).
  static absl::StatusOr<std::unique_ptr<FileKeyProvider>> Open(const std::string& path);

  // Re-reads the file (after RotateMasterKey/RetireMasterKey by this or another process). On error the
  // keys loaded before stay in use and the error is returned.
  absl::Status Reload();
  // The ids of the keys held, oldest first (the last is active).
  std::vector<std::string> key_ids() const;
  const std::string& path() const { return path_; }

  std::string active_key_id() const override;
  absl::StatusOr<std::string> Wrap(std::string_view key_id, const SecretKey& data_key,
                                   std::string_view aad) const override;
  absl::StatusOr<SecretKey> Unwrap(std::string_view key_id, std::string_view wrapped,
                                   std::string_view aad) const override;
  std::string Describe() const override;

 private:
  FileKeyProvider(std::string path, MasterKeys keys) : path_(std::move(path)), keys_(std::move(keys)) {}
  absl::StatusOr<SecretKey> Find(std::string_view key_id) const;

  const std::string path_;
  mutable Mutex mu_;
  MasterKeys keys_ ABSL_GUARDED_BY(mu_);
};

// Creates a master key file at `path` holding one new random key (RAND_bytes), mode 0600, written
// durably and atomically; returns the key's id. AlreadyExists when `path` exists (never overwritten:
// that would lose every key in it). NotFound when its directory does not exist. This is what
// `gpugeek keys init --key-file PATH` runs.
absl::StatusOr<std::string> CreateMasterKeyFile(const std::string& path);

// Appends a new random key to the master key file at `path`, making it the active one, and returns its
// id. The file is replaced atomically and durably (old keys kept), under an flock on "<path>.lock" so
// concurrent rotations and retirements of one file do not lose each other's keys. Errors: those of
// ReadMasterKeyFile; Internal on a failed write (the file is then unchanged).
absl::StatusOr<std::string> RotateMasterKey(const std::string& path);

// Removes key `key_id` from the master key file at `path` (atomically, under the same lock). Only safe
// once no keyring still has a data key wrapped under it (Keyring::master_key_ids(); Rewrap first):
// data keys wrapped under a removed key cannot be recovered. FailedPrecondition for the active key;
// NotFound when the file holds no such key; otherwise the errors of RotateMasterKey.
absl::Status RetireMasterKey(const std::string& path, std::string_view key_id);

}  // namespace gpugeek::crypto
