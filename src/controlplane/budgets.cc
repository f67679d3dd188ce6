#include "controlplane/budgets.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "common/status_macros.h"
#include "ledger/money.h"

namespace gpugeek::controlplane {
namespace {

bool ByScope(const store::BudgetRecord& a, const store::BudgetRecord& b) {
  return std::tie(a.tenant, a.user) < std::tie(b.tenant, b.user);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Budgets>> Budgets::Open(store::Store& store, Clock& clock) {
  auto budgets = std::unique_ptr<Budgets>(new Budgets(store, clock));
  RETURN_IF_ERROR(budgets->Reload());
  return budgets;
}

absl::Status Budgets::Reload() {
  ASSIGN_OR_RETURN(std::vector<store::BudgetRecord> stored, store_.ListBudgets());
  std::sort(stored.begin(), stored.end(), ByScope);
  MutexLock lock(&mu_);
  budgets_ = std::move(stored);
  return absl::OkStatus();
}

absl::StatusOr<store::BudgetRecord> Budgets::Set(store::BudgetRecord budget) {
  if (budget.monthly_limit_micros <= 0 || budget.monthly_limit_micros > ledger::kMaxPostingMicros) {
    return absl::InvalidArgumentError("monthly_limit: must be above 0 and at most 1000000000.00");
  }
  if (budget.alert_percents.empty()) budget.alert_percents = kDefaultAlertPercents;
  std::sort(budget.alert_percents.begin(), budget.alert_percents.end());
  budget.alert_percents.erase(std::unique(budget.alert_percents.begin(), budget.alert_percents.end()),
                              budget.alert_percents.end());
  if (budget.alert_percents.size() > 10 || budget.alert_percents.front() < 1 || budget.alert_percents.back() > 1000) {
    return absl::InvalidArgumentError(
        "alert_percents: at most 10 percents of the limit, each 1..1000, e.g. [50, 80, 100]");
  }
  budget.alerted_period.clear();
  budget.alerted_percent = 0;
  budget.updated_at = clock_.Now();
  RETURN_IF_ERROR(store_.PutBudget(budget));
  MutexLock lock(&mu_);
  auto it = std::lower_bound(budgets_.begin(), budgets_.end(), budget, ByScope);
  if (it != budgets_.end() && !ByScope(budget, *it)) {
    *it = budget;
  } else {
    budgets_.insert(it, budget);
  }
  return budget;
}

absl::Status Budgets::Remove(const std::string& tenant, const std::string& user) {
  RETURN_IF_ERROR(store_.DeleteBudget(tenant, user));
  MutexLock lock(&mu_);
  std::erase_if(budgets_, [&](const store::BudgetRecord& b) { return b.tenant == tenant && b.user == user; });
  return absl::OkStatus();
}

std::vector<store::BudgetRecord> Budgets::List(const std::string& tenant) const {
  MutexLock lock(&mu_);
  std::vector<store::BudgetRecord> out;
  for (const store::BudgetRecord& b : budgets_) {
    if (tenant.empty() || b.tenant == tenant) out.push_back(b);
  }
  return out;
}

std::optional<store::BudgetRecord> Budgets::Find(const std::string& tenant, const std::string& user) const {
  MutexLock lock(&mu_);
  for (const store::BudgetRecord& b : budgets_) {
    if (b.tenant == tenant && b.user == user) return b;
  }
  return std::nullopt;
}

absl::Status Budgets::MarkAlerted(const std::string& tenant, const std::string& user, const std::string& period,
                                  int percent) {
  std::optional<store::BudgetRecord> budget = Find(tenant, user);
  if (!budget) return absl::NotFoundError(fmt::format("no budget for {}/{}", tenant, user));
  budget->alerted_period = period;
  budget->alerted_percent = percent;
  // Only the budget read: one set or removed meanwhile by the operator stays as it is (its alerts start over).
  absl::Status stored = store_.MarkBudgetAlerted(tenant, user, budget->updated_at, period, percent);
  if (stored.code() == absl::StatusCode::kFailedPrecondition) return absl::OkStatus();
  RETURN_IF_ERROR(stored);
  MutexLock lock(&mu_);
  for (store::BudgetRecord& b : budgets_) {
    // Unless replaced meanwhile (Set starts its alerts over).
    if (b.tenant == tenant && b.user == user && b.updated_at == budget->updated_at) b = *budget;
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::controlplane
