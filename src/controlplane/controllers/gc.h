#pragma once
// GcController: retention. Log grants of released allocations are dropped after log_grant_retention
// (their nodes may no longer ship bytes for them), and the logs of jobs that ended more than
// log_retention ago are deleted from disk. The log sweep runs once per `sweep_interval` (monotonic);
// a job's age is its last update on the wall clock, the time the store records and users see. The
// events of jobs that ended more than event_retention ago are deleted in batches of kEventBatch, one
// batch per pass while there are more, else once per kEventSweepInterval, so no pass holds the store
// for long. Audit records older than audit_retention are deleted the same way.

#include <optional>

#include "controlplane/controllers/context.h"

namespace gpugeek::controlplane {

class GcController {
 public:
  void Reconcile(ControllerContext& ctx, MonoTime now);

  static constexpr Duration kSweepInterval = std::chrono::minutes(10);
  static constexpr Duration kEventSweepInterval = std::chrono::minutes(1);
  static constexpr int kEventBatch = 5000;

 private:
  void SweepLogs(ControllerContext& ctx);
  void SweepEvents(ControllerContext& ctx, MonoTime now);
  void SweepAudit(ControllerContext& ctx, MonoTime now);
  std::optional<MonoTime> last_sweep_;
  std::optional<MonoTime> last_event_sweep_;
  bool more_events_ = false;  // the last batch was full
  std::optional<MonoTime> last_audit_sweep_;
  bool more_audit_ = false;  // the last batch was full
};

}  // namespace gpugeek::controlplane
