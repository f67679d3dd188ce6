// Reading versions out of the store: files of a commit, diffs between commits, checkouts into folders
// (the rest of VersionStore is in version_store.cc).
#include "data/version_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <mutex>

#include <fmt/format.h>

#include "common/status_macros.h"
#include "crypto/durable_file.h"
#include "data/parallel.h"

namespace gpugeek::data {
namespace {

namespace fs = std::filesystem;

// A file to write: where, and its entry as trees[tree].entries[entry] (indices: `trees` grows meanwhile).
struct CheckoutFile {
  std::string path;
  size_t tree = 0;
  size_t entry = 0;
};

absl::Status TooDeep(const std::string& tree) {
  return absl::DataLossError(fmt::format(
      "tree {} is nested deeper than {} folders: the store is damaged (run `gpugeek data fsck`)", tree, kMaxTreeDepth));
}

absl::Status CollectCheckout(const VersionStore& store, const std::string& tree_digest, const fs::path& dir, int depth,
                             std::vector<Tree>& trees, std::vector<CheckoutFile>& files) {
  if (depth > kMaxTreeDepth) return TooDeep(tree_digest);
  ASSIGN_OR_RETURN(Tree tree, store.ReadTree(tree_digest));
  std::error_code ec;
  fs::create_directory(dir, ec);
  if (ec) return crypto::ErrnoStatus(ec.value(), "create", dir.string());
  trees.push_back(std::move(tree));
  const size_t index = trees.size() - 1;
  for (size_t i = 0; i < trees[index].entries.size(); ++i) {
    const TreeEntry& e = trees[index].entries[i];
    if (e.is_dir) {
      // `trees` may grow: copy what is needed before recursing.
      const std::string sub = e.tree;
      const fs::path child = dir / e.name;
      RETURN_IF_ERROR(CollectCheckout(store, sub, child, depth + 1, trees, files));
    } else {
      files.push_back({(dir / e.name).string(), index, i});
    }
  }
  return absl::OkStatus();
}

absl::Status WriteCheckoutFile(const ObjectStore& objects, const std::string& path, const TreeEntry& e) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, e.executable ? 0755 : 0644);
  if (fd < 0) return crypto::ErrnoStatus(errno, "create", path);
  absl::Status status;
  if (::fchmod(fd, e.executable ? 0755 : 0644) != 0) status = crypto::ErrnoStatus(errno, "chmod", path);
  for (const ChunkRef& c : e.chunks) {
    if (!status.ok()) break;
    absl::StatusOr<std::string> bytes = objects.Get(c.digest, c.bytes);
    if (!bytes.ok()) {
      status = bytes.status();
      break;
    }
    size_t done = 0;
    while (done < bytes->size() && status.ok()) {
      const ssize_t n = ::write(fd, bytes->data() + done, bytes->size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) status = crypto::ErrnoStatus(errno, "write", path);
      if (n > 0) done += static_cast<size_t>(n);
    }
  }
  if (::close(fd) != 0 && status.ok()) status = crypto::ErrnoStatus(errno, "close", path);
  return status;
}

// Appends every file under tree entry `e` (a file or a folder) at `path` as added or removed.
void DiffFilesUnder(const VersionStore& store, const TreeEntry& e, const std::string& path, bool added, int depth,
                    std::vector<DiffEntry>& out, absl::Status& status) {
  if (!status.ok()) return;
  if (depth > kMaxTreeDepth) {
    status = TooDeep(e.tree);
    return;
  }
  if (!e.is_dir) {
    DiffEntry d{path, added ? DiffEntry::Change::kAdded : DiffEntry::Change::kRemoved, added ? 0 : e.bytes,
                added ? e.bytes : 0};
    out.push_back(std::move(d));
    return;
  }
  absl::StatusOr<Tree> tree = store.ReadTree(e.tree);
  if (!tree.ok()) {
    status = tree.status();
    return;
  }
  for (const TreeEntry& child : tree->entries)
    DiffFilesUnder(store, child, path + "/" + child.name, added, depth + 1, out, status);
}

absl::Status DiffTrees(const VersionStore& store, const std::string& a, const std::string& b, const std::string& prefix,
                       int depth, std::vector<DiffEntry>& out) {
  if (a == b) return absl::OkStatus();
  if (depth > kMaxTreeDepth) return TooDeep(b);
  ASSIGN_OR_RETURN(Tree ta, store.ReadTree(a));
  ASSIGN_OR_RETURN(Tree tb, store.ReadTree(b));
  absl::Status status;
  auto ia = ta.entries.begin();
  auto ib = tb.entries.begin();
  auto join = [&](const std::string& name) { return prefix.empty() ? name : prefix + "/" + name; };
  while (status.ok() && (ia != ta.entries.end() || ib != tb.entries.end())) {
    if (ib == tb.entries.end() || (ia != ta.entries.end() && ia->name < ib->name)) {
      DiffFilesUnder(store, *ia, join(ia->name), /*added=*/false, depth + 1, out, status);
      ++ia;
    } else if (ia == ta.entries.end() || ib->name < ia->name) {
      DiffFilesUnder(store, *ib, join(ib->name), /*added=*/true, depth + 1, out, status);
      ++ib;
    } else {
      const std::string path = join(ia->name);
      if (ia->is_dir && ib->is_dir) {
        status = DiffTrees(store, ia->tree, ib->tree, path, depth + 1, out);
      } else if (ia->is_dir != ib->is_dir) {
        DiffFilesUnder(store, *ia, path, /*added=*/false, depth + 1, out, status);
        DiffFilesUnder(store, *ib, path, /*added=*/true, depth + 1, out, status);
      } else if (ia->chunks != ib->chunks || ia->executable != ib->executable) {
        out.push_back({path, DiffEntry::Change::kModified, ia->bytes, ib->bytes});
      }
      ++ia;
      ++ib;
    }
  }
  return status;
}

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, TreeEntry>>> VersionStore::ListFiles(
    const std::string& commit) const {
  ASSIGN_OR_RETURN(Commit c, ReadCommit(commit));
  std::vector<std::pair<std::string, TreeEntry>> files;
  // (tree digest, path prefix) still to list; depth-first, entries in name order.
  std::vector<std::pair<std::string, std::string>> todo{{c.tree, ""}};
  while (!todo.empty()) {
    auto [digest, prefix] = std::move(todo.back());
    todo.pop_back();
    if (std::count(prefix.begin(), prefix.end(), '/') > kMaxTreeDepth) return TooDeep(digest);
    ASSIGN_OR_RETURN(Tree tree, ReadTree(digest));
    for (TreeEntry& e : tree.entries) {
      std::string path = prefix + e.name;
      if (e.is_dir) {
        todo.emplace_back(e.tree, path + "/");
      } else {
        files.emplace_back(std::move(path), std::move(e));
      }
    }
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return files;
}

absl::StatusOr<std::string> VersionStore::ReadFile(const TreeEntry& file, uint64_t max_bytes) const {
  if (file.bytes > max_bytes) {
    return absl::InvalidArgumentError(
        fmt::format("{:?} holds {} bytes, over the limit of {}", file.name, file.bytes, max_bytes));
  }
  std::string bytes;
  bytes.reserve(file.bytes);
  for (const ChunkRef& c : file.chunks) {
    ASSIGN_OR_RETURN(std::string chunk, objects_->Get(c.digest, c.bytes));
    bytes += chunk;
  }
  return bytes;
}

absl::StatusOr<std::vector<DiffEntry>> VersionStore::Diff(const std::string& dataset, const std::string& from,
                                                          const std::string& to) const {
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> lock, StoreLock::Acquire(LockPath(), StoreLock::Mode::kShared));
  ASSIGN_OR_RETURN(std::string a, Resolve(dataset, from));
  ASSIGN_OR_RETURN(std::string b, Resolve(dataset, to));
  ASSIGN_OR_RETURN(Commit ca, ReadCommit(a));
  ASSIGN_OR_RETURN(Commit cb, ReadCommit(b));
  std::vector<DiffEntry> out;
  RETURN_IF_ERROR(DiffTrees(*this, ca.tree, cb.tree, "", 0, out));
  std::stable_sort(out.begin(), out.end(), [](const DiffEntry& x, const DiffEntry& y) { return x.path < y.path; });
  return out;
}

absl::StatusOr<CheckoutResult> VersionStore::Checkout(const std::string& dataset, const std::string& rev,
                                                      const std::string& dir, int threads) const {
  std::error_code ec;
  // "out/", "./out" and "out" name one folder; the partial folder goes beside it.
  fs::path target = fs::absolute(dir, ec).lexically_normal();
  if (!target.has_filename()) target = target.parent_path();
  if (fs::exists(target, ec)) {
    if (!fs::is_directory(target, ec) || !fs::is_empty(target, ec)) {
      return absl::FailedPreconditionError(
          fmt::format("{} exists and is not an empty folder; check out into a new folder", dir));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> lock, StoreLock::Acquire(LockPath(), StoreLock::Mode::kShared));
  ASSIGN_OR_RETURN(std::string digest, Resolve(dataset, rev));
  ASSIGN_OR_RETURN(Commit commit, ReadCommit(digest));
  const fs::path partial = target.parent_path() / fmt::format(".{}.partial-{}", target.filename().string(), ::getpid());
  fs::remove_all(partial, ec);
  std::vector<Tree> trees;
  std::vector<CheckoutFile> files;
  absl::Status status = CollectCheckout(*this, commit.tree, partial, 0, trees, files);
  if (status.ok()) {
    std::mutex mu;
    ParallelFor(files.size(), WorkerCount(threads, files.size()), 1, [&](size_t begin, size_t end, int) {
      for (size_t i = begin; i < end; ++i) {
        absl::Status s = WriteCheckoutFile(*objects_, files[i].path, trees[files[i].tree].entries[files[i].entry]);
        std::lock_guard<std::mutex> guard(mu);
        if (!s.ok() && status.ok()) status = s;
      }
    });
  }
  if (status.ok()) {
    fs::remove(target, ec);  // the empty folder, if any
    if (::rename(partial.c_str(), target.c_str()) != 0) status = crypto::ErrnoStatus(errno, "rename into", dir);
  }
  if (!status.ok()) {
    fs::remove_all(partial, ec);
    return status;
  }
  return CheckoutResult{digest, commit.files, commit.bytes};
}

}  // namespace gpugeek::data
