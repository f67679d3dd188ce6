#pragma once
// WorkdirFetcher: a job's workdir archive, fetched from the server once per digest per node and kept in
// a cache folder by digest, shared by every member that needs it.
//
// The problem: all members of a job on a node (and later jobs of the same tree) need the same archive;
// fetching it per member would multiply the transfer, and fetching it on the agent's heartbeat thread
// would stall heartbeats for as long as a 1 GiB download takes (and fence the node). So Fetch starts at
// most one download per digest on its own thread and hands every caller the same shared_future; the
// file lands in the cache only once its SHA-256 equals the digest (written to "<digest>.part", then
// renamed), so a cached file is always a verified one and is used without another download. A failed
// download is forgotten, so the next Fetch of that digest tries again.
//
// Thread-safe. The download threads are detached and hold the fetcher through a shared_ptr, so the agent
// may be destroyed while one runs.

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/mutex.h"

namespace gpugeek::agent {

class WorkdirFetcher : public std::enable_shared_from_this<WorkdirFetcher> {
 public:
  // Streams the archive `digest` to `sink` piece by piece; an error, or `sink` returning false, ends it.
  using DownloadFn =
      std::function<absl::Status(const std::string& digest, const std::function<bool(const std::string& piece)>& sink)>;

  // `cache_dir` is created when needed. `download` is called on a download thread.
  static std::shared_ptr<WorkdirFetcher> Create(std::string cache_dir, DownloadFn download);

  // The cached archive's path once it is there and verified: at once when cached, otherwise when the one
  // download of `digest` ends. Errors: InvalidArgument for a digest that is not 64 hex digits;
  // DataLoss when the bytes do not hash to it; the download's error (e.g. NotFound: the server would not
  // give this node that archive); Unavailable on a write error.
  std::shared_future<absl::StatusOr<std::string>> Fetch(const std::string& digest);

  // Downloads started since creation (tests: one per digest, however many members asked).
  int downloads() const;
  std::string PathOf(const std::string& digest) const { return cache_dir_ + "/" + digest; }

 private:
  WorkdirFetcher(std::string cache_dir, DownloadFn download);
  absl::StatusOr<std::string> Download(const std::string& digest);

  const std::string cache_dir_;
  const DownloadFn download_;
  mutable Mutex mu_;
  std::map<std::string, std::shared_future<absl::StatusOr<std::string>>> in_flight_ ABSL_GUARDED_BY(mu_);
  int downloads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gpugeek::agent
