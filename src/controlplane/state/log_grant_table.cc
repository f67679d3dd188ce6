#include "controlplane/state/log_grant_table.h"

namespace gpugeek::controlplane {

void LogGrantTable::Place(const std::string& job_id, const std::string& tenant, int64_t epoch,
                          const std::vector<std::string>& nodes) {
  MutexLock lock(&mu_);
  LogGrant& grant = grants_[job_id];
  grant.tenant = tenant;
  for (size_t rank = 0; rank < nodes.size(); ++rank) grant.members[{epoch, static_cast<int>(rank)}] = nodes[rank];
  grant.ranks = static_cast<int>(nodes.size());
  grant.live = true;
  grant.released_at.reset();
}

void LogGrantTable::Release(const std::string& job_id, MonoTime now) {
  MutexLock lock(&mu_);
  auto it = grants_.find(job_id);
  if (it == grants_.end()) return;
  it->second.live = false;
  it->second.released_at = now;
  released_.emplace_back(now, job_id);
}

void LogGrantTable::Erase(const std::string& job_id) {
  MutexLock lock(&mu_);
  grants_.erase(job_id);  // its entry in released_ finds nothing when it expires
}

void LogGrantTable::Clear() {
  MutexLock lock(&mu_);
  grants_.clear();
  released_.clear();
}

size_t LogGrantTable::Expire(MonoTime cutoff) {
  MutexLock lock(&mu_);
  size_t expired = 0;
  while (!released_.empty() && released_.front().first <= cutoff) {
    auto it = grants_.find(released_.front().second);
    // Placed again (live) or released again later (a newer entry in the FIFO): not this entry's to drop.
    if (it != grants_.end() && !it->second.live && it->second.released_at == released_.front().first) {
      grants_.erase(it);
      ++expired;
    }
    released_.pop_front();
  }
  return expired;
}

std::optional<std::string> LogGrantTable::WriterTenant(const std::string& job_id, int64_t epoch, int rank,
                                                       const std::string& node) const {
  MutexLock lock(&mu_);
  auto it = grants_.find(job_id);
  if (it == grants_.end()) return std::nullopt;
  auto member = it->second.members.find({epoch, rank});
  if (member == it->second.members.end() || member->second != node) return std::nullopt;
  return it->second.tenant;
}

std::optional<LogGrant> LogGrantTable::Get(const std::string& job_id) const {
  MutexLock lock(&mu_);
  auto it = grants_.find(job_id);
  if (it == grants_.end()) return std::nullopt;
  return it->second;
}

size_t LogGrantTable::size() const {
  MutexLock lock(&mu_);
  return grants_.size();
}

}  // namespace gpugeek::controlplane
