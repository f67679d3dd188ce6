#include "controlplane/controllers/gc.h"

#include <spdlog/spdlog.h>

#include "api/job_state.h"
#include "common/absl_fmt.h"
#include "controlplane/log_store.h"

namespace gpugeek::controlplane {

void GcController::Reconcile(ControllerContext& ctx, MonoTime now) {
  ctx.log_grants.Expire(now - ctx.options.log_grant_retention);
  SweepEvents(ctx, now);
  SweepAudit(ctx, now);
  if (last_sweep_ && now - *last_sweep_ < kSweepInterval) return;
  last_sweep_ = now;
  SweepLogs(ctx);
}

void GcController::SweepEvents(ControllerContext& ctx, MonoTime now) {
  if (!more_events_ && last_event_sweep_ && now - *last_event_sweep_ < kEventSweepInterval) return;
  last_event_sweep_ = now;
  auto deleted = ctx.store.DeleteOldEvents(ctx.clock.Now() - ctx.options.event_retention, kEventBatch);
  if (!deleted.ok()) {
    spdlog::warn("control plane: event retention: {}", deleted.status());
    more_events_ = false;
    return;
  }
  more_events_ = *deleted == kEventBatch;
}

void GcController::SweepAudit(ControllerContext& ctx, MonoTime now) {
  if (!more_audit_ && last_audit_sweep_ && now - *last_audit_sweep_ < kEventSweepInterval) return;
  last_audit_sweep_ = now;
  auto deleted = ctx.store.DeleteOldAudit(ctx.clock.Now() - ctx.options.audit_retention, kEventBatch);
  if (!deleted.ok()) {
    spdlog::warn("control plane: audit retention: {}", deleted.status());
    more_audit_ = false;
    return;
  }
  more_audit_ = *deleted == kEventBatch;
}

void GcController::SweepLogs(ControllerContext& ctx) {
  const TimePoint cutoff = ctx.clock.Now() - ctx.options.log_retention;
  for (api::JobState state : {api::JobState::kSucceeded, api::JobState::kFailed, api::JobState::kCancelled}) {
    store::JobFilter filter{.state = state, .limit = 1000};
    for (;;) {
      auto page = ctx.store.ListJobs(filter);
      if (!page.ok()) {
        spdlog::warn("control plane: log retention sweep: {}", page.status());
        return;
      }
      for (const store::JobRecord& job : *page) {
        if (job.updated_at >= cutoff || ctx.state.live.contains(job.id) || ctx.logs.JobBytes(job.id) == 0) continue;
        if (absl::Status st = ctx.logs.RemoveJob(job.id); !st.ok()) {
          spdlog::warn("control plane: removing the logs of {}: {}", job.id, st);
          continue;
        }
        ctx.log_grants.Erase(job.id);
      }
      if (static_cast<int>(page->size()) < filter.limit) break;
      filter.after_id = page->back().id;
    }
  }
}

}  // namespace gpugeek::controlplane
