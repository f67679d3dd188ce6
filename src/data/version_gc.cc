#include "data/version_gc.h"

#include <unordered_set>

#include <fmt/format.h>

#include "archive/digest.h"
#include "common/file.h"
#include "common/status_macros.h"

namespace gpugeek::data {
namespace {

// Marks everything reachable from the refs. A missing or undecodable object is reported through
// `missing` (with the ref that reaches it) and not followed.
class Marker {
 public:
  explicit Marker(const VersionStore& store) : store_(store) {}

  void MarkRefs(std::vector<std::string>* missing) {
    for (const std::string& dataset : store_.ListDatasets()) {
      absl::StatusOr<std::vector<Ref>> refs = store_.ListRefs(dataset);
      if (!refs.ok()) continue;
      for (const Ref& ref : *refs) {
        where_ = fmt::format("{} {}", dataset, ref.name);
        MarkCommit(ref.commit, missing);
      }
    }
  }
  const std::unordered_set<std::string>& marked() const { return marked_; }

 private:
  bool Mark(const std::string& digest) { return marked_.insert(digest).second; }

  void MarkCommit(std::string digest, std::vector<std::string>* missing) {
    std::vector<std::string> todo{std::move(digest)};
    while (!todo.empty()) {
      const std::string d = std::move(todo.back());
      todo.pop_back();
      if (!Mark(d)) continue;
      absl::StatusOr<Commit> c = store_.ReadCommit(d);
      if (!c.ok()) {
        missing->push_back(fmt::format("{}: commit {} ({})", where_, d, std::string(c.status().message())));
        continue;
      }
      MarkTree(c->tree, missing);
      for (const std::string& p : c->parents) todo.push_back(p);
    }
  }

  void MarkTree(const std::string& digest, std::vector<std::string>* missing) {
    if (!Mark(digest)) return;
    absl::StatusOr<Tree> tree = store_.ReadTree(digest);
    if (!tree.ok()) {
      missing->push_back(fmt::format("{}: tree {} ({})", where_, digest, std::string(tree.status().message())));
      return;
    }
    for (const TreeEntry& e : tree->entries) {
      if (e.is_dir) {
        MarkTree(e.tree, missing);
        continue;
      }
      for (const ChunkRef& c : e.chunks) {
        if (Mark(c.digest) && !store_.objects().Has(c.digest)) {
          missing->push_back(fmt::format("{}: chunk {}", where_, c.digest));
        }
      }
    }
  }

  const VersionStore& store_;
  std::unordered_set<std::string> marked_;
  std::string where_;
};

}  // namespace

absl::StatusOr<GcResult> GarbageCollect(VersionStore& store) {
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> lock, StoreLock::Acquire(store.LockPath(), StoreLock::Mode::kExclusive));
  Marker marker(store);
  std::vector<std::string> missing;
  marker.MarkRefs(&missing);
  if (!missing.empty()) {
    return absl::DataLossError(fmt::format(
        "not collecting garbage: {} object(s) that refs reach are missing or damaged, first {}; run `gpugeek data "
        "fsck`",
        missing.size(), missing.front()));
  }
  GcResult result;
  std::vector<std::pair<std::string, uint64_t>> garbage;
  RETURN_IF_ERROR(store.objects().ForEach([&](const std::string& digest, uint64_t bytes) {
    if (marker.marked().contains(digest)) {
      result.kept_objects += 1;
      result.kept_bytes += bytes;
    } else {
      garbage.emplace_back(digest, bytes);
    }
  }));
  for (const auto& [digest, bytes] : garbage) {
    RETURN_IF_ERROR(store.objects().Remove(digest));
    result.removed_objects += 1;
    result.removed_bytes += bytes;
  }
  result.temp_files_removed = store.objects().RemoveTempFiles();
  return result;
}

absl::StatusOr<FsckReport> Fsck(VersionStore& store) {
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> lock, StoreLock::Acquire(store.LockPath(), StoreLock::Mode::kShared));
  FsckReport report;
  std::vector<std::string> digests;
  RETURN_IF_ERROR(store.objects().ForEach([&](const std::string& digest, uint64_t bytes) {
    report.objects += 1;
    report.bytes += bytes;
    digests.push_back(digest);
  }));
  for (const std::string& digest : digests) {
    absl::StatusOr<std::string> hex = archive::Sha256OfFile(store.objects().PathOf(digest));
    if (hex.ok() && *hex != digest) report.damaged.push_back(digest);
  }
  std::sort(report.damaged.begin(), report.damaged.end());
  Marker marker(store);
  marker.MarkRefs(&report.missing);
  for (const std::string& digest : digests) {
    if (!marker.marked().contains(digest)) report.unreferenced_objects += 1;
  }
  return report;
}

}  // namespace gpugeek::data
