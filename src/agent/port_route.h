#pragma once
// The port routes of an agent's node API listener (beside /v1/exec, exec_route.h), which only the control
// plane calls, with the exec token of the agent's last registration as the bearer token (else 401):
//
//   GET  /v1/ports?job_id=J&node_rank=R
//        200 {"ports": [{"port": 8000, "address": "127.0.0.1"}, ...]}: the member's listening TCP
//        sockets (listening_ports.h), sorted by port
//   POST /v1/port-forward?job_id=J&node_rank=R&port=P   Connection: Upgrade, Upgrade: gpugeek-tcp
//        101, then the connection carries the bytes of one TCP connection to the member's port P
//
// The agent connects only to a port the member itself listens on, at the address it bound (the
// loopback for a wildcard bind): every other port of the node (the agent's own, another job's) is 403,
// naming the member's ports. Errors before the switch: 400 a missing or malformed parameter, 404 no such
// member on this node, 409 the member is not running, 403 the port is not the member's, 426 the request
// did not ask to switch to gpugeek-tcp, 429 past kMaxPortForwards connections at once, 503 the member's
// port refused the connection. Each forwarded connection lasts until either end closes it or the
// listener stops; it has no idle deadline.

#include "http/server.h"

namespace gpugeek::agent {

class Agent;

inline constexpr char kAgentPortsRoute[] = "/v1/ports";
inline constexpr char kAgentPortForwardRoute[] = "/v1/port-forward";
inline constexpr char kPortForwardProtocol[] = "gpugeek-tcp";
inline constexpr int kMaxPortForwards = 64;

// Registers both routes on `server` (before its Start) for `agent` (borrowed; must outlive the server).
void RegisterPortRoutes(http::Server& server, Agent& agent);

}  // namespace gpugeek::agent
