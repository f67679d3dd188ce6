#pragma once
// GcController: retention. Log grants of released allocations are dropped after log_grant_retention
// (their nodes may no longer ship bytes for them), and the logs of jobs that ended more than
// log_retention ago are deleted from disk. The log sweep runs once per `sweep_interval` (monotonic);
// a job's age is its last update on the wall clock, the time the store records and users see.

#include <optional>

#include "controlplane/controllers/context.h"

namespace gpugeek::controlplane {

class GcController {
 public:
  void Reconcile(ControllerContext& ctx, MonoTime now);

  static constexpr Duration kSweepInterval = std::chrono::minutes(10);

 private:
  void SweepLogs(ControllerContext& ctx);
  std::optional<MonoTime> last_sweep_;
};

}  // namespace gpugeek::controlplane
