#pragma once
// The tenants' quota and fair-share routes (access.h says who may call each):
//
//   GET /v1/quota?tenant=&after=&limit=   -> {tenants: [row], next_after, half_life_s}   viewer
//       A member or viewer sees its own tenant's row only (another tenant reads as none: an empty list);
//       an admin every tenant (those of the accounts and any the scheduler knows), by name, paged.
//   PUT /v1/tenants/{name}/quota  {weight?, max_gpu_milli?, max_jobs?, max_gpus_by_model?} -> row   admin
//       Replaces the tenant's weight (default 1) and caps (absent or 0 = unlimited); 404 for a tenant
//       that does not exist.
//
// A row: {tenant, weight, max_gpus_by_model {model: GPUs}, max_gpu_milli, max_jobs, held_gpu_milli,
// held_gpu_milli_by_model {model: milli-GPU}, jobs, usage_gpu_milli_seconds (decayed), normalized_usage,
// normalized_share, fair_share_factor (Slurm's 2^(-usage/share): 1 unused, 0.5 used exactly its share),
// over_quota_jobs [{id, reason}]} (sched/quota.h).

#include "controlplane/accounts.h"
#include "controlplane/control_plane.h"
#include "http/server.h"

namespace gpugeek::controlplane {

// Registers the routes above on `server` behind their rules. All must outlive the server's serving.
void RegisterQuotaRoutes(http::Server& server, ControlPlane& control_plane, Accounts& accounts);

}  // namespace gpugeek::controlplane
