#pragma once
// DatasetStores: the tenants' dataset versions on the server (data/version_store.h), one store per
// tenant under <data_dir>/datasets/<tenant>.
//
// One store per tenant rather than one shared: chunks are deduplicated within a tenant only, so no
// tenant can learn whether another holds some bytes by asking which objects are missing (the
// confirmation-of-a-file attack on shared deduplicating stores), and a tenant's object is never served
// to anyone else whatever digest they name. Objects arrive from clients through
// data::AcceptObject (children first, every byte hashed), so a commit the store holds is a whole version
// and a branch may point at it at once.
//
// Nodes read a version's objects while one of their members needs it: NodeMayRead answers whether
// `digest` is part of version `commit`, from the version's object list, computed once per commit and
// kept for the most recent kClosureCacheSize commits.
//
// Thread-safe; the stores themselves are safe across threads and processes (data/version_store.h).

#include <array>
#include <atomic>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "data/version_store.h"
#include "data/version_transfer.h"

namespace gpugeek::controlplane {

struct DatasetStoreOptions {
  std::string dir;  // required: <data_dir>/datasets
  // Bytes of objects one tenant may hold (`--max-dataset-bytes`); an upload past it is ResourceExhausted.
  uint64_t max_tenant_bytes = uint64_t{1} << 40;
  // What the limit is called in messages: the server flag that sets it.
  std::string limit_flag = "--max-dataset-bytes";
  std::string noun = "datasets";  // in that message: "tenant T holds N bytes of datasets"
  // The largest version a commit may describe (its files and bytes, which AcceptObject checks against its
  // trees): bounds what a diff, a node's checkout and a version's object list cost, whatever the objects
  // (a tree naming one sub-tree twice, nested 40 deep, would describe 2^40 files).
  uint64_t max_version_files = 10'000'000;
  uint64_t max_version_bytes = uint64_t{16} << 40;
};

class DatasetStores {
 public:
  static constexpr size_t kClosureCacheSize = 16;

  // Creates `dir` (0700). InvalidArgument without a dir; Unavailable when it cannot be made.
  static absl::StatusOr<std::unique_ptr<DatasetStores>> Open(const DatasetStoreOptions& options, const Clock& clock);

  // The store of `tenant` ("" = the default tenant), opened (and created) on first use.
  absl::StatusOr<data::VersionStore*> For(const std::string& tenant);

  // data::AcceptObject into the tenant's store, within max_tenant_bytes (ResourceExhausted naming the
  // limit and the flag). Returns whether the object is new.
  absl::StatusOr<bool> Accept(const std::string& tenant, data::ObjectKind kind, const std::string& digest,
                              std::string_view bytes);

  // Whether `digest` is one of the objects of version `commit` of the tenant's store (the commit itself,
  // its trees and chunks). NotFound when the tenant has no such commit.
  absl::StatusOr<bool> VersionHas(const std::string& tenant, const std::string& commit, const std::string& digest);

  // Bytes of objects the tenant holds (counted at first use, then kept up to date by Accept).
  absl::StatusOr<uint64_t> TenantBytes(const std::string& tenant);
  const DatasetStoreOptions& options() const { return options_; }

 private:
  struct TenantStore {
    std::unique_ptr<data::VersionStore> store;
    std::atomic<uint64_t> bytes{0};
  };
  DatasetStores(DatasetStoreOptions options, const Clock& clock) : options_(std::move(options)), clock_(clock) {}
  absl::StatusOr<std::shared_ptr<TenantStore>> Tenant(const std::string& tenant);

  const DatasetStoreOptions options_;
  const Clock& clock_;
  mutable Mutex mu_;
  // Opening a store counts its bytes (a walk of its objects): done once, outside mu_, by the first caller.
  std::map<std::string, std::shared_ptr<TenantStore>> stores_ ABSL_GUARDED_BY(mu_);
  // (tenant, commit) -> the version's object digests, most recently used first.
  // A version's digests, binary and sorted: 32 bytes each (320 MB for the largest version allowed).
  using Digests = std::vector<std::array<uint8_t, 32>>;
  std::list<std::pair<std::string, std::shared_ptr<const Digests>>> closures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpugeek::controlplane
