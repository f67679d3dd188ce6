#pragma once
// Discovery: the one interface through which gpugeek learns what GPUs a node holds.
//
// The problem: a pool mixes NVIDIA and AMD GPUs, some nodes have no GPU library at all, and every
// test must run on a machine without a GPU. So the rest of gpugeek sees only this interface, and
// picks an implementation at start-up: NvmlDiscovery (NVIDIA, libnvidia-ml loaded at run time),
// RocmSmiDiscovery (AMD, librocm_smi64), EmulatedDiscovery (devices from a spec such as
// "8xH100-SXM-80GB", the fake for tests and simulations) and CompositeDiscovery (all backends of a
// host merged into one inventory, each failure reported rather than fatal).

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "hw/device.h"

namespace gpugeek::hw {

// Thread-safety: an implementation is not thread-safe; one owner calls it (the agent's
// discovery loop, the CLI). Calls are blocking and may take milliseconds per device.
class Discovery {
 public:
  virtual ~Discovery() = default;

  // The backend's short name ("nvml", "rocm_smi", "emulated", "composite"), used in problems.
  virtual std::string_view name() const = 0;

  // Enumerates the devices and the link between every pair, and reads the host (CPUs, memory).
  // The result satisfies ValidateInventory. Telemetry and health are left empty: call Sample.
  // Errors: NotFound when the vendor library cannot be loaded (no driver), FailedPrecondition
  // when it loads but fails to initialise, Internal when it lacks a required function. A device
  // that answers some queries but not others is still returned, with what was learnt.
  // May be called again to re-enumerate (e.g. after a GPU was lost).
  virtual absl::StatusOr<NodeInventory> Discover() = 0;

  // Reads telemetry and health of every device found by the last Discover, one GpuSample per
  // device in the same order. A device that fails to answer (lost, reset) gets health.lost /
  // health.error set rather than failing the whole call. FailedPrecondition when Discover has not
  // succeeded yet.
  virtual absl::StatusOr<std::vector<GpuSample>> Sample() = 0;
};

}  // namespace gpugeek::hw
