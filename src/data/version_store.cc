#include "data/version_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "archive/digest.h"
#include "common/file.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "crypto/durable_file.h"
#include "data/parallel.h"

namespace gpugeek::data {
namespace {

namespace fs = std::filesystem;

// A folder being pushed: its files (indices into the push's file list) and sub-folders, by name.
struct DirNode {
  std::map<std::string, size_t> files;
  std::map<std::string, DirNode> dirs;
};

struct SourceFile {
  std::string path;  // for reading and messages
  uint64_t stat_bytes = 0;
  bool executable = false;
  TreeEntry entry;  // filled by hashing
};

absl::Status WalkDir(const fs::path& dir, bool follow_links, DirNode& node, std::vector<SourceFile>& files) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return crypto::ErrnoStatus(ec.value(), "list", dir.string());
  for (fs::directory_iterator end; it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!IsValidEntryName(name)) {
      return absl::InvalidArgumentError(
          fmt::format("{}: file names must be UTF-8 and at most 255 bytes; rename it", it->path().string()));
    }
    fs::file_status st = it->symlink_status(ec);
    if (ec) return crypto::ErrnoStatus(ec.value(), "stat", it->path().string());
    if (follow_links && fs::is_symlink(st)) {
      const fs::file_status target = it->status(ec);
      if (!ec && fs::is_regular_file(target)) st = target;
    }
    if (fs::is_directory(st)) {
      RETURN_IF_ERROR(WalkDir(it->path(), follow_links, node.dirs[name], files));
    } else if (fs::is_regular_file(st)) {
      SourceFile f;
      f.path = it->path().string();
      f.stat_bytes = fs::file_size(it->path(), ec);  // of the target, for a followed link
      if (ec) return crypto::ErrnoStatus(ec.value(), "stat", f.path);
      f.executable = (st.permissions() & fs::perms::owner_exec) != fs::perms::none;
      node.files[name] = files.size();
      files.push_back(std::move(f));
    } else {
      return absl::InvalidArgumentError(
          fmt::format("{}: datasets hold regular files and folders only, and this is a {}; {}", it->path().string(),
                      fs::is_symlink(st) ? "symbolic link" : "special file",
                      !fs::is_symlink(st) ? "move it out of the folder"
                      : follow_links      ? "--follow-links follows links to regular files only (not to folders, "
                                            "dangling links or loops); replace it or move it out of the folder"
                                          : "push with --follow-links to store the file a link leads to, or move it "
                                            "out of the folder"));
    }
  }
  if (ec) return crypto::ErrnoStatus(ec.value(), "list", dir.string());
  return absl::OkStatus();
}

struct Counters {
  std::atomic<uint64_t> chunks{0}, new_objects{0}, new_bytes{0}, done_bytes{0};
};

absl::Status Store(ObjectStore& objects, std::string_view bytes, Counters& counters, std::string* digest) {
  ASSIGN_OR_RETURN(ObjectStore::PutResult put, objects.Put(bytes));
  if (put.stored_new) {
    counters.new_objects += 1;
    counters.new_bytes += bytes.size();
  }
  *digest = std::move(put.digest);
  return absl::OkStatus();
}

// Reads the file, cuts it into chunks and stores them; fills f.entry's chunks and size.
absl::Status HashFile(SourceFile& f, ObjectStore& objects, const ChunkerOptions& chunking, Counters& counters) {
  const int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return crypto::ErrnoStatus(errno, "open", f.path);
  // The buffer holds [begin, end) of unchunked bytes; it is refilled when fewer than max_bytes remain.
  // Sized for the file when it is small (most files in a dataset are): one read, no 8 MiB per file.
  const uint64_t full = std::max<size_t>(chunking.max_bytes * 2, size_t{8} << 20);
  std::string buf(static_cast<size_t>(std::min<uint64_t>(full, f.stat_bytes + 1)), '\0');
  size_t begin = 0, end = 0;
  bool eof = false;
  uint64_t total = 0;
  absl::Status status;
  while (status.ok()) {
    if (!eof && end - begin < chunking.max_bytes) {
      std::memmove(buf.data(), buf.data() + begin, end - begin);
      end -= begin;
      begin = 0;
      while (!eof && end < buf.size()) {
        const ssize_t n = ::read(fd, buf.data() + end, buf.size() - end);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          status = crypto::ErrnoStatus(errno, "read", f.path);
          break;
        }
        if (n == 0) eof = true;
        end += static_cast<size_t>(n);
      }
      if (!status.ok()) break;
    }
    if (begin == end) break;
    const std::string_view rest(buf.data() + begin, end - begin);
    const size_t len = NextChunkLength(rest, chunking);
    ChunkRef chunk{"", len};
    status = Store(objects, rest.substr(0, len), counters, &chunk.digest);
    f.entry.chunks.push_back(std::move(chunk));
    counters.chunks += 1;
    begin += len;
    total += len;
  }
  ::close(fd);
  RETURN_IF_ERROR(status);
  if (total != f.stat_bytes) {
    return absl::AbortedError(
        fmt::format("{} changed while it was read ({} bytes, then {}); push again once it is written", f.path,
                    f.stat_bytes, total));
  }
  f.entry.bytes = total;
  f.entry.executable = f.executable;
  counters.done_bytes += total;
  return absl::OkStatus();
}

// Stores the trees of `node` and below; returns the entry naming the folder's tree.
absl::StatusOr<TreeEntry> StoreTree(const DirNode& node, std::vector<SourceFile>& files, ObjectStore& objects,
                                    Counters& counters) {
  Tree tree;
  TreeEntry dir;
  dir.is_dir = true;
  // Files and folders merged in byte order of their names (a name is one or the other).
  auto f = node.files.begin();
  auto d = node.dirs.begin();
  while (f != node.files.end() || d != node.dirs.end()) {
    if (d == node.dirs.end() || (f != node.files.end() && f->first < d->first)) {
      TreeEntry e = files[f->second].entry;
      e.name = f->first;
      dir.bytes += e.bytes;
      dir.files += 1;
      tree.entries.push_back(std::move(e));
      ++f;
    } else {
      ASSIGN_OR_RETURN(TreeEntry e, StoreTree(d->second, files, objects, counters));
      e.name = d->first;
      dir.bytes += e.bytes;
      dir.files += e.files;
      tree.entries.push_back(std::move(e));
      ++d;
    }
  }
  RETURN_IF_ERROR(Store(objects, EncodeTree(tree), counters, &dir.tree));
  return dir;
}

// A new branch or tag name: valid, not hex-like (it would shadow commit digests), not taken by either kind.
absl::Status CheckNewRefName(const std::string& dataset, const std::string& name, Ref::Kind kind,
                             const std::function<bool(Ref::Kind)>& exists) {
  const char* what = kind == Ref::Kind::kBranch ? "branch" : "tag";
  RETURN_IF_ERROR(ValidateRefName(name, what));
  if (name.size() >= 6 && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
      })) {
    return absl::InvalidArgumentError(fmt::format(
        "{} name {:?} is all hex digits and would read as a commit digest; choose another name", what, name));
  }
  for (Ref::Kind k : {Ref::Kind::kBranch, Ref::Kind::kTag}) {
    if (exists(k)) {
      return absl::AlreadyExistsError(
          fmt::format("dataset {:?} already has a {} {:?}{}", dataset, k == Ref::Kind::kBranch ? "branch" : "tag", name,
                      k == Ref::Kind::kTag && kind == Ref::Kind::kTag ? "; tags never move (delete it first)" : ""));
    }
  }
  return absl::OkStatus();
}

std::string_view KindDir(Ref::Kind kind) { return kind == Ref::Kind::kBranch ? "branches" : "tags"; }

bool IsHexPrefix(std::string_view s) {
  return s.size() >= 6 && s.size() <= 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

absl::StatusOr<std::unique_ptr<StoreLock>> StoreLock::Acquire(const std::string& path, Mode mode) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return crypto::ErrnoStatus(errno, "open", path);
  int rc;
  do {
    rc = ::flock(fd, mode == Mode::kShared ? LOCK_SH : LOCK_EX);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    ::close(fd);
    return crypto::ErrnoStatus(err, "lock", path);
  }
  return std::unique_ptr<StoreLock>(new StoreLock(fd));
}

StoreLock::~StoreLock() { ::close(fd_); }

absl::StatusOr<std::unique_ptr<VersionStore>> VersionStore::Open(const std::string& root, const Clock& clock) {
  ASSIGN_OR_RETURN(std::unique_ptr<ObjectStore> objects, ObjectStore::Open(root));
  std::error_code ec;
  fs::create_directories(fs::path(root) / "refs", ec);
  if (ec) return crypto::ErrnoStatus(ec.value(), "create", root + "/refs");
  return std::unique_ptr<VersionStore>(new VersionStore(root, std::move(objects), clock));
}

std::string VersionStore::RefPath(const std::string& dataset, Ref::Kind kind, const std::string& name) const {
  return fmt::format("{}/refs/{}/{}/{}", root_, dataset, KindDir(kind), name);
}

absl::StatusOr<std::string> VersionStore::ReadRef(const std::string& dataset, Ref::Kind kind,
                                                  const std::string& name) const {
  absl::StatusOr<std::string> text = ReadFileBounded(RefPath(dataset, kind, name), 1024, "ref");
  if (!text.ok()) {
    if (absl::IsNotFound(text.status())) {
      return absl::NotFoundError(
          fmt::format("dataset {:?} has no {} {:?}", dataset, kind == Ref::Kind::kBranch ? "branch" : "tag", name));
    }
    return text.status();
  }
  std::string digest = text->substr(0, text->find('\n'));
  if (!archive::IsSha256Hex(digest)) {
    return absl::DataLossError(fmt::format("{} does not hold a commit digest", RefPath(dataset, kind, name)));
  }
  return digest;
}

absl::Status VersionStore::WriteRef(const std::string& dataset, Ref::Kind kind, const std::string& name,
                                    const std::string& commit, bool must_not_exist) {
  const std::string path = RefPath(dataset, kind, name);
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return crypto::ErrnoStatus(ec.value(), "create", fs::path(path).parent_path().string());
  if (must_not_exist) return crypto::CreateFileDurably(path, commit + "\n", 0644);
  return crypto::WriteFileDurably(path, commit + "\n", 0644);
}

absl::StatusOr<Commit> VersionStore::ReadCommit(const std::string& digest) const {
  ASSIGN_OR_RETURN(std::string bytes, objects_->Get(digest, kMaxCommitBytes));
  absl::StatusOr<Commit> commit = DecodeCommit(bytes);
  if (!commit.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("object {} is not a commit: {}", digest, std::string(commit.status().message())));
  }
  return commit;
}

absl::StatusOr<Tree> VersionStore::ReadTree(const std::string& digest) const {
  ASSIGN_OR_RETURN(std::string bytes, objects_->Get(digest, kMaxTreeBytes));
  absl::StatusOr<Tree> tree = DecodeTree(bytes);
  if (!tree.ok()) {
    return absl::DataLossError(
        fmt::format("object {} is not a tree: {}", digest, std::string(tree.status().message())));
  }
  return tree;
}

namespace {

absl::Status ValidatePushOptions(const PushOptions& options) {
  RETURN_IF_ERROR(ValidateRefName(options.dataset, "dataset"));
  RETURN_IF_ERROR(ValidateRefName(options.branch, "branch"));
  RETURN_IF_ERROR(ValidateChunkerOptions(options.chunking));
  if (options.message.size() > (size_t{1} << 20)) {
    return absl::InvalidArgumentError("commit message is over 1 MiB; shorten it");
  }
  if (!IsUtf8(options.message) || !IsUtf8(options.author) || options.author.size() > 1024) {
    return absl::InvalidArgumentError("commit message and author must be UTF-8 text (author at most 1 KiB)");
  }
  return absl::OkStatus();
}

// Cuts every file of `dir` into chunks and stores them and the folder's trees in `objects` (flushed):
// the top folder's entry.
absl::StatusOr<TreeEntry> HashFolder(const std::string& dir, const PushOptions& options, ObjectStore& objects,
                                     Counters& counters) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return absl::NotFoundError(fmt::format("{}: not a folder", dir));
  DirNode top;
  std::vector<SourceFile> files;
  RETURN_IF_ERROR(WalkDir(dir, options.follow_links, top, files));
  uint64_t total = 0;
  for (const SourceFile& f : files) total += f.stat_bytes;
  std::mutex mu;  // guards first_error and serialises progress calls
  absl::Status first_error;
  const int workers = WorkerCount(options.threads, files.size());
  ParallelFor(files.size(), workers, 1, [&](size_t begin, size_t end, int) {
    for (size_t i = begin; i < end; ++i) {
      absl::Status s = HashFile(files[i], objects, options.chunking, counters);
      std::lock_guard<std::mutex> guard(mu);
      if (!s.ok() && first_error.ok()) first_error = s;
      if (options.progress) options.progress(counters.done_bytes.load(), total);
    }
  });
  RETURN_IF_ERROR(first_error);
  ASSIGN_OR_RETURN(TreeEntry root_entry, StoreTree(top, files, objects, counters));
  RETURN_IF_ERROR(objects.Sync());
  return root_entry;
}

// Stores the commit of `root` on `parent` ("" = none), flushed: its digest.
absl::StatusOr<std::string> StoreCommit(ObjectStore& objects, const TreeEntry& root, const std::string& parent,
                                        const PushOptions& options, const Clock& clock, Counters& counters) {
  Commit commit;
  commit.tree = root.tree;
  if (!parent.empty()) commit.parents.push_back(parent);
  commit.dataset = options.dataset;
  commit.message = options.message;
  commit.author = options.author;
  commit.time_unix_s = std::chrono::duration_cast<std::chrono::seconds>(clock.Now().time_since_epoch()).count();
  commit.files = root.files;
  commit.bytes = root.bytes;
  std::string digest;
  RETURN_IF_ERROR(Store(objects, EncodeCommit(commit), counters, &digest));
  RETURN_IF_ERROR(objects.Sync());
  return digest;
}

}  // namespace

absl::StatusOr<PushResult> VersionStore::Push(const std::string& dir, const PushOptions& options) {
  RETURN_IF_ERROR(ValidatePushOptions(options));
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> lock, StoreLock::Acquire(LockPath(), StoreLock::Mode::kShared));
  Counters counters;
  ASSIGN_OR_RETURN(const TreeEntry root_entry, HashFolder(dir, options, *objects_, counters));

  PushResult result;
  result.files = root_entry.files;
  result.bytes = root_entry.bytes;
  result.chunks = counters.chunks;
  {
    // Compare-and-swap of the branch: its head is read and replaced under refs.lock.
    ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> refs_lock,
                     StoreLock::Acquire(root_ + "/refs.lock", StoreLock::Mode::kExclusive));
    absl::StatusOr<std::string> head = ReadRef(options.dataset, Ref::Kind::kBranch, options.branch);
    if (!head.ok() && !absl::IsNotFound(head.status())) return head.status();
    if (!head.ok()) {
      RETURN_IF_ERROR(CheckNewRefName(options.dataset, options.branch, Ref::Kind::kBranch, [&](Ref::Kind k) {
        struct stat st {};
        return ::stat(RefPath(options.dataset, k, options.branch).c_str(), &st) == 0;
      }));
    }
    if (head.ok()) {
      ASSIGN_OR_RETURN(Commit parent, ReadCommit(*head));
      if (parent.tree == root_entry.tree) {
        result.commit = *head;
        result.unchanged = true;
      }
    }
    if (!result.unchanged) {
      ASSIGN_OR_RETURN(result.commit, StoreCommit(*objects_, root_entry, head.ok() ? *head : std::string(), options,
                                                  clock_, counters));
      RETURN_IF_ERROR(WriteRef(options.dataset, Ref::Kind::kBranch, options.branch, result.commit, false));
    }
  }
  result.new_objects = counters.new_objects;
  result.new_bytes = counters.new_bytes;
  return result;
}

absl::StatusOr<PushResult> VersionStore::Snapshot(const std::string& dir, const PushOptions& options,
                                                  const std::string& parent) {
  RETURN_IF_ERROR(ValidatePushOptions(options));
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> lock, StoreLock::Acquire(LockPath(), StoreLock::Mode::kShared));
  std::optional<Commit> parent_commit;
  if (!parent.empty()) {
    absl::StatusOr<Commit> read = ReadCommit(parent);
    if (!read.ok()) {
      return absl::Status(read.status().code(),
                          fmt::format("parent {}: {}", parent.substr(0, 80), std::string(read.status().message())));
    }
    if (read->dataset != options.dataset) {
      return absl::InvalidArgumentError(fmt::format("parent {} is a commit of dataset '{}', not '{}'",
                                                    parent.substr(0, 12), read->dataset, options.dataset));
    }
    parent_commit = std::move(*read);
  }
  Counters counters;
  ASSIGN_OR_RETURN(const TreeEntry root_entry, HashFolder(dir, options, *objects_, counters));
  PushResult result;
  result.files = root_entry.files;
  result.bytes = root_entry.bytes;
  result.chunks = counters.chunks;
  if (parent_commit && parent_commit->tree == root_entry.tree) {
    result.commit = parent;
    result.unchanged = true;
  } else {
    ASSIGN_OR_RETURN(result.commit, StoreCommit(*objects_, root_entry, parent, options, clock_, counters));
  }
  result.new_objects = counters.new_objects;
  result.new_bytes = counters.new_bytes;
  return result;
}

absl::Status VersionStore::SetBranch(const std::string& dataset, const std::string& name, const std::string& commit,
                                     const std::string& expected) {
  RETURN_IF_ERROR(ValidateRefName(dataset, "dataset"));
  RETURN_IF_ERROR(ValidateRefName(name, "branch"));
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> lock, StoreLock::Acquire(LockPath(), StoreLock::Mode::kShared));
  absl::StatusOr<Commit> target = ReadCommit(commit);
  if (!target.ok()) {
    return absl::Status(target.status().code(),
                        fmt::format("commit {}: {}", commit.substr(0, 80), std::string(target.status().message())));
  }
  if (target->dataset != dataset) {
    return absl::InvalidArgumentError(fmt::format("commit {} is a version of dataset '{}', not '{}'",
                                                  commit.substr(0, 12), target->dataset, dataset));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> refs_lock,
                   StoreLock::Acquire(root_ + "/refs.lock", StoreLock::Mode::kExclusive));
  absl::StatusOr<std::string> head = ReadRef(dataset, Ref::Kind::kBranch, name);
  if (!head.ok() && !absl::IsNotFound(head.status())) return head.status();
  const std::string current = head.ok() ? *head : std::string();
  if (current != expected) {
    return absl::FailedPreconditionError(
        fmt::format("branch '{}' of dataset '{}' is at {}, not {}: it moved since you read it; read it again and retry",
                    name, dataset, current.empty() ? std::string("(none)") : current.substr(0, 12),
                    expected.empty() ? std::string("(none)") : expected.substr(0, 12)));
  }
  if (current.empty()) {
    RETURN_IF_ERROR(CheckNewRefName(dataset, name, Ref::Kind::kBranch, [&](Ref::Kind k) {
      struct stat st {};
      return ::stat(RefPath(dataset, k, name).c_str(), &st) == 0;
    }));
  }
  return WriteRef(dataset, Ref::Kind::kBranch, name, commit, false);
}

absl::StatusOr<std::string> VersionStore::Resolve(const std::string& dataset, const std::string& rev) const {
  RETURN_IF_ERROR(ValidateRefName(dataset, "dataset"));
  std::string base = rev;
  uint64_t back = 0;
  if (const size_t tilde = rev.find('~'); tilde != std::string::npos) {
    base = rev.substr(0, tilde);
    const std::string n = rev.substr(tilde + 1);
    if (n.empty() || n.size() > 6 || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return absl::InvalidArgumentError(fmt::format("revision {:?}: after ~ comes a count of commits, as main~2", rev));
    }
    back = std::stoull(n);
  }
  std::string digest;
  if (archive::IsSha256Hex(base) && objects_->Has(base)) digest = base;
  if (digest.empty() && ValidateRefName(base, "branch").ok()) {
    for (Ref::Kind kind : {Ref::Kind::kBranch, Ref::Kind::kTag}) {
      absl::StatusOr<std::string> ref = ReadRef(dataset, kind, base);
      if (ref.ok()) {
        digest = *ref;
        break;
      }
      if (!absl::IsNotFound(ref.status())) return ref.status();
    }
  }
  if (digest.empty() && IsHexPrefix(base)) {
    // A digest or a prefix of one: the commits of this dataset among the objects whose names start so.
    std::vector<std::string> matches;
    std::error_code ec;
    const fs::path folder = fs::path(objects_->root()) / "objects" / base.substr(0, 2);
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string candidate = base.substr(0, 2) + it->path().filename().string();
      if (candidate.size() != 64 || candidate.compare(0, base.size(), base) != 0) continue;
      absl::StatusOr<std::string> bytes = objects_->Get(candidate, kMaxCommitBytes);
      if (!bytes.ok()) continue;  // a chunk or tree larger than any commit, or damaged
      absl::StatusOr<Commit> commit = DecodeCommit(*bytes);
      if (commit.ok() && commit->dataset == dataset) matches.push_back(candidate);
    }
    if (matches.size() > 1) {
      return absl::InvalidArgumentError(
          fmt::format("revision {:?} is ambiguous: {} commits start with it; give more digits", base, matches.size()));
    }
    if (matches.size() == 1) digest = matches[0];
  }
  if (digest.empty()) {
    return absl::NotFoundError(
        fmt::format("dataset {:?} has no branch, tag or commit {:?} (see `gpugeek data branch --dataset {}`)", dataset,
                    base, dataset));
  }
  for (uint64_t i = 0; i < back; ++i) {
    ASSIGN_OR_RETURN(Commit c, ReadCommit(digest));
    if (c.parents.empty()) {
      return absl::InvalidArgumentError(
          fmt::format("revision {:?} goes back past the dataset's first commit ({} back)", rev, i));
    }
    digest = c.parents[0];
  }
  ASSIGN_OR_RETURN(Commit c, ReadCommit(digest));
  if (c.dataset != dataset) {
    return absl::NotFoundError(fmt::format("commit {} is in dataset {:?}, not {:?}", digest, c.dataset, dataset));
  }
  return digest;
}

absl::StatusOr<std::vector<LogEntry>> VersionStore::Log(const std::string& dataset, const std::string& rev,
                                                        size_t limit) const {
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> lock, StoreLock::Acquire(LockPath(), StoreLock::Mode::kShared));
  ASSIGN_OR_RETURN(std::string digest, Resolve(dataset, rev));
  std::vector<LogEntry> log;
  while (log.size() < limit) {
    ASSIGN_OR_RETURN(Commit c, ReadCommit(digest));
    const bool more = !c.parents.empty();
    const std::string parent = more ? c.parents[0] : "";
    log.push_back({digest, std::move(c)});
    if (!more) break;
    digest = parent;
  }
  return log;
}

absl::Status VersionStore::CreateBranch(const std::string& dataset, const std::string& name,
                                        const std::string& from_rev) {
  return CreateRef(dataset, Ref::Kind::kBranch, name, from_rev);
}

absl::Status VersionStore::CreateTag(const std::string& dataset, const std::string& name, const std::string& rev) {
  return CreateRef(dataset, Ref::Kind::kTag, name, rev);
}

absl::Status VersionStore::CreateRef(const std::string& dataset, Ref::Kind kind, const std::string& name,
                                     const std::string& rev) {
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> lock, StoreLock::Acquire(LockPath(), StoreLock::Mode::kShared));
  ASSIGN_OR_RETURN(std::string digest, Resolve(dataset, rev));
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> refs_lock,
                   StoreLock::Acquire(root_ + "/refs.lock", StoreLock::Mode::kExclusive));
  RETURN_IF_ERROR(CheckNewRefName(dataset, name, kind, [&](Ref::Kind k) {
    struct stat st {};
    return ::stat(RefPath(dataset, k, name).c_str(), &st) == 0;
  }));
  return WriteRef(dataset, kind, name, digest, /*must_not_exist=*/true);
}

absl::Status VersionStore::DeleteRef(const std::string& dataset, Ref::Kind kind, const std::string& name) {
  RETURN_IF_ERROR(ValidateRefName(dataset, "dataset"));
  RETURN_IF_ERROR(ValidateRefName(name, kind == Ref::Kind::kBranch ? "branch" : "tag"));
  ASSIGN_OR_RETURN(std::unique_ptr<StoreLock> lock,
                   StoreLock::Acquire(root_ + "/refs.lock", StoreLock::Mode::kExclusive));
  RETURN_IF_ERROR(ReadRef(dataset, kind, name).status());
  const std::string path = RefPath(dataset, kind, name);
  if (::unlink(path.c_str()) != 0) return crypto::ErrnoStatus(errno, "remove", path);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Ref>> VersionStore::ListRefs(const std::string& dataset) const {
  RETURN_IF_ERROR(ValidateRefName(dataset, "dataset"));
  std::vector<Ref> refs;
  for (Ref::Kind kind : {Ref::Kind::kBranch, Ref::Kind::kTag}) {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(fmt::format("{}/refs/{}/{}", root_, dataset, KindDir(kind)), ec), end;
         !ec && it != end; it.increment(ec)) {
      // A ref update killed between its temporary file and the rename leaves that file: not a ref.
      if (!IsInterruptedWrite(it->path().filename().string())) names.push_back(it->path().filename().string());
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      Ref ref{kind, name, "", ""};
      if (!ValidateRefName(name, "ref").ok()) {
        ref.error = "the ref file's name is not a valid branch or tag name";
      } else if (absl::StatusOr<std::string> commit = ReadRef(dataset, kind, name); commit.ok()) {
        ref.commit = *commit;
      } else {
        ref.error = std::string(commit.status().message());
      }
      refs.push_back(std::move(ref));
    }
  }
  return refs;
}

std::vector<std::string> VersionStore::ListDatasets() const {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(root_ + "/refs", ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!ValidateRefName(name, "dataset").ok()) continue;
    absl::StatusOr<std::vector<Ref>> refs = ListRefs(name);
    if (refs.ok() && !refs->empty()) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace gpugeek::data
