#pragma once
// GpuHealthController: GPU health as a scheduling input. Each pass reads every node's latest telemetry
// (the lease's samples, state/lease_table.h) and the XID events heartbeats carried since the last pass:
//
//   sticky   a GPU whose samples say it is lost, counts uncorrectable ECC errors (the driver's volatile
//            counter: until a reset) or waits for a page retirement is unhealthy for as long as they say so
//   XID      a hardware XID (kHardwareXids, from NVIDIA's XID catalog, docs.nvidia.com/deploy/xid-errors:
//            48 double-bit ECC, 61/62 internal micro-controller, 63/64 row remapping, 74 NVLink, 79 fell
//            off the bus, 92 high single-bit ECC rate, 94/95 contained/uncontained ECC, 119/120 GSP)
//            quarantines the GPU for options.gpu_quarantine after the last one; an application XID (13
//            graphics engine exception, 31 MMU fault, 43 stopped channel, 45 preemptive cleanup: a
//            workload's own fault) is only logged
//
// An unhealthy GPU is in NodeState::unhealthy_gpus (by UUID, with why): the scheduling controller holds
// it as taken, so nothing is placed on it, and every job with a live member on it is stopped and requeued
// (retry cause node-failure, an event naming the GPU) to run elsewhere. It is placed on again once
// healthy: its samples clear and its quarantine ran out.

#include <map>
#include <set>
#include <string>
#include <utility>

#include "controlplane/controllers/context.h"

namespace gpugeek::controlplane {

// Hardware XIDs (see above): the GPU itself failed.
inline const std::set<uint64_t>& HardwareXids() {
  static const std::set<uint64_t> kXids = {48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120};
  return kXids;
}

class GpuHealthController {
 public:
  // One pass at monotonic time `now`.
  void Reconcile(ControllerContext& ctx, MonoTime now);

 private:
  // (node, GPU UUID) -> end of its quarantine and the XID that started it.
  std::map<std::pair<std::string, std::string>, std::pair<MonoTime, uint64_t>> quarantine_;
};

}  // namespace gpugeek::controlplane
