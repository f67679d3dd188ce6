// The monthly budget commands of the client (REST API of src/controlplane/budget_routes.h):
//   gpugeek budget [--tenant T]                         this month's budgets, spent and alerted (yours; an
//                                                       admin: every tenant's)
//   gpugeek budget set (--tenant T | --user U) --monthly AMOUNT [--alert-at 50,80,100]     (admin)
//   gpugeek budget unset (--tenant T | --user U)                                             (admin)
// each with --server URL, --token, --profile and --json. A tenant or user whose month's spend reaches its
// budget is refused new work (402) and its running jobs are stopped (docs/billing.md).

#include <iostream>

#include <fmt/format.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/table.h"
#include "common/units.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;

// The scope's path: /v1/tenants/T/budget or /v1/users/U/budget; exits with a usage error unless exactly
// one of the two is given.
std::string ScopePath(const std::string& cmd, const std::string& tenant, const std::string& user) {
  if (tenant.empty() == user.empty()) Fail(cmd, "give one of --tenant TENANT or --user USER", kExitUsage);
  return tenant.empty() ? "/v1/users/" + UrlEncode(user) + "/budget" : "/v1/tenants/" + UrlEncode(tenant) + "/budget";
}

}  // namespace

void RegisterBudgetCommands(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string tenant;
    std::string user;
    std::string monthly;
    std::vector<int> alert_at;
  };
  auto o = std::make_shared<Options>();

  CLI::App* budget = app.add_subcommand("budget", "Monthly budgets of tenants and users: spent, alerted, limits");
  budget->add_option("--tenant", o->tenant, "This tenant's (yours unless you are an admin)");
  AddClientFlags(budget, &o->flags);
  budget->callback([o, budget] {
    if (budget->get_subcommands().size() > 0) return;
    const std::string cmd = "budget";
    json page;
    const std::string path = "/v1/budgets" + (o->tenant.empty() ? "" : "?tenant=" + UrlEncode(o->tenant));
    json all = {{"budgets", AllPages(cmd, *Connect(cmd, o->flags), path, "budgets", &page)}};
    all["period"] = page["period"];
    if (o->flags.json) return PrintJson(all);
    if (all["budgets"].empty()) {
      std::cout << "No budgets. An operator sets one with `gpugeek budget set --tenant T --monthly AMOUNT`.\n";
      return;
    }
    std::cout << fmt::format("Budgets of {} (UTC)\n", Text(all["period"]));
    TextTable table({"TENANT", "USER", "MONTHLY", "SPENT", "USED", "ALERTS AT", "ALERTED"});
    for (int c : {2, 3, 4}) table.AlignRight(c);
    for (const json& b : all["budgets"]) {
      std::string percents;
      for (const json& p : b["alert_percents"])
        percents += (percents.empty() ? "" : ",") + std::to_string(p.get<int>());
      const int alerted = b["alerted_percent"].get<int>();
      table.AddRow({Text(b["tenant"]), b["user"].get<std::string>().empty() ? "(all)" : Text(b["user"]),
                    FormatMoney(b["monthly_limit_micros"].get<int64_t>()),
                    FormatMoney(b["spent_micros"].get<int64_t>()),
                    fmt::format("{:.1f}%", b["used_percent"].get<double>()), percents,
                    alerted > 0 ? fmt::format("{}%", alerted) : "-"});
    }
    std::cout << table.Render();
  });

  CLI::App* set = budget->add_subcommand("set", "Set a tenant's or a user's monthly budget (admin)");
  set->add_option("--tenant", o->tenant, "The tenant's own budget");
  set->add_option("--user", o->user, "A user's budget, within its tenant's");
  set->add_option("--monthly", o->monthly, "The limit per calendar month (UTC), e.g. 500.00")->required();
  set->add_option("--alert-at", o->alert_at, "Percents of the limit to alert at (default 50,80,100)")
      ->delimiter(',')
      ->check(CLI::Range(1, 1000));
  AddClientFlags(set, &o->flags);
  set->callback([o] {
    const std::string cmd = "budget set";
    json body = {{"monthly_limit", o->monthly}};
    if (!o->alert_at.empty()) body["alert_percents"] = o->alert_at;
    json b = OrFail(cmd, Connect(cmd, o->flags)->Put(ScopePath(cmd, o->tenant, o->user), body));
    if (o->flags.json) return PrintJson(b);
    std::string percents;
    for (const json& p : b["alert_percents"]) percents += (percents.empty() ? "" : ", ") + std::to_string(p.get<int>());
    std::cout << fmt::format("Budget of {} set: {} a month; alerts at {}%\n",
                             o->user.empty() ? "tenant " + o->tenant : "user " + o->user,
                             FormatMoney(b["monthly_limit_micros"].get<int64_t>()), percents);
  });

  CLI::App* unset = budget->add_subcommand("unset", "Remove a tenant's or a user's monthly budget (admin)");
  unset->add_option("--tenant", o->tenant, "The tenant's own budget");
  unset->add_option("--user", o->user, "A user's budget");
  AddClientFlags(unset, &o->flags);
  unset->callback([o] {
    const std::string cmd = "budget unset";
    json r = OrFail(cmd, Connect(cmd, o->flags)->Delete(ScopePath(cmd, o->tenant, o->user)));
    if (o->flags.json) return PrintJson(r);
    std::cout << fmt::format("Budget of {} removed\n", o->user.empty() ? "tenant " + o->tenant : "user " + o->user);
  });
}

}  // namespace gpugeek::cli
