#pragma once
// Admission's capacity check: a job that no registered node could ever host is refused at submission,
// naming what is missing, instead of waiting forever (Slurm's "Requested node configuration is not
// available"; Kubernetes leaves such a pod Pending).
//
// "Ever" means on the pool as registered, with nothing allocated: every registered node counts, down,
// suspect and cordoned ones too (they may come back), each at its full capacity. The check runs the
// scheduler's own filters (sched/filters.h: GPU model and count, CPU, memory, capacity type, node
// labels such as regions, tenant reservations) on that empty pool, so it can never refuse a job the
// scheduler would place.
//
// Thread-safety: Check may be called from any thread. The empty pool is built once per set of
// registrations and shared; each check schedules on its own copy.

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "common/mutex.h"
#include "controlplane/state/snapshot.h"
#include "sched/cluster.h"
#include "sched/request.h"

namespace gpugeek::controlplane {

class AdmissionFit {
 public:
  // OK when one of `requests` (a job's alternatives, job_request.h BuildRequests) could be placed whole
  // (the gang included) on `snapshot`'s registered nodes with nothing allocated, or when no node is
  // registered at all (the job waits for the first agent). FailedPrecondition otherwise:
  //   "resources: no registered node could ever host this job (2 nodes, at full capacity): 2: has L4,
  //    not the requested A100-80GB; ...; add such a node or change resources"
  // with each distinct filter reason and how many nodes gave it.
  absl::Status Check(const std::vector<sched::Request>& requests, const Snapshot& snapshot);

 private:
  // The empty pool of `snapshot`'s registrations: the cached one while they are the same objects.
  std::shared_ptr<const sched::Cluster> EmptyPool(const Snapshot& snapshot);

  Mutex mu_;
  std::vector<const api::Registration*> registrations_ ABSL_GUARDED_BY(mu_);  // what pool_ was built from
  std::shared_ptr<const sched::Cluster> pool_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpugeek::controlplane
