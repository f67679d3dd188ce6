#pragma once
// CompositeDiscovery: every backend of a host merged into one NodeInventory. A host with both
// NVIDIA and AMD GPUs reports both; a backend whose library is missing or fails contributes a
// line to NodeInventory::problems ("nvml: cannot load libnvidia-ml.so.1: ...") instead of an
// error, so a host without GPUs still yields a (GPU-less) inventory.

#include <memory>
#include <vector>

#include "hw/discovery.h"
#include "hw/host_info.h"

namespace gpugeek::hw {

class CompositeDiscovery final : public Discovery {
 public:
  // Takes ownership of `backends`; devices are numbered in backend order.
  explicit CompositeDiscovery(std::vector<std::unique_ptr<Discovery>> backends, HostPaths host_paths = {});

  std::string_view name() const override { return "composite"; }
  // Never fails. Devices of different backends are linked by the PCIe path their NUMA nodes imply
  // (NODE / SYS, "?" when unknown).
  absl::StatusOr<NodeInventory> Discover() override;
  // A backend whose Sample fails marks each of its devices with health.error.
  // FailedPrecondition before Discover.
  absl::StatusOr<std::vector<GpuSample>> Sample() override;

 private:
  struct Part {
    Discovery* backend;
    size_t count;  // devices it contributed to the last inventory
  };
  const std::vector<std::unique_ptr<Discovery>> backends_;
  const HostPaths host_paths_;
  std::vector<Part> parts_;
  bool discovered_ = false;
};

// The discovery of this host: NVML then ROCm SMI, library paths from $GPUGEEK_NVML_LIBRARY and
// $GPUGEEK_ROCM_SMI_LIBRARY (defaults as in NvmlDiscoveryOptions / RocmSmiDiscoveryOptions).
std::unique_ptr<Discovery> MakeHostDiscovery();

}  // namespace gpugeek::hw
