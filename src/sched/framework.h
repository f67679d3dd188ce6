#pragma once
// Framework: one scheduling cycle per request member, from filter to bind.
//
// Schedule(request) tries the request's alternatives in order. For each, it places the gang's
// members one by one: filter (every filter plugin over all nodes) -> score (each score plugin,
// optionally min-max normalised, times its weight, summed) -> the best node, ties broken by a
// node order drawn from the seed (as the FGD simulator's renamed nodes and patched selectHost do) ->
// GPU choice inside the node (the policy's first score plugin) -> reserve (the snapshot takes the
// placement at once, so the next member sees it). Permit: when all members are reserved the gang is
// bound through the Binder; when one member finds no node, every reserved member is unreserved and
// the next alternative is tried. Unschedulable is a Decision, not an error: it says, per node, the
// first filter that rejected it for the last alternative tried.
//
// Ownership: the Framework borrows the Cluster (which must outlive it) and owns its plugins.
// Thread-safety: none; one scheduling loop calls it.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/rng.h"
#include "sched/cluster.h"
#include "sched/plugin.h"
#include "sched/request.h"

namespace gpugeek::sched {

// Receives the placements of a permitted gang. Implementations: the control plane writes them to
// the store; the simulator and tests accept them.
class Binder {
 public:
  virtual ~Binder() = default;
  // An error makes the framework unreserve the gang and return the error from Schedule.
  virtual absl::Status Bind(const Request& request, std::span<const Placement> placements) = 0;
};

// Accepts every binding (the simulator's binder).
class AcceptAllBinder final : public Binder {
 public:
  absl::Status Bind(const Request&, std::span<const Placement>) override { return absl::OkStatus(); }
};

struct FrameworkOptions {
  std::string policy = "FGD";  // a policy of the Registry (registry.h)
  uint64_t seed = 42;          // node tie order and the Random policy's draws
  // Weight of NVLink-topology scoring added to the policy (0: off). Multi-GPU shapes then prefer
  // nodes that can hold them inside one NVLink domain.
  int64_t topology_weight = 0;
  PluginContext context;              // typical pods for fragmentation-aware policies
  bool explain_unschedulable = true;  // fill Decision::reasons (costs a pass over all nodes)
};

struct NodeReason {
  NodeIndex node = -1;
  std::string plugin;  // the filter that rejected the node
  std::string reason;
};

struct Decision {
  bool scheduled = false;
  int alternative = -1;               // index of the alternative placed
  std::vector<Placement> placements;  // gang_size entries when scheduled
  std::vector<NodeReason> reasons;    // when unschedulable (and explain_unschedulable)
  // When unschedulable: how many members of the gang fitted (in the last alternative tried) before
  // one did not; `reasons` explain that one, with the others still reserved.
  int32_t members_placed = 0;
};

class Framework {
 public:
  // Errors: NotFound for an unknown policy; InvalidArgument when a policy needs typical pods and
  // none are given.
  static absl::StatusOr<std::unique_ptr<Framework>> Create(const FrameworkOptions& options, Cluster* cluster);

  // Errors: InvalidArgument for an invalid request (Validate); the binder's error (nothing stays
  // reserved). Otherwise a Decision, scheduled or not.
  absl::StatusOr<Decision> Schedule(const Request& request, Binder& binder);
  // Gives back the resources of placements made by Schedule (a finished or evicted job).
  void Release(std::span<const Placement> placements);
  // Takes everything still free on node `n` (a node out of service: reclaimed, down, drained), so
  // that nothing is placed there; Release({placement}) gives it back. Members already on the node
  // keep what they hold (evict them first to empty it).
  Placement Hold(NodeIndex n);

  const Cluster& cluster() const { return *cluster_; }
  const std::string& policy() const { return policy_; }

 private:
  struct WeightedScore {
    std::unique_ptr<ScorePlugin> plugin;
    int64_t weight;
  };
  Framework(Cluster* cluster, uint64_t seed) : cluster_(cluster), rng_(seed) {}
  // Places the gang of `request` in `alternative` into d->placements (reserved, not bound); false (d's
  // reasons and members_placed saying why, nothing reserved) when it does not fit.
  bool PlaceGang(const Request& request, const ResourceShape& alternative, Decision* d);
  // With Request::gang_label: the label (null: no constraint) and the value a member must have (`pin`, set
  // by the gang's first member) or, before that, must not have (`tried`). A node without the label has
  // the value "".
  struct GangDomain {
    const std::string* label = nullptr;
    std::optional<std::string> pin;
    const std::set<std::string, std::less<>>* tried = nullptr;
  };
  // Places one member, never on a node of `exclude`, only in `domain`; false when no node is feasible.
  bool PlaceOne(const PodShape& shape, std::span<const Placement> exclude, const GangDomain& domain, Placement* out);
  // Node n's value of `label`; "" when it has none. Valid while the cluster lives.
  std::string_view LabelValue(NodeIndex n, const std::string& label) const;
  void Explain(const PodShape& shape, std::vector<NodeReason>* reasons) const;

  // Constant after construction.
  Cluster* cluster_;
  std::string policy_;
  std::vector<std::unique_ptr<FilterPlugin>> filters_;
  std::vector<WeightedScore> scores_;
  std::vector<uint32_t> rank_;  // tie order: lower rank wins
  bool explain_ = true;

  // Scratch reused across cycles (no allocation per node per pod).
  Rng rng_;
  std::vector<NodeIndex> candidates_;
  std::vector<int64_t> raw_, total_;
};

}  // namespace gpugeek::sched
