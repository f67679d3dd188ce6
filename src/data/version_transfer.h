#pragma once
// Moving a version between two stores (a client's and the server's, the server's and a node's): which
// objects a version is made of, and how a store takes an object it did not make itself.
//
// The receiving store keeps one invariant: it holds a tree only when it holds everything the tree
// reaches, and a commit only when it holds its tree and its parents. AcceptObject checks the children
// of each tree and commit before storing it, so objects must arrive children first (the order
// ListVersionObjects gives), and a branch may then point at any commit the store holds without walking
// it: the commit's presence proves the version is whole.

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
// sub-trees must be in the store already, each chunk with the size the tree gives it; a commit's tree
// and parents must be in the store. Returns whether the object is new. Errors: InvalidArgument for a
// bad digest, bytes that do not hash to it, or an object that does not decode; FailedPrecondition naming
// the first missing or mismatched child (send children first); the store's I/O errors.
absl::StatusOr<bool> AcceptObject(VersionStore& store, ObjectKind kind, const std::string& digest,
                                  std::string_view bytes);

}  // namespace gpugeek::data
