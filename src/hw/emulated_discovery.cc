#include "hw/emulated_discovery.h"

#include <unistd.h>

#include <algorithm>

#include "fmt/format.h"
#include "hw/host_info.h"
#include "hw/topology.h"

namespace gpugeek::hw {
namespace {

// How the GPUs of one spec group are wired to each other (see the header for the systems).
enum class Fabric { kNone, kNvSwitchBoard, kV100CubeMesh, kNvLinkBridgePairs, kXgmiMeshBoard, kGcdPairs, kXgmiHive };

constexpr int kBoardSize = 8;  // GPUs per HGX / OAM baseboard
constexpr int kHiveSize = 4;   // cards per XGMI bridge (MI100, MI210)
constexpr int kGcdLinks = 4;   // in-package Infinity Fabric links between the two GCDs (CDNA2 white paper)

// DGX-1 (V100) hybrid cube-mesh: NVLink links between GPU i and j, six per GPU; nvidia-smi topo -m
// on a DGX-1V prints exactly these NV1/NV2 cells.
constexpr int kCubeMesh[8][8] = {
    {0, 1, 1, 2, 2, 0, 0, 0}, {1, 0, 2, 1, 0, 2, 0, 0}, {1, 2, 0, 2, 0, 0, 1, 0}, {2, 1, 2, 0, 0, 0, 0, 1},
    {2, 0, 0, 0, 0, 1, 1, 2}, {0, 2, 0, 0, 1, 0, 2, 1}, {0, 0, 1, 0, 1, 2, 0, 2}, {0, 0, 0, 1, 2, 1, 2, 0},
};

bool IsSuperchip(const GpuModel& m) { return m.form_factor.find("Superchip") != std::string::npos; }

Fabric FabricOf(const GpuModel& m) {
  const Interconnect& ic = m.interconnect;
  bool pcie_card = m.form_factor.starts_with("PCIe");
  if (m.vendor == Vendor::kNvidia) {
    if (ic.nvlink_generation == 0 || IsSuperchip(m)) return Fabric::kNone;
    if (pcie_card) return Fabric::kNvLinkBridgePairs;
    return ic.nvlink_generation == 2 ? Fabric::kV100CubeMesh : Fabric::kNvSwitchBoard;
  }
  if (m.vendor == Vendor::kAmd) {
    if (m.package_devices == 2) return Fabric::kGcdPairs;
    if (ic.xgmi_links == 0) return Fabric::kNone;
    return pcie_card ? Fabric::kXgmiHive : Fabric::kXgmiMeshBoard;
  }
  return Fabric::kNone;
}

struct Slot {
  const GpuModel* model;
  int group;
  int local;        // index within its spec group
  int group_count;  // GPUs in its spec group
  int numa;
  int pcie_switch;  // GPUs with the same value share a PCIe switch
};

// Fabric links between two GPUs of one group; 0 when they meet only over PCIe.
int FabricLinks(const Slot& a, const Slot& b) {
  const GpuModel& m = *a.model;
  auto group_size = [&](int unit, int first) { return std::min(unit, a.group_count - first); };
  switch (FabricOf(m)) {
    case Fabric::kNone:
      return 0;
    case Fabric::kNvSwitchBoard: {
      if (a.local / kBoardSize != b.local / kBoardSize) return 0;
      int size = group_size(kBoardSize, a.local / kBoardSize * kBoardSize);
      int links = NvLinkLinksPerGpu(m);
      // Boards of up to four GPUs (HGX 4-GPU) wire GPUs directly and split the links evenly;
      // larger boards go through NVSwitch, giving every pair the full count.
      return size <= 4 ? links / (size - 1) : links;
    }
    case Fabric::kV100CubeMesh:
      if (a.local / kBoardSize != b.local / kBoardSize) return 0;
      return kCubeMesh[a.local % kBoardSize][b.local % kBoardSize];
    case Fabric::kNvLinkBridgePairs:
      return a.local / 2 == b.local / 2 ? NvLinkLinksPerGpu(m) : 0;
    case Fabric::kXgmiMeshBoard:
      return a.local / kBoardSize == b.local / kBoardSize ? 1 : 0;
    case Fabric::kGcdPairs:
      return a.local / 2 == b.local / 2 ? kGcdLinks : 0;
    case Fabric::kXgmiHive: {
      if (a.local / kHiveSize != b.local / kHiveSize) return 0;
      int size = group_size(kHiveSize, a.local / kHiveSize * kHiveSize);
      return std::max(1, m.interconnect.xgmi_links / (size - 1));
    }
  }
  return 0;
}

std::vector<Slot> LayOut(const EmulateSpec& spec) {
  std::vector<Slot> slots;
  int next_switch = 0;
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const EmulateGroup& group = spec.groups[g];
    // Half the cards on each socket (the first half on socket 0); a superchip is its own node.
    int half = (group.count + 1) / 2;
    for (int local = 0; local < group.count; ++local) {
      Slot s{group.model, static_cast<int>(g), local, group.count, 0, 0};
      if (IsSuperchip(*group.model)) {
        s.numa = local;
        s.pcie_switch = next_switch + local;
      } else {
        s.numa = local < half ? 0 : 1;
        int in_socket = local < half ? local : local - half;
        s.pcie_switch = next_switch + s.numa * kMaxEmulatedGpus + in_socket / 2;  // two cards per switch
      }
      slots.push_back(s);
    }
    next_switch += 2 * kMaxEmulatedGpus;
  }
  return slots;
}

uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64-bit offset basis and prime
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  // splitmix64's finaliser, so ids of neighbouring devices do not share most of their digits.
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

GpuSample IdleSample(const GpuModel& m) {
  GpuSample s;
  s.telemetry.utilization_percent = 0;
  s.telemetry.memory_used_bytes = 0;
  s.telemetry.temperature_celsius = 30;
  s.telemetry.power_milliwatts = static_cast<uint32_t>(m.tdp_watts) * 100;  // a tenth of TDP, in mW
  s.health.ecc_uncorrected = 0;
  s.health.retired_pages = 0;
  s.health.retirement_pending = false;
  return s;
}

}  // namespace

NodeInventory BuildEmulatedInventory(const EmulateSpec& spec, const std::string& host_name, const HostInfo& host) {
  NodeInventory inv;
  inv.host = host;
  const std::vector<Slot> slots = LayOut(spec);
  const std::string canonical = spec.Canonical();
  int max_numa = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    const GpuModel& m = *s.model;
    GpuDevice d;
    d.index = static_cast<int>(i);
    d.vendor = m.vendor;
    d.name = m.aliases.empty() ? m.display_name : m.aliases.front();
    d.model_id = m.id;
    d.uuid = fmt::format("GPU-emu-{:016x}", Fnv1a(fmt::format("{}|{}|{}", host_name, canonical, i)));
    // Sixteen devices per PCI domain, buses spaced as on real boards; always a valid bus number.
    d.pci_bus_id = fmt::format("{:04x}:{:02x}:00.0", i / 16, 0x10 + (i % 16) * 0x0e);
    d.memory_total_bytes = m.memory_bytes;
    d.numa_node = s.numa;
    d.driver_version = "emulated";
    d.runtime_version = "emulated";
    d.source = "emulated";
    d.source_index = static_cast<int>(i);
    max_numa = std::max(max_numa, s.numa);
    inv.gpus.push_back(std::move(d));
  }
  inv.host.numa_nodes = std::max(inv.host.numa_nodes, max_numa + 1);

  const size_t n = slots.size();
  inv.links.assign(n, std::vector<PeerLink>(n));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      PeerLink& link = inv.links[i][j];
      if (i == j) {
        link.kind = LinkKind::kSelf;
        continue;
      }
      const Slot& a = slots[i];
      const Slot& b = slots[j];
      link.pcie = a.numa != b.numa ? LinkKind::kSys : a.pcie_switch == b.pcie_switch ? LinkKind::kPix : LinkKind::kNode;
      int fabric = a.group == b.group ? FabricLinks(a, b) : 0;
      if (fabric > 0 && a.model->vendor == Vendor::kNvidia) {
        link.kind = LinkKind::kNvLink;
        link.links = fabric;
        link.bytes_per_second = fabric * NvLinkBytesPerLink(*a.model);
      } else if (fabric > 0) {
        link.kind = LinkKind::kXgmi;
        link.links = fabric;
        link.bytes_per_second = fabric * XgmiBytesPerLink(*a.model);
      } else {
        link.kind = link.pcie;
        link.bytes_per_second = std::min(PcieBytesPerSecond(*a.model), PcieBytesPerSecond(*b.model));
      }
    }
  }
  return inv;
}

EmulatedDiscovery::EmulatedDiscovery(EmulateSpec spec, NodeInventory inventory)
    : spec_(std::move(spec)), inventory_(std::move(inventory)) {
  for (const GpuDevice& d : inventory_.gpus) {
    const GpuModel* m = nullptr;
    for (const EmulateGroup& g : spec_.groups) {
      if (g.model->id == d.model_id) m = g.model;
    }
    samples_.push_back(IdleSample(*m));  // every device's model comes from the spec
  }
}

absl::StatusOr<std::unique_ptr<EmulatedDiscovery>> EmulatedDiscovery::Create(const EmulatedDiscoveryOptions& options) {
  const GpuCatalog& catalog = options.catalog != nullptr ? *options.catalog : GpuCatalog::Builtin();
  auto spec = ParseEmulateSpec(options.spec, catalog);
  if (!spec.ok()) return spec.status();
  std::string host_name = options.host_name;
  if (host_name.empty()) {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) == 0) host_name = buf;
  }
  HostInfo host = options.host.has_value() ? *options.host : ReadHostInfo();
  NodeInventory inventory = BuildEmulatedInventory(*spec, host_name, host);
  return std::unique_ptr<EmulatedDiscovery>(new EmulatedDiscovery(*std::move(spec), std::move(inventory)));
}

absl::StatusOr<NodeInventory> EmulatedDiscovery::Discover() {
  discovered_ = true;
  return inventory_;
}

absl::StatusOr<std::vector<GpuSample>> EmulatedDiscovery::Sample() {
  if (!discovered_) return absl::FailedPreconditionError("emulated: Sample before Discover");
  return samples_;
}

absl::Status EmulatedDiscovery::SetSample(int index, GpuSample sample) {
  if (index < 0 || index >= static_cast<int>(samples_.size())) {
    return absl::InvalidArgumentError(fmt::format("emulated: no device {} (the node has {})", index, samples_.size()));
  }
  samples_[index] = std::move(sample);
  return absl::OkStatus();
}

}  // namespace gpugeek::hw
