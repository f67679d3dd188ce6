#pragma once
// Garbage collection and checking of a version store (version_store.h).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/version_store.h"

namespace gpugeek::data {

struct GcResult {
  uint64_t kept_objects = 0, kept_bytes = 0;
  uint64_t removed_objects = 0, removed_bytes = 0;
  uint64_t temp_files_removed = 0;  // left by killed pushes
};

// Deletes every object no ref reaches (through commits and all their ancestors, trees and chunks) and
// every file a killed writer left in objects/tmp/. Holds the store's lock exclusive, so it waits for
// running pushes and checkouts and none starts meanwhile. Errors: DataLoss, deleting nothing, when a ref
// reaches an object that is missing or damaged (run Fsck); the errno text of I/O failures.
absl::StatusOr<GcResult> GarbageCollect(VersionStore& store);

struct FsckReport {
  uint64_t objects = 0, bytes = 0;
  uint64_t unreferenced_objects = 0;  // garbage: GarbageCollect would remove them
  std::vector<std::string> damaged;   // objects whose bytes do not hash to their name
  std::vector<std::string> missing;   // "<dataset> <ref>: <digest>" for objects refs reach but the store lacks
  bool ok() const { return damaged.empty() && missing.empty(); }
};

// Reads and hashes every object and walks every ref's history. Holds the store's lock shared.
absl::StatusOr<FsckReport> Fsck(VersionStore& store);

}  // namespace gpugeek::data
