#include "controlplane/api_routes.h"

#include <fmt/format.h>

#include "api/json_reader.h"
#include "common/absl_fmt.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "controlplane/account_routes.h"
#include "controlplane/api_views.h"
#include "controlplane/billing_routes.h"
#include "controlplane/budget_routes.h"
#include "controlplane/metrics.h"
#include "controlplane/openapi.h"
#include "controlplane/quota_routes.h"
#include "controlplane/reservation_routes.h"
#include "workload/plan_json.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;

constexpr int kDefaultLimit = 100;
constexpr int kMaxLimit = 1000;

absl::StatusOr<int> IntQuery(const Request& r, const std::string& name, int fallback, int lo, int hi) {
  const std::string v = r.query_value(name);
  if (v.empty()) return fallback;
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  if (*end != '\0' || n < lo || n > hi) {
    return absl::InvalidArgumentError(
        fmt::format("query parameter '{}' = '{}' must be an integer {}..{}", name, v, lo, hi));
  }
  return static_cast<int>(n);
}

// The NotFound of a job the caller may not see: word for word the store's for an unknown id, so the
// answer tells nothing of another tenant's objects.
absl::Status NoJob(const std::string& id) { return absl::NotFoundError(fmt::format("store: no job '{}'", id)); }

// The job, when the caller may see it.
absl::StatusOr<JobView> VisibleJob(ControlPlane& cp, const Principal& who, const std::string& id) {
  absl::StatusOr<JobView> job = cp.GetJob(id);
  if (!job.ok()) return job.status();
  if (!who.CanSee(job->record.tenant)) return NoJob(id);
  return job;
}

absl::StatusOr<Reply> SubmitJob(ControlPlane& cp, const Accounts& accounts, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(nlohmann::json body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"spec_yaml", "model_config", "tenant", "dry_run"}));
  SubmitRequest submit;
  ASSIGN_OR_RETURN(submit.spec_yaml, reader.String("spec_yaml"));
  submit.user = who.user;
  // A job belongs to the caller's tenant; only an admin submits for another one (that must exist).
  ASSIGN_OR_RETURN(submit.tenant, reader.String("tenant", who.tenant));
  if (submit.tenant != who.tenant) {
    if (!who.admin()) {
      return absl::PermissionDeniedError(
          fmt::format("tenant: you submit as tenant '{}'; leave the field out or set it to yours", who.tenant));
    }
    if (!accounts.HasTenant(submit.tenant)) {
      return absl::NotFoundError(fmt::format("tenant: '{}' does not exist", submit.tenant));
    }
  }
  if (reader.Has("model_config") && !body["model_config"].is_null()) {
    if (!body["model_config"].is_object()) return reader.Error("model_config", "must be the config.json object");
    submit.model_config_json = body["model_config"].dump();
  }
  if (reader.Has("dry_run") && !body["dry_run"].is_null()) {
    if (!body["dry_run"].is_boolean()) return reader.Error("dry_run", "must be true or false");
    if (body["dry_run"].get<bool>()) {
      ASSIGN_OR_RETURN(JobQuote quote, cp.Quote(submit));
      return Reply::Json(QuoteToJson(quote));
    }
  }
  ASSIGN_OR_RETURN(JobView job, cp.Submit(submit));
  return Reply::Json(JobToJson(job), 201);
}

absl::StatusOr<Reply> ListJobs(ControlPlane& cp, const Principal& who, const Request& r) {
  store::JobFilter filter;
  if (const std::string s = r.query_value("state"); !s.empty()) {
    filter.state = api::ParseJobState(s);
    if (!filter.state) {
      return absl::InvalidArgumentError(
          fmt::format("query parameter 'state' = '{}' must be one of PENDING, SCHEDULED, RUNNING, SUCCEEDED, FAILED, "
                      "CANCELLED",
                      s));
    }
  }
  filter.tenant = r.query_value("tenant");
  if (!who.admin()) {
    // Another tenant's jobs read as none at all.
    if (!filter.tenant.empty() && filter.tenant != who.tenant) {
      return Reply::Json({{"jobs", nlohmann::json::array()}, {"next_after", nullptr}});
    }
    filter.tenant = who.tenant;
  }
  filter.name = r.query_value("name");
  filter.after_id = r.query_value("after");
  const std::string order = r.query_value("order");
  if (order != "" && order != "newest" && order != "oldest") {
    return absl::InvalidArgumentError(
        fmt::format("query parameter 'order' = {} must be 'newest' (the default) or 'oldest'", QuoteForMessage(order)));
  }
  filter.newest_first = order != "oldest";
  ASSIGN_OR_RETURN(filter.limit, IntQuery(r, "limit", kDefaultLimit, 1, kMaxLimit));
  ASSIGN_OR_RETURN(auto jobs, cp.ListJobs(filter));
  nlohmann::json list = nlohmann::json::array();
  for (const auto& j : jobs) list.push_back(JobToJson(j));
  nlohmann::json out = {{"jobs", list}};
  out["next_after"] =
      static_cast<int>(jobs.size()) == filter.limit ? nlohmann::json(jobs.back().record.id) : nlohmann::json();
  return Reply::Json(out);
}

// The node as `who` may see it: the pool is shared, but the jobs on it are listed only for their tenant.
NodeView VisibleTo(const Principal& who, NodeView n) {
  if (who.admin()) return n;
  std::vector<std::string> jobs, tenants;
  for (size_t i = 0; i < n.jobs.size(); ++i) {
    if (n.job_tenants[i] != who.tenant) continue;
    jobs.push_back(n.jobs[i]);
    tenants.push_back(n.job_tenants[i]);
  }
  n.jobs = std::move(jobs);
  n.job_tenants = std::move(tenants);
  return n;
}

// Nodes by name, paged: ?limit=N (1..1000, default 100) &after=NAME; "next_after" names the last node
// of a full page (null on the last page).
absl::StatusOr<Reply> ListNodes(ControlPlane& cp, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(int limit, IntQuery(r, "limit", kDefaultLimit, 1, kMaxLimit));
  const std::string after = r.query_value("after");
  nlohmann::json list = nlohmann::json::array();
  std::string last;
  for (const NodeView& n : cp.Nodes(after, limit + 1)) {
    if (static_cast<int>(list.size()) == limit) {
      return Reply::Json({{"nodes", list}, {"next_after", last}});
    }
    last = n.registration.node;
    list.push_back(NodeToJson(VisibleTo(who, n)));
  }
  return Reply::Json({{"nodes", list}, {"next_after", nullptr}});
}

absl::StatusOr<Reply> Events(ControlPlane& cp, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(int limit, IntQuery(r, "limit", kDefaultLimit, 1, kMaxLimit));
  const std::string after = r.query_value("after", "0");
  char* end = nullptr;
  const long long after_seq = std::strtoll(after.c_str(), &end, 10);
  if (*end != '\0' || after_seq < 0) {
    return absl::InvalidArgumentError(fmt::format("query parameter 'after' = '{}' must be an event seq >= 0", after));
  }
  store::EventFilter filter{.job_id = r.query_value("job"), .after_seq = after_seq, .limit = limit};
  if (!who.admin()) filter.tenant = who.tenant;  // another tenant's job's events read as none
  ASSIGN_OR_RETURN(auto events, cp.Events(filter));
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : events) list.push_back(EventToJson(e));
  return Reply::Json({{"events", list}});
}

absl::StatusOr<Reply> Plan(ControlPlane& cp, const Request& r) {
  ASSIGN_OR_RETURN(nlohmann::json body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"model_config", "task", "objective", "top"}));
  if (!reader.Has("model_config") || !body["model_config"].is_object()) {
    return reader.Error("model_config", "is required: the model's config.json object");
  }
  ASSIGN_OR_RETURN(const nlohmann::json* task_json, reader.Raw("task"));
  api::JsonReader t(*task_json, "task");
  RETURN_IF_ERROR(t.CheckObject({"kind", "seq", "batch", "tokens"}));
  workload::Task task;
  ASSIGN_OR_RETURN(std::string kind, t.String("kind"));
  auto parsed_kind = workload::ParseTaskKind(kind);
  if (!parsed_kind.ok()) return t.Error("kind", "must be one of inference, lora, qlora, full, pretrain");
  task.kind = *parsed_kind;
  ASSIGN_OR_RETURN(task.seq, t.Int("seq", 4096, 1, 10'000'000));
  ASSIGN_OR_RETURN(task.batch, t.Int("batch", 1, 1, 1'000'000));
  ASSIGN_OR_RETURN(int64_t tokens, t.Int("tokens", 0, 0, INT64_MAX));
  task.tokens = static_cast<double>(tokens);
  workload::PlannerOptions options;
  ASSIGN_OR_RETURN(std::string objective, reader.String("objective", std::string("time")));
  auto parsed_objective = workload::ParseObjective(objective);
  if (!parsed_objective.ok()) return reader.Error("objective", "must be one of time, cost, gpus");
  options.objective = *parsed_objective;
  ASSIGN_OR_RETURN(int64_t top, reader.Int("top", 5, 1, 50));
  options.top_k = static_cast<int>(top);
  ASSIGN_OR_RETURN(workload::Plan plan, cp.DryRunPlan(body["model_config"].dump(), task, {}, options));
  nlohmann::json candidates = nlohmann::json::array();
  for (const auto& c : plan.candidates) candidates.push_back(workload::PlanCandidateToJson(c));
  return Reply::Json(
      {{"candidates", candidates}, {"rejected", plan.rejected}, {"layouts_evaluated", plan.layouts_evaluated}});
}

// The body of a reclaim notice, {"deadline_s": 1..3600}, as a duration.
absl::StatusOr<Duration> ReclaimNotice(const Request& r) {
  ASSIGN_OR_RETURN(const nlohmann::json body, r.JsonBody());
  const api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"deadline_s"}));
  ASSIGN_OR_RETURN(const int64_t seconds, reader.Int("deadline_s", std::nullopt, 1, 3600));
  return std::chrono::seconds(seconds);
}

absl::StatusOr<Reply> NodeAction(ControlPlane& cp, const Request& r, const std::string& action) {
  const std::string name = r.param("name");
  if (action == "drain") {
    RETURN_IF_ERROR(cp.Drain(name));
  } else {
    RETURN_IF_ERROR(cp.SetCordoned(name, action == "cordon"));
  }
  ASSIGN_OR_RETURN(NodeView node, cp.Node(name));
  return Reply::Json(NodeToJson(node));
}

// Prometheus HTTP service discovery (https://prometheus.io/docs/prometheus/latest/http_sd/): one
// target group per node that is not down and announced where it serves its metrics.
nlohmann::json PrometheusTargets(ControlPlane& cp) {
  nlohmann::json groups = nlohmann::json::array();
  for (const NodeView& n : cp.Nodes()) {
    const api::Registration& r = n.registration;
    if (n.state == "down" || r.metrics_address.empty()) continue;
    groups.push_back({{"targets", {r.metrics_address}},
                      {"labels", {{"node", r.node}, {"capacity_type", r.capacity_type}, {"region", r.region}}}});
  }
  return groups;
}

}  // namespace

void RegisterApiRoutes(http::Server& server, ControlPlane& cp, Accounts& accounts, NodeAuthority& nodes, Clock& clock) {
  const auto route = [&](const std::string& method, const std::string& pattern, GuardedHandler handler) {
    GuardedRoute(server, accounts, method, pattern, std::move(handler));
  };
  route("GET", "/v1/healthz", [&clock](const Principal&, const Request&) -> absl::StatusOr<Reply> {
    return Reply::Json({{"status", "ok"}, {"time", FormatTime(clock.Now())}});
  });
  route("GET", "/v1/openapi.json",
        [](const Principal&, const Request&) -> absl::StatusOr<Reply> { return Reply::Json(OpenApiDocument()); });
  route("POST", "/v1/jobs",
        [&cp, &accounts](const Principal& who, const Request& r) { return SubmitJob(cp, accounts, who, r); });
  route("GET", "/v1/jobs", [&cp](const Principal& who, const Request& r) { return ListJobs(cp, who, r); });
  route("GET", "/v1/jobs/{id}", [&cp](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(JobView job, VisibleJob(cp, who, r.param("id")));
    return Reply::Json(JobToJson(job));
  });
  route("POST", "/v1/jobs/{id}/cancel", [&cp](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    RETURN_IF_ERROR(VisibleJob(cp, who, r.param("id")).status());
    std::string reason = fmt::format("cancelled by {}", who.user);
    if (!r.body.empty()) {
      ASSIGN_OR_RETURN(nlohmann::json body, r.JsonBody());
      api::JsonReader reader(body, "");
      RETURN_IF_ERROR(reader.CheckObject({"reason"}));
      ASSIGN_OR_RETURN(reason, reader.String("reason", reason));
    }
    ASSIGN_OR_RETURN(JobView job, cp.Cancel(r.param("id"), reason));
    return Reply::Json(JobToJson(job));
  });
  route("GET", kLogRoutePattern, [&cp](const Principal& who, const Request& r) {
    const LogJobInfoFn job_info = [&cp, &who](const std::string& id) -> absl::StatusOr<LogJobInfo> {
      ASSIGN_OR_RETURN(LogJobInfo info, cp.LogState(id));
      if (!who.CanSee(info.tenant)) return NoJob(id);
      return info;
    };
    return ServeLogs(cp.logs(), job_info, r);
  });
  route("GET", "/v1/events", [&cp](const Principal& who, const Request& r) { return Events(cp, who, r); });
  route("GET", "/v1/nodes", [&cp](const Principal& who, const Request& r) { return ListNodes(cp, who, r); });
  route("GET", "/v1/nodes/{name}", [&cp](const Principal& who, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(NodeView node, cp.Node(r.param("name")));
    return Reply::Json(NodeToJson(VisibleTo(who, std::move(node))));
  });
  route("DELETE", "/v1/nodes/{name}", [&cp, &nodes](const Principal&, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(NodeView node, cp.RemoveNode(r.param("name")));
    // Its credential goes with it: an agent that comes back must join again with a new join token.
    RETURN_IF_ERROR(nodes.Revoke(r.param("name")));
    return Reply::Json(NodeToJson(node));
  });
  for (const std::string action : {"cordon", "uncordon", "drain"}) {
    route("POST", "/v1/nodes/{name}/" + action,
          [&cp, action](const Principal&, const Request& r) { return NodeAction(cp, r, action); });
  }
  // A spot reclaim notice: {"deadline_s": 30} = the provider takes the node back in 30 s.
  route("POST", "/v1/nodes/{name}/reclaim", [&cp](const Principal&, const Request& r) -> absl::StatusOr<Reply> {
    ASSIGN_OR_RETURN(const Duration notice, ReclaimNotice(r));
    RETURN_IF_ERROR(cp.Reclaim(r.param("name"), notice));
    ASSIGN_OR_RETURN(NodeView node, cp.Node(r.param("name")));
    return Reply::Json(NodeToJson(node));
  });
  route("GET", "/v1/pool", [&cp](const Principal&, const Request&) -> absl::StatusOr<Reply> {
    return Reply::Json(PoolToJson(cp.Pool()));
  });
  route("POST", "/v1/plans", [&cp](const Principal&, const Request& r) { return Plan(cp, r); });
  RegisterAccountRoutes(server, accounts);
  RegisterJoinTokenRoutes(server, accounts, nodes);
  RegisterQuotaRoutes(server, cp, accounts);
  RegisterBillingRoutes(server, cp, accounts);
  RegisterBudgetRoutes(server, cp, accounts);
  RegisterReservationRoutes(server, cp, accounts);
  route("GET", "/v1/prometheus/targets", [&cp](const Principal&, const Request&) -> absl::StatusOr<Reply> {
    return Reply::Json(PrometheusTargets(cp));
  });
  if (ControlPlaneMetrics* m = cp.metrics(); m != nullptr) {
    route("GET", "/metrics", [m](const Principal&, const Request&) -> absl::StatusOr<Reply> {
      return Reply::Text(m->registry().Render(), metrics::kContentType);
    });
  }
}

void RegisterAgentRoutes(http::Server& server, ControlPlane& cp, NodeAuthority& nodes, ExecTokens* exec_tokens) {
  const auto authorization = [](const Request& r) -> std::string_view {
    auto it = r.headers.find("authorization");
    return it == r.headers.end() ? std::string_view() : std::string_view(it->second);
  };
  server.Route("POST", "/v1/agents/register",
               [&cp, &nodes, authorization, exec_tokens](const Request& r) -> absl::StatusOr<Reply> {
                 ASSIGN_OR_RETURN(nlohmann::json body, r.JsonBody());
                 ASSIGN_OR_RETURN(api::Registration reg, api::RegistrationFromJson(body));
                 // Who may register this name is settled before anything is stored; a join token is
                 // consumed only once the registration is.
                 ASSIGN_OR_RETURN(NodeAuthority::Admission admission,
                                  nodes.AdmitRegistration(authorization(r), reg.node));
                 // Whose node it is comes from its join token, never from what the agent says: the provider
                 // label is what billing pays (controllers/metering.h).
                 reg.labels.erase(std::string(api::kProviderLabel));
                 if (!admission.provider.empty()) reg.labels[std::string(api::kProviderLabel)] = admission.provider;
                 ASSIGN_OR_RETURN(api::RegistrationReply reply, cp.Register(reg));
                 ASSIGN_OR_RETURN(reply.node_credential, nodes.Join(admission, reg.node));
                 if (exec_tokens != nullptr) reply.exec_token = exec_tokens->Issue(reg.node);
                 return Reply::Json(api::ToJson(reply));
               });
  server.Route("POST", "/v1/agents/{node}/heartbeat",
               [&cp, &nodes, authorization, exec_tokens](const Request& r) -> absl::StatusOr<Reply> {
                 // The credential first: a forged heartbeat costs one HMAC and changes nothing.
                 RETURN_IF_ERROR(nodes.AuthenticateNode(authorization(r), r.param("node")));
                 ASSIGN_OR_RETURN(nlohmann::json body, r.JsonBody());
                 ASSIGN_OR_RETURN(api::Heartbeat hb, api::HeartbeatFromJson(body));
                 if (hb.node != r.param("node")) {
                   return absl::InvalidArgumentError(fmt::format(
                       "heartbeat.node = '{}' does not match the URL's node '{}'", hb.node, r.param("node")));
                 }
                 ASSIGN_OR_RETURN(api::HeartbeatReply reply, cp.Heartbeat(hb));
                 // A node registered before this server started has no exec token: registering again gives it one.
                 if (exec_tokens != nullptr && !exec_tokens->Get(hb.node)) reply.reregister = true;
                 return Reply::Json(api::ToJson(reply));
               });
  // The agent's own reclaim notice (agent/reclaim_notice.h): only a node's credential reclaims that node.
  server.Route("POST", "/v1/agents/{node}/reclaim",
               [&cp, &nodes, authorization](const Request& r) -> absl::StatusOr<Reply> {
                 RETURN_IF_ERROR(nodes.AuthenticateNode(authorization(r), r.param("node")));
                 ASSIGN_OR_RETURN(const Duration notice, ReclaimNotice(r));
                 RETURN_IF_ERROR(cp.Reclaim(r.param("node"), notice));
                 return Reply::Json({{"node", r.param("node")},
                                     {"deadline_s", std::chrono::duration_cast<std::chrono::seconds>(notice).count()}});
               });
}

}  // namespace gpugeek::controlplane
