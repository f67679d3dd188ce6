#pragma once
// Feasibility filters: the default kube-scheduler resource fit (CPU, memory) plus the Open-Gpu-Share
// filter of the FGD simulator (GPU model allowed; num_gpus GPUs each with gpu_milli free), and a
// capacity-type filter (on-demand / spot / reserved), and a node-label filter (regions and the like).

#include <map>
#include <string>
#include <string_view>

#include "sched/plugin.h"

namespace gpugeek::sched {

// CPU and memory: free >= requested.
class NodeResourcesFit final : public FilterPlugin {
 public:
  std::string_view name() const override { return "NodeResourcesFit"; }
  void Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const override;
  std::string Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const override;
};

// GPU model and free GPU shares (GpusFit in plugin.h).
class GpuShareFit final : public FilterPlugin {
 public:
  std::string_view name() const override { return "GpuShareFit"; }
  void Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const override;
  std::string Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const override;
};

// Only nodes of the requested capacity type, when the request names one.
class CapacityTypeFit final : public FilterPlugin {
 public:
  std::string_view name() const override { return "CapacityTypeFit"; }
  void Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const override;
  std::string Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const override;
};

// Only nodes priced at most the request's max_price per GPU-hour (Request::max_price_micros), when it
// has one; an unpriced node (price 0) fits any cap.
class PriceFit final : public FilterPlugin {
 public:
  std::string_view name() const override { return "PriceFit"; }
  void Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const override;
  std::string Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const override;
};

// Whether a node with `labels` takes work of `tenant`: it has no kReservedForLabel, or `tenant` (non-empty) is
// one of the comma-separated names it lists (spaces around them ignored).
bool ReservedTo(const std::map<std::string, std::string>& labels, std::string_view tenant);

// Nodes reserved to some tenants (label kReservedForLabel = "team-a,team-b") take pods of those tenants
// only (ReservedTo); a pod without a tenant fits only nodes without the label. Nodes without it are shared.
class TenantReservationFit final : public FilterPlugin {
 public:
  std::string_view name() const override { return "TenantReservationFit"; }
  void Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const override;
  std::string Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const override;
};

// Only nodes whose labels satisfy the request's node selector (every key present, with one of the
// allowed values), when it has one.
class NodeSelectorFit final : public FilterPlugin {
 public:
  std::string_view name() const override { return "NodeSelectorFit"; }
  void Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const override;
  std::string Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const override;
};

}  // namespace gpugeek::sched
