#pragma once
// DatasetFetcher: the dataset version a job names (`dataset: NAME@REV`, pinned by the control plane to a
// commit digest), fetched object by object from the server into a node-wide cache and checked out once
// per commit, read-only for every member that needs it.
//
// The problem: datasets are large and versions of one dataset share most of their bytes, so a node must
// download only the objects it does not hold yet (a chunk shared by two versions, or by two datasets, is
// downloaded once), must never trust what the server sends (a wrong or damaged object would silently
// corrupt training), and must not download the same version once per member or stall the agent's
// heartbeat thread while it does. So the cache is a real data::VersionStore (version_store.h) keyed by
// SHA-256, every object's bytes are checked against the digest they were asked for before they are
// stored, and Fetch starts at most one fetch per commit on its own thread and hands every caller the same
// shared_future.
//
// Layout under `cache_dir` (0755):
//   store/                the node's object store (store/objects/ab/cdef...); objects of every version (0700)
//   versions/<commit>     a complete checkout of that commit (folders 0755, files 0644, or 0755 when
//                         executable); versions/ is 0711: a member passes through to a checkout it is
//                         told of but cannot list the others. The agent closes each checkout to its
//                         tenant (group, 0750) before a member of a switched user reads it.
//   staging/              checkouts being written (0700); renamed into versions/ only once complete
// A folder in versions/ is therefore always a whole, verified checkout, and it is used without a single
// request. Nothing is ever removed (no garbage collection of old versions yet).
//
// Thread-safe. The fetch threads are detached and hold the fetcher through a shared_ptr, so the agent may
// be destroyed while one runs.

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "data/version_store.h"

namespace gpugeek::agent {

class DatasetFetcher : public std::enable_shared_from_this<DatasetFetcher> {
 public:
  // The bytes of object `digest` (64 lower-case hex digits), reachable from commit `commit`, from the
  // server. Called on fetch threads, up to `threads` at once; must be thread-safe. Errors end the fetch
  // and are passed on (e.g. NotFound: the server would not give this node that object).
  using GetObjectFn = std::function<absl::StatusOr<std::string>(const std::string& commit, const std::string& digest)>;

  // Opens (creating when missing) the cache at `cache_dir` (made absolute). `clock` (borrowed; must outlive the
  // fetcher) times fetches for the log. `threads` (>= 1; fewer become 1): how many chunks download at once. Errors: the
  // errno text naming a folder that cannot be created.
  static absl::StatusOr<std::shared_ptr<DatasetFetcher>> Create(const std::string& cache_dir, GetObjectFn get,
                                                                const Clock& clock, int threads = 4);

  // The checkout of commit `commit` of dataset `dataset`: its folder (PathOf(commit)) once every file is
  // there, byte for byte, verified. At once when the folder exists (after checking the cached commit
  // names `dataset`); otherwise when the one fetch of `commit` ends (callers asking meanwhile share it).
  // A fetch downloads the commit, then its trees, then the chunks (`threads` at once), each only when the
  // node's store lacks it, and checks out. Errors: InvalidArgument for a dataset name that
  // data::ValidateRefName refuses or a commit that is not 64 lower-case hex digits (at once), and for a
  // commit of another dataset (naming both names); DataLoss naming the digest when the bytes the server
  // sent do not hash to it (nothing of them is stored), or for trees nested deeper than
  // data::kMaxTreeDepth; InvalidArgument for an object that is not the tree or commit it should be;
  // GetObjectFn's error; the errno text of a failed write. A failed fetch is forgotten, so the next Fetch
  // of that commit starts anew (and downloads only what the failed one did not store).
  std::shared_future<absl::StatusOr<std::string>> Fetch(const std::string& dataset, const std::string& commit);

  // Where commit `commit`'s checkout is (or will be): <cache_dir>/versions/<commit>, an absolute path.
  std::string PathOf(const std::string& commit) const { return cache_dir_ + "/versions/" + commit; }

  // Objects (commits, trees, chunks) downloaded and verified since creation, and their bytes. Objects
  // the server sent with the wrong bytes are not counted.
  uint64_t objects_downloaded() const;
  uint64_t bytes_downloaded() const;

 private:
  DatasetFetcher(std::string cache_dir, std::unique_ptr<data::VersionStore> store, GetObjectFn get, const Clock& clock,
                 int threads);
  // What one fetch downloaded, for its log line (the counters below mix concurrent fetches).
  struct Tally;
  // The fetch thread's work: everything but the bookkeeping of in_flight_.
  absl::StatusOr<std::string> FetchNow(const std::string& dataset, const std::string& commit);
  // Downloads object `digest` (reachable from `commit`), checks its bytes against it, stores and returns them.
  absl::StatusOr<std::string> Download(const std::string& commit, const std::string& digest, Tally& tally);
  // Download of each of `digests`, threads_ at once; the first error stops the rest and is returned.
  absl::Status DownloadAll(const std::string& commit, const std::vector<std::string>& digests, Tally& tally);

  // Constant after construction.
  const std::string cache_dir_;
  const std::unique_ptr<data::VersionStore> store_;  // thread-safe itself
  const GetObjectFn get_;
  const Clock& clock_;
  const int threads_;

  mutable Mutex mu_;
  // By commit: the fetch in progress.
  std::map<std::string, std::shared_future<absl::StatusOr<std::string>>> in_flight_ ABSL_GUARDED_BY(mu_);
  uint64_t objects_downloaded_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t bytes_downloaded_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpugeek::agent
