#include "controlplane/controllers/scheduling.h"

#include <algorithm>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "api/job_state.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/controllers/transitions.h"
#include "controlplane/job_request.h"
#include "controlplane/log_store.h"
#include "controlplane/metrics.h"
#include "controlplane/reservations.h"
#include "controlplane/secrets.h"
#include "sched/registry.h"

namespace gpugeek::controlplane {
namespace {

using api::JobState;

// FGD's typical-pod popularity threshold (Weng et al., ATC'23; sched/frag.h).
constexpr double kTypicalPodPopularityPct = 95;
// The typical pods follow the workload; recomputing them costs a cluster rebuild, so new jobs alone
// trigger it at most this often (capacity changes always do).
constexpr Duration kTypicalRefresh = std::chrono::seconds(1);

uint64_t SequenceOf(const std::string& job_id) {
  // Ids are issued in submission order as j-NNNNNNNN.
  return job_id.size() > 2 ? std::strtoull(job_id.c_str() + 2, nullptr, 10) : 0;
}

// Writes a permitted gang's placement to the store (the control plane's sched::Binder).
class StoreBinder final : public sched::Binder {
 public:
  StoreBinder(ControllerContext& ctx, const std::vector<const SchedNode*>& sched_nodes, store::JobRecord record)
      : ctx_(ctx), sched_nodes_(sched_nodes), record_(std::move(record)) {}

  absl::Status Bind(const sched::Request&, std::span<const sched::Placement> placements) override {
    placements_.assign(placements.begin(), placements.end());
    Allocation a;
    for (size_t rank = 0; rank < placements.size(); ++rank) {
      const SchedNode& sn = *sched_nodes_[placements[rank].node];
      a.members.push_back(ToMember(ctx_.state, sn, placements[rank], static_cast<int>(rank)));
      if (rank == 0) a.gpu_model = sn.spec.gpu_model;
    }
    a.master_addr = MasterAddress(ctx_.state, a.members.front().node);
    a.master_port = FreeRendezvousPort(ctx_.state, a.master_addr);
    if (a.master_port == 0) {
      return absl::ResourceExhaustedError(
          fmt::format("node {} has all {} rendezvous ports in use", a.members.front().node, kRendezvousPorts));
    }
    store::JobRecord next = record_;
    next.state = JobState::kScheduled;
    next.epoch = record_.epoch + 1;
    next.allocation_json = ToJson(a).dump();
    next.reason = "placed on " + Describe(a);
    next.updated_at = ctx_.clock.Now();
    ASSIGN_OR_RETURN(stored_, ctx_.store.UpdateJob(next));
    allocation_ = std::move(a);
    return absl::OkStatus();
  }

  const store::JobRecord& stored() const { return stored_; }
  const Allocation& allocation() const { return allocation_; }
  const std::vector<sched::Placement>& placements() const { return placements_; }

 private:
  ControllerContext& ctx_;
  const std::vector<const SchedNode*>& sched_nodes_;
  store::JobRecord record_;
  store::JobRecord stored_;
  Allocation allocation_;
  std::vector<sched::Placement> placements_;
};

}  // namespace

AllocationMember ToMember(const State& state, const SchedNode& sn, const sched::Placement& p, int rank) {
  const api::Registration& reg = state.nodes.at(sn.node).registration;
  AllocationMember m;
  m.rank = rank;
  m.node = sn.node;
  m.sched_node = sn.spec.name;
  for (int i = 0; i < p.num_gpus; ++i) {
    const int device = sn.device_index[p.gpus[i]];
    m.gpus.push_back(device);
    m.gpu_uuids.push_back(reg.inventory.gpus.at(device).uuid);
  }
  m.gpu_milli = p.num_gpus > 0 ? p.gpu_milli : 0;
  m.cpu_milli = p.cpu_milli;
  m.memory_bytes = p.memory_bytes;
  return m;
}

std::string MasterAddress(const State& state, const std::string& node) {
  auto it = state.nodes.find(node);
  return it != state.nodes.end() && !it->second.registration.address.empty() ? it->second.registration.address : node;
}

int FreeRendezvousPort(const State& state, const std::string& master_addr) {
  auto it = state.ports.find(master_addr);
  for (int port = kFirstRendezvousPort; port < kFirstRendezvousPort + kRendezvousPorts; ++port) {
    if (it == state.ports.end() || !it->second.contains(port)) return port;
  }
  return 0;
}

std::shared_ptr<const sched::Cluster> SchedulingController::ClusterCopy() {
  if (!cluster_) return nullptr;
  // Copied only when a rebuild or a placement changed it since the last copy.
  if (!cluster_copy_ || cluster_changed_) cluster_copy_ = std::make_shared<const sched::Cluster>(*cluster_);
  cluster_changed_ = false;
  return cluster_copy_;
}

SchedulingController::SchedulingController(Duration half_life)
    : queue_(sched::SchedulingQueueOptions{.ledger = {.half_life = half_life}}) {}

absl::Status SchedulingController::ConfigureTenant(const std::string& tenant, const sched::TenantConfig& config) {
  return queue_.ledger().SetTenant(tenant, config);
}

absl::Status SchedulingController::RestoreUsage(const std::string& tenant, double usage) {
  return queue_.ledger().RestoreUsage(tenant, usage);
}

std::shared_ptr<const QuotaTable> SchedulingController::QuotaCopy(const ControllerContext& ctx) const {
  auto table = std::make_shared<QuotaTable>();
  table->tenants = queue_.ledger().AllUsage();
  table->half_life = queue_.ledger().half_life();
  if (queue_.over_quota_size() > 0) {
    for (const auto& [id, pending] : ctx.state.pending) {
      if (queue_.State(id) == sched::QueueState::kOverQuota) {
        table->over_quota[pending.record.tenant].emplace_back(id, queue_.Reason(id));
      }
    }
  }
  return table;
}

void SchedulingController::SyncQueue(ControllerContext& ctx, MonoTime now) {
  for (const auto& [id, pending] : ctx.state.pending) {
    if (queue_.Contains(id)) continue;
    if (pending.not_before && now < *pending.not_before) {
      // A retry's backoff: queued once it has passed.
      std::string& reason = ctx.state.pending_reason[id];
      if (reason.empty()) {
        reason = "waiting out its retry backoff";
        ctx.state.dirty = true;
      }
      continue;
    }
    // The least the job holds once placed, over its requests' alternatives: lets the queue park it over
    // its tenant's milli-GPU cap without an attempt.
    int64_t min_gpu_milli = 0;
    if (pending.requests.ok()) {
      bool first = true;
      for (const sched::Request& r : *pending.requests) {
        for (const sched::ResourceShape& a : r.alternatives) {
          const int64_t milli = int64_t{r.gang_size} * a.num_gpus * a.gpu_milli;
          min_gpu_milli = first ? milli : std::min(min_gpu_milli, milli);
          first = false;
        }
      }
    }
    sched::QueueItem item{.key = id,
                          .priority = pending.record.priority,
                          .sequence = SequenceOf(id),
                          .shape_key = pending.shape_key,
                          .tenant = pending.record.tenant,
                          .min_gpu_milli = min_gpu_milli};
    if (absl::Status st = queue_.Add(std::move(item)); !st.ok()) spdlog::error("control plane: queue {}: {}", id, st);
    workload_changed_ = true;
  }
}

void SchedulingController::ReleaseHoldings(ControllerContext& ctx, MonoTime now) {
  for (const std::string& id : ctx.state.released) queue_.ledger().Release(id, now);
}

void SchedulingController::BindLiveHoldings(ControllerContext& ctx, MonoTime now) {
  for (const auto& [id, live] : ctx.state.live) {
    if (queue_.ledger().Holds(id)) continue;
    // What it held when placed: every member's GPUs, of its node's model (rank 0's when the node left).
    sched::Holding holding;
    for (const AllocationMember& m : live.allocation.members) {
      if (m.gpus.empty()) continue;
      std::string model = live.allocation.gpu_model;
      if (auto node = ctx.state.nodes.find(m.node); node != ctx.state.nodes.end()) {
        for (const SchedNode& sn : node->second.sched_nodes) {
          if (sn.spec.name == m.sched_node) model = sn.spec.gpu_model;
        }
      }
      holding.gpu_milli_by_model[model] += static_cast<int64_t>(m.gpus.size()) * m.gpu_milli;
    }
    if (absl::Status st = queue_.ledger().Bind(id, live.record.tenant, std::move(holding), now); !st.ok()) {
      spdlog::error("control plane: counting job {} against tenant '{}': {}", id, live.record.tenant, st);
    }
  }
}

void SchedulingController::Forget(const std::string& job_id) { queue_.Remove(job_id); }

void SchedulingController::RefreshCluster(ControllerContext& ctx) {
  // last_rebuild_ (the typical pods' refresh throttle) is left to the passes: a write must not delay
  // the typical pods of the jobs the next pass sees.
  if (ctx.state.cluster_dirty) {
    Rebuild(ctx);
  } else {
    ApplyReleases(ctx);
  }
}

void SchedulingController::ApplyReleases(ControllerContext& ctx) {
  ReleaseHoldings(ctx, ctx.clock.Monotonic());
  for (const std::string& id : ctx.state.released) {
    if (!cluster_) break;
    auto it = bound_.find(id);
    if (it == bound_.end()) continue;
    for (const sched::Placement& p : it->second) cluster_->Release(p);
    bound_.erase(it);
    cluster_changed_ = true;
  }
  ctx.state.released.clear();
  if (cluster_) HoldUnhealthyGpus(ctx);  // a released member on an unhealthy GPU frees nothing
}

void SchedulingController::HoldUnhealthyGpus(ControllerContext& ctx) {
  for (size_t n = 0; n < sched_nodes_.size(); ++n) {
    const SchedNode& sn = *sched_nodes_[n];
    const NodeState& node = ctx.state.nodes.at(sn.node);
    if (node.unhealthy_gpus.empty()) continue;
    const std::vector<hw::GpuDevice>& devices = node.registration.inventory.gpus;
    const auto index = static_cast<sched::NodeIndex>(n);
    for (size_t i = 0; i < sn.device_index.size(); ++i) {
      const int device = sn.device_index[i];
      if (device < 0 || device >= static_cast<int>(devices.size())) continue;
      if (node.unhealthy_gpus.count(devices[device].uuid) == 0) continue;
      const int32_t free = cluster_->gpu_free(index)[i];
      if (free <= 0) continue;
      sched::Placement p;
      p.node = index;
      p.gpu_milli = free;
      p.num_gpus = 1;
      p.gpus[0] = static_cast<uint8_t>(i);
      cluster_->Bind(p);
      held_unhealthy_.push_back(p);
      cluster_changed_ = true;
    }
  }
}

void SchedulingController::Rebuild(ControllerContext& ctx) {
  // The ledger follows the live allocations too: what was released gives back, what is live holds.
  const MonoTime now = ctx.clock.Monotonic();
  ReleaseHoldings(ctx, now);
  BindLiveHoldings(ctx, now);
  framework_.reset();
  cluster_.reset();
  bound_.clear();
  held_unhealthy_.clear();
  ctx.state.released.clear();  // the rebuild starts from the live allocations
  sched_index_.clear();
  sched_nodes_.clear();
  std::vector<sched::NodeSpec> specs;
  for (const auto& [name, s] : ctx.state.nodes) {
    if (s.down || s.suspect || s.cordoned || s.blocked_until) continue;
    auto hold = ctx.state.reserved.find(name);
    for (const SchedNode& sn : s.sched_nodes) {
      sched_index_[sn.spec.name] = static_cast<sched::NodeIndex>(specs.size());
      sched_nodes_.push_back(&sn);
      specs.push_back(sn.spec);
      if (hold != ctx.state.reserved.end()) {
        // Held by a reservation (reservations.h): its tenant's alone, whatever the node's own labels say.
        specs.back().labels[sched::kReservedForLabel] = hold->second.tenant;
        specs.back().labels[kReservationLabel] = hold->second.id;
      }
    }
  }
  auto cluster = sched::Cluster::Create(std::move(specs));
  if (!cluster.ok()) {
    spdlog::error("control plane: cannot build the scheduler's cluster: {}", cluster.status());
    return;
  }
  cluster_.emplace(std::move(*cluster));
  // Resources held by live allocations (draining ones too: their GPUs are not free until released).
  std::vector<sched::ResourceShape> shapes;
  for (const auto& [id, live] : ctx.state.live) {
    for (const AllocationMember& m : live.allocation.members) {
      if (!live.Holds(m.rank)) continue;
      auto idx = sched_index_.find(m.sched_node);
      if (idx == sched_index_.end()) continue;  // node not schedulable: nothing else lands there
      const SchedNode& sn = *sched_nodes_[idx->second];
      const std::vector<hw::GpuDevice>& devices = ctx.state.nodes.at(sn.node).registration.inventory.gpus;
      sched::Placement p;
      p.node = idx->second;
      p.cpu_milli = m.cpu_milli;
      p.memory_bytes = m.memory_bytes;
      p.gpu_milli = static_cast<int32_t>(m.gpu_milli);
      bool found = true;
      for (size_t i = 0; i < m.gpus.size(); ++i) {
        // By UUID: a node that registered again may list its GPUs in another order.
        int device = m.gpus[i];
        if (i < m.gpu_uuids.size()) {
          auto d = std::find_if(devices.begin(), devices.end(),
                                [&](const hw::GpuDevice& g) { return g.uuid == m.gpu_uuids[i]; });
          device = d == devices.end() ? -1 : static_cast<int>(d - devices.begin());
        }
        auto pos = std::find(sn.device_index.begin(), sn.device_index.end(), device);
        if (pos == sn.device_index.end()) {
          found = false;
          break;
        }
        p.gpus[p.num_gpus++] = static_cast<uint8_t>(pos - sn.device_index.begin());
      }
      if (found && cluster_->CanBind(p)) {
        cluster_->Bind(p);
        bound_[id].push_back(p);
      } else {
        spdlog::error("control plane: job {} rank {} no longer fits {}; not counted", id, m.rank, m.sched_node);
      }
      shapes.push_back({m.cpu_milli, m.memory_bytes, p.num_gpus, p.gpu_milli, {live.allocation.gpu_model}});
    }
  }
  HoldUnhealthyGpus(ctx);
  // The workload's typical pods: what the jobs seen so far asked for (FGD's measure, sched/frag.h).
  for (const auto& [id, pending] : ctx.state.pending) {
    if (pending.requests.ok()) shapes.push_back(pending.requests->front().alternatives.front());
  }
  typical_ = sched::ComputeTypicalPods(shapes, kTypicalPodPopularityPct, *cluster_);
  const sched::PolicySpec* policy = sched::Registry::Builtin().FindPolicy(ctx.options.policy);
  active_policy_ = policy->needs_typical_pods && typical_.empty() ? "BestFit" : policy->name;
  sched::FrameworkOptions fo;
  fo.policy = active_policy_;
  fo.seed = ctx.options.seed;
  fo.topology_weight = ctx.options.topology_weight;
  fo.context.typical_pods = typical_;
  auto framework = sched::Framework::Create(fo, &*cluster_);
  if (!framework.ok()) {
    spdlog::error("control plane: cannot build the scheduler: {}", framework.status());
    return;
  }
  framework_ = std::move(*framework);
  cluster_changed_ = true;
  ctx.state.cluster_dirty = false;
  ctx.state.dirty = true;
  workload_changed_ = false;
}

absl::StatusOr<sched::AttemptOutcome> SchedulingController::Attempt(ControllerContext& ctx, const std::string& job_id,
                                                                    MonoTime now) {
  using Kind = sched::AttemptOutcome::Kind;
  auto it = ctx.state.pending.find(job_id);
  if (it == ctx.state.pending.end()) return sched::AttemptOutcome{.kind = Kind::kDropped};
  PendingJob& job = it->second;
  if (!job.requests.ok()) {
    // Admission checked it; a catalog change could break it. Nothing but a change brings it back.
    ctx.state.pending_reason[job_id] = std::string(job.requests.status().message());
    return sched::AttemptOutcome{.kind = Kind::kUnschedulable, .reason = ctx.state.pending_reason[job_id]};
  }
  std::string why;
  std::string over_quota;  // the quota's reason for each request it admitted none of
  bool attempted = false;
  // Regions reclaimed lately are tried last (ControlPlane::Reclaim).
  // Where its data lives (its last checkpoint's region, else resources.data_region) is tried first.
  const std::string data_region = !job.record.checkpoint_region.empty() ? job.record.checkpoint_region
                                  : job.spec.ok()                       ? job.spec->resources.data_region
                                                                        : "";
  // The tenant's reserved capacity first (reservations.h), then the rest as it prefers.
  const std::string tenant = SecretTenant(job.record.tenant);
  std::vector<std::string> reservations;
  for (const auto& [node, hold] : ctx.state.reserved) {
    if (hold.tenant == tenant && std::find(reservations.begin(), reservations.end(), hold.id) == reservations.end()) {
      reservations.push_back(hold.id);
    }
  }
  for (const sched::Request& request :
       PreferringReservations(PreferringDataRegion(AvoidingRegions(*job.requests, known_regions_, avoid_regions_),
                                                   known_regions_, data_region, ctx.options.region_latency),
                              tenant, reservations)) {
    StoreBinder binder(ctx, sched_nodes_, job.record);
    auto attempt =
        sched::ScheduleWithinQuota(queue_.ledger(), job_id, job.record.tenant, request, *framework_, binder, now);
    if (attempt.ok() && attempt->over_quota) {
      over_quota += (over_quota.empty() ? "" : "; ") + attempt->reason;
      continue;
    }
    attempted = true;
    if (!attempt.ok()) {
      // The binder's error (the store): retried after a backoff, not parked as unschedulable.
      const std::string reason = fmt::format("placing failed, retrying: {}", attempt.status().message());
      ctx.state.pending_reason[job_id] = reason;
      ctx.state.dirty = true;
      return sched::AttemptOutcome{.kind = Kind::kError, .reason = reason};
    }
    const sched::Decision* decision = &attempt->decision;
    if (decision->scheduled) {
      const Allocation& a = binder.allocation();
      LiveJob live{binder.stored(), *job.spec, a, std::vector<MemberStatus>(a.members.size())};
      live.placed_at = now;
      if (auto r = ctx.state.recovery.find(job_id); r != ctx.state.recovery.end()) r->second.placed_at = now;
      SetLayout(live);
      spdlog::info("control plane: {} ({}) {}", job_id, job.record.name, binder.stored().reason);
      ctx.state.ports[a.master_addr].insert(a.master_port);
      ctx.log_grants.Place(job_id, live.record.tenant, live.record.epoch, MemberNodes(a));
      bound_[job_id] = binder.placements();
      ctx.state.live.insert_or_assign(job_id, std::move(live));
      ctx.state.pending.erase(it);
      ctx.state.pending_reason.erase(job_id);
      CountTransition(ctx, job_id, JobState::kPending, JobState::kScheduled);
      if (ctx.metrics != nullptr) ctx.metrics->Placed(active_policy_);
      cluster_changed_ = true;
      ctx.logs.Wake(job_id);
      ctx.state.dirty = true;
      return sched::AttemptOutcome{.kind = Kind::kPlaced};
    }
    std::map<std::string, int> counts;
    for (const auto& r : decision->reasons) ++counts[r.reason];
    why = request.gang_size > 1 ? fmt::format("no node fits member {} of the gang of {} ({} nodes)",
                                              decision->members_placed + 1, request.gang_size, cluster_->size())
                                : fmt::format("no node fits ({} nodes)", cluster_->size());
    for (const auto& [reason, n] : counts) why += fmt::format("; {}: {}", n, reason);
  }
  if (!attempted) {
    // Waits, parked, until its tenant releases something or its quota changes; blocks nobody.
    ctx.state.pending_reason[job_id] = over_quota;  // each clause: "over quota (tenant 'T'): ..."
    ctx.state.dirty = true;
    return sched::AttemptOutcome{.kind = Kind::kOverQuota, .reason = over_quota};
  }
  if (!over_quota.empty()) why += "; " + over_quota;
  ctx.state.pending_reason[job_id] = why;
  ctx.state.dirty = true;
  return sched::AttemptOutcome{.kind = Kind::kUnschedulable, .reason = why};
}

void SchedulingController::Reconcile(ControllerContext& ctx, MonoTime now) {
  SyncQueue(ctx, now);
  if (ctx.state.capacity_generation != seen_generation_) {
    seen_generation_ = ctx.state.capacity_generation;
    queue_.CapacityChanged();
    // A node's region changes only when it registers, which changes the capacity.
    known_regions_.clear();
    for (const auto& [name, node] : ctx.state.nodes) {
      if (!node.registration.region.empty()) known_regions_.insert(node.registration.region);
    }
  }
  if (ctx.state.cluster_dirty || (workload_changed_ && (!last_rebuild_ || now - *last_rebuild_ >= kTypicalRefresh))) {
    Rebuild(ctx);
    last_rebuild_ = now;
  } else if (cluster_) {
    ApplyReleases(ctx);
  }
  if (!framework_) return;
  ReformGangs(ctx, now);  // ahead of the queue: their survivors hold GPUs while they wait
  avoid_regions_.clear();
  for (const auto& [region, at] : ctx.state.reclaimed_regions) {
    if (now - at < ctx.options.reclaim_avoid) avoid_regions_.insert(region);
  }
  const MonoTime start = ctx.clock.Monotonic();
  auto stats = queue_.RunCycle(
      now, [&](const sched::QueueItem& item) { return Attempt(ctx, item.key, now); },
      [&](const sched::QueueItem& item, const std::string& reason) {
        ctx.state.pending_reason[item.key] = reason;
        ctx.state.dirty = true;
      });
  if (!stats.ok()) spdlog::error("control plane: scheduling pass: {}", stats.status());
  if (ctx.metrics != nullptr) ctx.metrics->SchedulingCycle(ctx.clock.Monotonic() - start);
}

}  // namespace gpugeek::controlplane
