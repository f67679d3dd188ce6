#pragma once
// Tenants' secrets (`gpugeek secret set NAME`) and how they reach a job without leaking anywhere else.
//
// The problem: a job needs credentials (HF_TOKEN, AWS_SECRET_ACCESS_KEY) in its environment, but a
// spec's env is shown by the API, written to the database and visible to every node. So a spec names
// a secret (`env: {HF_TOKEN: {secret: hf}}`, api/job_spec.h) and keeps only that name; the value is
//   - stored sealed with the tenant's data key (store::Sealer over a crypto::Keyring, aad
//     "secret:<tenant>/<name>"): the database file never holds it in the clear;
//   - resolved only when the heartbeat reply for the node running one of the job's members is built
//     (ControlPlane::Heartbeat), so it travels to that node only, inside that member's assignment;
//   - never in an API view (listings carry names and times), an event or a stored spec;
//   - redacted from the job's logs and its members' report messages before they are stored: each
//     value becomes "[secret:NAME]" (LogRedactor).
// Tenant isolation: every call takes the caller's tenant; another tenant's secret answers NotFound
// exactly like an absent one, and a spec can only name its own tenant's secrets.
//
// Thread-safety: every method may be called concurrently.

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "crypto/keyring.h"
#include "store/store.h"

namespace gpugeek::controlplane {

// A secret value may be a token, a password, a service-account JSON or a kubeconfig: at most 64 KiB.
inline constexpr size_t kMaxSecretValueBytes = size_t{64} << 10;

// store::Sealer over a crypto::Keyring (borrowed; must outlive the sealer): each tenant's bytes under
// its own data key. The store's "" tenant (a job of the default tenant) is sealed as "default".
class KeyringSealer final : public store::Sealer {
 public:
  explicit KeyringSealer(crypto::Keyring& keyring) : keyring_(keyring) {}
  absl::StatusOr<std::string> Seal(std::string_view tenant, std::string_view plaintext, std::string_view aad) override;
  absl::StatusOr<std::string> Open(std::string_view tenant, std::string_view sealed,
                                   std::string_view aad) const override;

 private:
  crypto::Keyring& keyring_;
};

// Replaces secret values in a member's log stream by "[secret:NAME]".
//
// A value may be split across two chunks of one member's log (a heartbeat ships whatever the workload
// wrote so far). So Redact holds back the shortest tail of the bytes that could still become a value:
// the longest suffix that is a proper prefix of some value (so at most the longest value's length - 1
// bytes, and none at all when the tail cannot start a value). The held bytes are stored with the next
// chunk, or as they are at the member's end (`end` = true: its exit report arrived). Matching is
// leftmost, the longest value first when several start at one byte.
class LogRedactor {
 public:
  struct Secret {
    std::string name;
    std::string value;  // empty values never match
  };
  // `held` carries the tail between calls of one stream (empty at its start). Returns the bytes to
  // store now: `held` + `data` with every whole value replaced, minus the new held tail.
  static std::string Redact(const std::vector<Secret>& secrets, std::string& held, std::string_view data, bool end);
};

class Secrets {
 public:
  // `store` is borrowed (and must have a Sealer: its PutSecret refuses otherwise).
  Secrets(store::Store& store, Clock& clock) : store_(store), clock_(clock) {}

  // Creates or replaces `tenant`'s secret `name`. InvalidArgument naming the field for a bad name
  // (api::ValidateSecretName), an empty value or one over kMaxSecretValueBytes; FailedPrecondition
  // when the store keeps no secrets; the store's errors. Returns the record without its value.
  absl::StatusOr<store::SecretRecord> Put(const std::string& tenant, const std::string& name, std::string value);
  // The tenant's secrets by name, without values.
  absl::StatusOr<std::vector<store::SecretRecord>> List(const std::string& tenant);
  // NotFound when the tenant has no such secret (another tenant's reads the same).
  absl::Status Delete(const std::string& tenant, const std::string& name);
  // The value (cached after the first read; Put and Delete drop the cache entry). NotFound as Delete.
  absl::StatusOr<std::string> Value(const std::string& tenant, const std::string& name);

  // Admission: OK when every secret `refs` names (variable -> secret) exists in `tenant`; otherwise
  // InvalidArgument "env.HF_TOKEN: tenant 'acme' has no secret 'hf'; ..." for the first that does not.
  absl::Status CheckRefs(const std::string& tenant, const std::map<std::string, std::string>& refs);

 private:
  store::Store& store_;
  Clock& clock_;
  Mutex mu_;
  std::map<std::pair<std::string, std::string>, std::string> cache_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // bumped by every Put and Delete
};

// The tenant a job's secrets belong to: its own, or "default" for a job stored without one.
inline std::string SecretTenant(const std::string& job_tenant) { return job_tenant.empty() ? "default" : job_tenant; }

}  // namespace gpugeek::controlplane
