#pragma once
// The exec route of an agent's node API listener (the listener serving /metrics, metrics_listener.h):
//
//   POST /v1/exec   Authorization: Bearer <RegistrationReply::exec_token>
//   {"job_id": "j-00000001", "node_rank": 0, "argv": ["sh", "-c", "echo hi"], "timeout_ms": 3600000}
//
// Only the control plane calls it (it relays `POST /v1/jobs/{id}/exec` after authorising the user):
// the bearer token is the one the server gave this agent at its last registration, compared in
// constant time; anything else is 401 (also while the agent has none). The reply is 200 with an exec
// stream (api/exec_stream.h, content type api::kExecStreamContentType) from RunExec (exec_runner.h).
// Errors before the stream: 400 for a malformed body (argv empty, over kMaxExecArgs arguments or
// kMaxExecArgvBytes in all, a NUL byte; timeout_ms outside 1 .. 86,400,000; unknown keys), 404 when the
// node holds no such member, 409 when it is not running, 429 past kMaxConcurrentExecs at once.

#include "http/server.h"

namespace gpugeek::agent {

class Agent;

inline constexpr size_t kMaxExecArgs = 4096;
inline constexpr size_t kMaxExecArgvBytes = 256 << 10;
inline constexpr int kMaxConcurrentExecs = 16;
inline constexpr char kAgentExecRoute[] = "/v1/exec";

// OK when `r` presents the agent's exec token (Authorization: Bearer, compared in constant time);
// Unauthenticated otherwise, also while the agent has none. Shared by every route only the control plane
// calls (this one, port_route.h).
absl::Status CheckExecToken(const http::Request& r, const Agent& agent);

// Registers POST kAgentExecRoute on `server` (before its Start) for `agent` (borrowed; must outlive
// the server).
void RegisterExecRoute(http::Server& server, Agent& agent);

}  // namespace gpugeek::agent
