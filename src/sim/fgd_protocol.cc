#include "sim/fgd_protocol.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "absl/strings/str_split.h"
#include "common/rng.h"
#include "common/units.h"

namespace gpugeek::sim {

const std::vector<std::string>& FgdWorkloads() {
  static const auto* const kWorkloads =
      new std::vector<std::string>{"default",    "cpu050",     "cpu100",      "cpu200",     "cpu250",    "gpushare40",
                                   "gpushare60", "gpushare80", "gpushare100", "gpuspec10",  "gpuspec20", "gpuspec25",
                                   "gpuspec33",  "multigpu20", "multigpu30",  "multigpu40", "multigpu50"};
  return *kWorkloads;
}

absl::StatusOr<std::string> WorkloadFileName(std::string_view workload) {
  const auto& all = FgdWorkloads();
  if (std::find(all.begin(), all.end(), workload) == all.end()) {
    return absl::NotFoundError(fmt::format("unknown workload '{}' (one of: {})", workload, fmt::join(all, ", ")));
  }
  return fmt::format("openb_pod_list_{}.csv", workload);
}

std::vector<sched::NodeSpec> ToNodeSpecs(const std::vector<TraceNode>& nodes) {
  std::vector<sched::NodeSpec> out;
  out.reserve(nodes.size());
  for (const TraceNode& n : nodes) {
    sched::NodeSpec s;
    s.name = n.name;
    s.cpu_milli = n.cpu_milli;
    s.memory_bytes = n.memory_mib * kMiB;
    s.gpu_count = n.gpus;
    s.gpu_model = n.model;
    out.push_back(std::move(s));
  }
  return out;
}

sched::ResourceShape ToShape(const TracePod& pod) {
  sched::ResourceShape s;
  s.cpu_milli = pod.cpu_milli;
  s.memory_bytes = pod.memory_mib * kMiB;
  s.num_gpus = pod.num_gpu;
  s.gpu_milli = pod.gpu_milli;
  if (!pod.gpu_spec.empty()) s.allowed_models = absl::StrSplit(pod.gpu_spec, '|');
  return s;
}

std::vector<size_t> FgdArrivalOrder(const std::vector<TracePod>& pods, uint64_t seed, double tune_ratio,
                                    int64_t total_gpu_milli) {
  std::vector<size_t> by_name(pods.size());
  std::iota(by_name.begin(), by_name.end(), size_t{0});
  std::stable_sort(by_name.begin(), by_name.end(), [&](size_t a, size_t b) { return pods[a].name < pods[b].name; });
  Rng rng(seed);
  std::vector<size_t> order = by_name;
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.Uniform(i)]);
  if (tune_ratio <= 0 || pods.empty()) return order;

  int64_t total = 0;
  for (const TracePod& p : pods) total += int64_t{p.num_gpu} * p.gpu_milli;
  const double target = tune_ratio * static_cast<double>(total_gpu_milli);
  if (static_cast<double>(total) < target) {
    while (true) {
      const size_t idx = by_name[rng.Uniform(by_name.size())];
      const TracePod& p = pods[idx];
      if (static_cast<double>(total + p.gpu_milli) > target) break;
      total += int64_t{p.num_gpu} * p.gpu_milli;
      order.push_back(idx);
    }
  } else {
    while (static_cast<double>(total) > target && !order.empty()) {
      const size_t k = rng.Uniform(order.size());
      total -= int64_t{pods[order[k]].num_gpu} * pods[order[k]].gpu_milli;
      order.erase(order.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  return order;
}

}  // namespace gpugeek::sim
