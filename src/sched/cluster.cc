#include "sched/cluster.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include <fmt/format.h>

#include "absl/status/status.h"

namespace gpugeek::sched {
namespace {

[[noreturn]] void Die(const std::string& why) {
  fmt::print(stderr, "sched::Cluster invariant broken: {}\n", why);
  std::abort();
}

}  // namespace

std::string_view CapacityTypeName(CapacityType t) {
  switch (t) {
    case CapacityType::kOnDemand:
      return "on-demand";
    case CapacityType::kSpot:
      return "spot";
    case CapacityType::kReserved:
      return "reserved";
  }
  return "?";
}

int GpuClassOf(int32_t num_gpus, int32_t gpu_milli) {
  if (num_gpus <= 0 || gpu_milli <= 0) return 0;
  if (num_gpus == 1 && gpu_milli < kMilliPerGpu) return 1;
  return 1 + std::min<int32_t>(num_gpus, kMaxGpusPerNode);
}

absl::StatusOr<Cluster> Cluster::Create(std::vector<NodeSpec> nodes) {
  Cluster c;
  std::set<std::string> names;
  const size_t n = nodes.size();
  c.model_id_.resize(n);
  c.gpu_begin_.resize(n);
  c.gpu_end_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    NodeSpec& s = nodes[i];
    if (s.name.empty()) return absl::InvalidArgumentError(fmt::format("node {} has an empty name", i));
    if (!names.insert(s.name).second) {
      return absl::InvalidArgumentError(fmt::format("duplicate node name '{}'", s.name));
    }
    if (s.cpu_milli < 0) return absl::InvalidArgumentError(fmt::format("node '{}': negative cpu_milli", s.name));
    if (s.gpu_count < 0 || s.gpu_count > kMaxGpusPerNode) {
      return absl::InvalidArgumentError(
          fmt::format("node '{}': gpu_count {} outside 0..{}", s.name, s.gpu_count, kMaxGpusPerNode));
    }
    if ((s.gpu_count > 0) != !s.gpu_model.empty()) {
      return absl::InvalidArgumentError(fmt::format("node '{}': a GPU model needs GPUs and GPUs need a model", s.name));
    }
    if (!s.nvlink_domain.empty() && static_cast<int32_t>(s.nvlink_domain.size()) != s.gpu_count) {
      return absl::InvalidArgumentError(fmt::format("node '{}': nvlink_domain has {} entries for {} GPUs", s.name,
                                                    s.nvlink_domain.size(), s.gpu_count));
    }
    int id = -1;
    if (!s.gpu_model.empty()) {
      auto it = std::find(c.models_.begin(), c.models_.end(), s.gpu_model);
      if (it == c.models_.end()) {
        if (static_cast<int>(c.models_.size()) >= kMaxGpuModels) {
          return absl::InvalidArgumentError(fmt::format("more than {} GPU models", kMaxGpuModels));
        }
        c.models_.push_back(s.gpu_model);
        it = c.models_.end() - 1;
      }
      id = static_cast<int>(it - c.models_.begin());
    }
    c.model_id_[i] = id;
    c.gpu_begin_[i] = static_cast<int32_t>(c.gpu_free_.size());
    for (int g = 0; g < s.gpu_count; ++g) {
      c.gpu_free_.push_back(kMilliPerGpu);
      c.domain_.push_back(s.nvlink_domain.empty() ? 0 : s.nvlink_domain[g]);
    }
    c.gpu_end_[i] = static_cast<int32_t>(c.gpu_free_.size());
    c.cpu_free_.push_back(s.cpu_milli);
    c.mem_free_.push_back(s.memory_bytes);
    c.total_cpu_milli_ += s.cpu_milli;
    c.total_gpu_milli_ += int64_t{s.gpu_count} * kMilliPerGpu;
  }
  c.specs_ = std::move(nodes);
  c.gpu_free_total_.assign(n, 0);
  c.full_free_.assign(n, 0);
  c.max_gpu_free_.assign(n, 0);
  c.class_count_.assign(n * kNumGpuClasses, 0);
  c.distinct_classes_.assign(n, 0);
  c.version_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) c.Summarize(static_cast<NodeIndex>(i));
  return c;
}

int Cluster::FindModel(std::string_view name) const {
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

void Cluster::Summarize(NodeIndex n) {
  int32_t total = 0, full = 0, mx = 0;
  for (int32_t g = gpu_begin_[n]; g < gpu_end_[n]; ++g) {
    const int32_t f = gpu_free_[g];
    total += f;
    full += f == kMilliPerGpu;
    mx = std::max(mx, f);
  }
  gpu_free_total_[n] = total;
  full_free_[n] = full;
  max_gpu_free_[n] = mx;
  ++version_[n];
}

bool Cluster::CanBind(const Placement& p) const {
  if (p.node < 0 || static_cast<size_t>(p.node) >= size()) return false;
  if (p.cpu_milli < 0 || p.cpu_milli > cpu_free_[p.node] || p.memory_bytes > mem_free_[p.node]) return false;
  if (p.num_gpus < 0 || p.num_gpus > gpu_count(p.node)) return false;
  if (p.num_gpus > 0 && (p.gpu_milli <= 0 || p.gpu_milli > kMilliPerGpu)) return false;
  uint32_t seen = 0;
  for (int i = 0; i < p.num_gpus; ++i) {
    const int g = p.gpus[i];
    if (g >= gpu_count(p.node) || (seen >> g & 1u)) return false;
    seen |= 1u << g;
    if (gpu_free_[gpu_begin_[p.node] + g] < p.gpu_milli) return false;
  }
  return true;
}

void Cluster::Bind(const Placement& p) {
  if (!CanBind(p)) {
    Die(fmt::format("Bind of cpu={} mem={} gpus={}x{} on node {} over-commits it; filters must run first", p.cpu_milli,
                    p.memory_bytes, p.num_gpus, p.gpu_milli, p.node));
  }
  cpu_free_[p.node] -= p.cpu_milli;
  mem_free_[p.node] -= p.memory_bytes;
  allocated_cpu_milli_ += p.cpu_milli;
  for (int i = 0; i < p.num_gpus; ++i) gpu_free_[gpu_begin_[p.node] + p.gpus[i]] -= p.gpu_milli;
  allocated_gpu_milli_ += int64_t{p.num_gpus} * p.gpu_milli;
  const int cls = GpuClassOf(p.num_gpus, p.gpu_milli);
  if (cls != 0 && class_count_[p.node * kNumGpuClasses + cls]++ == 0) ++distinct_classes_[p.node];
  Summarize(p.node);
}

void Cluster::Release(const Placement& p) {
  if (p.node < 0 || static_cast<size_t>(p.node) >= size()) Die("Release of a placement on no node");
  const NodeSpec& s = specs_[p.node];
  if (cpu_free_[p.node] + p.cpu_milli > s.cpu_milli || mem_free_[p.node] + p.memory_bytes > s.memory_bytes) {
    Die(fmt::format("Release on node '{}' exceeds its capacity: it was never bound", s.name));
  }
  for (int i = 0; i < p.num_gpus; ++i) {
    if (p.gpus[i] >= gpu_count(p.node) || gpu_free_[gpu_begin_[p.node] + p.gpus[i]] + p.gpu_milli > kMilliPerGpu) {
      Die(fmt::format("Release on node '{}' exceeds a GPU's capacity: it was never bound", s.name));
    }
  }
  cpu_free_[p.node] += p.cpu_milli;
  mem_free_[p.node] += p.memory_bytes;
  allocated_cpu_milli_ -= p.cpu_milli;
  for (int i = 0; i < p.num_gpus; ++i) gpu_free_[gpu_begin_[p.node] + p.gpus[i]] += p.gpu_milli;
  allocated_gpu_milli_ -= int64_t{p.num_gpus} * p.gpu_milli;
  const int cls = GpuClassOf(p.num_gpus, p.gpu_milli);
  if (cls != 0 && --class_count_[p.node * kNumGpuClasses + cls] == 0) --distinct_classes_[p.node];
  Summarize(p.node);
}

}  // namespace gpugeek::sched
