#include "hw/composite_discovery.h"

#include "fmt/format.h"
#include "hw/nvml_discovery.h"
#include "hw/rocm_smi_discovery.h"
#include "hw/topology.h"

namespace gpugeek::hw {

CompositeDiscovery::CompositeDiscovery(std::vector<std::unique_ptr<Discovery>> backends, HostPaths host_paths)
    : backends_(std::move(backends)), host_paths_(std::move(host_paths)) {}

absl::StatusOr<NodeInventory> CompositeDiscovery::Discover() {
  NodeInventory inv;
  inv.host = ReadHostInfo(host_paths_);
  parts_.clear();
  std::vector<NodeInventory> found;
  for (const auto& backend : backends_) {
    auto r = backend->Discover();
    if (!r.ok()) {
      inv.problems.push_back(fmt::format("{}: {}", std::string(backend->name()), std::string(r.status().message())));
      parts_.push_back({backend.get(), 0});
      found.emplace_back();
      continue;
    }
    parts_.push_back({backend.get(), r->gpus.size()});
    found.push_back(*std::move(r));
  }

  std::vector<size_t> part_of;  // backend position of each merged device
  for (size_t p = 0; p < found.size(); ++p) {
    for (GpuDevice& d : found[p].gpus) {
      d.index = static_cast<int>(inv.gpus.size());
      inv.gpus.push_back(std::move(d));
      part_of.push_back(p);
    }
    for (std::string& problem : found[p].problems) inv.problems.push_back(std::move(problem));
  }

  const size_t n = inv.gpus.size();
  inv.links.assign(n, std::vector<PeerLink>(n));
  size_t offset = 0;
  for (const NodeInventory& part : found) {
    const size_t m = part.gpus.size();
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < m; ++j) inv.links[offset + i][offset + j] = part.links[i][j];
    }
    offset += m;
  }
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (part_of[i] == part_of[j]) continue;
      PeerLink& link = inv.links[i][j];
      link.pcie = PciePathFromNuma(inv.gpus[i].numa_node, inv.gpus[j].numa_node);
      link.kind = link.pcie;
    }
  }
  discovered_ = true;
  return inv;
}

absl::StatusOr<std::vector<GpuSample>> CompositeDiscovery::Sample() {
  if (!discovered_) return absl::FailedPreconditionError("composite: Sample before Discover");
  std::vector<GpuSample> all;
  for (const Part& part : parts_) {
    if (part.count == 0) continue;
    auto r = part.backend->Sample();
    if (r.ok() && r->size() == part.count) {
      for (GpuSample& s : *r) all.push_back(std::move(s));
      continue;
    }
    std::string why =
        r.ok() ? fmt::format("{} samples for {} devices", r->size(), part.count) : std::string(r.status().message());
    for (size_t i = 0; i < part.count; ++i) {
      GpuSample s;
      s.health.error = fmt::format("{}: {}", std::string(part.backend->name()), why);
      all.push_back(std::move(s));
    }
  }
  return all;
}

std::unique_ptr<Discovery> MakeHostDiscovery() {
  std::vector<std::unique_ptr<Discovery>> backends;
  backends.push_back(std::make_unique<NvmlDiscovery>());
  backends.push_back(std::make_unique<RocmSmiDiscovery>());
  return std::make_unique<CompositeDiscovery>(std::move(backends));
}

}  // namespace gpugeek::hw
