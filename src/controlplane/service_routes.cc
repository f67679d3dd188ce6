#include "controlplane/service_routes.h"

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

J ServiceJson(DeploymentController& deployments, const store::ServiceRecord& s) {
  J out = {{"id", s.id},       {"name", s.name},     {"tenant", s.tenant},        {"user", s.user},
           {"state", s.state}, {"reason", s.reason}, {"generation", s.generation}};
  const std::map<std::string, int> desired = ParseDesired(s.desired);
  J versions = J::array();
  int total = 0;
  const std::map<std::string, uint64_t> served = deployments.Served(s.name);
  if (absl::StatusOr<api::ServiceSpec> spec = api::ParseServiceSpec(s.spec_yaml); spec.ok()) {
    for (const api::ServiceVersion& v : spec->versions) {
      const int n = desired.contains(v.name) ? desired.at(v.name) : 0;
      total += n;
      const uint64_t requests = served.contains(v.name) ? served.at(v.name) : 0;
      versions.push_back({{"name", v.name}, {"weight", v.weight_percent}, {"desired", n}, {"requests", requests}});
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

absl::StatusOr<Reply> Create(DeploymentController& deployments, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"spec_yaml"}));
  ASSIGN_OR_RETURN(const std::string spec_yaml, reader.String("spec_yaml"));
  ASSIGN_OR_RETURN(const store::ServiceRecord record, deployments.Apply(spec_yaml, who.tenant, who.user));
  return Reply::Json(ServiceJson(deployments, record), 201);
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
    J s = ServiceJson(deployments, page[i]);
    s.erase("spec_yaml");
    list.push_back(std::move(s));
  }
  if (static_cast<int>(page.size()) > limit) next = page[static_cast<size_t>(limit) - 1].id;
  return Reply::Json({{"services", list}, {"next_after", next}});
}

absl::StatusOr<Reply> Get(DeploymentController& deployments, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(const store::ServiceRecord s, Visible(deployments, who, r.param("name")));
  return Reply::Json(ServiceJson(deployments, s));
}

absl::StatusOr<Reply> Delete(DeploymentController& deployments, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(const store::ServiceRecord s, Visible(deployments, who, r.param("name")));
  ASSIGN_OR_RETURN(const store::ServiceRecord deleted,
                   deployments.Delete(s.id, fmt::format("deleted by {}", who.user)));
  return Reply::Json(ServiceJson(deployments, deleted));
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

absl::StatusOr<Reply> Load(DeploymentController& deployments, const Request& r) {
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"gateway", "services"}));
  ASSIGN_OR_RETURN(const std::string gateway, reader.String("gateway"));
  if (gateway.empty() || gateway.size() > 256) {
    return absl::InvalidArgumentError("gateway: give the reporting gateway's id (1-256 characters)");
  }
  std::map<std::string, std::pair<double, double>> load;
  std::map<std::string, std::map<std::string, uint64_t>> served;
  const J services = body.value("services", J::object());
  if (!services.is_object()) return absl::InvalidArgumentError("services: must be an object of service names");
  if (services.size() > static_cast<size_t>(DeploymentController::kMaxServices)) {
    return absl::InvalidArgumentError(
        fmt::format("services: {} services; at most {}", services.size(), DeploymentController::kMaxServices));
  }
  for (const auto& [name, v] : services.items()) {
    api::JsonReader one(v, "services." + name);
    RETURN_IF_ERROR(one.CheckObject({"in_flight", "queued", "versions"}));
    ASSIGN_OR_RETURN(const int64_t in_flight, one.Int("in_flight", 0, 0, int64_t{1} << 40));
    ASSIGN_OR_RETURN(const int64_t queued, one.Int("queued", 0, 0, int64_t{1} << 40));
    load[name] = {static_cast<double>(in_flight), static_cast<double>(queued)};
    // Requests answered per version since the gateway started (the observed split).
    if (one.Has("versions")) {
      const J& versions = v["versions"];
      if (!versions.is_object() || versions.size() > static_cast<size_t>(api::kMaxServiceVersions)) {
        return absl::InvalidArgumentError(
            fmt::format("services.{}.versions: must map at most {} version names to request counts", name,
                        api::kMaxServiceVersions));
      }
      api::JsonReader counts(versions, "services." + name + ".versions");
      for (const auto& [version, n] : versions.items()) {
        ASSIGN_OR_RETURN(const int64_t count, counts.Int(version, std::nullopt, 0, int64_t{1} << 53));
        served[name][version] = static_cast<uint64_t>(count);
      }
    }
  }
  deployments.ReportLoad(gateway, load, served);
  return Reply::Json(J::object());
}

}  // namespace

void RegisterServiceRoutes(http::Server& server, Accounts& accounts, store::Store& store,
                           DeploymentController& deployments) {
  GuardedRoute(server, accounts, "POST", "/v1/services",
               [&](const Principal& who, const Request& r) { return Create(deployments, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/services",
               [&](const Principal& who, const Request& r) { return List(store, deployments, who, r); });
  GuardedRoute(server, accounts, "POST", "/v1/services/load",
               [&](const Principal&, const Request& r) { return Load(deployments, r); });
  GuardedRoute(server, accounts, "GET", "/v1/services/{name}",
               [&](const Principal& who, const Request& r) { return Get(deployments, who, r); });
  GuardedRoute(server, accounts, "DELETE", "/v1/services/{name}",
               [&](const Principal& who, const Request& r) { return Delete(deployments, who, r); });
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
