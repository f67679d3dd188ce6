#include "agent/exec_route.h"

#include <atomic>
#include <memory>

#include <fmt/format.h>

#include "agent/agent.h"
#include "agent/exec_runner.h"
#include "api/exec_stream.h"
#include "api/json_reader.h"
#include "common/status_macros.h"

namespace gpugeek::agent {
namespace {

struct ExecRequest {
  std::string job_id;
  int node_rank = 0;
  std::vector<std::string> argv;
  Duration timeout = kDefaultExecTimeout;
};

absl::StatusOr<ExecRequest> ParseExecRequest(const http::Request& r) {
  ASSIGN_OR_RETURN(nlohmann::json body, r.JsonBody());
  api::JsonReader reader(body, "exec");
  RETURN_IF_ERROR(reader.CheckObject({"job_id", "node_rank", "argv", "timeout_ms"}));
  ExecRequest out;
  ASSIGN_OR_RETURN(out.job_id, reader.String("job_id"));
  ASSIGN_OR_RETURN(int64_t rank, reader.Int("node_rank", 0, 0, 1023));
  out.node_rank = static_cast<int>(rank);
  ASSIGN_OR_RETURN(
      int64_t timeout_ms,
      reader.Int("timeout_ms", std::chrono::duration_cast<std::chrono::milliseconds>(kDefaultExecTimeout).count(), 1,
                 86'400'000));
  out.timeout = std::chrono::milliseconds(timeout_ms);
  const auto argv = body.find("argv");
  if (argv == body.end() || !argv->is_array() || argv->empty() || argv->size() > kMaxExecArgs) {
    return absl::InvalidArgumentError(fmt::format("exec.argv: must be an array of 1..{} strings", kMaxExecArgs));
  }
  size_t bytes = 0;
  for (const nlohmann::json& a : *argv) {
    if (!a.is_string()) return absl::InvalidArgumentError("exec.argv: every element must be a string");
    const std::string& s = a.get_ref<const std::string&>();
    if (s.find('\0') != std::string::npos) return absl::InvalidArgumentError("exec.argv: an argument holds a NUL byte");
    bytes += s.size() + 1;
    out.argv.push_back(s);
  }
  if (bytes > kMaxExecArgvBytes) {
    return absl::InvalidArgumentError(
        fmt::format("exec.argv: {} bytes in all, over the {} limit", bytes, kMaxExecArgvBytes));
  }
  if (out.argv[0].empty()) return absl::InvalidArgumentError("exec.argv: the command (argv[0]) is empty");
  return out;
}

}  // namespace

absl::Status CheckExecToken(const http::Request& r, const Agent& agent) {
  auto auth = r.headers.find("authorization");
  const std::string_view presented = auth != r.headers.end() && auth->second.rfind("Bearer ", 0) == 0
                                         ? std::string_view(auth->second).substr(7)
                                         : std::string_view();
  if (!agent.ExecTokenMatches(presented)) {
    return absl::UnauthenticatedError("the server's exec token is required (Authorization: Bearer)");
  }
  return absl::OkStatus();
}

void RegisterExecRoute(http::Server& server, Agent& agent) {
  auto running = std::make_shared<std::atomic<int>>(0);
  server.Route("POST", kAgentExecRoute, [&agent, running](const http::Request& r) -> absl::StatusOr<http::Reply> {
    RETURN_IF_ERROR(CheckExecToken(r, agent));
    ASSIGN_OR_RETURN(ExecRequest req, ParseExecRequest(r));
    ASSIGN_OR_RETURN(ExecTarget target, agent.ExecTargetFor(req.job_id, req.node_rank));
    if (running->fetch_add(1) >= kMaxConcurrentExecs) {
      running->fetch_sub(1);
      return absl::ResourceExhaustedError(
          fmt::format("exec: {} commands already run on node {}; try again later", kMaxConcurrentExecs, agent.node()));
    }
    // The slot is given back when the reply (and its stream) is destroyed, whether or not it streamed.
    std::shared_ptr<void> slot(nullptr, [running](void*) { running->fetch_sub(1); });
    http::Reply reply;
    reply.content_type = api::kExecStreamContentType;
    reply.stream = [target = std::move(target), req = std::move(req), slot](const http::ChunkWriter& write) {
      RunExec(target, req.argv, req.timeout, write);
    };
    return reply;
  });
}

}  // namespace gpugeek::agent
