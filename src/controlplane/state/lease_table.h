#pragma once
// LeaseTable: one heartbeat lease per node, renewed by every heartbeat on the monotonic clock.
//
// Liveness must never wait behind user traffic or a store write, so a heartbeat touches only this
// table: one short critical section, no fsync, no I/O, and no lock that the writer (the controllers)
// holds across I/O. The node lifecycle controller reads the renewal times on each pass and decides,
// from monotonic ages, which nodes are suspect and which are lost (docs/architecture.md, "Fencing").
//
// A lease belongs to one agent process: `instance_id` is drawn by the agent at each start. A heartbeat
// from another instance than the one that registered does not renew (the agent must register again,
// which is how the control plane learns that an agent restarted).
//
// Thread-safety: every method may be called from any thread.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "hw/device.h"

namespace gpugeek::controlplane {

struct Lease {
  std::string instance_id;
  MonoTime renewed;                    // last renewal (registration or heartbeat), monotonic
  TimePoint renewed_wall;              // the same instant on the wall clock, for display only
  std::vector<hw::GpuSample> samples;  // the latest GPU telemetry, one per GPU
  // XID codes every heartbeat's samples carried since TakeXids last read them, by GPU index: an event
  // comes in one sample only, so the latest samples alone could lose it between two controller passes.
  std::map<int, std::vector<uint64_t>> unread_xids;
};

enum class RenewResult {
  kRenewed,
  kUnknownNode,    // no lease: the node must register
  kOtherInstance,  // the lease belongs to another agent process: register again
};

class LeaseTable {
 public:
  // Grants (or re-grants) `node`'s lease to `instance_id`, renewed now.
  void Grant(const std::string& node, const std::string& instance_id, MonoTime now, TimePoint wall);
  // Renews the lease if `instance_id` holds it, storing the telemetry.
  RenewResult Renew(const std::string& node, const std::string& instance_id, MonoTime now, TimePoint wall,
                    std::vector<hw::GpuSample> samples);
  void Remove(const std::string& node);
  std::optional<Lease> Get(const std::string& node) const;
  // Every node's last renewal, by node name.
  std::map<std::string, MonoTime> Renewals() const;
  // Every node's latest samples, by node name (nodes without samples are absent).
  std::map<std::string, std::vector<hw::GpuSample>> Samples() const;
  // The XIDs received since the last call, node -> GPU index -> codes in arrival order; cleared.
  std::map<std::string, std::map<int, std::vector<uint64_t>>> TakeXids();

 private:
  mutable Mutex mu_;
  std::map<std::string, Lease> leases_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gpugeek::controlplane
