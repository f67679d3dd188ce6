#include "controlplane/secrets.h"

#include <algorithm>

#include <fmt/format.h>

#include "api/job_spec.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"

namespace gpugeek::controlplane {

absl::StatusOr<std::string> KeyringSealer::Seal(std::string_view tenant, std::string_view plaintext,
                                                std::string_view aad) {
  return keyring_.Seal(tenant.empty() ? "default" : tenant, plaintext, aad);
}

absl::StatusOr<std::string> KeyringSealer::Open(std::string_view tenant, std::string_view sealed,
                                                std::string_view aad) const {
  return keyring_.Open(tenant.empty() ? "default" : tenant, sealed, aad);
}

std::string LogRedactor::Redact(const std::vector<Secret>& secrets, std::string& held, std::string_view data,
                                bool end) {
  std::string buf = std::move(held);
  held.clear();
  buf.append(data);
  std::string out;
  out.reserve(buf.size());
  size_t i = 0;
  while (i < buf.size()) {
    const Secret* match = nullptr;
    bool may_start = false;
    for (const Secret& s : secrets) {
      if (s.value.empty()) continue;
      const size_t left = buf.size() - i;
      if (left >= s.value.size()) {
        if (buf.compare(i, s.value.size(), s.value) == 0 &&
            (match == nullptr || s.value.size() > match->value.size())) {
          match = &s;
        }
      } else if (!end && s.value.compare(0, left, buf, i, left) == 0) {
        may_start = true;  // the rest of the buffer is a proper prefix of this value
      }
    }
    if (match != nullptr) {
      out += "[secret:" + match->name + "]";
      i += match->value.size();
    } else if (may_start) {
      held = buf.substr(i);
      break;
    } else {
      out.push_back(buf[i++]);
    }
  }
  return out;
}

absl::StatusOr<store::SecretRecord> Secrets::Put(const std::string& tenant, const std::string& name,
                                                 std::string value) {
  RETURN_IF_ERROR(api::ValidateSecretName("name", name));
  if (value.empty()) return absl::InvalidArgumentError("value: must not be empty");
  if (value.size() > kMaxSecretValueBytes) {
    return absl::InvalidArgumentError(
        fmt::format("value: {} bytes is over the {} bytes a secret may hold", value.size(), kMaxSecretValueBytes));
  }
  const TimePoint now = clock_.Now();
  ASSIGN_OR_RETURN(
      store::SecretRecord stored,
      store_.PutSecret(
          {.tenant = tenant, .name = name, .value = std::move(value), .created_at = now, .updated_at = now}));
  {
    MutexLock lock(&mu_);
    cache_.erase({tenant, name});
    ++generation_;
  }
  stored.value.clear();
  return stored;
}

absl::StatusOr<std::vector<store::SecretRecord>> Secrets::List(const std::string& tenant) {
  return store_.ListSecrets(tenant);
}

absl::Status Secrets::Delete(const std::string& tenant, const std::string& name) {
  RETURN_IF_ERROR(store_.DeleteSecret(tenant, name));
  MutexLock lock(&mu_);
  cache_.erase({tenant, name});
  ++generation_;
  return absl::OkStatus();
}

absl::StatusOr<std::string> Secrets::Value(const std::string& tenant, const std::string& name) {
  uint64_t generation;
  {
    MutexLock lock(&mu_);
    if (auto it = cache_.find({tenant, name}); it != cache_.end()) return it->second;
    generation = generation_;
  }
  // Read outside the lock (no lock across I/O); a Put or Delete during the read bumps the generation,
  // and then what was read may be stale: it is returned but not cached.
  ASSIGN_OR_RETURN(store::SecretRecord s, store_.GetSecret(tenant, name));
  MutexLock lock(&mu_);
  if (generation == generation_) cache_[{tenant, name}] = s.value;
  return s.value;
}

absl::Status Secrets::CheckRefs(const std::string& tenant, const std::map<std::string, std::string>& refs) {
  for (const auto& [var, name] : refs) {
    absl::StatusOr<std::string> v = Value(tenant, name);
    if (absl::IsNotFound(v.status())) {
      return absl::InvalidArgumentError(fmt::format(
          "env.{}: tenant '{}' has no secret '{}'; create it with `gpugeek secret set {}` (gpugeek secrets lists "
          "yours)",
          var, tenant, name, name));
    }
    if (!v.ok()) return v.status();
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::controlplane
