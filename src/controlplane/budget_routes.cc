#include "controlplane/budget_routes.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "api/json_reader.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "controlplane/api_views.h"
#include "controlplane/paging.h"
#include "ledger/money.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;
using J = nlohmann::json;

absl::StatusOr<Reply> GetBudgets(ControlPlane& cp, const Accounts& accounts, const Principal& who, const Request& r) {
  std::string tenant = r.query_value("tenant");
  if (!who.admin() && tenant.empty()) tenant = who.tenant;
  if (!tenant.empty() && (!who.CanSee(tenant) || !accounts.HasTenant(tenant))) {
    return absl::NotFoundError(fmt::format("no tenant '{}'", tenant));
  }
  const std::string period = Billing::Period(cp.clock().Now());
  std::vector<store::BudgetRecord> budgets = cp.billing().budgets().List(tenant);
  // Paged by "tenant/user": in that key's order ("a-b/" sorts before "a/x").
  std::sort(budgets.begin(), budgets.end(), [](const store::BudgetRecord& a, const store::BudgetRecord& b) {
    return a.tenant + "/" + a.user < b.tenant + "/" + b.user;
  });
  ASSIGN_OR_RETURN(
      J out, Page(
                 r, "budgets", budgets, [](const store::BudgetRecord& b) { return b.tenant + "/" + b.user; },
                 [&](const store::BudgetRecord& b) {
                   const ledger::Money spent = cp.billing().MonthSpend(b.tenant, b.user, period);
                   const ledger::Money limit = ledger::Money::Micros(b.monthly_limit_micros);
                   return J{{"tenant", b.tenant},
                            {"user", b.user},
                            {"monthly_limit_micros", b.monthly_limit_micros},
                            {"monthly_limit", limit.ToString()},
                            {"spent_micros", spent.micros},
                            {"spent", spent.ToString()},
                            {"used_percent",
                             static_cast<double>(spent.micros) * 100.0 / static_cast<double>(b.monthly_limit_micros)},
                            {"alert_percents", b.alert_percents},
                            {"alerted_percent", b.alerted_period == period ? b.alerted_percent : 0},
                            {"updated_at", FormatTime(b.updated_at)}};
                 },
                 J{{"period", period}}));
  return Reply::Json(out);
}

// The body of a PUT: {monthly_limit: "50.00", alert_percents?: [50, 80, 100]}.
absl::StatusOr<store::BudgetRecord> ReadBudget(const Request& r) {
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"monthly_limit", "alert_percents"}));
  if (!body.contains("monthly_limit") || !body["monthly_limit"].is_string()) {
    return reader.Error("monthly_limit", "must be a decimal string with up to six decimals, e.g. \"50.00\"");
  }
  absl::StatusOr<ledger::Money> limit = ledger::ParseMoney(body["monthly_limit"].get<std::string>());
  if (!limit.ok()) return reader.Error("monthly_limit", std::string(limit.status().message()));
  ASSIGN_OR_RETURN(std::vector<int64_t> percents, reader.IntList("alert_percents"));
  store::BudgetRecord budget{.monthly_limit_micros = limit->micros};
  for (int64_t p : percents) {
    if (p < 1 || p > 1000) return reader.Error("alert_percents", "each percent must be 1..1000");
    budget.alert_percents.push_back(static_cast<int>(p));
  }
  return budget;
}

J BudgetJson(const store::BudgetRecord& b) {
  return {{"tenant", b.tenant},
          {"user", b.user},
          {"monthly_limit_micros", b.monthly_limit_micros},
          {"monthly_limit", ledger::Money::Micros(b.monthly_limit_micros).ToString()},
          {"alert_percents", b.alert_percents},
          {"updated_at", FormatTime(b.updated_at)}};
}

// The tenant of user `name`: NotFound when there is none.
absl::StatusOr<std::string> UserTenant(const Accounts& accounts, const Principal& who, const std::string& name) {
  ASSIGN_OR_RETURN(std::vector<store::UserRecord> users, accounts.Users(who));
  for (const store::UserRecord& u : users) {
    if (u.name == name) return u.tenant;
  }
  return absl::NotFoundError(fmt::format("no user '{}'", name));
}

absl::StatusOr<Reply> PutBudget(ControlPlane& cp, const Accounts& accounts, const Principal& who, const Request& r,
                                bool of_user) {
  store::BudgetRecord scope;
  if (of_user) {
    scope.user = r.param("name");
    ASSIGN_OR_RETURN(scope.tenant, UserTenant(accounts, who, scope.user));
  } else {
    scope.tenant = r.param("name");
    if (!accounts.HasTenant(scope.tenant)) return absl::NotFoundError(fmt::format("no tenant '{}'", scope.tenant));
  }
  ASSIGN_OR_RETURN(store::BudgetRecord budget, ReadBudget(r));
  budget.tenant = scope.tenant;
  budget.user = scope.user;
  ASSIGN_OR_RETURN(store::BudgetRecord stored, cp.billing().budgets().Set(std::move(budget)));
  return Reply::Json(BudgetJson(stored));
}

absl::StatusOr<Reply> DeleteBudget(ControlPlane& cp, const Accounts& accounts, const Principal& who, const Request& r,
                                   bool of_user) {
  std::string tenant = r.param("name"), user;
  if (of_user) {
    user = r.param("name");
    ASSIGN_OR_RETURN(tenant, UserTenant(accounts, who, user));
  } else if (!accounts.HasTenant(tenant)) {
    return absl::NotFoundError(fmt::format("no tenant '{}'", tenant));
  }
  RETURN_IF_ERROR(cp.billing().budgets().Remove(tenant, user));
  return Reply::Json({{"tenant", tenant}, {"user", user}, {"deleted", true}});
}

}  // namespace

void RegisterBudgetRoutes(http::Server& server, ControlPlane& cp, Accounts& accounts) {
  GuardedRoute(server, accounts, "GET", "/v1/budgets",
               [&cp, &accounts](const Principal& who, const Request& r) { return GetBudgets(cp, accounts, who, r); });
  for (const bool of_user : {false, true}) {
    const std::string path = of_user ? "/v1/users/{name}/budget" : "/v1/tenants/{name}/budget";
    GuardedRoute(server, accounts, "PUT", path, [&cp, &accounts, of_user](const Principal& who, const Request& r) {
      return PutBudget(cp, accounts, who, r, of_user);
    });
    GuardedRoute(server, accounts, "DELETE", path, [&cp, &accounts, of_user](const Principal& who, const Request& r) {
      return DeleteBudget(cp, accounts, who, r, of_user);
    });
  }
}

}  // namespace gpugeek::controlplane
