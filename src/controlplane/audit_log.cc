#include "controlplane/audit_log.h"

namespace gpugeek::controlplane {

absl::Status AuditLog::Append(store::AuditRecord record) {
  record.time = clock_.Now();
  std::unique_lock<std::mutex> lock(mu_);
  const std::shared_ptr<Group> mine = open_;
  mine->records.push_back(std::move(record));
  // Either a writer stores this group, or this caller does once no write is in progress.
  written_.wait(lock, [&] { return mine->done || (!writing_ && open_ == mine); });
  if (mine->done) return mine->status;
  writing_ = true;
  open_ = std::make_shared<Group>();  // later callers queue behind this write
  lock.unlock();
  // `mine` is no longer open_: nobody else touches its records while they are written.
  absl::Status status = store_.AppendAudit(mine->records);
  lock.lock();
  mine->status = status;
  mine->done = true;
  writing_ = false;
  written_.notify_all();
  return status;
}

}  // namespace gpugeek::controlplane
