#include "controlplane/state/lease_table.h"

namespace gpugeek::controlplane {

void LeaseTable::Grant(const std::string& node, const std::string& instance_id, MonoTime now, TimePoint wall) {
  MutexLock lock(&mu_);
  Lease& lease = leases_[node];
  lease.instance_id = instance_id;
  lease.renewed = now;
  lease.renewed_wall = wall;
}

RenewResult LeaseTable::Renew(const std::string& node, const std::string& instance_id, MonoTime now, TimePoint wall,
                              std::vector<hw::GpuSample> samples) {
  MutexLock lock(&mu_);
  auto it = leases_.find(node);
  if (it == leases_.end()) return RenewResult::kUnknownNode;
  if (it->second.instance_id != instance_id) return RenewResult::kOtherInstance;
  it->second.renewed = now;
  it->second.renewed_wall = wall;
  for (size_t i = 0; i < samples.size(); ++i) {
    const std::vector<uint64_t>& xids = samples[i].health.xid_errors;
    if (xids.empty()) continue;
    std::vector<uint64_t>& unread = it->second.unread_xids[static_cast<int>(i)];
    // Bounded: a GPU storming XIDs keeps the first ones (one is enough to act on).
    for (size_t k = 0; k < xids.size() && unread.size() < 64; ++k) unread.push_back(xids[k]);
  }
  it->second.samples = std::move(samples);
  return RenewResult::kRenewed;
}

void LeaseTable::Remove(const std::string& node) {
  MutexLock lock(&mu_);
  leases_.erase(node);
}

std::optional<Lease> LeaseTable::Get(const std::string& node) const {
  MutexLock lock(&mu_);
  auto it = leases_.find(node);
  if (it == leases_.end()) return std::nullopt;
  return it->second;
}

std::map<std::string, MonoTime> LeaseTable::Renewals() const {
  MutexLock lock(&mu_);
  std::map<std::string, MonoTime> out;
  for (const auto& [node, lease] : leases_) out.emplace(node, lease.renewed);
  return out;
}

std::map<std::string, std::vector<hw::GpuSample>> LeaseTable::Samples() const {
  MutexLock lock(&mu_);
  std::map<std::string, std::vector<hw::GpuSample>> out;
  for (const auto& [node, lease] : leases_) {
    if (!lease.samples.empty()) out.emplace(node, lease.samples);
  }
  return out;
}

std::map<std::string, std::map<int, std::vector<uint64_t>>> LeaseTable::TakeXids() {
  MutexLock lock(&mu_);
  std::map<std::string, std::map<int, std::vector<uint64_t>>> out;
  for (auto& [node, lease] : leases_) {
    if (!lease.unread_xids.empty()) out.emplace(node, std::move(lease.unread_xids));
    lease.unread_xids.clear();
  }
  return out;
}

}  // namespace gpugeek::controlplane
