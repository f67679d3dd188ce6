#pragma once
// RocmSmiDiscovery: AMD GPUs through ROCm SMI (librocm_smi64, shipped with ROCm), loaded with
// dlopen at run time; gpugeek declares the functions it calls itself, matching rocm_smi.h.
//
// What it reads (ROCm SMI function in brackets): name [rsmi_dev_name_get], unique id
// [rsmi_dev_unique_id_get, printed as "GPU-<16 hex>", the form rocminfo prints and
// ROCR_VISIBLE_DEVICES accepts], PCI id [rsmi_dev_pci_id_get], VRAM total
// [rsmi_dev_memory_total_get], driver version [rsmi_version_str_get], NUMA node
// [rsmi_topo_get_numa_node_number], links [rsmi_topo_get_link_type: XGMI or PCIe, with hops];
// per sample busy %, VRAM used, temperature (edge sensor, else junction; millidegrees), power
// (average, else current socket power; microwatts), uncorrectable ECC errors summed over the RAS
// blocks, and reserved / pending bad pages. ROCm SMI offers no XID-like event stream.
// The runtime version is the ROCm release (<rocm root>/.info/version), else the ROCm SMI library's.

#include <memory>
#include <string>

#include "hw/discovery.h"
#include "hw/host_info.h"

namespace gpugeek::hw {

inline constexpr char kRocmSmiLibraryEnv[] = "GPUGEEK_ROCM_SMI_LIBRARY";
inline constexpr char kRocmSmiDefaultLibrary[] = "librocm_smi64.so.1";

struct RocmSmiDiscoveryOptions {
  // The library to load; empty means $GPUGEEK_ROCM_SMI_LIBRARY, else "librocm_smi64.so.1", else
  // "librocm_smi64.so", else the same under $ROCM_PATH/lib (default /opt/rocm/lib).
  std::string library_path;
  // Where ROCm is installed; empty means $ROCM_PATH, else /opt/rocm.
  std::string rocm_root;
  HostPaths host_paths;
  const GpuCatalog* catalog = nullptr;  // GpuCatalog::Builtin() when null; must outlive the object
};

class RocmSmiDiscovery final : public Discovery {
 public:
  // Never fails; the library is loaded by the first Discover.
  explicit RocmSmiDiscovery(RocmSmiDiscoveryOptions options = {});
  ~RocmSmiDiscovery() override;  // rsmi_shut_down, then dlclose

  std::string_view name() const override { return "rocm_smi"; }
  // NotFound: the library cannot be loaded (no ROCm). Internal: it lacks a required function.
  // FailedPrecondition: rsmi_init or rsmi_num_monitor_devices failed (amdgpu not loaded), with
  // rsmi_status_string's text. Partial device failures land in NodeInventory::problems.
  absl::StatusOr<NodeInventory> Discover() override;
  // A device whose queries fail with a file / not-found error (its sysfs node vanished) is
  // reported lost.
  absl::StatusOr<std::vector<GpuSample>> Sample() override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpugeek::hw
