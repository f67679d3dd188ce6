#include "agent/dataset_fetch.h"

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "archive/digest.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "crypto/durable_file.h"
#include "data/parallel.h"
#include "data/version_objects.h"

namespace gpugeek::agent {
namespace {

namespace fs = std::filesystem;

absl::Status MakeReadableDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return crypto::ErrnoStatus(ec.value(), "create", dir);
  // Members run as other users and must reach the checkouts, whatever the agent's umask.
  if (::chmod(dir.c_str(), 0755) != 0) return crypto::ErrnoStatus(errno, "chmod", dir);
  return absl::OkStatus();
}

// Folders 0755 at and under `dir` (Checkout creates them with the process's umask; files it already
// makes 0644 / 0755). Checkouts hold no links, so nothing outside `dir` is touched.
absl::Status OpenFolders(const std::string& dir) {
  if (::chmod(dir.c_str(), 0755) != 0) return crypto::ErrnoStatus(errno, "chmod", dir);
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec) && ::chmod(it->path().c_str(), 0755) != 0) {
      return crypto::ErrnoStatus(errno, "chmod", it->path().string());
    }
  }
  if (ec) return crypto::ErrnoStatus(ec.value(), "list", dir);
  return absl::OkStatus();
}

// Removes what an earlier, interrupted checkout of `commit` left in `staging`: the finished folder not
// yet renamed, and Checkout's ".<commit>.partial-<pid>" folders.
void RemoveStaleStaging(const std::string& staging, const std::string& commit) {
  std::error_code ec;
  const std::string partial = "." + commit + ".partial-";
  for (fs::directory_iterator it(staging, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == commit || name.starts_with(partial)) {
      std::error_code ignored;
      fs::remove_all(it->path(), ignored);
    }
  }
}

std::string Short(const std::string& digest) { return digest.substr(0, 12); }

}  // namespace

struct DatasetFetcher::Tally {
  std::atomic<uint64_t> objects{0};
  std::atomic<uint64_t> bytes{0};
};

absl::StatusOr<std::shared_ptr<DatasetFetcher>> DatasetFetcher::Create(const std::string& dir, GetObjectFn get,
                                                                       const Clock& clock, int threads) {
  // Absolute: members read PathOf from any folder.
  std::error_code ec;
  fs::path absolute = fs::absolute(dir, ec).lexically_normal();
  if (ec) return crypto::ErrnoStatus(ec.value(), "resolve", dir);
  if (!absolute.has_filename()) absolute = absolute.parent_path();  // "cache/" names "cache"
  const std::string cache_dir = absolute.string();
  RETURN_IF_ERROR(MakeReadableDir(cache_dir));
  RETURN_IF_ERROR(MakeReadableDir(cache_dir + "/versions"));
  RETURN_IF_ERROR(MakeReadableDir(cache_dir + "/staging"));
  ASSIGN_OR_RETURN(std::unique_ptr<data::VersionStore> store, data::VersionStore::Open(cache_dir + "/store", clock));
  // Members of every tenant pass through versions/ to their own checkout but cannot list it; the
  // objects and the checkouts being written are the agent's alone.
  for (const auto& [sub, mode] :
       {std::pair{"/versions", 0711}, std::pair{"/staging", 0700}, std::pair{"/store", 0700}}) {
    if (::chmod((cache_dir + sub).c_str(), mode) != 0) return crypto::ErrnoStatus(errno, "chmod", cache_dir + sub);
  }
  return std::shared_ptr<DatasetFetcher>(
      new DatasetFetcher(cache_dir, std::move(store), std::move(get), clock, std::max(1, threads)));
}

DatasetFetcher::DatasetFetcher(std::string cache_dir, std::unique_ptr<data::VersionStore> store, GetObjectFn get,
                               const Clock& clock, int threads)
    : cache_dir_(std::move(cache_dir)),
      store_(std::move(store)),
      get_(std::move(get)),
      clock_(clock),
      threads_(threads) {}

uint64_t DatasetFetcher::objects_downloaded() const {
  MutexLock lock(&mu_);
  return objects_downloaded_;
}

uint64_t DatasetFetcher::bytes_downloaded() const {
  MutexLock lock(&mu_);
  return bytes_downloaded_;
}

std::shared_future<absl::StatusOr<std::string>> DatasetFetcher::Fetch(const std::string& dataset,
                                                                      const std::string& commit) {
  std::promise<absl::StatusOr<std::string>> ready;
  if (!archive::IsSha256Hex(commit)) {
    ready.set_value(absl::InvalidArgumentError(
        fmt::format("dataset commit '{}' is not a SHA-256 (64 lower-case hex digits)", commit.substr(0, 80))));
    return ready.get_future().share();
  }
  if (absl::Status valid = data::ValidateRefName(dataset, "dataset"); !valid.ok()) {
    ready.set_value(valid);
    return ready.get_future().share();
  }
  struct stat st;
  if (::stat(PathOf(commit).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    // Only complete checkouts are renamed into versions/, and only after their commit was stored.
    absl::StatusOr<data::Commit> cached = store_->ReadCommit(commit);
    if (cached.ok()) {
      if (cached->dataset != dataset) {
        ready.set_value(absl::InvalidArgumentError(fmt::format("commit {} is a version of dataset '{}', not of '{}'",
                                                               Short(commit), cached->dataset, dataset)));
      } else {
        ready.set_value(PathOf(commit));
      }
      return ready.get_future().share();
    }
    // The commit object is gone from the store (removed by hand): fetch it again below.
  }
  MutexLock lock(&mu_);
  if (auto it = in_flight_.find(commit); it != in_flight_.end()) return it->second;
  auto promise = std::make_shared<std::promise<absl::StatusOr<std::string>>>();
  std::shared_future<absl::StatusOr<std::string>> future = promise->get_future().share();
  in_flight_[commit] = future;
  std::thread([self = shared_from_this(), dataset, commit, promise] {
    absl::StatusOr<std::string> result = self->FetchNow(dataset, commit);
    if (!result.ok()) spdlog::warn("dataset {}@{}: fetch failed: {}", dataset, Short(commit), result.status());
    {
      // Forgotten before the result is published: a caller seeing a failure and asking again starts anew.
      MutexLock forget(&self->mu_);
      self->in_flight_.erase(commit);
    }
    promise->set_value(std::move(result));
  }).detach();
  return future;
}

absl::StatusOr<std::string> DatasetFetcher::Download(const std::string& commit, const std::string& digest,
                                                     Tally& tally) {
  absl::StatusOr<std::string> bytes = get_(commit, digest);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        fmt::format("downloading object {}: {}", digest, std::string(bytes.status().message())));
  }
  // Never trust the server: an object is stored only under the digest of its own bytes.
  const std::string got = archive::Sha256Hex(*bytes);
  if (got != digest) {
    return absl::DataLossError(
        fmt::format("object {}: the {} bytes the server sent hash to {}; not stored", digest, bytes->size(), got));
  }
  RETURN_IF_ERROR(store_->objects().PutWithDigest(digest, *bytes).status());
  tally.objects += 1;
  tally.bytes += bytes->size();
  MutexLock lock(&mu_);
  ++objects_downloaded_;
  bytes_downloaded_ += bytes->size();
  return bytes;
}

absl::Status DatasetFetcher::DownloadAll(const std::string& commit, const std::vector<std::string>& digests,
                                         Tally& tally) {
  std::atomic<bool> failed{false};
  Mutex status_mu;
  absl::Status status;
  data::ParallelFor(digests.size(), data::WorkerCount(threads_, digests.size()), 1, [&](size_t begin, size_t end, int) {
    for (size_t i = begin; i < end && !failed.load(); ++i) {
      absl::StatusOr<std::string> got = Download(commit, digests[i], tally);
      if (got.ok()) continue;
      failed = true;
      MutexLock lock(&status_mu);
      if (status.ok()) status = got.status();
    }
  });
  MutexLock lock(&status_mu);
  return status;
}

absl::StatusOr<std::string> DatasetFetcher::FetchNow(const std::string& dataset, const std::string& commit) {
  const MonoTime start = clock_.Monotonic();
  Tally tally;
  spdlog::info("dataset {}@{}: fetching into {}", dataset, Short(commit), PathOf(commit));
  // The commit, from the node's store when it is there (a retry, another dataset's checkout of it).
  if (!store_->objects().Has(commit)) RETURN_IF_ERROR(DownloadAll(commit, {commit}, tally));
  ASSIGN_OR_RETURN(std::string commit_bytes, store_->objects().Get(commit, data::kMaxCommitBytes));
  absl::StatusOr<data::Commit> c = data::DecodeCommit(commit_bytes);
  if (!c.ok()) {
    return absl::InvalidArgumentError(
        fmt::format("object {} is not a commit: {}", commit, std::string(c.status().message())));
  }
  if (c->dataset != dataset) {
    return absl::InvalidArgumentError(
        fmt::format("commit {} is a version of dataset '{}', not of '{}'", Short(commit), c->dataset, dataset));
  }
  struct stat st;
  if (::stat(PathOf(commit).c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return PathOf(commit);
  // The checkout alone takes the version's bytes (the server checked the commit's totals against its
  // trees): refuse at once rather than fill the node's disk for every tenant on it.
  struct statvfs fs_stat;
  if (::statvfs(cache_dir_.c_str(), &fs_stat) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(fs_stat.f_bavail) * fs_stat.f_frsize;
    if (c->bytes > free_bytes) {
      return absl::ResourceExhaustedError(
          fmt::format("version {} holds {} bytes; the node's disk at {} has {} free: too small for its checkout",
                      Short(commit), c->bytes, cache_dir_, free_bytes));
    }
  }

  // The trees, one level at a time (the missing ones of a level downloaded together), then every chunk
  // the node lacks. A tree or chunk shared by several folders or files is looked at once.
  std::set<std::string> seen_trees{c->tree};
  std::set<std::string> seen_chunks;
  std::vector<std::string> level{c->tree};
  std::vector<std::string> missing_chunks;
  for (int depth = 0; !level.empty(); ++depth) {
    if (depth > data::kMaxTreeDepth) {
      return absl::DataLossError(fmt::format("commit {}: trees nested deeper than {} folders (tree {})", commit,
                                             data::kMaxTreeDepth, level.front()));
    }
    std::vector<std::string> missing_trees;
    for (const std::string& t : level) {
      if (!store_->objects().Has(t)) missing_trees.push_back(t);
    }
    RETURN_IF_ERROR(DownloadAll(commit, missing_trees, tally));
    std::vector<std::string> next;
    for (const std::string& t : level) {
      ASSIGN_OR_RETURN(std::string bytes, store_->objects().Get(t, data::kMaxTreeBytes));
      absl::StatusOr<data::Tree> tree = data::DecodeTree(bytes);
      if (!tree.ok()) {
        return absl::InvalidArgumentError(
            fmt::format("object {} is not a tree: {}", t, std::string(tree.status().message())));
      }
      for (const data::TreeEntry& e : tree->entries) {
        if (e.is_dir) {
          if (seen_trees.insert(e.tree).second) next.push_back(e.tree);
          continue;
        }
        for (const data::ChunkRef& chunk : e.chunks) {
          if (seen_chunks.insert(chunk.digest).second && !store_->objects().Has(chunk.digest)) {
            missing_chunks.push_back(chunk.digest);
          }
        }
      }
    }
    level = std::move(next);
  }
  RETURN_IF_ERROR(DownloadAll(commit, missing_chunks, tally));

  // Checked out beside versions/ and renamed into it once complete and readable by members.
  const std::string staging = cache_dir_ + "/staging";
  const std::string staged = staging + "/" + commit;
  RemoveStaleStaging(staging, commit);
  ASSIGN_OR_RETURN(data::CheckoutResult out, store_->Checkout(dataset, commit, staged, threads_));
  absl::Status opened = OpenFolders(staged);
  if (opened.ok() && std::rename(staged.c_str(), PathOf(commit).c_str()) != 0) {
    opened = crypto::ErrnoStatus(errno, "rename into", PathOf(commit));
  }
  if (!opened.ok()) {
    std::error_code ignored;
    fs::remove_all(staged, ignored);
    return opened;
  }
  const double seconds = std::chrono::duration<double>(clock_.Monotonic() - start).count();
  spdlog::info("dataset {}@{}: {} objects ({} bytes) downloaded; {} files ({} bytes) checked out into {} in {:.1f} s",
               dataset, Short(commit), tally.objects.load(), tally.bytes.load(), out.files, out.bytes, PathOf(commit),
               seconds);
  return PathOf(commit);
}

}  // namespace gpugeek::agent
