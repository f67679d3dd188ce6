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

}  // namespace gpugeek::controlplane
