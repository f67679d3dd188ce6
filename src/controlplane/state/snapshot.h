#pragma once
// Snapshot: an immutable view of the committed state, published by the writer after each pass that
// changed something. API views, metrics, `gpugeek top` and heartbeat replies read the latest one
// without taking any lock the writer holds: a reader never waits behind a store write, the planner
// or a scheduling cycle, and always sees one consistent instant.
//
// Publishing swaps a shared_ptr under a mutex held for the swap only; a reader copies the pointer and
// then reads at leisure (the snapshot it holds stays alive until it drops it).

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "api/agent_protocol.h"
#include "controlplane/state/state.h"
#include "sched/cluster.h"
#include "sched/frag.h"
#include "sched/quota.h"

namespace gpugeek::controlplane {

struct NodeSnapshot {
  std::shared_ptr<const api::Registration> registration;  // never null
  std::string state;                                      // ready | suspect | cordoned | down
  bool cordoned = false;
  int64_t gpu_milli_allocated = 0;
  std::map<std::string, std::string> unhealthy_gpus;  // NodeState's: UUID -> why
  std::vector<std::string> jobs;                      // live jobs with a member here
  std::vector<std::string> job_tenants;               // the tenant of jobs[i]
};

// What `gpugeek quota` shows: use against limit of each tenant, and its jobs waiting over quota.
struct QuotaTable {
  std::vector<sched::TenantUsage> tenants;  // by name: configured, holding or with usage
  // Job ids parked over quota with the reason, by tenant.
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> over_quota;
  Duration half_life{};  // of usage; 0 = no decay
};

struct Snapshot {
  uint64_t version = 0;                                                       // bumped on every publish
  std::map<std::string, NodeSnapshot> nodes;                                  // by name
  std::unordered_map<std::string, std::vector<api::Assignment>> assignments;  // by node
  // The live jobs whose env refers to secrets (controlplane/secrets.h), by job id: their tenant and
  // variable -> secret name. Values are resolved per heartbeat reply, never kept here.
  struct SecretRefs {
    std::string tenant;
    std::map<std::string, std::string> env;
  };
  std::unordered_map<std::string, SecretRefs> job_secrets;
  std::unordered_map<std::string, std::string> pending_reasons;  // by job id
  // The metering segments still open (members running; usage.h), by job id: a job's view adds them up to now.
  struct OpenSegment {
    std::string capacity_type;
    std::string gpu_model;
    int64_t milli = 0;  // milli-GPU
    int64_t price = 0;  // micro-units per GPU-hour
    int64_t on_demand_price = 0;
    MonoTime since{};
    Duration idle{};  // of it, with every GPU idle (controllers/metering.h), as of this snapshot
  };
  std::unordered_map<std::string, std::vector<OpenSegment>> metering;
  // The scheduler's view of the schedulable pool (nodes ready and uncordoned) with the resources live
  // allocations hold; nullptr until the first pass.
  std::shared_ptr<const sched::Cluster> cluster;
  std::vector<sched::TypicalPod> typical;
  std::string policy;                       // the placement policy in use
  std::shared_ptr<const QuotaTable> quota;  // never null after the first publish
  int pending_jobs = 0;
};

// The assignments of every node, from the live jobs: the desired state each heartbeat reply carries.
// A member that has exited is not listed; a member of a job that ended or is draining is listed with
// `cancel`, so its agent stops it.
std::unordered_map<std::string, std::vector<api::Assignment>> BuildAssignments(const State& state);

}  // namespace gpugeek::controlplane
