#include "controlplane/dataset_store.h"

#include <filesystem>

#include <fmt/format.h>

#include "common/status_macros.h"
#include "controlplane/secrets.h"

namespace gpugeek::controlplane {

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
  if (!t->store->objects().Has(digest) && t->bytes.load() + bytes.size() > options_.max_tenant_bytes) {
    return absl::ResourceExhaustedError(
        fmt::format("tenant '{}' holds {} bytes of datasets; {} more would pass this server's limit of {} "
                    "(--max-dataset-bytes): delete branches and collect garbage, or ask the operator",
                    SecretTenant(tenant), t->bytes.load(), bytes.size(), options_.max_tenant_bytes));
  }
  ASSIGN_OR_RETURN(bool stored_new, data::AcceptObject(*t->store, kind, digest, bytes));
  if (stored_new) t->bytes += bytes.size();
  return stored_new;
}

absl::StatusOr<bool> DatasetStores::VersionHas(const std::string& tenant, const std::string& commit,
                                               const std::string& digest) {
  const std::string key = SecretTenant(tenant) + "/" + commit;
  std::shared_ptr<const std::set<std::string>> closure;
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
    auto digests = std::make_shared<std::set<std::string>>();
    for (data::VersionObject& o : objects) digests->insert(std::move(o.digest));
    closure = digests;
    MutexLock lock(&mu_);
    closures_.emplace_front(key, closure);
    if (closures_.size() > kClosureCacheSize) closures_.pop_back();
  }
  return closure->contains(digest);
}

}  // namespace gpugeek::controlplane
