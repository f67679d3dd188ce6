#include "controlplane/job_request.h"

#include <fmt/format.h>

#include "api/engines.h"
#include "api/json_reader.h"
#include "common/status_macros.h"
#include "controlplane/node_model.h"
#include "controlplane/reservations.h"

namespace gpugeek::controlplane {
namespace {

sched::CapacityType ToSched(api::CapacityType c) {
  switch (c) {
    case api::CapacityType::kSpot:
      return sched::CapacityType::kSpot;
    case api::CapacityType::kReserved:
      return sched::CapacityType::kReserved;
    case api::CapacityType::kOnDemand:
      return sched::CapacityType::kOnDemand;
  }
  return sched::CapacityType::kOnDemand;
}

// The capacity types a job accepts, in its preference order; one nullopt (any type) when it names none.
std::vector<std::optional<sched::CapacityType>> Capacities(const api::Resources& r) {
  std::vector<std::optional<sched::CapacityType>> out;
  for (api::CapacityType c : r.capacity) out.push_back(ToSched(c));
  if (out.empty()) out.push_back(std::nullopt);
  return out;
}

struct Group {
  int gang = 1;
  std::vector<sched::ResourceShape> shapes;
};

void AddShape(std::vector<Group>& groups, int gang, sched::ResourceShape shape) {
  for (Group& g : groups) {
    if (g.gang == gang) {
      g.shapes.push_back(std::move(shape));
      return;
    }
  }
  groups.push_back({gang, {std::move(shape)}});
}

// The engine format the job loads and the runtimes that run it; none for a job without `engine:`.
sched::EngineNeed EngineNeedOf(const api::JobSpec& spec) {
  if (spec.engine.empty()) return {};
  return {.format = spec.engine, .runtimes = api::RuntimesFor(spec.engine)};
}

}  // namespace

absl::StatusOr<std::vector<sched::Request>> BuildRequests(const std::string& job_id, const api::JobSpec& spec,
                                                          const workload::ResourceRequest* plan) {
  std::vector<Group> groups;
  const api::Resources& r = spec.resources;
  if (!r.any_of.empty()) {
    for (const api::AcceleratorRequest& a : r.any_of) {
      sched::ResourceShape s;
      s.cpu_milli = r.cpu_milli;
      s.memory_bytes = r.memory_bytes;
      s.num_gpus = a.count;
      s.gpu_milli = static_cast<int32_t>(a.milli_per_gpu);
      s.allowed_models = {a.model};
      AddShape(groups, spec.num_nodes, std::move(s));
    }
  } else if (plan != nullptr) {
    for (const auto& alt : plan->alternatives) {
      const int per_node = std::max(1, std::min(alt.gpus, alt.gpus_per_node > 0 ? alt.gpus_per_node : alt.gpus));
      if (per_node > sched::kMaxGpusPerNode) continue;
      const int gang = (alt.gpus + per_node - 1) / per_node;
      sched::ResourceShape s;
      s.cpu_milli = r.cpu_milli;
      s.memory_bytes = r.memory_bytes;
      s.num_gpus = per_node;
      s.gpu_milli = 1000;
      s.allowed_models = {alt.gpu_model};
      AddShape(groups, gang, std::move(s));
    }
  }
  if (groups.empty()) {
    return absl::InvalidArgumentError(fmt::format(
        "job {}: nothing to place: give resources.accelerators, or model and task for the planner", job_id));
  }
  // Capacity types are constraints, as the job spec documents: a job that asked for spot (to be cheap) or
  // for on-demand (not to be reclaimed) waits rather than run on another type; a preference list
  // ([spot, on-demand]) is tried in its order, each type over every group, so spot anywhere comes first.
  const std::vector<std::optional<sched::CapacityType>> capacities = Capacities(r);
  std::vector<sched::Request> out;
  for (const std::optional<sched::CapacityType>& capacity : capacities) {
    for (const Group& g : groups) {
      sched::Request req;
      req.id = job_id;
      req.alternatives = g.shapes;
      req.gang_size = g.gang;
      req.distinct_nodes = g.gang > 1;  // num_nodes means nodes: one member per node
      // A gang stays in one region unless the job allows otherwise (resources.span_regions).
      if (g.gang > 1 && !r.span_regions) req.gang_label = kRegionLabel;
      req.priority = spec.priority;
      req.capacity_type = capacity;
      // A constraint too (data residency).
      if (!r.regions.empty()) req.node_selector[std::string(kRegionLabel)] = r.regions;
      req.image = spec.image;           // only nodes that have the image (sched::ImageFit)
      req.engine = EngineNeedOf(spec);  // only nodes with a runtime of the format (sched::EngineFit)
      req.max_price_micros = spec.max_price_micros.value_or(0);  // sched::PriceFit
      out.push_back(std::move(req));
    }
  }
  return out;
}

std::vector<sched::Request> ReplacementRequests(const std::string& job_id, const std::string& tenant,
                                                const api::JobSpec& spec, const std::string& gpu_model,
                                                const sched::ResourceShape& like, int count) {
  const api::Resources& r = spec.resources;
  const std::vector<std::optional<sched::CapacityType>> capacities = Capacities(r);
  std::vector<sched::Request> out;
  for (const std::optional<sched::CapacityType>& capacity : capacities) {
    sched::Request req;
    req.id = job_id;
    req.alternatives = {like};
    req.alternatives.front().allowed_models = {gpu_model};
    req.gang_size = count;
    req.distinct_nodes = true;
    if (!r.span_regions) req.gang_label = kRegionLabel;
    req.priority = spec.priority;
    req.capacity_type = capacity;
    if (!r.regions.empty()) req.node_selector[std::string(kRegionLabel)] = r.regions;
    req.image = spec.image;
    req.engine = EngineNeedOf(spec);
    req.max_price_micros = spec.max_price_micros.value_or(0);
    req.tenant = tenant;
    out.push_back(std::move(req));
  }
  return out;
}

std::vector<sched::Request> AvoidingRegions(const std::vector<sched::Request>& requests,
                                            const std::set<std::string>& known, const std::set<std::string>& avoid) {
  if (avoid.empty()) return requests;
  std::vector<sched::Request> out;
  out.reserve(requests.size() * 2);
  for (const sched::Request& r : requests) {
    auto selected = r.node_selector.find(kRegionLabel);
    std::vector<std::string> allowed;
    if (selected != r.node_selector.end()) {
      allowed = selected->second;
    } else {
      allowed.assign(known.begin(), known.end());
    }
    const size_t before = allowed.size();
    std::erase_if(allowed, [&](const std::string& region) { return avoid.contains(region); });
    if (!allowed.empty() && allowed.size() != before) {
      sched::Request away = r;
      away.node_selector[std::string(kRegionLabel)] = std::move(allowed);
      out.push_back(std::move(away));
    }
    out.push_back(r);
  }
  return out;
}

std::vector<sched::Request> PreferringDataRegion(const std::vector<sched::Request>& requests,
                                                 const std::set<std::string>& known, const std::string& data_region,
                                                 const api::RegionLatency& latency) {
  if (data_region.empty()) return requests;
  std::vector<sched::Request> out;
  for (const sched::Request& r : requests) {
    auto selected = r.node_selector.find(kRegionLabel);
    std::vector<std::string> allowed =
        selected != r.node_selector.end() ? selected->second : std::vector<std::string>(known.begin(), known.end());
    if (allowed.size() > 1) {
      for (std::string& region : api::NearestFirst(latency, data_region, std::move(allowed))) {
        sched::Request pinned = r;
        pinned.node_selector[std::string(kRegionLabel)] = {std::move(region)};
        out.push_back(std::move(pinned));
      }
    }
    out.push_back(r);
  }
  return out;
}

std::vector<sched::Request> PreferringReservations(const std::vector<sched::Request>& requests,
                                                   const std::string& tenant,
                                                   const std::vector<std::string>& reservations) {
  if (reservations.empty()) return requests;
  std::vector<sched::Request> out;
  for (const sched::Request& r : requests) {
    sched::Request pinned = r;
    pinned.tenant = tenant;
    pinned.node_selector[std::string(kReservationLabel)] = reservations;
    pinned.capacity_type.reset();
    pinned.max_price_micros = 0;
    out.push_back(std::move(pinned));
  }
  for (const sched::Request& r : requests) {
    out.push_back(r);
    out.back().tenant = tenant;
  }
  return out;
}

nlohmann::json PlanToJson(const workload::ResourceRequest& plan, const std::string& best_summary) {
  nlohmann::json alts = nlohmann::json::array();
  for (const auto& a : plan.alternatives) {
    alts.push_back({{"gpu_model", a.gpu_model},
                    {"gpus", a.gpus},
                    {"gpus_per_node", a.gpus_per_node},
                    {"tp", a.tp},
                    {"pp", a.pp},
                    {"cp", a.cp},
                    {"dp", a.dp},
                    {"zero_stage", a.zero_stage},
                    {"micro_batch", a.micro_batch},
                    {"memory_per_gpu_bytes", a.memory_per_gpu_bytes},
                    {"est_seconds", a.est_seconds},
                    {"est_cost_micros", a.est_cost_micros}});
  }
  return {{"best", best_summary}, {"alternatives", alts}};
}

absl::StatusOr<workload::ResourceRequest> PlanFromJson(const std::string& json_text) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  api::JsonReader r(j, "plan");
  RETURN_IF_ERROR(r.CheckObject({"best", "alternatives"}));
  workload::ResourceRequest out;
  ASSIGN_OR_RETURN(auto alts, r.Objects("alternatives"));
  for (const api::JsonReader& a : alts) {
    workload::ResourceRequest::Alternative alt;
    ASSIGN_OR_RETURN(alt.gpu_model, a.String("gpu_model"));
    ASSIGN_OR_RETURN(int64_t gpus, a.Int("gpus", std::nullopt, 1, 1 << 20));
    ASSIGN_OR_RETURN(int64_t per_node, a.Int("gpus_per_node", 0, 0, 1 << 20));
    ASSIGN_OR_RETURN(int64_t tp, a.Int("tp", 1, 1, 1 << 20));
    ASSIGN_OR_RETURN(int64_t pp, a.Int("pp", 1, 1, 1 << 20));
    ASSIGN_OR_RETURN(int64_t dp, a.Int("dp", 1, 1, 1 << 20));
    ASSIGN_OR_RETURN(int64_t cp, a.Int("cp", 1, 1, 1 << 20));
    ASSIGN_OR_RETURN(int64_t zero, a.Int("zero_stage", 0, 0, 3));
    ASSIGN_OR_RETURN(alt.micro_batch, a.Int("micro_batch", 1, 1, 1 << 20));
    ASSIGN_OR_RETURN(int64_t mem, a.Int("memory_per_gpu_bytes", 0, 0, INT64_MAX));
    ASSIGN_OR_RETURN(alt.est_seconds, a.Int("est_seconds", 0, 0, INT64_MAX));
    ASSIGN_OR_RETURN(alt.est_cost_micros, a.Int("est_cost_micros", 0, 0, INT64_MAX));
    alt.gpus = static_cast<int>(gpus);
    alt.gpus_per_node = static_cast<int>(per_node);
    alt.tp = static_cast<int>(tp);
    alt.pp = static_cast<int>(pp);
    alt.dp = static_cast<int>(dp);
    alt.cp = static_cast<int>(cp);
    alt.zero_stage = static_cast<int>(zero);
    alt.memory_per_gpu_bytes = static_cast<uint64_t>(mem);
    out.alternatives.push_back(alt);
  }
  return out;
}

const workload::ResourceRequest::Alternative* PlanFor(const workload::ResourceRequest& plan,
                                                      const std::string& gpu_model) {
  for (const auto& alt : plan.alternatives) {
    if (alt.gpu_model == gpu_model) return &alt;
  }
  return nullptr;
}

}  // namespace gpugeek::controlplane
