#pragma once
// `gpugeek exec`: the control plane's half (the kubelet model). The server authorises the user, finds the
// member's node, and relays the request to that node's agent, which runs the command beside the member
// (agent/exec_route.h) and streams its output back (api/exec_stream.h) through the server to the user.
//
//   POST /v1/jobs/{id}/exec   {"argv": ["sh", "-c", "echo hi"], "rank": 0, "timeout_ms": 3600000}
//
// Access: member of the job's tenant (viewers 403; another tenant's job 404 word for word as an absent
// one). rank: node rank, default 0; timeout_ms: 1 .. 86,400,000, default 1 h (the agent kills the
// command's process group past it). The reply is 200 with the exec stream, relayed chunk by chunk as the
// agent writes it. Errors before the stream: 400 malformed body (argv not 1..4096 strings, unknown keys)
// or a rank the job does not have; 409 the job is not RUNNING (or its member is not running on the node);
// 503 the node announced no node API listener (its agent runs with `--metrics-listen off`), has not
// registered with this server since it started (no exec token yet), or cannot be reached.
// When the user goes away (seen at the next write to them) the relay closes its connection to the agent,
// which kills the command at its own next write (at most its 2 s keep-alive later).
// No control-plane lock is held while relaying: the job and node are copied out first.
//
// The exec token (ExecTokens): 32 random bytes (64 hex digits) per node, drawn at each registration,
// returned in RegistrationReply::exec_token and presented by the relay as the bearer token of the
// agent's route. It lives only in memory: after a server restart a heartbeat from a node without one is
// answered `reregister`, which gives it a new one.

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "controlplane/accounts.h"
#include "controlplane/control_plane.h"
#include "http/client.h"
#include "http/server.h"

namespace gpugeek::controlplane {

// The per-node exec tokens. Thread-safe.
class ExecTokens {
 public:
  // Draws a new token for `node` (replacing any) and returns it.
  std::string Issue(const std::string& node);
  // The node's token, nullopt when it has none (not registered since this server started).
  std::optional<std::string> Get(const std::string& node) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> tokens_;  // guarded by mu_
};

struct ExecRelayOptions {
  // The CA the agents' node API certificates chain to (the server's own, ServerOptions::tls_ca_file or
  // the local PKI's), for nodes announcing Registration::metrics_tls; "" relays to TLS nodes fail (503).
  std::string ca_file;
  Duration connect_timeout = std::chrono::seconds(3);
  // A silent agent past this is gone (it writes an empty frame every 2 s while a command is quiet).
  Duration read_timeout = std::chrono::seconds(30);
};

inline constexpr char kExecRoutePattern[] = "/v1/jobs/{id}/exec";

// How the control plane reaches the node API of `job`'s member with node rank `rank` (for exec, ports and
// port-forward): the node and a client configuration with the node's exec token. FailedPrecondition when
// the job is not RUNNING; InvalidArgument for a rank the job does not have; Unavailable when the node
// serves no node API or has no exec token yet. `what` names the operation in the messages.
struct MemberNodeApi {
  std::string node;
  http::ClientOptions client;
};
absl::StatusOr<MemberNodeApi> NodeApiOfMember(ControlPlane& cp, const ExecTokens& tokens,
                                              const ExecRelayOptions& options, const JobView& job, int rank,
                                              std::string_view what);

// Registers POST kExecRoutePattern behind its access rule (access.h). All arguments must outlive the
// server's serving.
void RegisterExecRoute(http::Server& server, ControlPlane& control_plane, Accounts& accounts, ExecTokens& tokens,
                       ExecRelayOptions options);

}  // namespace gpugeek::controlplane
