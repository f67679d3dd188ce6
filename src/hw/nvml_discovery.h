#pragma once
// NvmlDiscovery: NVIDIA GPUs through NVML (libnvidia-ml.so.1, shipped with the driver), loaded
// with dlopen at run time. gpugeek declares the few NVML functions it calls itself, matching
// nvml.h, so neither CUDA nor the NVML headers are needed to build.
//
// What it reads (NVML function in brackets): name, UUID, PCI bus id [nvmlDeviceGetPciInfo_v3],
// memory [nvmlDeviceGetMemoryInfo], driver and CUDA version, NUMA node [nvmlDeviceGetMemoryAffinity,
// else sysfs], NVLink links [nvmlDeviceGetNvLinkState / RemotePciInfo_v2 / RemoteDeviceType] and
// PCIe paths [nvmlDeviceGetTopologyCommonAncestor]; per sample utilisation, memory used,
// temperature, power, volatile uncorrectable ECC errors, retired pages and pending retirement, and
// XID critical errors from an NVML event set (where the driver lets this user register events).

#include <memory>
#include <string>

#include "hw/discovery.h"
#include "hw/host_info.h"

namespace gpugeek::hw {

inline constexpr char kNvmlLibraryEnv[] = "GPUGEEK_NVML_LIBRARY";
inline constexpr char kNvmlDefaultLibrary[] = "libnvidia-ml.so.1";

struct NvmlDiscoveryOptions {
  // The library to load; empty means $GPUGEEK_NVML_LIBRARY, else "libnvidia-ml.so.1". Tests
  // point it at a fake.
  std::string library_path;
  HostPaths host_paths;
  const GpuCatalog* catalog = nullptr;  // GpuCatalog::Builtin() when null; must outlive the object
};

class NvmlDiscovery final : public Discovery {
 public:
  // Never fails: the library is loaded by the first Discover, so a host without NVIDIA GPUs can
  // still construct one and learn why from Discover's status.
  explicit NvmlDiscovery(NvmlDiscoveryOptions options = {});
  ~NvmlDiscovery() override;  // nvmlShutdown, then dlclose

  std::string_view name() const override { return "nvml"; }
  // NotFound: the library cannot be loaded (no NVIDIA driver). Internal: it lacks a required
  // function. FailedPrecondition: nvmlInit_v2 or nvmlDeviceGetCount_v2 failed (driver not loaded,
  // no permission), with nvmlErrorString's text. A device that fails some queries is kept, and
  // the failures are listed in NodeInventory::problems.
  absl::StatusOr<NodeInventory> Discover() override;
  absl::StatusOr<std::vector<GpuSample>> Sample() override;

  // The library path actually used (after the environment default).
  const std::string& library_path() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpugeek::hw
