#pragma once
// Cluster: the scheduler's snapshot of the nodes and what is free on them.
//
// The hot path of every policy reads free CPU, memory and per-GPU milli-GPU for all nodes once per
// request, so the snapshot keeps them in flat arrays indexed by NodeIndex, with per-node summaries
// (total free GPU milli, fully free GPUs, largest free share) kept up to date incrementally by
// Bind/Release. Each node also carries a version that changes on every Bind/Release, so plugins can
// cache per-node results (e.g. FGD's fragmentation) and recompute only what changed.
//
// Units: CPU in milli-CPU, memory in bytes, GPU share in milli-GPU (1000 = one GPU).
// Thread-safety: none; one scheduling loop owns a Cluster.

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::sched {

inline constexpr int32_t kMilliPerGpu = 1000;
inline constexpr int kMaxGpusPerNode = 16;
// Models are interned to a bit of a 64-bit mask; a cluster holds at most this many distinct models.
inline constexpr int kMaxGpuModels = 63;

using NodeIndex = int32_t;

enum class CapacityType : uint8_t { kOnDemand = 0, kSpot = 1, kReserved = 2 };
std::string_view CapacityTypeName(CapacityType t);

// One node as an operator or a trace describes it.
struct NodeSpec {
  std::string name;
  int64_t cpu_milli = 0;
  uint64_t memory_bytes = 0;
  int32_t gpu_count = 0;  // 0..kMaxGpusPerNode
  std::string gpu_model;  // empty for a CPU-only node; otherwise an opaque model name ("A100", "G2")
  // NVLink domain of each GPU (GPUs in one domain talk over NVLink). Empty: all GPUs in domain 0.
  std::vector<int8_t> nvlink_domain;
  CapacityType capacity_type = CapacityType::kOnDemand;
  // What a GPU-hour of this node costs, in integer micro-units of the pool's currency; 0 = not priced.
  int64_t price_micros_per_gpu_hour = 0;
  std::map<std::string, std::string> labels;
  // The container images the node can run ("localhost/busybox:latest"), sorted; see ImageFit.
  std::vector<std::string> images;
  // The engine runtimes the node has ("onnxruntime", "tensorrt"; api/engines.h), sorted; see EngineFit.
  std::vector<std::string> engines;
};

// Where one member of a request landed: the node and the GPUs used there.
struct Placement {
  NodeIndex node = -1;
  int64_t cpu_milli = 0;
  uint64_t memory_bytes = 0;
  int32_t gpu_milli = 0;  // per GPU
  int32_t num_gpus = 0;
  std::array<uint8_t, kMaxGpusPerNode> gpus{};  // first num_gpus entries: GPU indices on the node
};

// GPU-affinity class of a placement (share / k whole GPUs), as the FGD simulator's GpuClustering
// policy groups pods: 0 = no GPU, 1 = a share of one GPU, 1 + k = k whole GPUs.
int GpuClassOf(int32_t num_gpus, int32_t gpu_milli);
inline constexpr int kNumGpuClasses = 2 + kMaxGpusPerNode;

class Cluster {
 public:
  // Errors: InvalidArgument for a duplicate or empty name, negative capacity, more than
  // kMaxGpusPerNode GPUs, a GPU count without a model (or a model without GPUs), an nvlink_domain
  // list whose length is not gpu_count, or more than kMaxGpuModels distinct models.
  static absl::StatusOr<Cluster> Create(std::vector<NodeSpec> nodes);

  size_t size() const { return specs_.size(); }
  const NodeSpec& spec(NodeIndex n) const { return specs_[n]; }
  // Interned model of node n: -1 for a CPU-only node, else 0..num_models()-1.
  int model_id(NodeIndex n) const { return model_id_[n]; }
  int num_models() const { return static_cast<int>(models_.size()); }
  const std::string& model_name(int id) const { return models_[id]; }
  // Model id by name, or -1 when no node has that model.
  int FindModel(std::string_view name) const;

  int64_t cpu_free(NodeIndex n) const { return cpu_free_[n]; }
  uint64_t memory_free(NodeIndex n) const { return mem_free_[n]; }
  int32_t gpu_count(NodeIndex n) const { return gpu_end_[n] - gpu_begin_[n]; }
  // Free milli-GPU of each GPU of node n, in device index order.
  std::span<const int32_t> gpu_free(NodeIndex n) const {
    return {gpu_free_.data() + gpu_begin_[n], static_cast<size_t>(gpu_end_[n] - gpu_begin_[n])};
  }
  std::span<const int8_t> nvlink_domain(NodeIndex n) const {
    return {domain_.data() + gpu_begin_[n], static_cast<size_t>(gpu_end_[n] - gpu_begin_[n])};
  }
  int32_t gpu_free_total(NodeIndex n) const { return gpu_free_total_[n]; }
  int32_t full_free_gpus(NodeIndex n) const { return full_free_[n]; }
  int32_t max_gpu_free(NodeIndex n) const { return max_gpu_free_[n]; }
  // Number of placements of each GpuClassOf class currently on node n, and how many classes are
  // present (ignoring class 0, CPU-only).
  int32_t class_count(NodeIndex n, int cls) const { return class_count_[n * kNumGpuClasses + cls]; }
  int32_t distinct_gpu_classes(NodeIndex n) const { return distinct_classes_[n]; }
  // Changes on every Bind/Release of node n; lets plugins cache per-node results.
  uint32_t version(NodeIndex n) const { return version_[n]; }

  int64_t total_gpu_milli() const { return total_gpu_milli_; }
  int64_t allocated_gpu_milli() const { return allocated_gpu_milli_; }
  int64_t total_cpu_milli() const { return total_cpu_milli_; }
  int64_t allocated_cpu_milli() const { return allocated_cpu_milli_; }

  // True when the placement's resources are free on its node (indices valid, distinct, each GPU
  // holding gpu_milli free).
  bool CanBind(const Placement& p) const;
  // Takes the placement's resources. Aborts (a broken invariant, not an input error) when they are
  // not free: the framework binds only placements its filters accepted on this very snapshot.
  void Bind(const Placement& p);
  // Returns the resources of a placement made by Bind. Aborts if that would exceed capacity.
  void Release(const Placement& p);

 private:
  Cluster() = default;
  void Summarize(NodeIndex n);

  // Constant after construction.
  std::vector<NodeSpec> specs_;
  std::vector<std::string> models_;
  std::vector<int> model_id_;
  std::vector<int32_t> gpu_begin_, gpu_end_;
  std::vector<int8_t> domain_;
  int64_t total_gpu_milli_ = 0;
  int64_t total_cpu_milli_ = 0;

  // Changed by Bind/Release.
  std::vector<int64_t> cpu_free_;
  std::vector<uint64_t> mem_free_;
  std::vector<int32_t> gpu_free_;
  std::vector<int32_t> gpu_free_total_, full_free_, max_gpu_free_;
  std::vector<int32_t> class_count_;
  std::vector<int32_t> distinct_classes_;
  std::vector<uint32_t> version_;
  int64_t allocated_gpu_milli_ = 0;
  int64_t allocated_cpu_milli_ = 0;
};

}  // namespace gpugeek::sched
