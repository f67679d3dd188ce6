#pragma once
// AuditLog: the record of every state-changing API call (who, what, when, from where, and how it was
// answered), queryable by admins (GET /v1/audit, `gpugeek audit`).
//
// The problem: a call's record must be stored before its reply leaves ("durable before acknowledged":
// no change a client saw succeed is missing from the log), yet one fsync per call would queue concurrent
// callers behind the disk. So Append is a group commit: the first caller that finds no write in progress
// writes every record queued until then in one store transaction (one fsync), and callers that arrive
// meanwhile queue theirs for the next write, which one of them performs. No lock of this class is held
// across the store call; the store holds its own for that one transaction. Agents' heartbeats, on their
// own listener, never pass through here.
//
// GuardedRoute (access.h) is the one caller of Append: every user route is registered through it, so
// no state-changing route escapes the log. Records hold no token secret and no request body.
// Retention: the control plane's GC deletes records older than ControlPlaneOptions::audit_retention.
// Thread-safety: every method may be called concurrently.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "store/store.h"

namespace gpugeek::controlplane {

class AuditLog {
 public:
  // `store` and `clock` must outlive this object.
  AuditLog(store::Store& store, Clock& clock) : store_(store), clock_(clock) {}

  // Stores `record` with its time set to now (wall clock) and returns once it is durable, together with
  // the other records of its group. On the store's error (Internal, Unavailable) nothing of the group is
  // stored and every caller of the group gets that error.
  absl::Status Append(store::AuditRecord record);

  // The records matching `filter`, oldest first (Store::ListAudit).
  absl::StatusOr<std::vector<store::AuditRecord>> List(const store::AuditFilter& filter) const {
    return store_.ListAudit(filter);
  }

 private:
  // The records of one store transaction; filled while open_, then written by one of its callers.
  struct Group {
    std::vector<store::AuditRecord> records;
    bool done = false;
    absl::Status status;
  };

  store::Store& store_;
  Clock& clock_;

  std::mutex mu_;
  std::condition_variable written_;
  std::shared_ptr<Group> open_ = std::make_shared<Group>();  // guarded by mu_: the group records join
  bool writing_ = false;                                     // guarded by mu_: a group is being written
};

}  // namespace gpugeek::controlplane
