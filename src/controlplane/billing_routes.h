#pragma once
// The marketplace's money routes (billing.h; access.h says who may call each). Amounts are integer
// micro-units ("..._micros") with the same amount as text beside them ("4.10"); request amounts are text
// with up to six decimals ("10.00").
//
//   GET  /v1/offers?gpu=&capacity=&region=&min_gpus=  viewer  what can be rented now, cheapest first
//        (offers.h): {offers: [{gpu_model, capacity_type, region, provider, price_micros_per_gpu_hour, nodes,
//        gpus, gpus_free, max_gpus_free_on_node}]}
//   GET  /v1/balance?tenant=                      viewer  what the tenant may spend now:
//        {tenant, available_micros, credit_micros, cash_micros, available, credits: [{account,
//        remaining_micros, expires_at}]}; a member or viewer sees its own tenant (another reads as 404).
//   GET  /v1/ledger?tenant=&after=&limit=         viewer  the tenant's transactions in posting order, paged
//        by position (`after`: the previous page's next_after); an admin without ?tenant= sees all.
//   GET  /v1/bill?period=YYYY-MM&tenant=          viewer  the tenant's bill for a calendar month (UTC): usage
//        lines per (GPU model, capacity type) with GPU-hours and cost, credit and cash spent, refunds, top-ups,
//        grants, expiries, and the balance at the period's end.
//   GET  /v1/earnings?period=YYYY-MM&provider=     viewer  a provider's month (the provider is a tenant: the
//        caller's own; an admin names any): its nodes' sales per (GPU model, capacity type) with GPU-hours, the
//        platform's fees and what it earned; its payouts; what it is owed now.
//   GET  /v1/cost-report?period=YYYY-MM&tenant=&after=&limit=   viewer  per job of the month: GPU-hours, cost,
//        what the same time costs on-demand and what that saved, paged by job id; the totals and the spend of
//        each day (UTC). An admin without ?tenant= sees every tenant's jobs.
//   POST /v1/tenants/{name}/top-ups {amount, id?}                    admin  money in (id: idempotency key)
//   POST /v1/tenants/{name}/grants {grant, amount, expires_in_days?}  admin  credit, once per grant name
//   POST /v1/providers/{name}/payouts {amount, id}                    admin  pays a provider out
//
// Errors: 400 naming the field; 404 for an unknown tenant; 409 for a payout above what is owed.

#include "controlplane/accounts.h"
#include "controlplane/control_plane.h"
#include "http/server.h"

namespace gpugeek::controlplane {

void RegisterBillingRoutes(http::Server& server, ControlPlane& control_plane, Accounts& accounts);

}  // namespace gpugeek::controlplane
