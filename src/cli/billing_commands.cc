// The marketplace's money commands of the client (REST API of src/controlplane/billing_routes.h):
//   gpugeek balance [--tenant T]                          what a tenant may spend now (credit, cash)
//   gpugeek ledger [--tenant T] [--limit N]               its transactions, oldest first
//   gpugeek bill [--period YYYY-MM] [--tenant T]          its bill for a month: GPU-hours and cost per GPU
//                                                         model and capacity type, credit and cash spent
//   gpugeek earnings [--period YYYY-MM] [--provider P]   a provider's sales, fees, payouts and what it is owed
//   gpugeek cost-report [--period YYYY-MM] [--tenant T] [--svg FILE]   per job: GPU-hours, cost, on-demand, saved
//   gpugeek top-up TENANT AMOUNT [--id KEY]               money in (admin)
//   gpugeek grant TENANT GRANT AMOUNT [--days N]          credit, once per grant name (admin)
//   gpugeek payout PROVIDER AMOUNT --id KEY               pays a provider out (admin)
// each with --server URL, --token, --profile and --json. Amounts are decimals in the pool's currency.

#include <algorithm>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/line_chart.h"
#include "common/table.h"
#include "common/units.h"

namespace gpugeek::cli {
namespace {

using nlohmann::json;

std::string Money(const json& micros) { return micros.is_number_integer() ? FormatMoney(micros.get<int64_t>()) : "-"; }

std::string TenantQuery(const std::string& tenant, char sep) {
  return tenant.empty() ? "" : fmt::format("{}tenant={}", sep, UrlEncode(tenant));
}

// The tenant's (net) change of a transaction: the sum of its postings to tenant:T:... accounts.
int64_t TenantChange(const json& t) {
  const std::string prefix = "tenant:" + t.value("tenant", std::string()) + ":";
  int64_t sum = 0;
  for (const json& p : t["postings"]) {
    if (p["account"].get<std::string>().starts_with(prefix)) sum += p["micros"].get<int64_t>();
  }
  return sum;
}

}  // namespace

void RegisterBillingCommands(CLI::App& app) {
  struct Options {
    ClientFlags flags;
    std::string tenant;
    std::string period;
    int limit = 1000;
    std::string target;
    std::string grant;
    std::string amount;
    std::string id;
    int days = 0;
  };
  auto o = std::make_shared<Options>();

  CLI::App* balance = app.add_subcommand("balance", "What a tenant may spend now: unexpired credit and cash");
  balance->add_option("--tenant", o->tenant, "This tenant (yours unless you are an admin)");
  AddClientFlags(balance, &o->flags);
  balance->callback([o] {
    const std::string cmd = "balance";
    json b = OrFail(cmd, Connect(cmd, o->flags)->Get("/v1/balance" + TenantQuery(o->tenant, '?')));
    if (o->flags.json) return PrintJson(b);
    std::cout << fmt::format("Tenant {}: {} to spend (credit {}, cash {}){}\n", Text(b["tenant"]),
                             Money(b["available_micros"]), Money(b["credit_micros"]), Money(b["cash_micros"]),
                             b.value("enforced", false) ? "; budgets are enforced" : "");
    if (b["credits"].empty()) return;
    TextTable table({"CREDIT", "REMAINING", "EXPIRES"});
    table.AlignRight(1);
    for (const json& c : b["credits"]) {
      table.AddRow({Text(c["account"]), Money(c["remaining_micros"]),
                    c["expires_at"].is_null() ? "never" : LocalTime(c["expires_at"].get<std::string>())});
    }
    std::cout << table.Render();
  });

  CLI::App* ledger = app.add_subcommand("ledger", "A tenant's ledger transactions, oldest first");
  ledger->add_option("--tenant", o->tenant, "This tenant (yours unless you are an admin; an admin: all without it)");
  ledger->add_option("--limit", o->limit, "At most this many")->capture_default_str()->check(CLI::Range(1, 1000000));
  AddClientFlags(ledger, &o->flags);
  ledger->callback([o] {
    const std::string cmd = "ledger";
    auto client = Connect(cmd, o->flags);
    json entries = json::array();
    std::string after;
    while (static_cast<int>(entries.size()) < o->limit) {
      const int page = std::min(1000, o->limit - static_cast<int>(entries.size()));
      std::string path = fmt::format("/v1/ledger?limit={}{}", page, TenantQuery(o->tenant, '&'));
      if (!after.empty()) path += "&after=" + UrlEncode(after);
      json reply = OrFail(cmd, client->Get(path));
      for (json& e : reply["entries"]) entries.push_back(std::move(e));
      if (reply["next_after"].is_null()) break;
      after = reply["next_after"].get<std::string>();
    }
    if (o->flags.json) return PrintJson({{"entries", entries}});
    TextTable table({"TIME", "KIND", "TENANT", "JOB", "CHANGE", "ID", "MEMO"});
    table.AlignRight(4);
    for (const json& e : entries) {
      table.AddRow({LocalTime(e["at"].get<std::string>()), Text(e["kind"]), Text(e["tenant"]),
                    e["job"].get<std::string>().empty() ? "-" : Text(e["job"]), FormatMoney(TenantChange(e)),
                    Text(e["id"]), Text(e["memo"])});
    }
    std::cout << table.Render();
  });

  CLI::App* bill = app.add_subcommand("bill", "A tenant's bill for a calendar month (UTC)");
  bill->add_option("--period", o->period, "YYYY-MM (default: this month)");
  bill->add_option("--tenant", o->tenant, "This tenant (yours unless you are an admin)");
  AddClientFlags(bill, &o->flags);
  bill->callback([o] {
    const std::string cmd = "bill";
    std::string path = "/v1/bill?period=" + UrlEncode(o->period) + TenantQuery(o->tenant, '&');
    json b = OrFail(cmd, Connect(cmd, o->flags)->Get(path));
    if (o->flags.json) return PrintJson(b);
    std::cout << fmt::format("Bill of tenant {} for {} (UTC)\n", Text(b["tenant"]), Text(b["period"]));
    TextTable table({"GPU MODEL", "CAPACITY", "GPU-HOURS", "COST"});
    table.AlignRight(2);
    table.AlignRight(3);
    for (const json& l : b["lines"]) {
      if (l.value("capacity_type", "") == "serverless") {  // a service's requests and tokens
        table.AddRow(
            {fmt::format("{} requests, {} tokens", l.value("requests", int64_t{0}), l.value("tokens", int64_t{0})),
             "serverless", "-", Money(l["cost_micros"])});
        continue;
      }
      table.AddRow({Text(l["gpu_model"]), Text(l["capacity_type"]), fmt::format("{:.3f}", l["gpu_hours"].get<double>()),
                    Money(l["cost_micros"])});
    }
    table.AddRow({"total", "", "", Money(b["usage_micros"])});
    std::cout << table.Render();
    std::cout << fmt::format(
        "Paid from credit {}, from cash {}. Refunds {}, top-ups {}, credit granted {}, expired {}. Available now: {}\n",
        Money(b["paid_from_credit_micros"]), Money(b["paid_from_cash_micros"]), Money(b["refunds_micros"]),
        Money(b["top_ups_micros"]), Money(b["grants_micros"]), Money(b["expired_micros"]),
        Money(b["available_now_micros"]));
  });

  CLI::App* earnings = app.add_subcommand("earnings", "A provider's month: its nodes' sales, fees, payouts, owed");
  earnings->add_option("--period", o->period, "YYYY-MM (default: this month)");
  earnings->add_option("--provider", o->target, "This provider (your tenant unless you are an admin)");
  AddClientFlags(earnings, &o->flags);
  earnings->callback([o] {
    const std::string cmd = "earnings";
    std::string path = "/v1/earnings?period=" + UrlEncode(o->period);
    if (!o->target.empty()) path += "&provider=" + UrlEncode(o->target);
    json e = OrFail(cmd, Connect(cmd, o->flags)->Get(path));
    if (o->flags.json) return PrintJson(e);
    std::cout << fmt::format("Earnings of provider {} for {} (UTC)\n", Text(e["provider"]), Text(e["period"]));
    TextTable table({"GPU MODEL", "CAPACITY", "GPU-HOURS", "SALES", "FEES", "EARNED"});
    for (int c : {2, 3, 4, 5}) table.AlignRight(c);
    for (const json& l : e["lines"]) {
      table.AddRow({Text(l["gpu_model"]), Text(l["capacity_type"]), fmt::format("{:.3f}", l["gpu_hours"].get<double>()),
                    Money(l["sales_micros"]), Money(l["fees_micros"]), Money(l["earned_micros"])});
    }
    table.AddRow({"total", "", "", Money(e["sales_micros"]), Money(e["fees_micros"]), Money(e["earned_micros"])});
    std::cout << table.Render();
    std::cout << fmt::format("Paid out {}. Owed now: {}\n", Money(e["paid_out_micros"]), Money(e["owed_now_micros"]));
  });

  CLI::App* report = app.add_subcommand(
      "cost-report", "Per job of a month: GPU-hours, cost, what it would cost on-demand and what spot saved");
  report->add_option("--period", o->period, "YYYY-MM (default: this month)");
  report->add_option("--tenant", o->tenant, "This tenant (yours unless you are an admin; an admin: all without it)");
  report->add_option("--svg", o->target, "Also write the month's cumulative spend per day as an SVG chart here");
  AddClientFlags(report, &o->flags);
  report->callback([o] {
    const std::string cmd = "cost-report";
    auto client = Connect(cmd, o->flags);
    json jobs = json::array();
    json first;
    std::string after;
    for (;;) {
      std::string path = "/v1/cost-report?limit=1000&period=" + UrlEncode(o->period) + TenantQuery(o->tenant, '&');
      if (!after.empty()) path += "&after=" + UrlEncode(after);
      json page = OrFail(cmd, client->Get(path));
      for (json& j : page["jobs"]) jobs.push_back(std::move(j));
      if (first.is_null()) first = page;
      if (page["next_after"].is_null()) break;
      after = page["next_after"].get<std::string>();
    }
    first["jobs"] = jobs;
    first.erase("next_after");
    if (!o->target.empty()) {
      ChartSeries spend{.name = "cumulative spend"};
      double sum = 0;
      int day = 0;
      for (const json& d : first["daily_cost_micros"]) {
        sum += static_cast<double>(d.get<int64_t>()) / 1e6;
        spend.points.emplace_back(++day, sum);
      }
      const std::string svg = LineChartSvg("Spend in " + Text(first["period"]) + " (UTC)", "day of the month",
                                           "cumulative spend (pool currency)", {spend}, 1, std::max(day, 2));
      std::ofstream out(o->target);
      out << svg;
      if (!out) Fail(cmd, fmt::format("--svg: cannot write {}", o->target), kExitUsage);
    }
    if (o->flags.json) return PrintJson(first);
    std::cout << fmt::format("Cost report for {} (UTC){}\n", Text(first["period"]),
                             first["tenant"].is_null() ? ", every tenant" : ", tenant " + Text(first["tenant"]));
    TextTable table({"JOB", "TENANT", "GPU-HOURS", "IDLE", "COST", "IDLE COST", "REFUNDED", "ON-DEMAND", "SAVED"});
    for (int c : {2, 3, 4, 5, 6, 7, 8}) table.AlignRight(c);
    const auto add = [&table](const std::string& job, const std::string& tenant, const json& row) {
      const int64_t metered = row["gpu_milli_seconds"].get<int64_t>();
      const int64_t idle = row["idle_gpu_milli_seconds"].get<int64_t>();
      table.AddRow({job, tenant, fmt::format("{:.3f}", row["gpu_hours"].get<double>()),
                    metered > 0 ? fmt::format("{}%", idle * 100 / metered) : "-", Money(row["cost_micros"]),
                    Money(row["idle_cost_micros"]), Money(row["refunded_micros"]), Money(row["on_demand_micros"]),
                    Money(row["saving_micros"])});
    };
    for (const json& j : first["jobs"]) add(Text(j["job"]), Text(j["tenant"]), j);
    add("total", "", first["totals"]);
    std::cout << table.Render();
    std::cout << "IDLE: the share of GPU time allocated with every GPU below 1% utilisation; REFUNDED: GPU time lost "
                 "to a node lost or reclaimed since the last checkpoint.\n";
    if (!o->target.empty()) std::cout << fmt::format("Chart: {}\n", o->target);
  });

  CLI::App* top_up = app.add_subcommand("top-up", "Add money to a tenant's cash (admin)");
  top_up->add_option("tenant", o->target, "Tenant name")->required();
  top_up->add_option("amount", o->amount, "Amount in the pool's currency, e.g. 10.00")->required();
  top_up->add_option("--id", o->id, "Idempotency key: the same key tops up once (default: a new one)");
  AddClientFlags(top_up, &o->flags);
  top_up->callback([o] {
    const std::string cmd = "top-up";
    json body = {{"amount", o->amount}};
    if (!o->id.empty()) body["id"] = o->id;
    json t = OrFail(cmd, Connect(cmd, o->flags)->Post("/v1/tenants/" + UrlEncode(o->target) + "/top-ups", body));
    if (o->flags.json) return PrintJson(t);
    std::cout << fmt::format("Topped up tenant {} by {} ({})\n", o->target, FormatMoney(TenantChange(t)),
                             Text(t["id"]));
  });

  CLI::App* grant = app.add_subcommand("grant", "Grant a tenant credit, spent before its cash (admin)");
  grant->add_option("tenant", o->target, "Tenant name")->required();
  grant->add_option("grant", o->grant, "Grant name (one grant per name), e.g. promo-2026")->required();
  grant->add_option("amount", o->amount, "Amount in the pool's currency, e.g. 25.00")->required();
  grant->add_option("--days", o->days, "Days until it expires; 0 = never")->check(CLI::Range(0, 36500));
  AddClientFlags(grant, &o->flags);
  grant->callback([o] {
    const std::string cmd = "grant";
    json body = {{"grant", o->grant}, {"amount", o->amount}, {"expires_in_days", o->days}};
    json t = OrFail(cmd, Connect(cmd, o->flags)->Post("/v1/tenants/" + UrlEncode(o->target) + "/grants", body));
    if (o->flags.json) return PrintJson(t);
    std::cout << fmt::format("Granted tenant {} {} of credit ({}{})\n", o->target, FormatMoney(TenantChange(t)),
                             Text(t["id"]), t.contains("expires_at") ? ", expires " + Text(t["expires_at"]) : "");
  });

  CLI::App* payout = app.add_subcommand("payout", "Pay a provider out of what the platform owes it (admin)");
  payout->add_option("provider", o->target, "Provider name (its nodes' label provider=NAME)")->required();
  payout->add_option("amount", o->amount, "Amount in the pool's currency")->required();
  payout->add_option("--id", o->id, "Idempotency key, e.g. the bank transfer's reference")->required();
  AddClientFlags(payout, &o->flags);
  payout->callback([o] {
    const std::string cmd = "payout";
    json t = OrFail(
        cmd, Connect(cmd, o->flags)
                 ->Post("/v1/providers/" + UrlEncode(o->target) + "/payouts", {{"amount", o->amount}, {"id", o->id}}));
    if (o->flags.json) return PrintJson(t);
    std::cout << fmt::format("Paid provider {} {} ({})\n", o->target, o->amount, Text(t["id"]));
  });
}

}  // namespace gpugeek::cli
