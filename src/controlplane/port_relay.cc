#include "controlplane/port_relay.h"

#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "http/client.h"
#include "http/upgrade_client.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;

// agent/port_route.h (an L3 sibling: not included).
constexpr char kAgentPortsPath[] = "/v1/ports";
constexpr char kAgentPortForwardPath[] = "/v1/port-forward";

absl::StatusOr<int> IntQuery(const Request& r, const std::string& name, int fallback, int lo, int hi) {
  const std::string text = r.query_value(name);
  if (text.empty()) {
    if (fallback >= lo) return fallback;
    return absl::InvalidArgumentError(
        fmt::format("{}: required, a number {}..{} (e.g. ?{}={})", name, lo, hi, name, name == "port" ? 8000 : lo));
  }
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < lo || value > hi) {
    return absl::InvalidArgumentError(fmt::format("{}: must be a number {}..{}, got '{}'", name, lo, hi, text));
  }
  return value;
}

absl::StatusOr<JobView> VisibleJob(ControlPlane& cp, const Principal& who, const std::string& id) {
  ASSIGN_OR_RETURN(JobView job, cp.GetJob(id));
  if (!who.CanSee(job.record.tenant)) return absl::NotFoundError(fmt::format("store: no job '{}'", id));
  return job;
}

absl::StatusOr<Reply> Ports(ControlPlane& cp, ExecTokens& tokens, const ExecRelayOptions& options, const Principal& who,
                            const Request& r) {
  const std::string id = r.param("id");
  ASSIGN_OR_RETURN(JobView job, VisibleJob(cp, who, id));
  if (job.record.state != api::JobState::kRunning || !job.allocation.has_value()) {
    return absl::FailedPreconditionError(
        fmt::format("job {} is {}: ports needs a RUNNING job", id, api::JobStateName(job.record.state)));
  }
  nlohmann::json members = nlohmann::json::array();
  for (const AllocationMember& m : job.allocation->members) {
    nlohmann::json row = {{"rank", m.rank}, {"node", m.node}};
    absl::StatusOr<nlohmann::json> ports = [&]() -> absl::StatusOr<nlohmann::json> {
      ASSIGN_OR_RETURN(MemberNodeApi api, NodeApiOfMember(cp, tokens, options, job, m.rank, "ports"));
      ASSIGN_OR_RETURN(std::unique_ptr<http::Client> client, http::Client::Create(api.client));
      return client->Get(fmt::format("{}?job_id={}&node_rank={}", kAgentPortsPath, http::UrlEncode(id), m.rank));
    }();
    if (ports.ok() && ports->contains("ports") && (*ports)["ports"].is_array()) {
      row["ports"] = (*ports)["ports"];
    } else {
      row["error"] = ports.ok() ? "the agent's answer holds no ports" : std::string(ports.status().message());
    }
    members.push_back(std::move(row));
  }
  return Reply::Json({{"job_id", id}, {"members", std::move(members)}});
}

// Forwarded connections open through this server, in all and per tenant (each holds a worker thread and
// two relay threads).
struct OpenForwards {
  std::mutex mu;
  int total = 0;
  std::map<std::string, int> by_tenant;
};

absl::StatusOr<Reply> PortForward(ControlPlane& cp, ExecTokens& tokens, const ExecRelayOptions& options,
                                  const std::shared_ptr<OpenForwards>& open, const Principal& who, const Request& r) {
  const std::string id = r.param("id");
  ASSIGN_OR_RETURN(JobView job, VisibleJob(cp, who, id));
  // A request that does not ask to switch gets its 426 before the agent is dialled.
  if (!http::AsksToUpgrade(r, kPortForwardProtocol)) return Reply::UpgradeRequired(kPortForwardProtocol);
  ASSIGN_OR_RETURN(int rank, IntQuery(r, "rank", 0, 0, 1023));
  ASSIGN_OR_RETURN(MemberNodeApi api, NodeApiOfMember(cp, tokens, options, job, rank, "port-forward"));
  ASSIGN_OR_RETURN(int port, IntQuery(r, "port", -1, 1, 65535));
  {
    std::lock_guard<std::mutex> lock(open->mu);
    if (open->total >= kMaxPortForwardsPerServer) {
      return absl::ResourceExhaustedError(
          fmt::format("port-forward: {} connections already open through this server; close some first",
                      kMaxPortForwardsPerServer));
    }
    if (open->by_tenant[who.tenant] >= kMaxPortForwardsPerTenant) {
      return absl::ResourceExhaustedError(
          fmt::format("port-forward: tenant {} has {} connections open already (the most one tenant may hold); "
                      "close some first",
                      who.tenant, kMaxPortForwardsPerTenant));
    }
    ++open->total;
    ++open->by_tenant[who.tenant];
  }
  std::shared_ptr<void> slot(nullptr, [open, tenant = who.tenant](void*) {
    std::lock_guard<std::mutex> lock(open->mu);
    --open->total;
    if (--open->by_tenant[tenant] == 0) open->by_tenant.erase(tenant);
  });
  // The agent checks the port and connects before switching, so its refusal is this request's answer.
  absl::StatusOr<std::unique_ptr<http::ByteStream>> agent = http::OpenUpgrade(
      api.client, "POST",
      fmt::format("{}?job_id={}&node_rank={}&port={}", kAgentPortForwardPath, http::UrlEncode(id), rank, port),
      kPortForwardProtocol);
  if (!agent.ok()) {
    const absl::Status& st = agent.status();
    if (st.code() == absl::StatusCode::kUnauthenticated) {
      return absl::UnavailableError(
          fmt::format("node {}'s agent refused this server's exec token; retry once it registered again", api.node));
    }
    if (st.code() == absl::StatusCode::kUnavailable) {
      return absl::UnavailableError(fmt::format("node {}: {}", api.node, st.message()));
    }
    return st;
  }
  spdlog::info("port-forward: {} (tenant {}) opens job {} rank {} port {} on node {}", who.user, who.tenant, id, rank,
               port, api.node);
  Reply reply;
  reply.upgrade_protocol = kPortForwardProtocol;
  reply.upgrade = [agent = std::shared_ptr<http::ByteStream>(std::move(*agent)), slot](http::ByteStream& user) {
    http::Splice(user, *agent);
  };
  return reply;
}

}  // namespace

void RegisterPortRoutes(http::Server& server, ControlPlane& control_plane, Accounts& accounts, ExecTokens& tokens,
                        ExecRelayOptions options) {
  GuardedRoute(server, accounts, "GET", kPortsRoutePattern,
               [&control_plane, &tokens, options](const Principal& who, const Request& r) {
                 return Ports(control_plane, tokens, options, who, r);
               });
  auto open = std::make_shared<OpenForwards>();
  GuardedRoute(server, accounts, "POST", kPortForwardRoutePattern,
               [&control_plane, &tokens, options, open](const Principal& who, const Request& r) {
                 return PortForward(control_plane, tokens, options, open, who, r);
               });
}

}  // namespace gpugeek::controlplane
