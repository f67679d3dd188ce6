#pragma once
// From what a job asks for to what the scheduler places.
//
// A job asks either explicitly (JobSpec resources.accelerators: alternatives of MODEL:COUNT per
// node, for num_nodes nodes) or through the planner (a workload::ResourceRequest whose alternatives
// may need different node counts, e.g. 4 x A100 on one node or 16 x A100 on two). The scheduler's
// Request shares one gang size across its alternatives, so alternatives are grouped by gang size,
// in order. A capacity type (spot / on-demand / reserved) and regions are constraints: only nodes of
// that capacity type, in one of those regions (the node label kRegionLabel of node_model.h), qualify.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/job_spec.h"
#include "api/region_latency.h"
#include "sched/request.h"
#include "workload/planner.h"

namespace gpugeek::controlplane {

// The scheduler requests to try, in order, for one job. InvalidArgument when the job asks for
// nothing the scheduler can place (no alternatives and no plan).
absl::StatusOr<std::vector<sched::Request>> BuildRequests(const std::string& job_id, const api::JobSpec& spec,
                                                          const workload::ResourceRequest* plan);

// The requests that replace `count` lost members of an elastic gang (api::ElasticSpec) beside its
// survivors, in the order to try: one per capacity type the spec accepts (its preference order), each a
// gang of `count` members of `like`'s shape (its GPU count, milli-GPU, CPU and memory) on `gpu_model`,
// on distinct nodes, in the spec's regions and, unless span_regions, the survivors' region (the caller
// sets sched::Request::placed to the survivors' placements).
std::vector<sched::Request> ReplacementRequests(const std::string& job_id, const std::string& tenant,
                                                const api::JobSpec& spec, const std::string& gpu_model,
                                                const sched::ResourceShape& like, int count);

// `requests` with, before each one, a copy that also keeps out of the regions in `avoid` (reclaimed lately,
// ControlPlane::Reclaim): its region selector becomes the regions it allowed (all of `known` when it named
// none) minus `avoid`. No copy when that leaves no region or changes nothing. Order kept otherwise, so a
// capacity preference still comes first: [spot away, spot, on-demand away, on-demand].
std::vector<sched::Request> AvoidingRegions(const std::vector<sched::Request>& requests,
                                            const std::set<std::string>& known, const std::set<std::string>& avoid);

// `requests` with, before each one, a copy pinned to each region it allows (all of `known` when it named
// none), the data region first and the rest nearest it first (api::NearestFirst over `latency`); the
// request itself last (it also reaches nodes without a region). Unchanged when `data_region` is empty or
// fewer than two regions are allowed. Applied after AvoidingRegions, so a reclaimed region is still tried
// only after every other: [spot away in data region, spot away nearest, ..., spot away, spot in data
// region, ..., spot, on-demand ...].
std::vector<sched::Request> PreferringDataRegion(const std::vector<sched::Request>& requests,
                                                 const std::set<std::string>& known, const std::string& data_region,
                                                 const api::RegionLatency& latency);

// `requests` of a job of `tenant` (its ledger name, SecretTenant) with, before them all, a copy of each
// pinned to the nodes of `reservations` (the tenant's, reservations.h: node label kReservationLabel), so its
// reserved capacity, paid for used or not, is taken first. The copies drop the capacity type and max_price:
// a held node costs the tenant nothing more, whatever it sells at. Every request carries `tenant` (the
// scheduler's reserved-for filter). Unchanged when `reservations` is empty.
std::vector<sched::Request> PreferringReservations(const std::vector<sched::Request>& requests,
                                                   const std::string& tenant,
                                                   const std::vector<std::string>& reservations);

// The planner's request as stored with the job (JobRecord::plan_json) and read back.
nlohmann::json PlanToJson(const workload::ResourceRequest& plan, const std::string& best_summary);
absl::StatusOr<workload::ResourceRequest> PlanFromJson(const std::string& json_text);

// The plan's alternative for `gpu_model` (the model a placement got); nullptr when `plan` has none.
const workload::ResourceRequest::Alternative* PlanFor(const workload::ResourceRequest& plan,
                                                      const std::string& gpu_model);

}  // namespace gpugeek::controlplane
