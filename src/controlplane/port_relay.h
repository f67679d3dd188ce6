#pragma once
// `gpugeek ports` and `gpugeek port-forward`: the control plane's half. As exec (exec_relay.h), the server
// authorises the user, finds the member's node and relays to that node's agent (agent/port_route.h) with
// the node's exec token; no control-plane lock is held while relaying.
//
//   GET  /v1/jobs/{id}/ports
//        200 {"job_id": ..., "members": [{"rank": 0, "node": "n1", "ports": [{"port": 8000,
//        "address": "127.0.0.1"}], "error": "..."}]}: the TCP ports each member listens on; a member
//        whose agent cannot be asked has "error" instead of "ports"
//   POST /v1/jobs/{id}/port-forward?port=P&rank=R   Connection: Upgrade, Upgrade: gpugeek-tcp
//        101, then the connection carries one TCP connection to port P of the member with node rank R
//        (default 0), byte for byte, until either end closes it
//
// Access: member of the job's tenant for both (a forwarded port reaches the job as exec does; viewers
// 403; another tenant's job 404 word for word as an absent one). A request without the upgrade headers
// is 426 before anything is dialled. Errors before the switch: 409 the job is not RUNNING; 400 a rank the job does not
// have or a port outside 1..65535; 403 the member does not listen on the port (the agent connects to nothing else,
// naming the member's ports); 426 the request did not ask to switch to gpugeek-tcp; 429 too many forwarded connections
// (kMaxPortForwardsPerServer or kMaxPortForwardsPerTenant here, or the agent's own limit); 503 the node serves no node
// API, has no exec token yet, cannot be reached, or the member's port refused the connection.

#include "controlplane/accounts.h"
#include "controlplane/control_plane.h"
#include "controlplane/exec_relay.h"
#include "http/server.h"

namespace gpugeek::controlplane {

inline constexpr char kPortsRoutePattern[] = "/v1/jobs/{id}/ports";
inline constexpr char kPortForwardRoutePattern[] = "/v1/jobs/{id}/port-forward";
inline constexpr char kPortForwardProtocol[] = "gpugeek-tcp";  // agent/port_route.h's
// Forwarded connections open through this server at once, at most: each holds a worker thread and one
// relay thread.
inline constexpr int kMaxPortForwardsPerServer = 128;
// ... and per tenant, so that one tenant cannot hold every slot.
inline constexpr int kMaxPortForwardsPerTenant = 32;

// Registers both routes behind their access rules (access.h). All arguments must outlive the server's
// serving.
void RegisterPortRoutes(http::Server& server, ControlPlane& control_plane, Accounts& accounts, ExecTokens& tokens,
                        ExecRelayOptions options);

}  // namespace gpugeek::controlplane
