#pragma once
// Plugin interfaces of the scheduling framework (after the Kubernetes scheduler framework:
// filter, score + normalize; reserve/unreserve, permit and bind are steps of the framework itself).
//
// Plugins see only (pod shape, cluster snapshot, cycle state), so the same code runs in the control
// plane and in the simulator. Plugins may keep caches keyed by Cluster::version (they are owned by
// one Framework and called from one thread), but a result must not depend on the cache.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/rng.h"
#include "sched/cluster.h"
#include "sched/frag.h"
#include "sched/request.h"

namespace gpugeek::sched {

inline constexpr int64_t kMaxNodeScore = 100;
inline constexpr int64_t kMinNodeScore = 0;

// State of one scheduling cycle (one member of one request).
struct CycleState {
  Rng* rng = nullptr;  // seeded; never null inside a cycle
};

// Shared, read-only inputs a plugin may need, fixed when the framework is built.
struct PluginContext {
  // Typical pods of the workload (FGD's fragmentation measure). May be empty.
  std::vector<TypicalPod> typical_pods;
};

// Removes infeasible nodes. Filter runs on the hot path over all candidates at once.
class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual std::string_view name() const = 0;
  // Keeps, in order, the candidates where `shape` may run; drops the rest.
  virtual void Filter(const PodShape& shape, const Cluster& cluster, std::vector<NodeIndex>& candidates) const = 0;
  // Why node n is rejected ("" when it is not). Called only to explain an unschedulable result.
  virtual std::string Explain(const PodShape& shape, const Cluster& cluster, NodeIndex n) const = 0;
};

// The GPUs a placement takes on its node.
struct GpuChoice {
  int32_t num = 0;
  std::array<uint8_t, kMaxGpusPerNode> gpus{};
};

// Scores feasible nodes (higher is better) and chooses GPUs inside the chosen node.
class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual std::string_view name() const = 0;
  // Writes one raw score per feasible node (same order). `feasible` is non-empty.
  virtual void Score(const PodShape& shape, const Cluster& cluster, std::span<const NodeIndex> feasible,
                     std::span<int64_t> scores, CycleState& state) = 0;
  // True: the framework rescales this plugin's scores min-max to [0, 100] with integer arithmetic
  // (the FGD simulator's NormalizeScore; all equal -> 0).
  virtual bool normalize() const { return false; }
  // Chooses the GPUs for `shape` on feasible node n (the policy's GPU choice inside the node).
  // The default is best fit (the FGD simulator's `-gpusel best`): a share takes the GPU with the
  // least free milli that fits (lowest index on ties); whole GPUs take the first fully free ones.
  virtual GpuChoice SelectGpus(const PodShape& shape, const Cluster& cluster, NodeIndex n, CycleState& state);
};

// Best-fit GPU choice (see ScorePlugin::SelectGpus). Requires that the shape fits node n.
GpuChoice BestFitGpus(const PodShape& shape, const Cluster& cluster, NodeIndex n);

// True when `shape`'s GPUs fit node n (model allowed, enough GPUs with gpu_milli free each).
inline bool GpusFit(const PodShape& shape, const Cluster& c, NodeIndex n) {
  if (!shape.uses_gpu()) return true;
  if (!shape.ModelAllowed(c.model_id(n))) return false;
  if (shape.gpu_milli == kMilliPerGpu) return c.full_free_gpus(n) >= shape.num_gpus;
  if (shape.num_gpus == 1) return c.max_gpu_free(n) >= shape.gpu_milli;
  int32_t fitting = 0;
  for (int32_t f : c.gpu_free(n)) fitting += f >= shape.gpu_milli;
  return fitting >= shape.num_gpus;
}

}  // namespace gpugeek::sched
