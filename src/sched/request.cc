#include "sched/request.h"

#include <fmt/format.h>

namespace gpugeek::sched {

absl::Status Validate(const Request& r) {
  if (r.alternatives.empty()) return absl::InvalidArgumentError(fmt::format("request '{}': no alternatives", r.id));
  if (r.gang_size < 1) return absl::InvalidArgumentError(fmt::format("request '{}': gang_size < 1", r.id));
  for (size_t i = 0; i < r.alternatives.size(); ++i) {
    const ResourceShape& s = r.alternatives[i];
    const std::string where = fmt::format("request '{}' alternative {}", r.id, i);
    if (s.cpu_milli < 0) return absl::InvalidArgumentError(where + ": negative cpu_milli");
    if (s.num_gpus < 0 || s.num_gpus > kMaxGpusPerNode) {
      return absl::InvalidArgumentError(where + fmt::format(": num_gpus outside 0..{}", kMaxGpusPerNode));
    }
    if (s.num_gpus > 0 && (s.gpu_milli < 1 || s.gpu_milli > kMilliPerGpu)) {
      return absl::InvalidArgumentError(where + ": gpu_milli outside 1..1000");
    }
    if (s.num_gpus == 0 && s.gpu_milli != 0) return absl::InvalidArgumentError(where + ": gpu_milli without GPUs");
    if (s.num_gpus > 1 && s.gpu_milli < kMilliPerGpu) {
      return absl::InvalidArgumentError(where + ": a GPU share (< 1000 milli) of more than one GPU");
    }
  }
  return absl::OkStatus();
}

PodShape Compile(const ResourceShape& s, const Cluster& cluster, const Request* request) {
  PodShape p;
  if (request != nullptr) {
    p.capacity_type = request->capacity_type;
    if (!request->node_selector.empty()) p.node_selector = &request->node_selector;
    if (!request->tenant.empty()) p.tenant = &request->tenant;
    if (!request->image.empty()) p.image = &request->image;
    if (!request->engine.format.empty()) p.engine = &request->engine;
    p.max_price_micros = request->max_price_micros;
  }
  p.cpu_milli = s.cpu_milli;
  p.memory_bytes = s.memory_bytes;
  p.num_gpus = s.num_gpus;
  p.gpu_milli = s.num_gpus > 0 ? s.gpu_milli : 0;
  // Mirrors the FGD simulator's IsNodeAccessibleToPodByType: empty entries are ignored, and a list
  // with no non-empty entry means "any model".
  for (const std::string& m : s.allowed_models) {
    if (m.empty()) continue;
    p.any_model = false;
    const int id = cluster.FindModel(m);
    if (id >= 0) p.model_mask |= uint64_t{1} << id;
  }
  return p;
}

}  // namespace gpugeek::sched
