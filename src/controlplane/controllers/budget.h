#pragma once
// BudgetController: stops a job that reached its own `max_cost` (api::JobSpec::max_cost_micros: its metered
// usage plus its open segments up to now), and a tenant's running work when its money is spent
// (BillingOptions::enforce).
//
// Each pass it prices what the tenant's running members have used since their segments began (charged
// only when each ends, usage.h) at their nodes' prices, and when the tenant's spendable balance
// (unexpired credit + cash, billing.h) minus that is zero or less, cancels its live jobs with the reason
// "budget: ...": the agents stop the members with SIGTERM, the workloads' checkpoint moment
// (docs/checkpointing.md), and their segments are charged as they end, so the tenant's cash ends at most
// the grace period's usage below zero. A tenant whose members all run on unpriced nodes is never stopped.
// It also posts the expiries of credits that are due, once per `expiry_interval`.
//
// Monthly budgets (budgets.h), enforced with or without BillingOptions::enforce: a tenant's or user's month
// spend (Billing::MonthSpend) plus its running members' open segments, against its limit. At each alert
// percent crossed this month (once each: the highest crossed is stored with the budget) it logs a warning;
// at the limit it cancels the scope's live jobs (the user's: those it submitted) with a "budget: ..." reason.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "controlplane/controllers/context.h"
#include "ledger/money.h"

namespace gpugeek::controlplane {

class BudgetController {
 public:
  void Reconcile(ControllerContext& ctx, MonoTime now);

  static constexpr Duration kExpiryInterval = std::chrono::seconds(10);

 private:
  // Cancels live job `id` with `reason` (SIGTERM to its members, who are charged up to their exit).
  void Stop(ControllerContext& ctx, const std::string& id, const std::string& reason);
  // Monthly budgets: alerts and stops. `open`: the open segments' cost by (tenant, user or "");
  // `jobs`: the live jobs of each such scope.
  void EnforceMonthly(ControllerContext& ctx, const std::map<std::pair<std::string, std::string>, ledger::Money>& open,
                      const std::map<std::pair<std::string, std::string>, std::vector<std::string>>& jobs);
  std::optional<MonoTime> last_expiry_;
};

}  // namespace gpugeek::controlplane
