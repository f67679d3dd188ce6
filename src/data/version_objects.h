#pragma once
// The objects a dataset version is made of, and their bytes in the object store (object_store.h). As in
// git, a version is a commit naming the tree of its top folder; a tree lists one folder's entries, each a
// file (its size and chunks, chunker.h) or a sub-folder (the digest of its own tree). An edit in one
// folder therefore writes new trees only along its path to the top, and unchanged sub-folders keep their
// digest, which lets diff skip them whole.
//
// Encoding: compact JSON with object keys sorted and entries sorted by name (byte order), so equal
// content always gives equal bytes and so equal digests:
//   tree:   {"entries":[{"bytes":N,"chunks":[["<sha256>",N],...],"executable":false,"name":"a.txt"},
//                       {"bytes":N,"files":F,"name":"sub","tree":"<sha256>"}],"type":"tree"}
//   commit: {"author":"..","bytes":N,"dataset":"..","files":F,"message":"..","parents":["<sha256>"],
//            "time":UNIX_SECONDS,"tree":"<sha256>","type":"commit"}

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpugeek::data {

struct ChunkRef {
  std::string digest;  // SHA-256 of the chunk's bytes, 64 hex digits
  uint64_t bytes = 0;

  bool operator==(const ChunkRef&) const = default;
};

struct TreeEntry {
  std::string name;  // one path component: UTF-8, 1..255 bytes, no '/', NUL, "." or ".."
  bool is_dir = false;
  uint64_t bytes = 0;  // a file's size; a folder's total over every file below it
  // File only:
  bool executable = false;
  std::vector<ChunkRef> chunks;  // in file order; their sizes add up to `bytes`
  // Folder only:
  std::string tree;    // digest of the folder's tree object
  uint64_t files = 0;  // regular files below it, at any depth

  bool operator==(const TreeEntry&) const = default;
};

struct Tree {
  std::vector<TreeEntry> entries;  // sorted by name, names distinct
};

struct Commit {
  std::string tree;                  // digest of the top folder's tree
  std::vector<std::string> parents;  // digests of parent commits; empty for a dataset's first
  std::string dataset;
  std::string message;
  std::string author;
  int64_t time_unix_s = 0;  // wall time of the commit, seconds since the Unix epoch
  uint64_t files = 0;       // regular files in the version
  uint64_t bytes = 0;       // their total size
};

// Largest tree and commit objects Decode accepts (a folder of ~1 million files; a 1 MiB message).
inline constexpr uint64_t kMaxTreeBytes = uint64_t{256} << 20;
inline constexpr uint64_t kMaxCommitBytes = uint64_t{2} << 20;
// Deepest folder nesting a version may have: a Linux path holds at most 4096 bytes, so at most 2048
// components. Walks of deeper trees (only a hand-made store has them) stop with DataLoss.
inline constexpr int kMaxTreeDepth = 2048;

std::string EncodeTree(const Tree& tree);
std::string EncodeCommit(const Commit& commit);

// Decode the bytes of a tree / commit object. InvalidArgument naming the field and what is wrong when the
// bytes are not such an object (another kind of object, bad JSON, a bad name or digest, entries out of
// order, chunk sizes that do not add up, ...). Never throws.
absl::StatusOr<Tree> DecodeTree(std::string_view bytes);
absl::StatusOr<Commit> DecodeCommit(std::string_view bytes);

// Whether `name` can be a tree entry's name (see TreeEntry::name).
bool IsValidEntryName(std::string_view name);
// Dataset, branch and tag names: 1..64 of [A-Za-z0-9._-], not starting with '.' or '-', and not the name of
// an interrupted write (IsInterruptedWrite). InvalidArgument naming `what` ("dataset", "branch", "tag") and
// the rule otherwise.
absl::Status ValidateRefName(std::string_view name, std::string_view what);
// Whether `file_name` is what a writer killed mid-write leaves beside a ref ("main.tmp.<16 hex digits>",
// crypto/durable_file.h): never a ref, skipped when refs are listed.
bool IsInterruptedWrite(std::string_view file_name);

}  // namespace gpugeek::data
