#include "controlplane/service_routes.h"

#include <algorithm>

#include <fmt/format.h>

#include "api/json_reader.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "controlplane/api_views.h"
#include "controlplane/paging.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;
using J = nlohmann::json;

// The ACTIVE service of that name, when the caller may see it.
absl::StatusOr<store::ServiceRecord> Visible(DeploymentController& deployments, const Principal& who,
                                             const std::string& name) {
  absl::StatusOr<store::ServiceRecord> s = deployments.Find(name);
  if (!s.ok() && s.status().code() != absl::StatusCode::kNotFound) return s.status();
  if (!s.ok() || !who.CanSee(s->tenant)) return absl::NotFoundError(fmt::format("no service '{}'", name));
  return s;
}

J ServiceJson(store::Store& store, DeploymentController& deployments, const store::ServiceRecord& s) {
  J out = {{"id", s.id},       {"name", s.name},     {"tenant", s.tenant},        {"user", s.user},
           {"state", s.state}, {"reason", s.reason}, {"generation", s.generation}};
  const std::map<std::string, int> desired = ParseDesired(s.desired);
  J versions = J::array();
  int total = 0;
  const std::map<std::string, uint64_t> served = deployments.Served(s.name);
  // Metered since the service began (serving_meter.h): every gateway instance's counters.
  std::map<std::string, std::pair<int64_t, int64_t>> metered;
  for (const store::ServiceUsageRecord& u :
       store.ListServiceUsage(s.id).value_or(std::vector<store::ServiceUsageRecord>{})) {
    metered[u.version_name].first += u.requests;
    metered[u.version_name].second += u.tokens;
  }
  if (absl::StatusOr<api::ServiceSpec> spec = api::ParseServiceSpec(s.spec_yaml); spec.ok()) {
    for (const api::ServiceVersion& v : spec->versions) {
      const int n = desired.contains(v.name) ? desired.at(v.name) : 0;
      total += n;
      const uint64_t requests = served.contains(v.name) ? served.at(v.name) : 0;
      const std::pair<int64_t, int64_t> m =
          metered.contains(v.name) ? metered.at(v.name) : std::pair<int64_t, int64_t>{};
      versions.push_back({{"name", v.name},
                          {"weight", v.weight_percent},
                          {"desired", n},
                          {"requests", requests},
                          {"metered_requests", m.first},
                          {"metered_tokens", m.second}});
    }
    out["replicas"] = {{"min", spec->replicas.min}, {"max", spec->replicas.max}, {"initial", spec->replicas.initial}};
  } else {
    out["replicas"] = {{"min", 0}, {"max", 0}, {"initial", 0}};
  }
  out["versions"] = std::move(versions);
  out["desired"] = total;
  int ready = 0;
  if (s.state == "ACTIVE") {
    if (absl::StatusOr<std::vector<ReplicaView>> replicas = deployments.Replicas(s, /*live_only=*/true);
        replicas.ok()) {
      for (const ReplicaView& r : *replicas) ready += r.state == "READY" ? 1 : 0;
    }
  }
  out["ready"] = ready;
  out["created_at"] = FormatTime(s.created_at);
  out["updated_at"] = FormatTime(s.updated_at);
  out["spec_yaml"] = s.spec_yaml;
  return out;
}

absl::StatusOr<Reply> Create(store::Store& store, DeploymentController& deployments, const Principal& who,
                             const Request& r) {
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"spec_yaml"}));
  ASSIGN_OR_RETURN(const std::string spec_yaml, reader.String("spec_yaml"));
  ASSIGN_OR_RETURN(const store::ServiceRecord record, deployments.Apply(spec_yaml, who.tenant, who.user));
  return Reply::Json(ServiceJson(store, deployments, record), 201);
}

absl::StatusOr<Reply> List(store::Store& store, DeploymentController& deployments, const Principal& who,
                           const Request& r) {
  ASSIGN_OR_RETURN(const int limit, PageLimit(r));
  store::ServiceFilter filter{.tenant = who.admin() ? r.query_value("tenant") : who.tenant,
                              .state = r.query_value("state").empty() ? "ACTIVE" : r.query_value("state"),
                              .after_id = r.query_value("after"),
                              .limit = limit + 1};
  ASSIGN_OR_RETURN(std::vector<store::ServiceRecord> page, store.ListServices(filter));
  J list = J::array();
  J next = nullptr;
  for (size_t i = 0; i < page.size() && static_cast<int>(i) < limit; ++i) {
    J s = ServiceJson(store, deployments, page[i]);
    s.erase("spec_yaml");
    list.push_back(std::move(s));
  }
  if (static_cast<int>(page.size()) > limit) next = page[static_cast<size_t>(limit) - 1].id;
  return Reply::Json({{"services", list}, {"next_after", next}});
}

absl::StatusOr<Reply> Get(store::Store& store, DeploymentController& deployments, const Principal& who,
                          const Request& r) {
  ASSIGN_OR_RETURN(const store::ServiceRecord s, Visible(deployments, who, r.param("name")));
  return Reply::Json(ServiceJson(store, deployments, s));
}

absl::StatusOr<Reply> Delete(store::Store& store, DeploymentController& deployments, const Principal& who,
                             const Request& r) {
  ASSIGN_OR_RETURN(const store::ServiceRecord s, Visible(deployments, who, r.param("name")));
  ASSIGN_OR_RETURN(const store::ServiceRecord deleted,
                   deployments.Delete(s.id, fmt::format("deleted by {}", who.user)));
  return Reply::Json(ServiceJson(store, deployments, deleted));
}

std::string ReplicaKey(const ReplicaView& v) { return fmt::format("{} {:012d}", v.version, v.ordinal); }

absl::StatusOr<Reply> ListReplicas(DeploymentController& deployments, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(const store::ServiceRecord s, Visible(deployments, who, r.param("name")));
  ASSIGN_OR_RETURN(std::vector<ReplicaView> replicas, deployments.Replicas(s));
  std::sort(replicas.begin(), replicas.end(),
            [](const ReplicaView& a, const ReplicaView& b) { return ReplicaKey(a) < ReplicaKey(b); });
  ASSIGN_OR_RETURN(J out, Page(r, "replicas", replicas, ReplicaKey, [](const ReplicaView& v) {
                     return J{{"version", v.version}, {"ordinal", v.ordinal},        {"job", v.job},
                              {"node", v.node},       {"address", v.address},        {"port", v.port},
                              {"state", v.state},     {"since", FormatTime(v.since)}};
                   }));
  return Reply::Json(out);
}

absl::StatusOr<Reply> Traffic(DeploymentController& deployments, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(const store::ServiceRecord s, Visible(deployments, who, r.param("name")));
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  RETURN_IF_ERROR(api::JsonReader(body, "").CheckObject({"weights"}));
  ASSIGN_OR_RETURN(const auto weights, deployments.SetTraffic(s.id, body.value("weights", J())));
  return Reply::Json({{"weights", weights}});
}

absl::StatusOr<Reply> Scale(DeploymentController& deployments, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(const store::ServiceRecord s, Visible(deployments, who, r.param("name")));
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  RETURN_IF_ERROR(api::JsonReader(body, "").CheckObject({"replicas"}));
  ASSIGN_OR_RETURN(const auto replicas,
                   deployments.Scale(s.id, body.value("replicas", J()), fmt::format("scaled by {}", who.user)));
  return Reply::Json({{"replicas", replicas}});
}

// Per version name, its counter (`what`: "versions" requests, "tokens" tokens) in one service's load report.
absl::StatusOr<std::map<std::string, uint64_t>> Counters(const J& service, const std::string& name, const char* what) {
  std::map<std::string, uint64_t> out;
  auto it = service.find(what);
  if (it == service.end()) return out;
  const std::string field = fmt::format("services.{}.{}", name, what);
  if (!it->is_object() || it->size() > static_cast<size_t>(api::kMaxServiceVersions)) {
    return absl::InvalidArgumentError(
        fmt::format("{}: must map at most {} version names to counts", field, api::kMaxServiceVersions));
  }
  api::JsonReader counts(*it, field);
  for (const auto& [version, n] : it->items()) {
    ASSIGN_OR_RETURN(const int64_t count, counts.Int(version, std::nullopt, 0, int64_t{1} << 53));
    out[version] = static_cast<uint64_t>(count);
  }
  return out;
}

absl::StatusOr<Reply> Load(DeploymentController& deployments, ServingMeterController& meter, const Request& r) {
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"gateway", "instance", "services"}));
  ASSIGN_OR_RETURN(const std::string gateway, reader.String("gateway"));
  if (gateway.empty() || gateway.size() > 256) {
    return absl::InvalidArgumentError("gateway: give the reporting gateway's id (1-256 characters)");
  }
  // The gateway instance its counters count from (serving_meter.h); without one nothing is metered.
  std::string instance;
  if (reader.Has("instance")) {
    ASSIGN_OR_RETURN(instance, reader.String("instance"));
    if (instance.empty() || instance.size() > 100 ||
        !std::all_of(instance.begin(), instance.end(), [](char c) { return c > ' ' && c < 0x7f; })) {
      return absl::InvalidArgumentError(
          "instance: give the gateway instance as 1-100 printable characters without spaces (GATEWAY_ID/NONCE)");
    }
  }
  std::map<std::string, std::pair<double, double>> load;
  std::map<std::string, std::map<std::string, uint64_t>> served;
  std::map<std::string, std::map<std::string, uint64_t>> tokens;
  const J services = body.value("services", J::object());
  if (!services.is_object()) return absl::InvalidArgumentError("services: must be an object of service names");
  if (services.size() > static_cast<size_t>(DeploymentController::kMaxServices)) {
    return absl::InvalidArgumentError(
        fmt::format("services: {} services; at most {}", services.size(), DeploymentController::kMaxServices));
  }
  for (const auto& [name, v] : services.items()) {
    api::JsonReader one(v, "services." + name);
    RETURN_IF_ERROR(one.CheckObject({"in_flight", "queued", "versions", "tokens"}));
    ASSIGN_OR_RETURN(const int64_t in_flight, one.Int("in_flight", 0, 0, int64_t{1} << 40));
    ASSIGN_OR_RETURN(const int64_t queued, one.Int("queued", 0, 0, int64_t{1} << 40));
    load[name] = {static_cast<double>(in_flight), static_cast<double>(queued)};
    // Requests answered and tokens reported per version since the gateway started (the observed split, and
    // the serverless meter's counters).
    ASSIGN_OR_RETURN(served[name], Counters(v, name, "versions"));
    ASSIGN_OR_RETURN(tokens[name], Counters(v, name, "tokens"));
  }
  deployments.ReportLoad(gateway, load, served);
  if (!instance.empty()) {
    for (const auto& [name, versions] : served) {
      const std::map<std::string, uint64_t>& reported = tokens[name];
      if (versions.empty() && reported.empty()) continue;
      absl::StatusOr<store::ServiceRecord> s = deployments.Find(name);
      if (!s.ok()) continue;  // deleted, or not (yet) a service: nothing to meter
      std::map<std::string, std::pair<int64_t, int64_t>> counts;
      for (const auto& [version, n] : versions) counts[version].first = static_cast<int64_t>(n);
      for (const auto& [version, n] : reported) counts[version].second = static_cast<int64_t>(n);
      for (const auto& [version, c] : counts) {
        meter.Report({.service_id = s->id,
                      .tenant = s->tenant,
                      .user = s->user,
                      .version = version,
                      .instance = instance,
                      .requests = c.first,
                      .tokens = c.second});
      }
    }
  }
  return Reply::Json(J::object());
}

}  // namespace

void RegisterServiceRoutes(http::Server& server, Accounts& accounts, store::Store& store,
                           DeploymentController& deployments, ServingMeterController& meter) {
  GuardedRoute(server, accounts, "POST", "/v1/services",
               [&](const Principal& who, const Request& r) { return Create(store, deployments, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/services",
               [&](const Principal& who, const Request& r) { return List(store, deployments, who, r); });
  GuardedRoute(server, accounts, "POST", "/v1/services/load",
               [&](const Principal&, const Request& r) { return Load(deployments, meter, r); });
  GuardedRoute(server, accounts, "GET", "/v1/services/{name}",
               [&](const Principal& who, const Request& r) { return Get(store, deployments, who, r); });
  GuardedRoute(server, accounts, "DELETE", "/v1/services/{name}",
               [&](const Principal& who, const Request& r) { return Delete(store, deployments, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/services/{name}/replicas",
               [&](const Principal& who, const Request& r) { return ListReplicas(deployments, who, r); });
  GuardedRoute(server, accounts, "POST", "/v1/services/{name}/traffic",
               [&](const Principal& who, const Request& r) { return Traffic(deployments, who, r); });
  GuardedRoute(server, accounts, "POST", "/v1/services/{name}/scale",
               [&](const Principal& who, const Request& r) { return Scale(deployments, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/endpoints",
               [&](const Principal&, const Request&) -> absl::StatusOr<Reply> {
                 ASSIGN_OR_RETURN(J routes, deployments.Routes());
                 return Reply::Json(routes);
               });
}

}  // namespace gpugeek::controlplane
