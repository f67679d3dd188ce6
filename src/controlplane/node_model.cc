#include "controlplane/node_model.h"

#include <map>
#include <numeric>

namespace gpugeek::controlplane {
namespace {

sched::CapacityType ParseCapacity(const std::string& s) {
  if (s == "spot") return sched::CapacityType::kSpot;
  if (s == "reserved") return sched::CapacityType::kReserved;
  return sched::CapacityType::kOnDemand;
}

// Union-find root with path halving.
int Root(std::vector<int>& parent, int i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

}  // namespace

std::vector<SchedNode> ToSchedNodes(const api::Registration& registration) {
  const hw::NodeInventory& inv = registration.inventory;
  const int64_t cpu_milli = int64_t{inv.host.cpu_cores} * 1000;
  const uint64_t memory = inv.host.memory_bytes;

  // NVLink / XGMI connected components over all devices.
  const int n = static_cast<int>(inv.gpus.size());
  std::vector<int> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  for (int i = 0; i < n && i < static_cast<int>(inv.links.size()); ++i) {
    for (int j = i + 1; j < n && j < static_cast<int>(inv.links[i].size()); ++j) {
      const hw::LinkKind k = inv.links[i][j].kind;
      if (k == hw::LinkKind::kNvLink || k == hw::LinkKind::kXgmi) parent[Root(parent, i)] = Root(parent, j);
    }
  }

  // Devices grouped by model, in order of first appearance.
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> by_model;
  for (const hw::GpuDevice& d : inv.gpus) {
    const std::string model = d.model_id.empty() ? d.name : d.model_id;
    if (!by_model.count(model)) order.push_back(model);
    by_model[model].push_back(d.index);
  }

  std::vector<SchedNode> out;
  if (order.empty()) {
    SchedNode s;
    s.node = registration.node;
    s.spec.name = registration.node;
    s.spec.cpu_milli = cpu_milli;
    s.spec.memory_bytes = memory;
    s.spec.capacity_type = ParseCapacity(registration.capacity_type);
    s.spec.price_micros_per_gpu_hour = registration.price_micros_per_gpu_hour;
    s.spec.labels = registration.labels;
    if (!registration.region.empty()) s.spec.labels[kRegionLabel] = registration.region;
    s.spec.images = registration.images;
    s.spec.engines = registration.engines;
    out.push_back(std::move(s));
    return out;
  }
  int64_t cpu_left = cpu_milli;
  uint64_t mem_left = memory;
  for (size_t g = 0; g < order.size(); ++g) {
    const std::vector<int>& devices = by_model[order[g]];
    SchedNode s;
    s.node = registration.node;
    s.spec.name = order.size() == 1 ? registration.node : registration.node + "/" + order[g];
    // Split host CPU and memory by GPU share; later groups get their share, the first the rest.
    if (g > 0) {
      s.spec.cpu_milli = cpu_milli * static_cast<int64_t>(devices.size()) / n;
      s.spec.memory_bytes = memory / static_cast<uint64_t>(n) * devices.size();
      cpu_left -= s.spec.cpu_milli;
      mem_left -= s.spec.memory_bytes;
    }
    s.spec.gpu_count = static_cast<int32_t>(std::min<size_t>(devices.size(), sched::kMaxGpusPerNode));
    s.spec.gpu_model = order[g];
    s.spec.capacity_type = ParseCapacity(registration.capacity_type);
    s.spec.price_micros_per_gpu_hour = registration.price_micros_per_gpu_hour;
    s.spec.labels = registration.labels;
    if (!registration.region.empty()) s.spec.labels[kRegionLabel] = registration.region;
    s.spec.images = registration.images;
    s.spec.engines = registration.engines;
    // Domains renumbered 0.. within the group, by first appearance.
    std::map<int, int8_t> domain_id;
    for (int i = 0; i < s.spec.gpu_count; ++i) {
      const int root = Root(parent, devices[i]);
      auto [it, inserted] = domain_id.emplace(root, static_cast<int8_t>(domain_id.size()));
      s.spec.nvlink_domain.push_back(it->second);
      s.device_index.push_back(devices[i]);
    }
    out.push_back(std::move(s));
  }
  out[0].spec.cpu_milli = cpu_left;
  out[0].spec.memory_bytes = mem_left;
  return out;
}

}  // namespace gpugeek::controlplane
