#pragma once
// The device and topology model: what one node holds (host CPUs and memory, its GPUs, how every
// pair of GPUs is linked) and how each GPU is doing right now (telemetry and health).
//
// Every discovery backend (NVML, ROCm SMI, emulated) fills the same types, so the scheduler, the
// agent and the CLI never care where a device came from. A device the catalog does not know keeps
// its raw name and measured memory (`model_id` is then empty): an unknown GPU is never dropped.
//
// Units: memory in bytes, bandwidth in bytes/s (decimal, as datasheets quote it), temperature in
// degrees Celsius, power in milliwatts (the unit NVML reports), utilisation in percent (0..100).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "hw/gpu_catalog.h"

namespace gpugeek::hw {

// How two GPUs reach each other, as `nvidia-smi topo -m` names it. The PCIe kinds are ordered from
// nearest to farthest; a direct fabric (NVLink, XGMI) beats any PCIe path.
enum class LinkKind {
  kSelf,     // "X": the same device (the matrix diagonal)
  kNvLink,   // "NV#": NVLink, direct or through NVSwitch; `links` says how many
  kXgmi,     // "XGMI": AMD Infinity Fabric; `links` says how many
  kPix,      // "PIX": at most one PCIe bridge between them
  kPxb,      // "PXB": several PCIe bridges, no host bridge
  kPhb,      // "PHB": through a PCIe host bridge (the CPU's root complex)
  kNode,     // "NODE": across host bridges within one NUMA node
  kSys,      // "SYS": across NUMA nodes (the SMP interconnect: QPI/UPI, Infinity Fabric)
  kUnknown,  // the library could not tell
};

// The short label of `nvidia-smi topo -m` ("X", "NV", "XGMI", "PIX", ..., "?"). For NVLink and
// XGMI the matrix appends the link count ("NV18").
std::string_view LinkKindLabel(LinkKind kind);
// The inverse of LinkKindLabel, ignoring case; nullopt for an unknown label.
std::optional<LinkKind> LinkKindFromLabel(std::string_view label);
// True for the PCIe path kinds (kPix .. kSys).
bool IsPciePath(LinkKind kind);

// The connection from one GPU to another.
struct PeerLink {
  LinkKind kind = LinkKind::kUnknown;
  int links = 0;                       // NVLink / XGMI links used between the pair; 0 for PCIe paths
  uint64_t bytes_per_second = 0;       // bidirectional peak of the path; 0 when unknown
  LinkKind pcie = LinkKind::kUnknown;  // the PCIe path between them as well (kUnknown if not known)

  bool operator==(const PeerLink&) const = default;
};

// Instantaneous telemetry. A field is nullopt when the library does not offer it for the device.
struct GpuTelemetry {
  std::optional<uint32_t> utilization_percent;  // share of the last sample period a kernel ran
  std::optional<uint64_t> memory_used_bytes;
  std::optional<int32_t> temperature_celsius;  // GPU die (NVIDIA) / edge sensor (AMD)
  std::optional<uint32_t> power_milliwatts;    // board draw (NVIDIA) / average socket power (AMD)

  bool operator==(const GpuTelemetry&) const = default;
};

// Health as the vendor library reports it. Sources: NVML ECC counters, retired pages and XID
// events; ROCm SMI ECC counters and reserved ("bad") pages.
struct GpuHealth {
  bool lost = false;  // the device stopped answering (NVML_ERROR_GPU_IS_LOST and the like)
  // Uncorrectable ECC errors since the driver loaded (NVML volatile counter; ROCm SMI's counters
  // are also per boot). A non-zero count means memory returned bad data: drain the GPU.
  std::optional<uint64_t> ecc_uncorrected;
  std::optional<uint32_t> retired_pages;   // memory pages retired (NVIDIA) / reserved (AMD)
  std::optional<bool> retirement_pending;  // a retirement waits for a reset / reboot
  std::vector<uint64_t> xid_errors;        // NVIDIA XID codes seen since the previous sample
  std::string error;                       // why the last sample failed, if it did

  // False when lost, an uncorrectable ECC error was counted, a retirement is pending, or an XID
  // arrived. Missing counters do not make a device unhealthy.
  bool Healthy() const;
  // One short word for tables: "ok", "lost", "ecc:N", "pending-retire", "xid:79", "error".
  std::string Summary() const;

  bool operator==(const GpuHealth&) const = default;
};

// One GPU as a discovery backend found it.
struct GpuDevice {
  int index = 0;  // position in NodeInventory::gpus (0-based)
  Vendor vendor = Vendor::kUndisclosed;
  std::string name;        // raw name the library reported, e.g. "NVIDIA H100 80GB HBM3"
  std::string model_id;    // catalog id ("H100-SXM-80GB"); empty when the catalog lacks it
  std::string uuid;        // "GPU-..." (NVIDIA, emulated), "GPU-<hex unique id>" (AMD)
  std::string pci_bus_id;  // "dddd:bb:dd.f", lower case (the Linux sysfs form)
  uint64_t memory_total_bytes = 0;
  int numa_node = -1;           // host NUMA node nearest the device; -1 when unknown
  std::string driver_version;   // kernel driver, e.g. "550.54.15"
  std::string runtime_version;  // CUDA version the driver supports ("12.4"), ROCm version
  std::string source;           // the backend: "nvml", "rocm_smi", "emulated"
  int source_index = 0;         // the device's index inside its backend's enumeration
  GpuTelemetry telemetry;       // as of the last Sample (empty right after Discover)
  GpuHealth health;             // as of the last Sample

  bool operator==(const GpuDevice&) const = default;
};

// The host the GPUs sit in. Sources: sysconf(3), /proc/meminfo, /proc/cpuinfo, /sys/devices/system/node.
struct HostInfo {
  std::string hostname;
  int cpu_cores = 0;          // logical CPUs online
  uint64_t memory_bytes = 0;  // MemTotal
  int numa_nodes = 1;
  std::string cpu_model;  // "model name" of the first CPU; empty when unknown

  bool operator==(const HostInfo&) const = default;
};

// Everything one node holds. Invariant: links is gpus.size() x gpus.size(), links[i][i].kind ==
// kSelf, and links[i][j] describes the same path as links[j][i].
struct NodeInventory {
  HostInfo host;
  std::vector<GpuDevice> gpus;
  std::vector<std::vector<PeerLink>> links;
  // What could not be discovered and why, one line each, e.g.
  // "nvml: cannot load libnvidia-ml.so.1: ... (no NVIDIA driver?)". Empty when all went well.
  std::vector<std::string> problems;

  bool operator==(const NodeInventory&) const = default;
};

// One device's telemetry and health at one moment, in the order of NodeInventory::gpus.
struct GpuSample {
  GpuTelemetry telemetry;
  GpuHealth health;

  bool operator==(const GpuSample&) const = default;
};

// Copies samples[i] into inventory.gpus[i]. InvalidArgument when the sizes differ (the inventory
// changed since the samples were taken); the inventory is then left unchanged.
absl::Status ApplySamples(const std::vector<GpuSample>& samples, NodeInventory& inventory);

// Checks the NodeInventory invariants above plus unique UUIDs and indexes matching positions.
// InvalidArgument naming the first violation.
absl::Status ValidateInventory(const NodeInventory& inventory);

}  // namespace gpugeek::hw
