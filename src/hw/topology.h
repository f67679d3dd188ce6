#pragma once
// Link arithmetic shared by every discovery backend, and the `nvidia-smi topo -m` style matrix.
//
// Per-link bandwidth comes from the catalog: a model's total NVLink (or XGMI) bandwidth divided by
// the links one GPU of that model has. Link counts per GPU (NVIDIA datasheets): V100 SXM2 6,
// A100 12 (NVLink3), A100 PCIe 12 over three bridges, H100/H200/GH200 SXM 18 (NVLink4), H100 PCIe
// and NVL 12 over three bridges, B200 18 (NVLink5), RTX 3090 4 over one bridge. All figures are
// bidirectional bytes/s.

#include <cstdint>
#include <string>

#include "hw/device.h"
#include "hw/gpu_catalog.h"

namespace gpugeek::hw {

// NVLink links one GPU of `model` has; 0 when the model has no NVLink.
int NvLinkLinksPerGpu(const GpuModel& model);
// Bidirectional bytes/s of one NVLink link of `model`; 0 when the model has no NVLink.
uint64_t NvLinkBytesPerLink(const GpuModel& model);
// Bidirectional bytes/s of one XGMI link of `model`; 0 when the model has no XGMI.
uint64_t XgmiBytesPerLink(const GpuModel& model);
// Bidirectional bytes/s of the x16 PCIe link of `model`.
uint64_t PcieBytesPerSecond(const GpuModel& model);

// The PCIe path between two devices when only their NUMA nodes are known: kNode for the same
// node, kSys for different nodes, kUnknown when either is -1.
LinkKind PciePathFromNuma(int numa_a, int numa_b);

// The matrix cell for one link: "X", "NV18", "XGMI", "XGMI4", "PIX", ..., "?".
std::string LinkCellLabel(const PeerLink& link);

// Renders the GPU-to-GPU matrix with a NUMA column, then a legend of the labels used, like
// `nvidia-smi topo -m`. Empty string for an inventory without GPUs.
std::string RenderTopologyMatrix(const NodeInventory& inventory);

}  // namespace gpugeek::hw
