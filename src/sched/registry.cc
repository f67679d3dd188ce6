// The one registry of scheduler plugins and placement policies.

#include "sched/registry.h"

#include <fmt/format.h>

#include "absl/strings/match.h"
#include "sched/best_fit_policy.h"
#include "sched/dot_product_policy.h"
#include "sched/engine_fit.h"
#include "sched/fgd_fit_policy.h"
#include "sched/fgd_policy.h"
#include "sched/filters.h"
#include "sched/gpu_clustering_policy.h"
#include "sched/gpu_packing_policy.h"
#include "sched/image_fit.h"
#include "sched/random_policy.h"
#include "sched/topology_policy.h"

namespace gpugeek::sched {

Registry::Registry() {
  filters_ = {
      {"NodeResourcesFit", [] { return std::make_unique<NodeResourcesFit>(); }},
      {"GpuShareFit", [] { return std::make_unique<GpuShareFit>(); }},
      {"CapacityTypeFit", [] { return std::make_unique<CapacityTypeFit>(); }},
      {"PriceFit", [] { return std::make_unique<PriceFit>(); }},
      {"NodeSelectorFit", [] { return std::make_unique<NodeSelectorFit>(); }},
      {"TenantReservationFit", [] { return std::make_unique<TenantReservationFit>(); }},
      {"ImageFit", [] { return std::make_unique<ImageFit>(); }},
      {"EngineFit", [] { return std::make_unique<EngineFit>(); }},
  };
  default_filters_ = {"NodeResourcesFit", "GpuShareFit",          "CapacityTypeFit", "PriceFit",
                      "NodeSelectorFit",  "TenantReservationFit", "ImageFit",        "EngineFit"};
  scores_ = {
      {"RandomScore", [](const PluginContext&) { return std::make_unique<RandomScore>(); }},
      {"DotProductScore", [](const PluginContext&) { return std::make_unique<DotProductScore>(); }},
      {"GpuClusteringScore", [](const PluginContext&) { return std::make_unique<GpuClusteringScore>(); }},
      {"GpuPackingScore", [](const PluginContext&) { return std::make_unique<GpuPackingScore>(); }},
      {"BestFitScore", [](const PluginContext&) { return std::make_unique<BestFitScore>(); }},
      {"FGDScore", [](const PluginContext& c) { return std::make_unique<FgdScore>(c.typical_pods); }},
      {"FGDFitScore", [](const PluginContext& c) { return std::make_unique<FgdFitScore>(c.typical_pods); }},
      {"NvlinkTopology", [](const PluginContext&) { return std::make_unique<NvlinkTopologyScore>(); }},
  };
  // Weight 1000 for the single score plugin, as the FGD experiments configure kube-scheduler.
  policies_ = {
      {"Random", "a random feasible node, a random fitting GPU", {{"RandomScore", 1000}}, false},
      {"DotProd", "Tetris dot product of free and requested CPU/GPU", {{"DotProductScore", 1000}}, false},
      {"GpuClustering", "keep pods of one GPU class together", {{"GpuClusteringScore", 1000}}, false},
      {"GpuPacking", "partially used GPUs first, then used nodes, then idle nodes", {{"GpuPackingScore", 1000}}, false},
      {"BestFit", "least CPU+GPU leftover", {{"BestFitScore", 1000}}, false},
      {"FGD", "fragmentation gradient descent (ATC'23)", {{"FGDScore", 1000}}, true},
      {"FGDFit",
       "ours: FGD on 50 levels, best fit among equal gradients off constrained models, shares as FGD",
       {{"FGDFitScore", 1}},
       true},
  };
}

const Registry& Registry::Builtin() {
  static const Registry* const kRegistry = new Registry();
  return *kRegistry;
}

absl::StatusOr<std::unique_ptr<FilterPlugin>> Registry::NewFilter(std::string_view name) const {
  for (const auto& [n, make] : filters_) {
    if (n == name) return make();
  }
  return absl::NotFoundError(fmt::format("unknown filter plugin '{}'", name));
}

absl::StatusOr<std::unique_ptr<ScorePlugin>> Registry::NewScore(std::string_view name,
                                                                const PluginContext& context) const {
  for (const auto& [n, make] : scores_) {
    if (n == name) return make(context);
  }
  return absl::NotFoundError(fmt::format("unknown score plugin '{}'", name));
}

const PolicySpec* Registry::FindPolicy(std::string_view name) const {
  for (const PolicySpec& p : policies_) {
    if (absl::EqualsIgnoreCase(p.name, absl::string_view(name.data(), name.size()))) return &p;
  }
  return nullptr;
}

}  // namespace gpugeek::sched
