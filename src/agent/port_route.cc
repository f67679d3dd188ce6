#include "agent/port_route.h"

#include <unistd.h>

#include <atomic>
#include <memory>
#include <optional>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "agent/agent.h"
#include "agent/exec_route.h"
#include "agent/listening_ports.h"
#include "common/status_macros.h"

namespace gpugeek::agent {
namespace {

struct Target {
  std::string job_id;
  int node_rank = 0;
};

absl::StatusOr<int> IntParam(const http::Request& r, const std::string& name, int lo, int hi, bool required) {
  const std::string text = r.query_value(name);
  if (text.empty()) {
    if (required) return absl::InvalidArgumentError(fmt::format("{}: required (a number {}..{})", name, lo, hi));
    return lo;
  }
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < lo || value > hi) {
    return absl::InvalidArgumentError(fmt::format("{}: must be a number {}..{}, got '{}'", name, lo, hi, text));
  }
  return value;
}

absl::StatusOr<Target> ParseTarget(const http::Request& r) {
  Target t;
  t.job_id = r.query_value("job_id");
  if (t.job_id.empty()) return absl::InvalidArgumentError("job_id: required");
  ASSIGN_OR_RETURN(t.node_rank, IntParam(r, "node_rank", 0, 1023, false));
  return t;
}

std::string PortList(const std::vector<ListeningPort>& ports) {
  if (ports.empty()) return "none";
  std::string out;
  for (const ListeningPort& p : ports) out += fmt::format("{}{}", out.empty() ? "" : ", ", p.port);
  return out;
}

}  // namespace

void RegisterPortRoutes(http::Server& server, Agent& agent) {
  server.Route("GET", kAgentPortsRoute, [&agent](const http::Request& r) -> absl::StatusOr<http::Reply> {
    RETURN_IF_ERROR(CheckExecToken(r, agent));
    ASSIGN_OR_RETURN(Target t, ParseTarget(r));
    ASSIGN_OR_RETURN(pid_t root, agent.PortRootFor(t.job_id, t.node_rank));
    nlohmann::json ports = nlohmann::json::array();
    for (const ListeningPort& p : ListeningPorts(root, "/proc", ::getpid())) {
      ports.push_back({{"port", p.port}, {"address", p.address}});
    }
    return http::Reply::Json({{"ports", std::move(ports)}});
  });

  auto open = std::make_shared<std::atomic<int>>(0);
  server.Route("POST", kAgentPortForwardRoute, [&agent, open](const http::Request& r) -> absl::StatusOr<http::Reply> {
    RETURN_IF_ERROR(CheckExecToken(r, agent));
    ASSIGN_OR_RETURN(Target t, ParseTarget(r));
    ASSIGN_OR_RETURN(int port, IntParam(r, "port", 1, 65535, true));
    // A request that does not ask to switch gets its 426 before anything is dialled.
    if (!http::AsksToUpgrade(r, kPortForwardProtocol)) return http::Reply::UpgradeRequired(kPortForwardProtocol);
    ASSIGN_OR_RETURN(pid_t root, agent.PortRootFor(t.job_id, t.node_rank));
    auto listening_on = [&]() -> std::optional<ListeningPort> {
      for (const ListeningPort& p : ListeningPorts(root, "/proc", ::getpid())) {
        if (p.port == port) return p;
      }
      return std::nullopt;
    };
    const std::optional<ListeningPort> listener = listening_on();
    if (!listener) {
      return absl::PermissionDeniedError(fmt::format("job {} rank {} does not listen on port {} (its ports: {})",
                                                     t.job_id, t.node_rank, port,
                                                     PortList(ListeningPorts(root, "/proc", ::getpid()))));
    }
    const std::optional<std::string> address = listener->ConnectAddress();
    if (!address) {
      return absl::PermissionDeniedError(fmt::format(
          "job {} rank {} listens on port {} at {}, not on the loopback or all addresses: port-forward reaches "
          "only those (bind 127.0.0.1 or 0.0.0.0)",
          t.job_id, t.node_rank, port, listener->address));
    }
    if (open->fetch_add(1) >= kMaxPortForwards) {
      open->fetch_sub(1);
      return absl::ResourceExhaustedError(fmt::format(
          "port-forward: {} connections already open on node {}; close some first", kMaxPortForwards, agent.node()));
    }
    std::shared_ptr<void> slot(nullptr, [open](void*) { open->fetch_sub(1); });
    // Connected before the switch, so a port that refuses is the caller's 503, not a stream that ends.
    ASSIGN_OR_RETURN(std::unique_ptr<http::TcpByteStream> member,
                     http::ConnectTcp(*address, port, std::chrono::seconds(3)));
    // Still the member's after the connect: had it closed the port and someone else bound it meanwhile,
    // the connection would be to them.
    if (!listening_on()) {
      return absl::PermissionDeniedError(
          fmt::format("job {} rank {} stopped listening on port {}", t.job_id, t.node_rank, port));
    }
    http::Reply reply;
    reply.upgrade_protocol = kPortForwardProtocol;
    reply.upgrade = [member = std::shared_ptr<http::TcpByteStream>(std::move(member)), slot, t,
                     port](http::ByteStream& relay) {
      const http::SpliceBytes moved = http::Splice(relay, *member);
      spdlog::info("port-forward: job {} rank {} port {} closed ({} bytes in, {} out)", t.job_id, t.node_rank, port,
                   moved.a_to_b, moved.b_to_a);
    };
    return reply;
  });
}

}  // namespace gpugeek::agent
