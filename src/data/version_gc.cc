#include "data/version_gc.h"

#include <unordered_map>

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
        if (!ref.error.empty()) {
          missing->push_back(
              fmt::format("{}: unreadable ref ({}); fix or delete the file under refs/{}", where_, ref.error, dataset));
          continue;
        }
        if (absl::StatusOr<Commit> head = store_.ReadCommit(ref.commit); head.ok() && head->dataset != dataset) {
          missing->push_back(fmt::format("{}: names commit {} of dataset {:?}", where_, ref.commit, head->dataset));
        }
        MarkCommit(ref.commit, missing);
      }
    }
  }
  const std::unordered_map<std::string, char>& marked() const { return marked_; }

 private:
  // Whether `digest` is new; an object reached once as one kind and once as another is reported.
  bool Mark(const std::string& digest, char kind, std::vector<std::string>* missing) {
    auto [it, inserted] = marked_.emplace(digest, kind);
    if (!inserted && it->second != kind) {
      missing->push_back(fmt::format("{}: object {} is reached as a {} and as a {}", where_, digest, KindName(kind),
                                     KindName(it->second)));
    }
    return inserted;
  }
  static const char* KindName(char kind) { return kind == 'c' ? "commit" : kind == 't' ? "tree" : "chunk"; }

  void MarkCommit(std::string digest, std::vector<std::string>* missing) {
    std::vector<std::string> todo{std::move(digest)};
    while (!todo.empty()) {
      const std::string d = std::move(todo.back());
      todo.pop_back();
      if (!Mark(d, 'c', missing)) continue;
      absl::StatusOr<Commit> c = store_.ReadCommit(d);
      if (!c.ok()) {
        missing->push_back(fmt::format("{}: commit {} ({})", where_, d, std::string(c.status().message())));
        continue;
      }
      MarkTree(c->tree, 0, missing);
      for (const std::string& p : c->parents) todo.push_back(p);
    }
  }

  void MarkTree(const std::string& digest, int depth, std::vector<std::string>* missing) {
    if (!Mark(digest, 't', missing)) return;
    if (depth > kMaxTreeDepth) {
      missing->push_back(fmt::format("{}: tree {} is nested deeper than {} folders", where_, digest, kMaxTreeDepth));
      return;
    }
    absl::StatusOr<Tree> tree = store_.ReadTree(digest);
    if (!tree.ok()) {
      missing->push_back(fmt::format("{}: tree {} ({})", where_, digest, std::string(tree.status().message())));
      return;
    }
    for (const TreeEntry& e : tree->entries) {
      if (e.is_dir) {
        MarkTree(e.tree, depth + 1, missing);
        continue;
      }
      for (const ChunkRef& c : e.chunks) {
        if (Mark(c.digest, 'k', missing) && !store_.objects().Has(c.digest)) {
          missing->push_back(fmt::format("{}: chunk {}", where_, c.digest));
        }
      }
    }
  }

  const VersionStore& store_;
  std::unordered_map<std::string, char> marked_;  // digest -> 'c' commit, 't' tree, 'k' chunk
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
