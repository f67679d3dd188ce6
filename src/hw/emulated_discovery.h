#pragma once
// EmulatedDiscovery: a node of GPUs that exist only on paper, built from an emulate spec
// ("8xH100-SXM-80GB", "8xMI300X", "4xA100-PCIe-80GB,2xL4"). It is the fake every test and the
// simulator use in place of NVML / ROCm SMI, so it reproduces the real topology of each system:
//
//  - 8-GPU SXM boards (HGX A100/H100/H200/B200): NVSwitch, every pair at the GPU's full link count
//    (NV12 for A100, NV18 for H100/H200/B200); boards of at most 4 link directly, the links split
//    evenly between peers (HGX A100 4-GPU: NV4 per pair). More than 8 GPUs form several boards.
//  - V100 SXM2: the DGX-1 hybrid cube-mesh (NV1/NV2, six links per GPU).
//  - PCIe cards with an NVLink bridge (A100 PCIe, H100 PCIe/NVL, RTX 3090): bridged pairs (0,1),
//    (2,3), ... at the card's full link count.
//  - MI300X / MI325X OAM: XGMI fully connected within 8-GPU boards, one link per pair (7 per GPU).
//  - MI250 / MI250X: the two GCDs of a package joined by four in-package XGMI links.
//  - MI100 / MI210: XGMI bridge hives of up to four cards.
//  - everything else, and between the groups above: PCIe on a two-socket host; within a socket
//    consecutive cards share a PCIe switch (PIX), other cards meet at the CPU (NODE), cards on
//    different sockets are SYS. GH200 superchips each have their own NUMA node (Grace CPU).
//
// UUIDs ("GPU-emu-<16 hex>") and PCI bus ids are deterministic functions of the host name, the
// canonical spec and the index. Telemetry is idle and healthy unless a test scripts it with
// SetSample.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hw/discovery.h"
#include "hw/emulate_spec.h"

namespace gpugeek::hw {

struct EmulatedDiscoveryOptions {
  std::string spec;  // the emulate spec text
  // Mixed into UUIDs so emulated nodes of one pool differ; gethostname(2) when empty.
  std::string host_name;
  // The host to report; the real host (ReadHostInfo) when unset. numa_nodes is raised to cover
  // the emulated layout.
  std::optional<HostInfo> host;
  const GpuCatalog* catalog = nullptr;  // GpuCatalog::Builtin() when null; must outlive the object
};

class EmulatedDiscovery final : public Discovery {
 public:
  // InvalidArgument when the spec does not parse (see ParseEmulateSpec).
  static absl::StatusOr<std::unique_ptr<EmulatedDiscovery>> Create(const EmulatedDiscoveryOptions& options);

  std::string_view name() const override { return "emulated"; }
  // Never fails.
  absl::StatusOr<NodeInventory> Discover() override;
  // The idle, healthy sample of each device (0 % busy, no memory used, 30 C, a tenth of TDP),
  // or what SetSample scripted. FailedPrecondition before Discover.
  absl::StatusOr<std::vector<GpuSample>> Sample() override;

  // Scripts what Sample returns for device `index` from now on (e.g. a lost GPU, an XID).
  // InvalidArgument for an index outside the inventory.
  absl::Status SetSample(int index, GpuSample sample);

  const EmulateSpec& spec() const { return spec_; }

 private:
  EmulatedDiscovery(EmulateSpec spec, NodeInventory inventory);

  // Constant after construction.
  const EmulateSpec spec_;
  const NodeInventory inventory_;
  // Mutable state.
  bool discovered_ = false;
  std::vector<GpuSample> samples_;
};

// Builds the inventory EmulatedDiscovery reports; exposed for tests and the simulator.
NodeInventory BuildEmulatedInventory(const EmulateSpec& spec, const std::string& host_name, const HostInfo& host);

}  // namespace gpugeek::hw
