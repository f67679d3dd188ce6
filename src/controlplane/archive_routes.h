#pragma once
// The routes of workdir archives (archive_store.h; access.h says who may call each):
//
//   HEAD /v1/archives/{digest}                         200 when the caller's tenant has it, else 404   viewer
//   GET  /v1/archives/{digest}                         the archive's bytes (application/octet-stream)  viewer
//   PUT  /v1/archives/{digest}?offset=N&total=T  BYTES -> {digest, received, complete, entries}        member
//   GET  /v1/agents/{node}/archives/{digest}           the bytes, to the node's own credential          node
//
// An archive is the caller's tenant's (an admin's too: its own tenant); another tenant's digest answers 404
// exactly like an absent one. A PUT carries one piece of the archive, at most the listener's body limit
// (12 MiB; `gpugeek submit` sends 8 MiB pieces), appended at `offset`; the piece that completes `total`
// makes the server verify the SHA-256 and the archive's entries (400, nothing kept, on a mismatch or an
// unsafe entry). A `total` over the server's --max-archive-bytes, or an archive over --max-archive-files,
// is answered 413 naming the limit. An agent may fetch an archive only while a job with that
// workdir_digest has a member assigned to its node; otherwise 404.

#include "controlplane/accounts.h"
#include "controlplane/archive_store.h"
#include "controlplane/control_plane.h"
#include "controlplane/node_authority.h"
#include "http/server.h"

namespace gpugeek::controlplane {

// Registers the user routes on the API listener; everything borrowed must outlive the server.
void RegisterArchiveRoutes(http::Server& server, Accounts& accounts, ArchiveStore& archives);

// Registers GET /v1/agents/{node}/archives/{digest} on the agents' listener.
void RegisterAgentArchiveRoute(http::Server& server, ArchiveStore& archives, ControlPlane& cp, NodeAuthority& nodes);

}  // namespace gpugeek::controlplane
