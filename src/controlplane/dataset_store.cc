#include "controlplane/dataset_store.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "archive/digest.h"
#include "common/status_macros.h"
#include "controlplane/secrets.h"
#include "crypto/aead.h"

namespace gpugeek::controlplane {
namespace {

// 64 lower-case hex digits (checked by the caller) as their 32 bytes.
std::array<uint8_t, 32> Binary(const std::string& hex) {
  std::array<uint8_t, 32> out{};
  absl::StatusOr<std::string> raw = crypto::HexDecode(hex);
  if (raw.ok() && raw->size() == out.size()) std::memcpy(out.data(), raw->data(), out.size());
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DatasetStores>> DatasetStores::Open(const DatasetStoreOptions& options,
                                                                   const Clock& clock) {
  if (options.dir.empty()) return absl::InvalidArgumentError("dataset stores: dir is required");
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) return absl::UnavailableError(fmt::format("dataset stores: cannot create {}: {}", options.dir, ec.message()));
  std::filesystem::permissions(options.dir, std::filesystem::perms::owner_all, ec);
  return std::unique_ptr<DatasetStores>(new DatasetStores(options, clock));
}

absl::StatusOr<std::shared_ptr<DatasetStores::TenantStore>> DatasetStores::Tenant(const std::string& tenant) {
  const std::string name = SecretTenant(tenant);  // validated names: safe as a folder name
  {
    MutexLock lock(&mu_);
    auto it = stores_.find(name);
    if (it != stores_.end()) return it->second;
  }
  auto opened = std::make_shared<TenantStore>();
  ASSIGN_OR_RETURN(opened->store, data::VersionStore::Open(options_.dir + "/" + name, clock_));
  uint64_t bytes = 0;
  RETURN_IF_ERROR(opened->store->objects().ForEach([&](const std::string&, uint64_t n) { bytes += n; }));
  opened->bytes = bytes;
  MutexLock lock(&mu_);
  auto [it, inserted] = stores_.emplace(name, std::move(opened));
  return it->second;
}

absl::StatusOr<data::VersionStore*> DatasetStores::For(const std::string& tenant) {
  ASSIGN_OR_RETURN(std::shared_ptr<TenantStore> t, Tenant(tenant));
  return t->store.get();  // stores are never closed while the server runs
}

absl::StatusOr<uint64_t> DatasetStores::TenantBytes(const std::string& tenant) {
  ASSIGN_OR_RETURN(std::shared_ptr<TenantStore> t, Tenant(tenant));
  return t->bytes.load();
}

absl::StatusOr<bool> DatasetStores::Accept(const std::string& tenant, data::ObjectKind kind, const std::string& digest,
                                           std::string_view bytes) {
  ASSIGN_OR_RETURN(std::shared_ptr<TenantStore> t, Tenant(tenant));
  // The bytes are reserved before the object is stored and given back unless it was new, so concurrent
  // uploads cannot pass the limit together.
  const uint64_t held = t->bytes.fetch_add(bytes.size()) + bytes.size();
  if (!t->store->objects().Has(digest) && held > options_.max_tenant_bytes) {
    t->bytes -= bytes.size();
    return absl::ResourceExhaustedError(
        fmt::format("tenant '{}' holds {} bytes of {}; {} more would pass this server's limit of {} "
                    "({}): delete branches you no longer need and ask the operator to collect "
                    "garbage, or to raise the limit",
                    SecretTenant(tenant), held - bytes.size(), options_.noun, bytes.size(), options_.max_tenant_bytes,
                    options_.limit_flag));
  }
  if (kind == data::ObjectKind::kCommit) {
    absl::StatusOr<data::Commit> commit = data::DecodeCommit(bytes);
    if (commit.ok() && (commit->files > options_.max_version_files || commit->bytes > options_.max_version_bytes)) {
      t->bytes -= bytes.size();
      return absl::InvalidArgumentError(fmt::format(
          "commit {}: a version of {} files and {} bytes is larger than this server takes ({} files, "
          "{} bytes); split the dataset",
          digest.substr(0, 12), commit->files, commit->bytes, options_.max_version_files, options_.max_version_bytes));
    }
  }
  absl::StatusOr<bool> stored_new = data::AcceptObject(*t->store, kind, digest, bytes);
  if (!stored_new.ok() || !*stored_new) t->bytes -= bytes.size();
  return stored_new;
}

absl::StatusOr<bool> DatasetStores::VersionHas(const std::string& tenant, const std::string& commit,
                                               const std::string& digest) {
  const std::string key = SecretTenant(tenant) + "/" + commit;
  std::shared_ptr<const Digests> closure;
  {
    MutexLock lock(&mu_);
    for (auto it = closures_.begin(); it != closures_.end(); ++it) {
      if (it->first != key) continue;
      closures_.splice(closures_.begin(), closures_, it);  // most recently used first
      closure = closures_.front().second;
      break;
    }
  }
  if (closure == nullptr) {
    ASSIGN_OR_RETURN(data::VersionStore * store, For(tenant));
    ASSIGN_OR_RETURN(std::vector<data::VersionObject> objects, data::ListVersionObjects(*store, commit));
    auto digests = std::make_shared<Digests>();
    digests->reserve(objects.size());
    for (const data::VersionObject& o : objects) digests->push_back(Binary(o.digest));
    std::sort(digests->begin(), digests->end());
    closure = digests;
    MutexLock lock(&mu_);
    closures_.emplace_front(key, closure);
    if (closures_.size() > kClosureCacheSize) closures_.pop_back();
  }
  if (!archive::IsSha256Hex(digest)) return false;
  return std::binary_search(closure->begin(), closure->end(), Binary(digest));
}

}  // namespace gpugeek::controlplane
