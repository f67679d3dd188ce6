#pragma once
// LogGrantTable: which node may write which member's log, per job (who may append (epoch, rank)).
//
// A heartbeat's log chunks are checked against it, and `gpugeek logs` asks it how many ranks a job has
// and whether the allocation still holds resources. It is written by the writer (a placement adds a
// grant, a release marks it released, the GC expires it) and read by heartbeats and log requests, so
// like the LeaseTable it has its own mutex, held for one lookup or update and never across I/O: a
// heartbeat never waits behind the writer, and a publish does not copy it (at 1,000 jobs/s it holds
// hundreds of thousands of released grants, which a per-snapshot copy would pay for on every pass).
//
// Released grants expire in release order (a FIFO of release times), so expiry costs O(expired), not
// O(grants), per pass.
//
// Thread-safety: every method may be called from any thread.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/clock.h"
#include "common/mutex.h"

namespace gpugeek::controlplane {

// Which node may ship log bytes for a job's member: (epoch, rank) -> node. Kept for a while after the
// allocation is released (log_grant_retention), because an agent ships the rest of a long log after
// the member's exit.
struct LogGrant {
  std::string tenant;                                      // the job's owner: its data key seals the log (LogStore)
  std::map<std::pair<int64_t, int>, std::string> members;  // (epoch, rank) -> node
  int ranks = 0;
  bool live = false;                    // the allocation still holds resources
  std::optional<MonoTime> released_at;  // when it stopped being live
};

class LogGrantTable {
 public:
  // A placement at `epoch`: each (epoch, rank) of `nodes` (indexed by rank) is granted to that node,
  // beside the grants of earlier epochs (their late bytes still land); the grant is live.
  void Place(const std::string& job_id, const std::string& tenant, int64_t epoch,
             const std::vector<std::string>& nodes);
  // The allocation released its resources at `now`: the grant expires `retention` later (Expire).
  void Release(const std::string& job_id, MonoTime now);
  // Drops `job_id`'s grant (its logs were deleted).
  void Erase(const std::string& job_id);
  // Drops every grant (the control plane reloads from the store).
  void Clear();
  // Drops the grants released at or before `cutoff` that were not placed again since. Returns how many.
  size_t Expire(MonoTime cutoff);

  // The job's tenant when `node` holds (epoch, rank) of `job_id` (it may write that member's log);
  // nullopt otherwise.
  std::optional<std::string> WriterTenant(const std::string& job_id, int64_t epoch, int rank,
                                          const std::string& node) const;
  std::optional<LogGrant> Get(const std::string& job_id) const;
  size_t size() const;

 private:
  mutable Mutex mu_;
  std::unordered_map<std::string, LogGrant> grants_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<MonoTime, std::string>> released_ ABSL_GUARDED_BY(mu_);  // in release order
};

}  // namespace gpugeek::controlplane
