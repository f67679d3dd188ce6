#include "sched/engine_fit.h"

#include <algorithm>

#include <fmt/format.h>

#include "absl/strings/str_join.h"

namespace gpugeek::sched {
namespace {

// Both lists are sorted and short (a handful of runtimes).
bool HasRuntime(const NodeSpec& spec, const EngineNeed& need) {
  return std::any_of(need.runtimes.begin(), need.runtimes.end(), [&](const std::string& r) {
    return std::binary_search(spec.engines.begin(), spec.engines.end(), r);
  });
}

}  // namespace

void EngineFit::Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const {
  if (shape.engine == nullptr) return;
  std::erase_if(candidates, [&](NodeIndex n) { return !HasRuntime(cluster.spec(n), *shape.engine); });
}

std::string EngineFit::Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const {
  if (shape.engine == nullptr || HasRuntime(cluster.spec(n), *shape.engine)) return "";
  const std::vector<std::string>& has = cluster.spec(n).engines;
  return fmt::format("engine {} needs {}; this node has {}", shape.engine->format,
                     shape.engine->runtimes.empty() ? "a runtime gpugeek does not know"
                                                    : absl::StrJoin(shape.engine->runtimes, " or "),
                     has.empty() ? "no engine runtime" : absl::StrJoin(has, ", "));
}

}  // namespace gpugeek::sched
