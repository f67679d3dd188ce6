#pragma once
// Budgets: monthly spending limits of a tenant and of each of its users, in integer micro-units per
// calendar month (UTC), set by the operator (`gpugeek budget set --tenant team-a --monthly 500.00`,
// `--user alice --monthly 50.00`), with the percents of the limit at which to alert (default 50, 80, 100).
//
// What counts: the tenant's (or the user's: the jobs it submitted, store::JobRecord::submitted_by) charges
// posted in the month, net of refunds (Billing::MonthSpend), plus what its running members' open segments
// cost so far. Enforced whether or not `--enforce-budgets` is set (that flag is about the balance): a
// submission whose tenant or user has spent its month's budget is refused with 402 naming the numbers
// (ControlPlane::Check), and the budget controller stops (SIGTERM first: the checkpoint moment) the running
// jobs of a tenant or user whose month's spend reaches its limit (controllers/budget.h). Each alert percent
// fires once a month: logged, kept with the budget (alerted_percent, shown by `gpugeek budget`), and
// Prometheus has gpugeek_budget_used_ratio for alert rules (deploy/prometheus/alerts.yml).
//
// Kept in the store (store::BudgetRecord), store first then memory, no lock across the store call; a
// failed pass commit reloads them (Reload). Thread-safety: every method may be called concurrently.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "store/store.h"

namespace gpugeek::controlplane {

inline const std::vector<int> kDefaultAlertPercents = {50, 80, 100};

class Budgets {
 public:
  // Loads every stored budget. Errors: the store's.
  static absl::StatusOr<std::unique_ptr<Budgets>> Open(store::Store& store, Clock& clock);
  absl::Status Reload();

  // Sets the budget of (budget.tenant, budget.user): replaces one there was, its alerts of the month
  // starting over. InvalidArgument naming the field: monthly_limit_micros must be 1..10^15;
  // alert_percents each 1..1000, at most 10 (sorted and deduplicated here; empty = kDefaultAlertPercents).
  // Returns what was stored.
  absl::StatusOr<store::BudgetRecord> Set(store::BudgetRecord budget);
  // NotFound when (tenant, user) has none.
  absl::Status Remove(const std::string& tenant, const std::string& user);
  // The budgets of `tenant` ("" = every tenant's), by (tenant, user); the tenant's own first.
  std::vector<store::BudgetRecord> List(const std::string& tenant) const;
  std::optional<store::BudgetRecord> Find(const std::string& tenant, const std::string& user) const;
  // Writer's pass: `percent` of (tenant, user)'s budget alerted in `period` ("2026-12").
  absl::Status MarkAlerted(const std::string& tenant, const std::string& user, const std::string& period, int percent);

 private:
  Budgets(store::Store& store, Clock& clock) : store_(store), clock_(clock) {}
  store::Store& store_;
  Clock& clock_;
  mutable Mutex mu_;
  std::vector<store::BudgetRecord> budgets_ ABSL_GUARDED_BY(mu_);  // by (tenant, user)
};

}  // namespace gpugeek::controlplane
