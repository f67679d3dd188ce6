#include "controlplane/standby.h"

#include <fmt/format.h>

#include "common/status_macros.h"
#include "http/client.h"
#include "http/status_http.h"

namespace gpugeek::controlplane {

absl::StatusOr<std::unique_ptr<StandbyListeners>> StandbyListeners::Start(const StandbyOptions& options) {
  auto s = std::unique_ptr<StandbyListeners>(new StandbyListeners());
  for (const bool agents : {false, true}) {
    // Small: a standby does nothing per request but answer.
    http::ServerOptions o{.host = options.host,
                          .port = agents ? options.agent_port : options.api_port,
                          .threads = 1,
                          .max_body_bytes = 16 << 20,
                          .name = agents ? "standby-agents" : "standby-api",
                          .max_workers = 8,
                          .max_queued_requests = 1024,
                          // Short: closing the listeners waits for requests under way, and the new leader
                          // binds these ports right after (a slow client must not delay it).
                          .header_timeout = std::chrono::seconds(3),
                          .body_timeout = std::chrono::seconds(3),
                          .idle_timeout = std::chrono::seconds(5),
                          .write_timeout = std::chrono::seconds(3),
                          .tls = options.tls};
    ASSIGN_OR_RETURN(std::unique_ptr<http::Server> server, http::Server::Create(o));
    StandbyListeners* self = s.get();
    server->Route("*", "/{path...}", [self, agents](const http::Request& r) { return self->Answer(r, agents); });
    RETURN_IF_ERROR(server->Start());
    (agents ? s->agent_ : s->api_) = std::move(server);
  }
  return s;
}

StandbyListeners::~StandbyListeners() { Stop(); }

void StandbyListeners::Stop() {
  if (api_) api_->Stop();
  if (agent_) agent_->Stop();
}

void StandbyListeners::SetLeader(const std::string& api_url, const std::string& agent_url) {
  std::lock_guard<std::mutex> lock(mu_);
  leader_api_url_ = api_url;
  leader_agent_url_ = agent_url;
}

absl::StatusOr<http::Reply> StandbyListeners::Answer(const http::Request& r, bool agents) const {
  std::string leader;
  {
    std::lock_guard<std::mutex> lock(mu_);
    leader = agents ? leader_agent_url_ : leader_api_url_;
  }
  http::Reply reply;
  if (r.method == "GET" && (r.path == "/healthz" || r.path == "/v1/healthz")) {
    // Alive but not serving: a load balancer's health check sends traffic to the leader only.
    reply = http::Reply::Json({{"status", "standby"}, {"leader", leader}}, 503);
  } else if (leader.empty()) {
    reply.status = 503;
    reply.body = http::ErrorBody(absl::UnavailableError(
                                     "this server is a standby and no leader is serving yet (an election is under "
                                     "way); try again in a second"))
                     .dump();
    reply.headers.emplace_back("Retry-After", "1");
  } else {
    reply.status = 307;
    reply.body =
        http::ErrorBody(
            absl::FailedPreconditionError(fmt::format("this server is a standby; the leader is at {}", leader)),
            {{"leader", leader}})
            .dump();
    reply.headers.emplace_back(http::kLeaderHeader, leader);
    reply.headers.emplace_back("Location", leader + r.target);
  }
  reply.headers.emplace_back(http::kStandbyHeader, "1");
  return reply;
}

}  // namespace gpugeek::controlplane
