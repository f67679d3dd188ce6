#pragma once
// Helpers for sched tests: small clusters and shapes in one line each.

#include <memory>
#include <string>
#include <vector>

#include "common/units.h"
#include "sched/cluster.h"
#include "sched/framework.h"
#include "sched/request.h"

namespace gpugeek::sched::testing {

inline NodeSpec Node(std::string name, int64_t cpu_milli, int32_t gpus, std::string model,
                     uint64_t memory_bytes = 256 * kGiB) {
  NodeSpec n;
  n.name = std::move(name);
  n.cpu_milli = cpu_milli;
  n.memory_bytes = memory_bytes;
  n.gpu_count = gpus;
  n.gpu_model = gpus > 0 ? std::move(model) : "";
  return n;
}

inline ResourceShape Shape(int64_t cpu_milli, int32_t num_gpus, int32_t gpu_milli, std::vector<std::string> models = {},
                           uint64_t memory_bytes = kGiB) {
  ResourceShape s;
  s.cpu_milli = cpu_milli;
  s.memory_bytes = memory_bytes;
  s.num_gpus = num_gpus;
  s.gpu_milli = gpu_milli;
  s.allowed_models = std::move(models);
  return s;
}

inline Request Req(std::string id, ResourceShape shape, int32_t gang = 1) {
  Request r;
  r.id = std::move(id);
  r.alternatives.push_back(std::move(shape));
  r.gang_size = gang;
  return r;
}

// Binds a placement of `num_gpus` x `milli` on the given GPUs of node n.
inline Placement Place(NodeIndex n, int64_t cpu, std::vector<int> gpus, int32_t milli, uint64_t mem = 0) {
  Placement p;
  p.node = n;
  p.cpu_milli = cpu;
  p.memory_bytes = mem;
  p.gpu_milli = milli;
  p.num_gpus = static_cast<int32_t>(gpus.size());
  for (size_t i = 0; i < gpus.size(); ++i) p.gpus[i] = static_cast<uint8_t>(gpus[i]);
  return p;
}

// A framework placing on `c` with the BestFit policy, seed 1 (what the filter tests place with); null when
// it cannot be made.
inline std::unique_ptr<Framework> BestFitFramework(Cluster* c) {
  FrameworkOptions o;
  o.policy = "BestFit";
  o.seed = 1;
  auto fw = Framework::Create(o, c);
  return fw.ok() ? *std::move(fw) : nullptr;
}

}  // namespace gpugeek::sched::testing
