#include "agent/workload_listener.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/metrics_listener.h"
#include "api/agent_protocol.h"
#include "api/json_reader.h"
#include "common/status_macros.h"
#include "http/server.h"

namespace gpugeek::agent {
namespace {

constexpr size_t kMaxBodyBytes = 1024;

// {"step": N}, N an integer 0..api::kMaxCheckpointStep; errors name the field.
absl::StatusOr<int64_t> ParseStep(const http::Request& r) {
  ASSIGN_OR_RETURN(const nlohmann::json body, r.JsonBody());
  const api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"step"}));
  return reader.Int("step", std::nullopt, 0, api::kMaxCheckpointStep);
}

// {"step": N, "value": V}: N an integer 0..api::kMaxCheckpointStep, V a finite number.
absl::StatusOr<std::pair<int64_t, double>> ParseReport(const http::Request& r) {
  ASSIGN_OR_RETURN(const nlohmann::json body, r.JsonBody());
  const api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"step", "value"}));
  ASSIGN_OR_RETURN(const int64_t step, reader.Int("step", std::nullopt, 0, api::kMaxCheckpointStep));
  ASSIGN_OR_RETURN(const nlohmann::json* value, reader.Raw("value"));
  if (!value->is_number()) return reader.Error("value", "must be a number");
  return std::make_pair(step, value->get<double>());
}

// The member's token from `Authorization: Bearer TOKEN`.
absl::StatusOr<std::string_view> MemberToken(const http::Request& r) {
  auto auth = r.headers.find("authorization");
  if (auth == r.headers.end() || !auth->second.starts_with("Bearer ")) {
    return absl::UnauthenticatedError("the member's token is required: Authorization: Bearer $GPUGEEK_MEMBER_TOKEN");
  }
  return std::string_view(auth->second).substr(7);
}

}  // namespace

bool WorkloadListenDisabled(const std::string& listen) { return listen.empty() || listen == "off"; }

absl::StatusOr<std::unique_ptr<WorkloadListener>> WorkloadListener::Start(const std::string& listen, Agent* agent) {
  if (agent == nullptr) return absl::InvalidArgumentError("WorkloadListener needs an agent");
  absl::StatusOr<ListenAddress> bound = ParseMetricsListen(listen);
  if (!bound.ok() || (bound->host != "127.0.0.1" && bound->host != "::1" && bound->host != "localhost")) {
    return absl::InvalidArgumentError(
        fmt::format("workload endpoint '{}' must be a loopback HOST:PORT such as 127.0.0.1:0 (port 0 = any free port): "
                    "only the node's own workloads may reach it",
                    listen));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<http::Server> server, http::Server::Create({.host = bound->host,
                                                                               .port = bound->port,
                                                                               .threads = 1,
                                                                               .max_body_bytes = kMaxBodyBytes,
                                                                               .name = "workload",
                                                                               .max_workers = 8}));
  server->Route("POST", "/v1/checkpoint", [agent](const http::Request& r) -> absl::StatusOr<http::Reply> {
    ASSIGN_OR_RETURN(const std::string_view token, MemberToken(r));
    ASSIGN_OR_RETURN(const int64_t step, ParseStep(r));
    ASSIGN_OR_RETURN(const std::string member, agent->ReportCheckpoint(token, step));
    return http::Reply::Json({{"member", member}, {"step", step}});
  });
  server->Route("POST", "/v1/report", [agent](const http::Request& r) -> absl::StatusOr<http::Reply> {
    ASSIGN_OR_RETURN(const std::string_view token, MemberToken(r));
    ASSIGN_OR_RETURN(const auto report, ParseReport(r));
    ASSIGN_OR_RETURN(const Agent::MetricAck ack, agent->ReportMetric(token, report.first, report.second));
    return http::Reply::Json(
        {{"member", ack.member}, {"step", report.first}, {"seq", ack.seq}, {"should_stop", ack.stop}});
  });
  RETURN_IF_ERROR(server->Start());
  const std::string host = bound->host == "::1" ? "[::1]" : bound->host;
  const std::string url = fmt::format("http://{}:{}", host, server->port());
  return std::unique_ptr<WorkloadListener>(new WorkloadListener(std::move(server), url));
}

WorkloadListener::WorkloadListener(std::unique_ptr<http::Server> server, std::string url)
    : server_(std::move(server)), url_(std::move(url)) {}

WorkloadListener::~WorkloadListener() { Stop(); }

void WorkloadListener::Stop() {
  if (server_ != nullptr) server_->Stop();
}

}  // namespace gpugeek::agent
