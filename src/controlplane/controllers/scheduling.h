#pragma once
// SchedulingController: places PENDING jobs with the same sched code the simulator runs: the
// sched::SchedulingQueue (priority then submission order; parked by request shape until capacity
// changes; backoff after a store error while binding) and sched::Framework (filter, score, reserve,
// permit for gangs, bind). Only the binder is the control plane's: it commits the placement to the
// store (epoch + 1, GPUs by UUID, a rendezvous port of rank 0's node) before any agent hears of it.
//
// Tenants (sched/quota.h): the queue's TenantLedger holds each tenant's weight and quota (set by the
// control plane from the store: ConfigureTenant), what each placed job holds (bound when placed, given
// back when its allocation is released, rebound from the live allocations after a restart) and the
// decayed usage behind fair share. A job over its tenant's quota waits PENDING with the reason and
// blocks nobody.
//
// Its private state: the queue, the scheduler's snapshot of the schedulable pool (sched::Cluster,
// rebuilt from State when nodes or allocations change, updated in place by each placement) and the
// typical pods of the workload (FGD's measure).

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "controlplane/controllers/context.h"
#include "controlplane/state/snapshot.h"
#include "sched/cluster.h"
#include "sched/frag.h"
#include "sched/framework.h"
#include "sched/quota.h"
#include "sched/scheduling_queue.h"

namespace gpugeek::controlplane {

// Rendezvous ports (MASTER_PORT) are allocated per master address from [kFirstRendezvousPort,
// kFirstRendezvousPort + kRendezvousPorts): 29500 is torchrun's default.
inline constexpr int kFirstRendezvousPort = 29500;
inline constexpr int kRendezvousPorts = 1000;

// The allocation member of rank `rank` that placement `p` on `sn` makes: its GPUs by device index and UUID.
AllocationMember ToMember(const State& state, const SchedNode& sn, const sched::Placement& p, int rank);
// MASTER_ADDR for a gang whose rank 0 runs on `node`: the node's registered address, else its name.
std::string MasterAddress(const State& state, const std::string& node);
// A rendezvous port on `master_addr` (MasterAddress) free among the allocations live there; 0 when all
// kRendezvousPorts are used.
int FreeRendezvousPort(const State& state, const std::string& master_addr);

class SchedulingController {
 public:
  // `half_life`: of the tenants' usage (fair share); 0 = no decay. InvalidArgument when negative.
  explicit SchedulingController(Duration half_life = sched::TenantLedgerOptions().half_life);

  // One pass at monotonic time `now`.
  void Reconcile(ControllerContext& ctx, MonoTime now);

  // Sets a tenant's weight and quota (jobs of it parked over quota are attempted again). Errors:
  // InvalidArgument for a weight not finite and > 0 or a negative cap (nothing changed).
  absl::Status ConfigureTenant(const std::string& tenant, const sched::TenantConfig& config);
  // Replaces a tenant's decayed usage (milli-GPU-seconds), e.g. restored from the store.
  absl::Status RestoreUsage(const std::string& tenant, double usage);
  const sched::TenantLedger& ledger() const { return queue_.ledger(); }
  // For the snapshot: use against limit as of the ledger's last time, and the jobs parked over quota
  // (a fresh copy; tenants are few).
  std::shared_ptr<const QuotaTable> QuotaCopy(const ControllerContext& ctx) const;

  // A pending job that left the queue other than by placement (cancelled).
  void Forget(const std::string& job_id);

  // Rebuilds the scheduler's pool now if nodes or allocations changed since the last pass (a write
  // between passes: register, cordon, drain, remove, cancel), so the snapshot published with that
  // write shows it (Pool()). Places nothing.
  void RefreshCluster(ControllerContext& ctx);

  // For the snapshot: a copy of the scheduler's pool (nullptr before the first pass), the typical
  // pods and the policy placing now.
  std::shared_ptr<const sched::Cluster> ClusterCopy();
  const std::vector<sched::TypicalPod>& typical() const { return typical_; }
  const std::string& active_policy() const { return active_policy_; }

 private:
  void Rebuild(ControllerContext& ctx);
  // Returns the resources of the allocations released since the last look (State::released) to cluster_.
  void ApplyReleases(ControllerContext& ctx);
  // Binds whatever is free on the unhealthy GPUs of the cluster's nodes (held_unhealthy_).
  void HoldUnhealthyGpus(ControllerContext& ctx);
  // Gives back, in the ledger at `now`, what the jobs of State::released held. Call before the list
  // is cleared.
  void ReleaseHoldings(ControllerContext& ctx, MonoTime now);
  // Records in the ledger what each live allocation it does not know holds (after a restart, a reload).
  void BindLiveHoldings(ControllerContext& ctx, MonoTime now);
  void SyncQueue(ControllerContext& ctx, MonoTime now);
  absl::StatusOr<sched::AttemptOutcome> Attempt(ControllerContext& ctx, const std::string& job_id, MonoTime now);
  // Re-forms each elastic gang marked LiveJob::reform (controllers/elastic_reform.cc): the members on
  // lost nodes are replaced beside the survivors (sched::Request::placed), or dropped when nothing fits
  // and at least elastic.min_nodes survive; the survivors keep their GPUs; one store write commits the
  // new allocation at the next epoch (every member restarts, SCHEDULED). With fewer survivors than
  // min_nodes and no room, the gang is requeued whole.
  void ReformGangs(ControllerContext& ctx, MonoTime now);
  absl::Status Reform(ControllerContext& ctx, const std::string& job_id, MonoTime now);

  sched::SchedulingQueue queue_;
  uint64_t seen_generation_ = 0;
  std::optional<sched::Cluster> cluster_;
  std::shared_ptr<const sched::Cluster> cluster_copy_;  // the last copy handed to a snapshot
  bool cluster_changed_ = false;                        // cluster_ changed since that copy
  std::unique_ptr<sched::Framework> framework_;
  std::string active_policy_;
  std::vector<sched::TypicalPod> typical_;
  std::map<std::string, sched::NodeIndex> sched_index_;  // scheduler node name -> index
  std::vector<const SchedNode*> sched_nodes_;            // by index
  // What each live allocation holds in cluster_, by job id (members that exited before the last
  // rebuild hold nothing there).
  std::unordered_map<std::string, std::vector<sched::Placement>> bound_;
  // What is free on unhealthy GPUs (NodeState::unhealthy_gpus), bound so that nothing is placed there;
  // dropped with the cluster at each rebuild, topped up after in-place releases.
  std::vector<sched::Placement> held_unhealthy_;
  std::optional<MonoTime> last_rebuild_;
  bool workload_changed_ = false;  // jobs arrived since the typical pods were computed
  // This cycle's regions reclaimed within options.reclaim_avoid (tried last, ControlPlane::Reclaim), and
  // every region of the pool; set by Reconcile before its cycle.
  std::set<std::string> avoid_regions_, known_regions_;
};

}  // namespace gpugeek::controlplane
