#pragma once
// The FGD experiment protocol (shared/anchors/fgd.md §2.1-2.2; simulator `core.go`
// SortClusterPods, TunePodsByNodeTotalResource): the 17 workloads, the order pods arrive in, and
// the inflation of the pod list to a multiple of the cluster's GPU capacity.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sched/cluster.h"
#include "sched/request.h"
#include "sim/trace_reader.h"

namespace gpugeek::sim {

// The 17 workloads of the paper, in the authors' order: default, cpu050..cpu250, gpushare40..100,
// gpuspec10..33, multigpu20..50.
const std::vector<std::string>& FgdWorkloads();
// "default" -> "openb_pod_list_default.csv". Errors: NotFound for a name not in FgdWorkloads().
absl::StatusOr<std::string> WorkloadFileName(std::string_view workload);
inline constexpr std::string_view kFgdNodeFile = "openb_node_list_gpu_node.csv";

// Nodes of the trace as scheduler nodes (memory MiB -> bytes; all on-demand, one NVLink domain).
std::vector<sched::NodeSpec> ToNodeSpecs(const std::vector<TraceNode>& nodes);
// A pod of the trace as a request shape (memory MiB -> bytes; gpu_spec split on '|').
sched::ResourceShape ToShape(const TracePod& pod);

// The arrival order: indices into `pods`, possibly repeated (inflation clones a pod).
//  1. sort by name, 2. shuffle with Rng(seed),
//  3. tune to target = tune_ratio x total_gpu_milli (<= 0: no tuning):
//     below target: repeatedly draw a pod uniformly (with replacement) from the name-sorted list and
//       append it, stopping at the first draw whose per-GPU milli would take the running total over
//       the target (the simulator checks gpu_milli but accumulates num_gpu x gpu_milli);
//     above target: remove uniformly random pods until the total is <= target.
std::vector<size_t> FgdArrivalOrder(const std::vector<TracePod>& pods, uint64_t seed, double tune_ratio,
                                    int64_t total_gpu_milli);

}  // namespace gpugeek::sim
