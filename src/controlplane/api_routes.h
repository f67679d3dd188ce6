#pragma once
// The REST API under /v1 (OpenAPI 3 document at /v1/openapi.json, see openapi.h).
//
// Every route needs `Authorization: Bearer <API token>` except healthz and openapi.json; access.h has
// the role each needs and how tenants are kept apart. Accounts: account_routes.h.
//
//   POST /v1/jobs                      {spec_yaml, model_config?, tenant?} -> 201 job
//   GET  /v1/jobs?state=&tenant=&name=&after=&limit=                      -> {jobs, next_after}
//   GET  /v1/jobs/{id}                                                    -> job
//   POST /v1/jobs/{id}/cancel          {reason?}                          -> job
//   GET  /v1/jobs/{id}/logs?rank=&epoch=&offset=&limit=&wait_ms=          -> byte range (log_routes.h)
//   GET  /v1/events?job=&after=&limit=                                    -> {events}
//   GET  /v1/nodes?after=&limit=, GET /v1/nodes/{name}                    -> {nodes, next_after} / node
//   POST /v1/nodes/{name}/cordon | /uncordon | /drain                     -> node
//   GET  /v1/pool                                                         -> pool
//   POST /v1/plans                     {model_config, task, gpus?, objective?, top?} -> plan
//   GET  /v1/quota?tenant=&after=&limit=, PUT /v1/tenants/{name}/quota      (quota_routes.h)
//   GET  /v1/healthz, GET /v1/openapi.json
//   GET  /v1/prometheus/targets        Prometheus HTTP service discovery: the agents' metrics addresses
//   GET  /metrics                      the server's metrics (docs/metrics.md) when the control plane has them
//
// Errors are {code, message, details} with the HTTP status of http/status_http.h; bad input is
// a 4xx naming the field.

#include "controlplane/accounts.h"
#include "controlplane/control_plane.h"
#include "controlplane/exec_relay.h"
#include "controlplane/node_authority.h"
#include "http/server.h"

namespace gpugeek::controlplane {

// Registers every user route on `server`, each behind its rule in access.h, authenticated by
// `accounts`. All must outlive the server's serving.
void RegisterApiRoutes(http::Server& server, ControlPlane& control_plane, Accounts& accounts, NodeAuthority& nodes,
                       Clock& clock);

// The agents' routes, served on their own listener so user traffic can never starve liveness:
//   POST /v1/agents/register, POST /v1/agents/{node}/heartbeat            (api/agent_protocol.h)
// Each needs the node's credential, or to register for the first time a join token (node_authority.h):
// 401 without a valid one, 403 for another node's credential, 409 for a join with a taken name.
// With `exec_tokens`, each registration draws the node's exec token (exec_relay.h) into its reply, and a
// heartbeat from a node without one (the server restarted) is answered `reregister` to get it one.
void RegisterAgentRoutes(http::Server& server, ControlPlane& control_plane, NodeAuthority& nodes,
                         ExecTokens* exec_tokens = nullptr);

}  // namespace gpugeek::controlplane
