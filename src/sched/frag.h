#pragma once
// GPU fragmentation as the FGD paper measures it (Weng et al., USENIX ATC'23, Sec. 4; simulator
// `pkg/utils/frag.go`: GetTypicalPods, NodeGpuShareFragAmount, GetNodePodFrag).
//
// Typical pods: the most frequent pod specs (CPU milli, per-GPU milli, GPU count, GPU model
// constraint; memory is not part of the spec) of a workload, taken by decreasing frequency until
// they cover >= popularity % of the pods, with probabilities renormalised over the chosen specs.
//
// Fragmentation of node n for a typical pod m, frag_n(m), in milli-GPU:
//   - m uses no GPU, or n's GPU model is not allowed for m, or m does not fit n (too few GPUs with
//     m's per-GPU milli free, or too little free CPU): all free GPU milli of n;
//   - otherwise: the free milli of the GPUs whose free milli is below m's per-GPU milli.
// F_n = sum_m p_m frag_n(m). Memory is not part of the measure, as in the paper.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sched/cluster.h"
#include "sched/request.h"

namespace gpugeek::sched {

struct TypicalPod {
  int64_t cpu_milli = 0;
  int32_t gpu_milli = 0;  // per GPU; 0 for a CPU-only spec
  int32_t num_gpus = 0;
  std::string models;  // the constraint as written, models joined by '|'; empty = any
  bool any_model = true;
  uint64_t model_mask = 0;  // resolved against the cluster, as PodShape::model_mask
  double probability = 0;   // in (0, 1]; the list sums to 1
  int64_t count = 0;        // pods of the workload with this spec
};

// Computes the typical pods of `pods` (the original, un-inflated workload). popularity_pct in
// (0, 100]; FGD uses 95. Ties in frequency are ordered as the FGD simulator orders them (larger
// CPU, then GPU milli, GPU count, model string first). Returns an empty list for no pods.
std::vector<TypicalPod> ComputeTypicalPods(std::span<const ResourceShape> pods, double popularity_pct,
                                           const Cluster& cluster);

// frag_n(m) in milli-GPU for one typical pod on a node in the given state.
int64_t NodePodFragMilli(int model, int64_t cpu_free, std::span<const int32_t> gpu_free, const TypicalPod& m);

// F_n in milli-GPU for a node in the given state (model id, free CPU, free milli of each GPU).
double NodeFragMilli(int model, int64_t cpu_free, std::span<const int32_t> gpu_free,
                     std::span<const TypicalPod> typical);
inline double NodeFragMilli(const Cluster& c, NodeIndex n, std::span<const TypicalPod> typical) {
  return NodeFragMilli(c.model_id(n), c.cpu_free(n), c.gpu_free(n), typical);
}

// GPUs of a node in the given state that have free milli-GPU yet no typical pod can use: for every
// m with probability > 0, the GPU's free share is counted in frag_n(m) (below m's per-GPU milli, or
// m cannot land on the node at all: CPU-only, model not allowed, too few GPUs or CPU). The whole-GPU
// companion of NodeFragMilli: 0 when `typical` is empty, as the fragmentation is then 0 too.
int32_t NodeUnallocatableGpus(int model, int64_t cpu_free, std::span<const int32_t> gpu_free,
                              std::span<const TypicalPod> typical);
inline int32_t NodeUnallocatableGpus(const Cluster& c, NodeIndex n, std::span<const TypicalPod> typical) {
  return NodeUnallocatableGpus(c.model_id(n), c.cpu_free(n), c.gpu_free(n), typical);
}

// Cluster-wide fragmentation kept per node; Refresh(n) after node n changed.
class FragTracker {
 public:
  FragTracker(const Cluster& cluster, std::vector<TypicalPod> typical);
  void Refresh(const Cluster& cluster, NodeIndex n) { node_[n] = NodeFragMilli(cluster, n, typical_); }
  double node(NodeIndex n) const { return node_[n]; }
  // Sum of F_n over all nodes, milli-GPU.
  double total() const;
  const std::vector<TypicalPod>& typical() const { return typical_; }

 private:
  std::vector<TypicalPod> typical_;
  std::vector<double> node_;
};

}  // namespace gpugeek::sched
