#include "sched/filters.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/units.h"

namespace gpugeek::sched {

void NodeResourcesFit::Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const {
  size_t kept = 0;
  for (NodeIndex n : candidates) {
    // Branch-free keep: the loop runs over every node for every request.
    candidates[kept] = n;
    kept += static_cast<size_t>(cluster.cpu_free(n) >= shape.cpu_milli) &
            static_cast<size_t>(cluster.memory_free(n) >= shape.memory_bytes);
  }
  candidates.resize(kept);
}

std::string NodeResourcesFit::Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const {
  if (cluster.cpu_free(n) < shape.cpu_milli) {
    return fmt::format("insufficient cpu: {} milli free, {} requested", cluster.cpu_free(n), shape.cpu_milli);
  }
  if (cluster.memory_free(n) < shape.memory_bytes) {
    return fmt::format("insufficient memory: {} bytes free, {} requested", cluster.memory_free(n), shape.memory_bytes);
  }
  return "";
}

void GpuShareFit::Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const {
  if (!shape.uses_gpu()) return;
  size_t kept = 0;
  for (NodeIndex n : candidates) {
    candidates[kept] = n;
    kept += GpusFit(shape, cluster, n);
  }
  candidates.resize(kept);
}

std::string GpuShareFit::Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const {
  if (!shape.uses_gpu()) return "";
  if (cluster.gpu_count(n) == 0) return "node has no GPU";
  if (!shape.ModelAllowed(cluster.model_id(n))) {
    // The wanted models that some node has (a wanted model no node has is not in the mask).
    std::vector<std::string> wanted;
    for (int m = 0; m < cluster.num_models() && m < 64; ++m) {
      if (shape.model_mask >> m & 1u) wanted.push_back(cluster.model_name(m));
    }
    if (wanted.empty())
      return fmt::format("has {}; no node has the requested GPU model", cluster.model_name(cluster.model_id(n)));
    return fmt::format("has {}, not the requested {}", cluster.model_name(cluster.model_id(n)),
                       fmt::join(wanted, " or "));
  }
  if (!GpusFit(shape, cluster, n)) {
    return fmt::format("insufficient GPU: fewer than {} GPUs with {} milli free", shape.num_gpus, shape.gpu_milli);
  }
  return "";
}

void CapacityTypeFit::Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const {
  if (!shape.capacity_type) return;
  std::erase_if(candidates, [&](NodeIndex n) { return cluster.spec(n).capacity_type != *shape.capacity_type; });
}

std::string CapacityTypeFit::Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const {
  if (!shape.capacity_type || cluster.spec(n).capacity_type == *shape.capacity_type) return "";
  return fmt::format("capacity type {} is not the requested {}", CapacityTypeName(cluster.spec(n).capacity_type),
                     CapacityTypeName(*shape.capacity_type));
}

void PriceFit::Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const {
  if (shape.max_price_micros <= 0) return;
  std::erase_if(candidates,
                [&](NodeIndex n) { return cluster.spec(n).price_micros_per_gpu_hour > shape.max_price_micros; });
}

std::string PriceFit::Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const {
  const int64_t price = cluster.spec(n).price_micros_per_gpu_hour;
  if (shape.max_price_micros <= 0 || price <= shape.max_price_micros) return "";
  return fmt::format("price {} per GPU-hour is above the job's max_price {}", FormatMoney(price),
                     FormatMoney(shape.max_price_micros));
}

namespace {

// The first requirement node `spec` fails, as "region=us-east not in [eu-west]"; "" when none.
std::string SelectorMismatch(const NodeSelector& selector, const NodeSpec& spec) {
  for (const auto& [key, allowed] : selector) {
    auto it = spec.labels.find(key);
    if (it == spec.labels.end()) return fmt::format("no label {} (wanted one of [{}])", key, fmt::join(allowed, ", "));
    if (std::find(allowed.begin(), allowed.end(), it->second) == allowed.end()) {
      return fmt::format("{}={} is not one of [{}]", key, it->second, fmt::join(allowed, ", "));
    }
  }
  return "";
}

}  // namespace

namespace {

// "" when `shape` may use node `n`; else why not.
std::string ReservationMismatch(const PodShape& shape, const NodeSpec& node) {
  if (ReservedTo(node.labels, shape.tenant == nullptr ? std::string_view() : std::string_view(*shape.tenant))) {
    return "";
  }
  return fmt::format("reserved for {}", node.labels.at(kReservedForLabel));
}

}  // namespace

bool ReservedTo(const std::map<std::string, std::string>& labels, std::string_view tenant) {
  auto it = labels.find(kReservedForLabel);
  if (it == labels.end()) return true;
  std::string_view list = it->second;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!tenant.empty() && item == tenant) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

void TenantReservationFit::Filter(const PodShape& shape, const Cluster& cluster,
                                  std::vector<NodeIndex>& candidates) const {
  std::erase_if(candidates, [&](NodeIndex n) { return !ReservationMismatch(shape, cluster.spec(n)).empty(); });
}

std::string TenantReservationFit::Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const {
  return ReservationMismatch(shape, cluster.spec(n));
}

void NodeSelectorFit::Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const {
  if (shape.node_selector == nullptr) return;
  std::erase_if(candidates,
                [&](NodeIndex n) { return !SelectorMismatch(*shape.node_selector, cluster.spec(n)).empty(); });
}

std::string NodeSelectorFit::Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const {
  if (shape.node_selector == nullptr) return "";
  return SelectorMismatch(*shape.node_selector, cluster.spec(n));
}

}  // namespace gpugeek::sched
