#include "hw/topology.h"

#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/table.h"
#include "common/units.h"

namespace gpugeek::hw {

int NvLinkLinksPerGpu(const GpuModel& model) {
  const Interconnect& ic = model.interconnect;
  switch (ic.nvlink_generation) {
    case 0:
      return 0;
    case 1:
      return 4;  // P100 SXM2
    case 2:
      return 6;  // V100 SXM2
    case 3:
      // GA102 (RTX 3090) has one four-link bridge connector; GA100 parts have twelve links.
      return ic.nvlink_bytes_per_second < 200 * kGB ? 4 : 12;
    case 4:
      // H100 PCIe / NVL carry 12 links over three bridges; SXM5 and Grace Hopper 18.
      return ic.nvlink_bytes_per_second < 900 * kGB ? 12 : 18;
    default:
      return 18;  // NVLink5 (B200)
  }
}

uint64_t NvLinkBytesPerLink(const GpuModel& model) {
  int links = NvLinkLinksPerGpu(model);
  return links == 0 ? 0 : model.interconnect.nvlink_bytes_per_second / links;
}

uint64_t XgmiBytesPerLink(const GpuModel& model) {
  const Interconnect& ic = model.interconnect;
  // The catalog halves package bandwidth for two-GCD parts (MI250/MI250X) but keeps the package's
  // link count, so scale back to the package before dividing.
  return ic.xgmi_links == 0 ? 0 : ic.xgmi_bytes_per_second * model.package_devices / ic.xgmi_links;
}

uint64_t PcieBytesPerSecond(const GpuModel& model) { return model.interconnect.PcieBytesPerSecond(); }

LinkKind PciePathFromNuma(int numa_a, int numa_b) {
  if (numa_a < 0 || numa_b < 0) return LinkKind::kUnknown;
  return numa_a == numa_b ? LinkKind::kNode : LinkKind::kSys;
}

std::string LinkCellLabel(const PeerLink& link) {
  switch (link.kind) {
    case LinkKind::kNvLink:
      return absl::StrCat("NV", link.links);
    case LinkKind::kXgmi:
      return link.links > 1 ? absl::StrCat("XGMI", link.links) : "XGMI";
    default:
      return std::string(LinkKindLabel(link.kind));
  }
}

std::string RenderTopologyMatrix(const NodeInventory& inventory) {
  const size_t n = inventory.gpus.size();
  if (n == 0) return "";
  std::vector<std::string> header = {""};
  for (size_t j = 0; j < n; ++j) header.push_back(absl::StrCat("GPU", j));
  header.push_back("NUMA");
  TextTable table(std::move(header));
  std::set<LinkKind> used;
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::string> row = {absl::StrCat("GPU", i)};
    for (size_t j = 0; j < n; ++j) {
      const PeerLink& link = inventory.links[i][j];
      used.insert(link.kind);
      row.push_back(LinkCellLabel(link));
    }
    int numa = inventory.gpus[i].numa_node;
    row.push_back(numa < 0 ? "N/A" : absl::StrCat(numa));
    table.AddRow(std::move(row));
  }
  std::string out = table.Render();
  out += "\nLegend:\n";
  static constexpr struct {
    LinkKind kind;
    const char* text;
  } kLegend[] = {
      {LinkKind::kSelf, "  X     = Self\n"},
      {LinkKind::kNvLink, "  NV#   = NVLink, # links (direct, or all-to-all through NVSwitch)\n"},
      {LinkKind::kXgmi, "  XGMI# = AMD Infinity Fabric (XGMI), # links (one when no number)\n"},
      {LinkKind::kPix, "  PIX   = PCIe, at most a single PCIe bridge\n"},
      {LinkKind::kPxb, "  PXB   = PCIe, multiple PCIe bridges (no host bridge)\n"},
      {LinkKind::kPhb, "  PHB   = PCIe, through a PCIe host bridge (typically the CPU)\n"},
      {LinkKind::kNode, "  NODE  = PCIe and the interconnect between host bridges within a NUMA node\n"},
      {LinkKind::kSys, "  SYS   = PCIe and the SMP interconnect between NUMA nodes (e.g. QPI/UPI)\n"},
      {LinkKind::kUnknown, "  ?     = unknown (the library did not say)\n"},
  };
  for (const auto& entry : kLegend) {
    if (used.contains(entry.kind)) out += entry.text;
  }
  return out;
}

}  // namespace gpugeek::hw
