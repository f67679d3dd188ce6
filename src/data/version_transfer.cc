#include "data/version_transfer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "archive/digest.h"
#include "common/status_macros.h"

namespace gpugeek::data {
namespace {

// Appends the chunks and trees below `tree` (children first), skipping what `seen` holds.
absl::Status Collect(const VersionStore& store, const std::string& tree, int depth, std::set<std::string>& seen,
                     std::vector<VersionObject>& out) {
  if (depth > kMaxTreeDepth) {
    return absl::DataLossError(
        fmt::format("tree {} is nested deeper than {} folders", tree.substr(0, 12), kMaxTreeDepth));
  }
  ASSIGN_OR_RETURN(const Tree t, store.ReadTree(tree));
  for (const TreeEntry& e : t.entries) {
    if (e.is_dir) {
      if (!seen.contains(e.tree)) RETURN_IF_ERROR(Collect(store, e.tree, depth + 1, seen, out));
      continue;
    }
    for (const ChunkRef& c : e.chunks) {
      if (seen.insert(c.digest).second) out.push_back({c.digest, ObjectKind::kChunk, c.bytes});
    }
  }
  if (seen.insert(tree).second) out.push_back({tree, ObjectKind::kTree, 0});
  return absl::OkStatus();
}

// FailedPrecondition unless the store holds chunk `digest` of `bytes` bytes.
absl::Status NeedChunk(const VersionStore& store, const std::string& what, const std::string& digest, uint64_t bytes) {
  absl::StatusOr<uint64_t> size = store.objects().Size(digest);
  if (!size.ok()) {
    return absl::FailedPreconditionError(
        fmt::format("{} {} is not in the store: send an object's children before it", what, digest.substr(0, 64)));
  }
  if (*size != bytes) {
    return absl::FailedPreconditionError(
        fmt::format("{} {} has {} bytes in the store, the tree says {}", what, digest.substr(0, 64), *size, bytes));
  }
  return absl::OkStatus();
}

std::string MarkerPath(const VersionStore& store, const std::string& digest) {
  return store.root() + "/accepted/" + digest;
}

// The store's marker of an accepted tree or commit.
struct Marker {
  ObjectKind kind = ObjectKind::kChunk;
  AcceptedTree tree;
};

// NotFound when the store lacks the object or never accepted it as a tree or commit, whatever its bytes.
absl::StatusOr<Marker> ReadMarker(const VersionStore& store, const std::string& digest) {
  if (!store.objects().Has(digest)) return absl::NotFoundError("absent");
  std::ifstream in(MarkerPath(store, digest));
  std::string kind;
  Marker m;
  if (!(in >> kind)) return absl::NotFoundError("no marker");
  if (kind == "commit") {
    m.kind = ObjectKind::kCommit;
    return m;
  }
  if (kind != "tree" || !(in >> m.tree.files >> m.tree.bytes >> m.tree.max_path_bytes)) {
    return absl::NotFoundError("no marker");
  }
  m.kind = ObjectKind::kTree;
  return m;
}

// FailedPrecondition unless `digest` was accepted as a `kind` (tree or commit): its marker.
absl::StatusOr<Marker> NeedAccepted(const VersionStore& store, const std::string& what, const std::string& digest,
                                    ObjectKind kind) {
  absl::StatusOr<Marker> m = ReadMarker(store, digest);
  if (!m.ok() || m->kind != kind) {
    return absl::FailedPreconditionError(
        fmt::format("{} {} is not in the store as a {}: send an object's children before it, each as its kind", what,
                    digest.substr(0, 64), ObjectKindName(kind)));
  }
  return *m;
}

// Writes the marker before the object itself, so an accepted object always has one; a marker without
// its object (a crash between the two) is ignored, and the sender sends the object again.
absl::Status WriteMarker(const VersionStore& store, const std::string& digest, const std::string& text) {
  std::error_code ec;
  std::filesystem::create_directories(store.root() + "/accepted", ec);
  const std::string path = MarkerPath(store, digest);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) return absl::InternalError(fmt::format("cannot write {}", tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(fmt::format("cannot rename {}: {}", tmp, std::strerror(errno)));
  }
  return absl::OkStatus();
}

// InvalidArgument unless `files` and `bytes` (what a folder entry or a commit says of a tree) are the
// tree's own totals, so a version's size is what its commit says, however often a sub-tree repeats.
absl::Status CheckTotals(const std::string& what, const std::string& digest, const AcceptedTree& tree, uint64_t files,
                         uint64_t bytes) {
  if (tree.files != files || tree.bytes != bytes) {
    return absl::InvalidArgumentError(
        fmt::format("{} says {} files of {} bytes; its tree {} holds {} files of {} bytes", what, files, bytes,
                    digest.substr(0, 12), tree.files, tree.bytes));
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view ObjectKindName(ObjectKind kind) {
  switch (kind) {
    case ObjectKind::kChunk:
      return "chunk";
    case ObjectKind::kTree:
      return "tree";
    case ObjectKind::kCommit:
      return "commit";
  }
  return "chunk";
}

absl::StatusOr<ObjectKind> ParseObjectKind(std::string_view name) {
  for (ObjectKind k : {ObjectKind::kChunk, ObjectKind::kTree, ObjectKind::kCommit}) {
    if (name == ObjectKindName(k)) return k;
  }
  return absl::InvalidArgumentError(
      fmt::format("object kind '{}' is not one of chunk, tree, commit", name.substr(0, 40)));
}

absl::StatusOr<std::vector<VersionObject>> ListVersionObjects(const VersionStore& store, const std::string& commit) {
  ASSIGN_OR_RETURN(const Commit c, store.ReadCommit(commit));
  std::vector<VersionObject> out;
  std::set<std::string> seen;
  RETURN_IF_ERROR(Collect(store, c.tree, 0, seen, out));
  out.push_back({commit, ObjectKind::kCommit, 0});
  return out;
}

absl::StatusOr<bool> AcceptObject(VersionStore& store, ObjectKind kind, const std::string& digest,
                                  std::string_view bytes) {
  if (!archive::IsSha256Hex(digest)) {
    return absl::InvalidArgumentError(
        fmt::format("object digest '{}' must be a SHA-256, 64 lower-case hex digits", digest.substr(0, 80)));
  }
  if (archive::Sha256Hex(bytes) != digest) {
    return absl::InvalidArgumentError(
        fmt::format("the {} bytes sent do not hash to {} (SHA-256): nothing stored", bytes.size(), digest));
  }
  std::string marker;
  if (kind == ObjectKind::kTree) {
    absl::StatusOr<Tree> tree = DecodeTree(bytes);
    if (!tree.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("tree {}: {}", digest.substr(0, 12), std::string(tree.status().message())));
    }
    AcceptedTree totals;
    for (const TreeEntry& e : tree->entries) {
      uint64_t path = e.name.size();
      if (e.is_dir) {
        ASSIGN_OR_RETURN(const Marker child,
                         NeedAccepted(store, fmt::format("sub-folder '{}': tree", e.name), e.tree, ObjectKind::kTree));
        RETURN_IF_ERROR(CheckTotals(fmt::format("sub-folder '{}'", e.name), e.tree, child.tree, e.files, e.bytes));
        path += 1 + child.tree.max_path_bytes;
      } else {
        for (const ChunkRef& c : e.chunks) {
          RETURN_IF_ERROR(NeedChunk(store, fmt::format("file '{}': chunk", e.name), c.digest, c.bytes));
        }
      }
      if (__builtin_add_overflow(totals.files, e.is_dir ? e.files : 1, &totals.files) ||
          __builtin_add_overflow(totals.bytes, e.bytes, &totals.bytes)) {
        return absl::InvalidArgumentError(fmt::format(
            "tree {}: its files or bytes add up past 2^64; no version is that large", digest.substr(0, 12)));
      }
      totals.max_path_bytes = std::max(totals.max_path_bytes, path);
    }
    if (totals.max_path_bytes > kMaxPathBytes) {
      return absl::InvalidArgumentError(
          fmt::format("tree {}: a path below it is {} bytes long, longer than a file system path may be ({})",
                      digest.substr(0, 12), totals.max_path_bytes, kMaxPathBytes));
    }
    marker = fmt::format("tree {} {} {}\n", totals.files, totals.bytes, totals.max_path_bytes);
  } else if (kind == ObjectKind::kCommit) {
    absl::StatusOr<Commit> commit = DecodeCommit(bytes);
    if (!commit.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("commit {}: {}", digest.substr(0, 12), std::string(commit.status().message())));
    }
    RETURN_IF_ERROR(ValidateRefName(commit->dataset, "dataset"));
    ASSIGN_OR_RETURN(const Marker tree, NeedAccepted(store, "the commit's tree", commit->tree, ObjectKind::kTree));
    RETURN_IF_ERROR(CheckTotals("the commit", commit->tree, tree.tree, commit->files, commit->bytes));
    for (const std::string& p : commit->parents) {
      RETURN_IF_ERROR(NeedAccepted(store, "parent commit", p, ObjectKind::kCommit).status());
      ASSIGN_OR_RETURN(const Commit parent, store.ReadCommit(p));
      if (parent.dataset != commit->dataset) {
        return absl::InvalidArgumentError(fmt::format("parent commit {} is of dataset '{}', this commit of '{}'",
                                                      p.substr(0, 12), parent.dataset, commit->dataset));
      }
    }
    marker = "commit\n";
  }
  if (!marker.empty()) {
    RETURN_IF_ERROR(WriteMarker(store, digest, marker));
  } else {
    // Sent as a chunk: whatever marker an earlier copy left (one garbage collection removed with its
    // children) no longer vouches for these bytes.
    (void)::unlink(MarkerPath(store, digest).c_str());
  }
  ASSIGN_OR_RETURN(ObjectStore::PutResult put, store.objects().PutWithDigest(digest, bytes));
  return put.stored_new;
}

bool IsAccepted(const VersionStore& store, ObjectKind kind, const std::string& digest) {
  if (kind == ObjectKind::kChunk) return store.objects().Has(digest);
  absl::StatusOr<Marker> m = ReadMarker(store, digest);
  return m.ok() && m->kind == kind;
}

}  // namespace gpugeek::data
