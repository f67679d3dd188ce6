#include "controlplane/admission_fit.h"

#include <map>
#include <string>

#include <fmt/format.h>

#include "controlplane/node_model.h"
#include "sched/framework.h"

namespace gpugeek::controlplane {

std::shared_ptr<const sched::Cluster> AdmissionFit::EmptyPool(const Snapshot& snapshot) {
  // Registrations are immutable and shared between snapshots until a node registers again, so the
  // same pointers mean the same pool.
  std::vector<const api::Registration*> key;
  key.reserve(snapshot.nodes.size());
  for (const auto& [name, node] : snapshot.nodes) key.push_back(node.registration.get());
  {
    MutexLock lock(&mu_);
    if (pool_ != nullptr && key == registrations_) return pool_;
  }
  std::vector<sched::NodeSpec> specs;
  for (const auto& [name, node] : snapshot.nodes) {
    for (SchedNode& sn : ToSchedNodes(*node.registration)) specs.push_back(std::move(sn.spec));
  }
  absl::StatusOr<sched::Cluster> cluster = sched::Cluster::Create(std::move(specs));
  if (!cluster.ok()) return nullptr;  // the scheduler reports a broken pool; admission does not guess
  auto pool = std::make_shared<const sched::Cluster>(std::move(*cluster));
  MutexLock lock(&mu_);
  registrations_ = std::move(key);
  pool_ = pool;
  return pool;
}

absl::Status AdmissionFit::Check(const std::vector<sched::Request>& requests, const Snapshot& snapshot) {
  if (snapshot.nodes.empty() || requests.empty()) return absl::OkStatus();
  std::shared_ptr<const sched::Cluster> pool = EmptyPool(snapshot);
  if (pool == nullptr) return absl::OkStatus();
  sched::Cluster cluster = *pool;  // placing binds; each check works on its own copy
  sched::FrameworkOptions options;
  options.policy = "BestFit";  // any policy: only feasibility matters here
  absl::StatusOr<std::unique_ptr<sched::Framework>> framework = sched::Framework::Create(options, &cluster);
  if (!framework.ok()) return absl::OkStatus();
  std::map<std::string, int> reasons;
  std::string gang;
  for (const sched::Request& request : requests) {
    sched::AcceptAllBinder binder;
    absl::StatusOr<sched::Decision> decision = (*framework)->Schedule(request, binder);
    if (!decision.ok()) return decision.status();  // an invalid request: admission's own error
    if (decision->scheduled) return absl::OkStatus();
    for (const sched::NodeReason& r : decision->reasons) ++reasons[r.reason];
    if (request.gang_size > 1 && decision->members_placed > 0) {
      gang = fmt::format("; only {} of the gang's {} nodes could", decision->members_placed, request.gang_size);
    }
  }
  std::string why;
  for (const auto& [reason, n] : reasons) why += fmt::format("; {}: {}", n, reason);
  return absl::FailedPreconditionError(
      fmt::format("resources: no registered node could ever host this job ({} nodes, at full capacity){}{}; add "
                  "such a node or change resources",
                  snapshot.nodes.size(), gang, why));
}

}  // namespace gpugeek::controlplane
