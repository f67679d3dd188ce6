#include "data/version_transfer.h"

#include <optional>
#include <set>

#include <fmt/format.h>

#include "archive/digest.h"
#include "common/status_macros.h"

namespace gpugeek::data {
namespace {

bool IsDigest(std::string_view d) {
  return d.size() == 64 && d.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

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

// FailedPrecondition unless the store holds `digest` (of `bytes` bytes when given).
absl::Status NeedChild(const VersionStore& store, const std::string& what, const std::string& digest,
                       std::optional<uint64_t> bytes) {
  absl::StatusOr<uint64_t> size = store.objects().Size(digest);
  if (!size.ok()) {
    return absl::FailedPreconditionError(
        fmt::format("{} {} is not in the store: send an object's children before it", what, digest.substr(0, 64)));
  }
  if (bytes.has_value() && *size != *bytes) {
    return absl::FailedPreconditionError(
        fmt::format("{} {} has {} bytes in the store, the tree says {}", what, digest.substr(0, 64), *size, *bytes));
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
  if (!IsDigest(digest)) {
    return absl::InvalidArgumentError(
        fmt::format("object digest '{}' must be a SHA-256, 64 lower-case hex digits", digest.substr(0, 80)));
  }
  if (archive::Sha256Hex(bytes) != digest) {
    return absl::InvalidArgumentError(
        fmt::format("the {} bytes sent do not hash to {} (SHA-256): nothing stored", bytes.size(), digest));
  }
  if (kind == ObjectKind::kTree) {
    absl::StatusOr<Tree> tree = DecodeTree(bytes);
    if (!tree.ok())
      return absl::InvalidArgumentError(
          fmt::format("tree {}: {}", digest.substr(0, 12), std::string(tree.status().message())));
    for (const TreeEntry& e : tree->entries) {
      if (e.is_dir) {
        RETURN_IF_ERROR(NeedChild(store, fmt::format("sub-folder '{}': tree", e.name), e.tree, std::nullopt));
        continue;
      }
      for (const ChunkRef& c : e.chunks) {
        RETURN_IF_ERROR(NeedChild(store, fmt::format("file '{}': chunk", e.name), c.digest, c.bytes));
      }
    }
  } else if (kind == ObjectKind::kCommit) {
    absl::StatusOr<Commit> commit = DecodeCommit(bytes);
    if (!commit.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("commit {}: {}", digest.substr(0, 12), std::string(commit.status().message())));
    }
    RETURN_IF_ERROR(ValidateRefName(commit->dataset, "dataset"));
    RETURN_IF_ERROR(NeedChild(store, "the commit's tree", commit->tree, std::nullopt));
    for (const std::string& p : commit->parents) {
      RETURN_IF_ERROR(NeedChild(store, "parent commit", p, std::nullopt));
      ASSIGN_OR_RETURN(const Commit parent, store.ReadCommit(p));
      if (parent.dataset != commit->dataset) {
        return absl::InvalidArgumentError(fmt::format("parent commit {} is of dataset '{}', this commit of '{}'",
                                                      p.substr(0, 12), parent.dataset, commit->dataset));
      }
    }
  }
  ASSIGN_OR_RETURN(ObjectStore::PutResult put, store.objects().PutWithDigest(digest, bytes));
  return put.stored_new;
}

}  // namespace gpugeek::data
