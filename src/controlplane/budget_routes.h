#pragma once
// The routes of monthly budgets (budgets.h; access.h says who may call each). Amounts are integer
// micro-units ("..._micros") with the same amount as text beside them; request amounts are text ("50.00").
//
//   GET    /v1/budgets?tenant=&after=&limit=   viewer  this month's budgets with what each has spent:
//          {period, budgets: [{tenant, user, monthly_limit_micros, monthly_limit, spent_micros, spent,
//          used_percent, alert_percents, alerted_percent, updated_at}], next_after}, paged by "tenant/user";
//          a member or viewer sees its own tenant's, an admin every tenant's (or ?tenant=).
//   PUT    /v1/tenants/{name}/budget {monthly_limit, alert_percents?}  admin  the tenant's budget
//   DELETE /v1/tenants/{name}/budget                                    admin
//   PUT    /v1/users/{name}/budget {monthly_limit, alert_percents?}    admin  a user's, within its tenant's
//   DELETE /v1/users/{name}/budget                                      admin
//
// Errors: 400 naming the field; 404 for an unknown tenant or user, or no budget to delete.

#include "controlplane/accounts.h"
#include "controlplane/control_plane.h"
#include "http/server.h"

namespace gpugeek::controlplane {

void RegisterBudgetRoutes(http::Server& server, ControlPlane& control_plane, Accounts& accounts);

}  // namespace gpugeek::controlplane
