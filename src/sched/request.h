#pragma once
// Request: what a job asks the scheduler for, and PodShape, the form plugins read on the hot path.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "sched/cluster.h"

namespace gpugeek::sched {

// The resources of one member (one pod) of a request.
struct ResourceShape {
  int64_t cpu_milli = 0;  // >= 0
  uint64_t memory_bytes = 0;
  int32_t num_gpus = 0;   // 0..kMaxGpusPerNode
  int32_t gpu_milli = 0;  // per GPU: 1..1000 when num_gpus > 0 (< 1000 only with num_gpus == 1), else 0
  std::vector<std::string> allowed_models;  // empty: any model
};

// Node labels a request requires: for every key, the node's label value must be one of the listed
// values (Kubernetes' nodeAffinity `In`). Empty: any node.
using NodeSelector = std::map<std::string, std::vector<std::string>>;

// A compiled-engine format every member loads and the runtimes that run it (api/engines.h RuntimesFor):
// only nodes whose NodeSpec::engines hold one of them qualify (EngineFit). An empty format needs none.
struct EngineNeed {
  std::string format;                 // "onnx-int8"; shown in explanations
  std::vector<std::string> runtimes;  // any of these, e.g. {"onnxruntime", "tensorrt"}
};

// A request: one or more alternative shapes (e.g. from the planner: 4 x A100 or 2 x H200), tried in
// order, the first that fits wins; a gang of gang_size identical members placed all or nothing.
struct Request {
  std::string id;
  std::vector<ResourceShape> alternatives;    // at least one
  int32_t gang_size = 1;                      // >= 1
  int32_t priority = 0;                       // higher first; used by queues, not by placement
  std::optional<CapacityType> capacity_type;  // when set, only nodes of this capacity type
  NodeSelector node_selector;                 // e.g. {"region": {"eu-west", "eu-north"}}
  // Each member on its own node, as the ranks of a multi-node job must be (else members may share
  // a node, as FGD-trace pods do).
  bool distinct_nodes = false;
  // When set (e.g. "region"), a gang's members all land on nodes with one value of this node label, so a
  // gang never spans regions: the first member's best node picks the value, and when the rest do not fit
  // there the next best value is tried, until the gang fits in one. Nodes without the label share the
  // value "". Empty: no such constraint.
  std::string gang_label;
  // The owner ("" = none): a node reserved to some tenants (label kReservedForLabel) takes only theirs.
  std::string tenant;
  // A container image every member runs in ("localhost/busybox:latest"; "" = none): only nodes whose
  // NodeSpec::images hold it qualify (ImageFit).
  std::string image;
  EngineNeed engine;
  // When > 0: only nodes priced at most this many micro-units per GPU-hour (unpriced nodes too), the job
  // spec's `max_price` (PriceFit).
  int64_t max_price_micros = 0;
  // Members of this gang placed already, in this cluster (an elastic gang's survivors, whose lost members
  // this request replaces): the new members land beside them, off their nodes when distinct_nodes and in
  // their gang_label value when one is set. Empty for a whole gang.
  std::vector<Placement> placed;
};

// The node label that reserves a node to some tenants: a comma-separated list of tenant names, e.g.
// "reserved-for=team-a,team-b" (`gpugeek agent --label`). A node without it is shared by all tenants.
inline constexpr char kReservedForLabel[] = "reserved-for";

// Errors: InvalidArgument naming the bad field (no alternatives, gang_size < 1, negative CPU,
// gpu_milli outside 1..1000 with GPUs, a share (< 1000) of more than one GPU, too many GPUs).
absl::Status Validate(const Request& r);

// A ResourceShape resolved against one cluster: allowed models as a bit mask over the cluster's
// interned model ids. Plugins read only this.
struct PodShape {
  int64_t cpu_milli = 0;
  uint64_t memory_bytes = 0;
  int32_t num_gpus = 0;
  int32_t gpu_milli = 0;
  bool any_model = true;    // no model constraint
  uint64_t model_mask = 0;  // when !any_model: bit i set = cluster model id i allowed
  std::optional<CapacityType> capacity_type;
  const NodeSelector* node_selector = nullptr;  // borrowed from the Request; null or empty = any node
  const std::string* tenant = nullptr;          // borrowed from the Request; null = no owner
  const std::string* image = nullptr;           // borrowed from the Request; null = no image needed
  const EngineNeed* engine = nullptr;           // borrowed from the Request; null = no engine needed
  int64_t max_price_micros = 0;                 // the Request's; 0 = any price

  bool uses_gpu() const { return num_gpus > 0 && gpu_milli > 0; }
  bool is_share() const { return num_gpus == 1 && gpu_milli < kMilliPerGpu; }
  int64_t total_gpu_milli() const { return int64_t{num_gpus} * gpu_milli; }
  // True when a node of model id `model` (-1 = CPU-only) may host this shape's GPUs.
  bool ModelAllowed(int model) const {
    if (any_model) return true;
    return model >= 0 && (model_mask >> model & 1u);
  }
};

// Resolves a shape against `cluster`'s models. A model no node has simply matches nothing. With a
// `request`, the shape also carries its node constraints (capacity type, selector, tenant, image, engine),
// borrowed: the request must outlive the PodShape (empty constraints are dropped).
PodShape Compile(const ResourceShape& s, const Cluster& cluster, const Request* request = nullptr);

}  // namespace gpugeek::sched
