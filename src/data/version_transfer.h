#pragma once
// Moving a version between two stores (a client's and the server's, the server's and a node's): which
// objects a version is made of, and how a store takes an object it did not make itself.
//
// The receiving store keeps one invariant: it accepts a tree only when it holds everything the tree
// reaches, and a commit only when it holds its tree and its parents. AcceptObject checks the children
// of each tree and commit before storing it, so objects must arrive children first (the order
// ListVersionObjects gives), and a branch may then point at any commit the store accepted without
// walking it. The kind is the sender's word, so the store records what it accepted as a tree or commit
// (<root>/accepted/<digest>: "tree FILES BYTES MAX_PATH_BYTES" or "commit"): a tree's bytes sent as a
// "chunk" skip the checks but are never taken for a tree, and a tree's totals are read from its marker
// instead of decoding it again.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "data/version_store.h"

namespace gpugeek::data {

enum class ObjectKind { kChunk, kTree, kCommit };
std::string_view ObjectKindName(ObjectKind kind);  // "chunk", "tree", "commit"
// InvalidArgument naming the three kinds for anything else.
absl::StatusOr<ObjectKind> ParseObjectKind(std::string_view name);

// Longest path a version may hold, in bytes ('/'-separated, relative): Linux's PATH_MAX less the NUL.
inline constexpr uint64_t kMaxPathBytes = 4095;

// What the store knows of an accepted tree: the files and bytes below it and its longest path.
struct AcceptedTree {
  uint64_t files = 0;
  uint64_t bytes = 0;
  uint64_t max_path_bytes = 0;
};

struct VersionObject {
  std::string digest;
  ObjectKind kind = ObjectKind::kChunk;
  uint64_t bytes = 0;  // a chunk's size; 0 for trees and the commit (their size is known once read)
};

// Every object version `commit` is made of, each once: its chunks (in file order), then its trees
// bottom-up (a folder's tree after all of its sub-folders'), the commit last. Not its parent commits.
// Errors: those of reading the commit and trees from `store` (NotFound, DataLoss), DataLoss past
// kMaxTreeDepth.
absl::StatusOr<std::vector<VersionObject>> ListVersionObjects(const VersionStore& store, const std::string& commit);

// Stores `bytes` as object `digest` of `kind` in `store`, from a sender that is not trusted: the bytes
// must hash to `digest` (SHA-256); a tree or commit must decode (version_objects.h); a tree's chunks and
// sub-trees must be in the store already (sub-trees, the commit's tree and its parents accepted as
// their kind), each chunk with the size the tree gives it and each sub-tree with the files and bytes the
// tree gives it; a commit's tree must hold the files and bytes the commit says (so a commit's totals are
// the version's true size, even for a tree that names one sub-tree many times); totals may not pass 2^64
// and no path may be longer than kMaxPathBytes. Returns whether the object is new. Errors: InvalidArgument for a
// bad digest, bytes that do not hash to it, or an object that does not decode; FailedPrecondition naming
// the first missing or mismatched child (send children first); the store's I/O errors.
absl::StatusOr<bool> AcceptObject(VersionStore& store, ObjectKind kind, const std::string& digest,
                                  std::string_view bytes);

// Whether `store` holds `digest` as accepted `kind`: a chunk is any object it holds; a tree or commit
// one AcceptObject took as that kind.
bool IsAccepted(const VersionStore& store, ObjectKind kind, const std::string& digest);

}  // namespace gpugeek::data
