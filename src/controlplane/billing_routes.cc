#include "controlplane/billing_routes.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "absl/numeric/int128.h"
#include "api/json_reader.h"
#include "api/names.h"
#include "common/status_macros.h"
#include "controlplane/access.h"
#include "controlplane/api_views.h"
#include "controlplane/offers.h"
#include "controlplane/paging.h"
#include "ledger/wallet.h"

namespace gpugeek::controlplane {
namespace {

using http::Reply;
using http::Request;
using J = nlohmann::json;
using ledger::Money;

J TransactionJson(const ledger::Transaction& t) {
  J postings = J::array();
  for (const ledger::Posting& p : t.postings) postings.push_back({{"account", p.account}, {"micros", p.amount.micros}});
  J j = {{"id", t.id},
         {"kind", ledger::KindName(t.kind)},
         {"at", FormatTime(t.at)},
         {"tenant", t.tenant},
         {"job", t.job},
         {"memo", t.memo},
         {"postings", postings}};
  if (t.expires_at) j["expires_at"] = FormatTime(*t.expires_at);
  if (t.kind == ledger::Kind::kCharge) {
    j["gpu_milli_seconds"] = t.gpu_milli_seconds;
    j["gpu_model"] = t.gpu_model;
    j["capacity_type"] = t.capacity_type;
    if (t.requests != 0 || t.tokens != 0) {
      j["requests"] = t.requests;
      j["tokens"] = t.tokens;
    }
  }
  return j;
}

// The tenant a read is about: ?tenant= (the caller's when absent). Another tenant's reads as 404 for a
// non-admin, as one that does not exist.
absl::StatusOr<std::string> ReadTenant(const Accounts& accounts, const Principal& who, const Request& r) {
  std::string tenant = r.query_value("tenant");
  if (tenant.empty()) tenant = who.tenant;
  if (!who.CanSee(tenant) || !accounts.HasTenant(tenant))
    return absl::NotFoundError(fmt::format("no tenant '{}'", tenant));
  return tenant;
}

absl::StatusOr<Reply> GetBalance(ControlPlane& cp, const Accounts& accounts, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(std::string tenant, ReadTenant(accounts, who, r));
  const ledger::TenantBalance b = cp.billing().Balance(tenant);
  J credits = J::array();
  for (const ledger::CreditLine& c : b.credits) {
    credits.push_back({{"account", c.account},
                       {"remaining_micros", c.remaining.micros},
                       {"expires_at", c.expires_at ? J(FormatTime(*c.expires_at)) : J()}});
  }
  return Reply::Json({{"tenant", tenant},
                      {"available_micros", b.available().micros},
                      {"credit_micros", b.credit.micros},
                      {"cash_micros", b.cash.micros},
                      {"available", b.available().ToString()},
                      {"credits", credits},
                      {"enforced", cp.billing().options().enforce}});
}

absl::StatusOr<Reply> GetLedger(ControlPlane& cp, const Accounts& accounts, const Principal& who, const Request& r) {
  std::string tenant;
  if (!who.admin() || !r.query_value("tenant").empty()) {
    ASSIGN_OR_RETURN(tenant, ReadTenant(accounts, who, r));
  }
  ASSIGN_OR_RETURN(int limit, PageLimit(r));
  size_t after = 0;
  if (const std::string a = r.query_value("after"); !a.empty()) {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(a.c_str(), &end, 10);
    if (*end != '\0' || a[0] == '-') {
      return absl::InvalidArgumentError(
          fmt::format("query parameter 'after' = '{}' must be the next_after of a page", a));
    }
    after = static_cast<size_t>(n);
  }
  const Billing::Page page = cp.billing().Entries(tenant, after, static_cast<size_t>(limit));
  J entries = J::array();
  for (const ledger::Transaction& t : page.entries) entries.push_back(TransactionJson(t));
  const bool full = page.entries.size() == static_cast<size_t>(limit);
  return Reply::Json({{"entries", entries}, {"next_after", full ? J(std::to_string(page.last)) : J()}});
}

// "2026-11" -> [2026-11-01T00:00Z, 2026-12-01T00:00Z).
absl::StatusOr<std::pair<TimePoint, TimePoint>> ParsePeriod(const std::string& text) {
  int year = 0;
  unsigned month = 0;
  char tail = 0;
  if (text.size() != 7 || std::sscanf(text.c_str(), "%4d-%2u%c", &year, &month, &tail) != 2 || year < 1970 ||
      year > 2200 || month < 1 || month > 12) {
    return absl::InvalidArgumentError(
        fmt::format("query parameter 'period' = '{}' must be a calendar month YYYY-MM, e.g. 2026-11", text));
  }
  using namespace std::chrono;
  const year_month first{std::chrono::year{year}, std::chrono::month{month}};
  const sys_days from{first / 1};
  const sys_days to{(first + months{1}) / 1};
  return std::pair{TimePoint(duration_cast<Duration>(from.time_since_epoch())),
                   TimePoint(duration_cast<Duration>(to.time_since_epoch()))};
}

absl::StatusOr<Reply> GetBill(ControlPlane& cp, const Accounts& accounts, const Principal& who, const Request& r) {
  ASSIGN_OR_RETURN(std::string tenant, ReadTenant(accounts, who, r));
  std::string period = r.query_value("period");
  if (period.empty()) period = FormatTime(cp.clock().Now()).substr(0, 7);
  ASSIGN_OR_RETURN(auto range, ParsePeriod(period));
  const std::string cash = ledger::CashAccount(tenant);
  const std::string credit_prefix = "tenant:" + tenant + ":credit:";
  struct Line {
    int64_t gpu_milli_seconds = 0;
    int64_t idle_gpu_milli_seconds = 0;
    int64_t requests = 0;  // serverless lines (controllers/serving_meter.h)
    int64_t tokens = 0;
    Money cost;
    int64_t charges = 0;
  };
  std::map<std::tuple<std::string, std::string>, Line> lines;
  Money usage, from_credit, from_cash, refunds, top_ups, grants, expired;
  for (const ledger::Transaction& t : cp.billing().Between(tenant, range.first, range.second)) {
    Money tenant_credit, tenant_cash;
    for (const ledger::Posting& p : t.postings) {
      if (p.account == cash) tenant_cash += p.amount;
      if (p.account.starts_with(credit_prefix)) tenant_credit += p.amount;
    }
    switch (t.kind) {
      case ledger::Kind::kCharge: {
        Line& l = lines[{t.gpu_model, t.capacity_type}];
        l.gpu_milli_seconds += t.gpu_milli_seconds;
        l.idle_gpu_milli_seconds += t.idle_gpu_milli_seconds;
        l.requests += t.requests;
        l.tokens += t.tokens;
        l.cost -= tenant_credit + tenant_cash;
        ++l.charges;
        usage -= tenant_credit + tenant_cash;
        from_credit -= tenant_credit;
        from_cash -= tenant_cash;
        break;
      }
      case ledger::Kind::kRefund:
        refunds += tenant_cash + tenant_credit;
        break;
      case ledger::Kind::kTopUp:
        top_ups += tenant_cash;
        break;
      case ledger::Kind::kGrant:
        grants += tenant_credit;
        break;
      case ledger::Kind::kExpire:
        expired -= tenant_credit;
        break;
      case ledger::Kind::kPayout:
        break;
    }
  }
  J out_lines = J::array();
  for (const auto& [key, l] : lines) {
    out_lines.push_back({{"gpu_model", std::get<0>(key)},
                         {"capacity_type", std::get<1>(key)},
                         {"gpu_hours", static_cast<double>(l.gpu_milli_seconds) / 3'600'000.0},
                         {"gpu_milli_seconds", l.gpu_milli_seconds},
                         {"idle_gpu_milli_seconds", l.idle_gpu_milli_seconds},
                         {"requests", l.requests},
                         {"tokens", l.tokens},
                         {"charges", l.charges},
                         {"cost_micros", l.cost.micros},
                         {"cost", l.cost.ToString()}});
  }
  const ledger::TenantBalance now = cp.billing().Balance(tenant);
  return Reply::Json({{"tenant", tenant},
                      {"period", period},
                      {"from", FormatTime(range.first)},
                      {"to", FormatTime(range.second)},
                      {"lines", out_lines},
                      {"usage_micros", usage.micros},
                      {"usage", usage.ToString()},
                      {"paid_from_credit_micros", from_credit.micros},
                      {"paid_from_cash_micros", from_cash.micros},
                      {"refunds_micros", refunds.micros},
                      {"top_ups_micros", top_ups.micros},
                      {"grants_micros", grants.micros},
                      {"expired_micros", expired.micros},
                      {"available_now_micros", now.available().micros}});
}

// A provider's earnings in a month: its nodes' sales per (GPU model, capacity type) with the platform's fee,
// its payouts, and what it is owed now. The provider is a tenant: the caller's own (an admin: ?provider=).
absl::StatusOr<Reply> GetEarnings(ControlPlane& cp, const Accounts& accounts, const Principal& who, const Request& r) {
  std::string provider = r.query_value("provider");
  if (provider.empty()) provider = who.tenant;
  if (!who.CanSee(provider) || !accounts.HasTenant(provider)) {
    return absl::NotFoundError(fmt::format("no provider '{}'", provider));
  }
  std::string period = r.query_value("period");
  if (period.empty()) period = FormatTime(cp.clock().Now()).substr(0, 7);
  ASSIGN_OR_RETURN(auto range, ParsePeriod(period));
  const std::string payable = ledger::ProviderAccount(provider);
  struct Line {
    int64_t gpu_milli_seconds = 0;
    Money sales, earned;
    int64_t charges = 0;
  };
  std::map<std::tuple<std::string, std::string>, Line> lines;
  Money sales, earned, paid_out;
  for (const ledger::Transaction& t : cp.billing().Between("", range.first, range.second)) {
    Money to_provider;
    for (const ledger::Posting& p : t.postings) {
      if (p.account == payable) to_provider += p.amount;
    }
    if (to_provider.micros == 0) continue;
    if (t.kind == ledger::Kind::kPayout) {
      paid_out -= to_provider;
      continue;
    }
    if (t.kind != ledger::Kind::kCharge) continue;
    const Money sale = -ledger::TenantChange(t);
    Line& l = lines[{t.gpu_model, t.capacity_type}];
    l.gpu_milli_seconds += t.gpu_milli_seconds;
    l.sales += sale;
    l.earned += to_provider;
    ++l.charges;
    sales += sale;
    earned += to_provider;
  }
  J out_lines = J::array();
  for (const auto& [key, l] : lines) {
    out_lines.push_back({{"gpu_model", std::get<0>(key)},
                         {"capacity_type", std::get<1>(key)},
                         {"gpu_hours", static_cast<double>(l.gpu_milli_seconds) / 3'600'000.0},
                         {"charges", l.charges},
                         {"sales_micros", l.sales.micros},
                         {"fees_micros", (l.sales - l.earned).micros},
                         {"earned_micros", l.earned.micros}});
  }
  return Reply::Json({{"provider", provider},
                      {"period", period},
                      {"lines", out_lines},
                      {"sales_micros", sales.micros},
                      {"fees_micros", (sales - earned).micros},
                      {"earned_micros", earned.micros},
                      {"paid_out_micros", paid_out.micros},
                      {"owed_now_micros", cp.billing().Owed(provider).micros}});
}

// The cost report of a month: per job, its GPU time and cost in the period, what the same time costs
// on-demand and what that saved; the totals; and the spend of each day (UTC) for the chart.
absl::StatusOr<Reply> GetCostReport(ControlPlane& cp, const Accounts& accounts, const Principal& who,
                                    const Request& r) {
  std::string tenant;
  if (!who.admin() || !r.query_value("tenant").empty()) {
    ASSIGN_OR_RETURN(tenant, ReadTenant(accounts, who, r));
  }
  std::string period = r.query_value("period");
  if (period.empty()) period = FormatTime(cp.clock().Now()).substr(0, 7);
  ASSIGN_OR_RETURN(auto range, ParsePeriod(period));
  struct Row {
    std::string tenant;
    int64_t gpu_milli_seconds = 0;
    int64_t idle_gpu_milli_seconds = 0;
    int64_t cost = 0;
    int64_t idle_cost = 0;  // the share of cost its GPUs sat idle for
    int64_t on_demand = 0;
    int64_t spot_cost = 0;
    int64_t refunded = 0;
    int64_t charges = 0;
  };
  std::map<std::string, Row> jobs;
  const int days =
      static_cast<int>(std::chrono::duration_cast<std::chrono::hours>(range.second - range.first).count() / 24);
  std::vector<int64_t> daily(static_cast<size_t>(days), 0);
  Row total;
  for (const ledger::Transaction& t : cp.billing().Between(tenant, range.first, range.second)) {
    const auto day = std::chrono::duration_cast<std::chrono::hours>(t.at - range.first).count() / 24;
    if (t.kind == ledger::Kind::kRefund && !t.job.empty()) {
      const int64_t refunded = ledger::TenantChange(t).micros;
      for (Row* row : {&jobs[t.job], &total}) {
        row->tenant = t.tenant;
        row->refunded += refunded;
      }
      if (day >= 0 && day < days) daily[static_cast<size_t>(day)] -= refunded;
      continue;
    }
    if (t.kind != ledger::Kind::kCharge) continue;
    const int64_t paid = -ledger::TenantChange(t).micros;
    // Its idle share: cost x idle / metered (at most the cost: idle <= metered).
    const int64_t idle_cost =
        t.gpu_milli_seconds > 0
            ? static_cast<int64_t>(absl::int128(paid) * t.idle_gpu_milli_seconds / t.gpu_milli_seconds)
            : 0;
    for (Row* row : {&jobs[t.job], &total}) {
      row->tenant = t.tenant;
      row->gpu_milli_seconds += t.gpu_milli_seconds;
      row->idle_gpu_milli_seconds += t.idle_gpu_milli_seconds;
      row->cost += paid;
      row->idle_cost += idle_cost;
      row->on_demand += std::max(t.on_demand_micros, paid);
      if (t.capacity_type == "spot") row->spot_cost += paid;
      ++row->charges;
    }
    if (day >= 0 && day < days) daily[static_cast<size_t>(day)] += paid;
  }
  const auto row_json = [](const Row& row) {
    return J{{"gpu_hours", static_cast<double>(row.gpu_milli_seconds) / 3'600'000.0},
             {"gpu_milli_seconds", row.gpu_milli_seconds},
             {"idle_gpu_milli_seconds", row.idle_gpu_milli_seconds},
             {"charges", row.charges},
             {"cost_micros", row.cost},
             {"idle_cost_micros", row.idle_cost},
             {"refunded_micros", row.refunded},
             {"net_cost_micros", row.cost - row.refunded},
             {"on_demand_micros", row.on_demand},
             {"saving_micros", row.on_demand - row.cost},
             {"spot_cost_micros", row.spot_cost}};
  };
  std::vector<std::string> ids;
  for (const auto& [id, row] : jobs) ids.push_back(id);
  J out = {{"tenant", tenant.empty() ? J() : J(tenant)},
           {"period", period},
           {"totals", row_json(total)},
           {"daily_cost_micros", daily}};
  ASSIGN_OR_RETURN(out, Page(
                            r, "jobs", ids, [](const std::string& id) { return id; },
                            [&](const std::string& id) {
                              J j = row_json(jobs[id]);
                              j["job"] = id;
                              j["tenant"] = jobs[id].tenant;
                              return j;
                            },
                            std::move(out)));
  return Reply::Json(out);
}

absl::StatusOr<Money> AmountField(const api::JsonReader& reader, const J& body) {
  if (!body.contains("amount") || !body["amount"].is_string()) {
    return reader.Error("amount", "must be a decimal string with up to six decimals, e.g. \"10.00\"");
  }
  absl::StatusOr<Money> m = ledger::ParseMoney(body["amount"].get<std::string>());
  if (!m.ok()) return reader.Error("amount", std::string(m.status().message()));
  if (m->micros == 0) return reader.Error("amount", "must be above 0");
  return *m;
}

absl::StatusOr<Reply> PostTopUp(ControlPlane& cp, const Accounts& accounts, const Request& r) {
  const std::string tenant = r.param("name");
  if (!accounts.HasTenant(tenant)) return absl::NotFoundError(fmt::format("no tenant '{}'", tenant));
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"amount", "id", "memo"}));
  ASSIGN_OR_RETURN(Money amount, AmountField(reader, body));
  ASSIGN_OR_RETURN(std::string key, reader.String("id", ""));
  ASSIGN_OR_RETURN(std::string memo, reader.String("memo", "top-up"));
  const TimePoint now = cp.clock().Now();
  if (key.empty()) key = std::to_string(now.time_since_epoch().count());  // no key: never a retry of another
  RETURN_IF_ERROR(api::ValidateName("id", key, api::NameKind::kJob));
  if (memo.size() > ledger::kMaxMemoBytes) return reader.Error("memo", "at most 1000 bytes");
  ASSIGN_OR_RETURN(ledger::Transaction t,
                   cp.billing().Post(ledger::TopUp("top-up/" + tenant + "/" + key, tenant, amount, now, memo)));
  return Reply::Json(TransactionJson(t), 201);
}

absl::StatusOr<Reply> PostGrant(ControlPlane& cp, const Accounts& accounts, const Request& r) {
  const std::string tenant = r.param("name");
  if (!accounts.HasTenant(tenant)) return absl::NotFoundError(fmt::format("no tenant '{}'", tenant));
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"grant", "amount", "expires_in_days", "memo"}));
  ASSIGN_OR_RETURN(std::string grant, reader.String("grant"));
  RETURN_IF_ERROR(api::ValidateName("grant", grant, api::NameKind::kJob));
  ASSIGN_OR_RETURN(Money amount, AmountField(reader, body));
  ASSIGN_OR_RETURN(int64_t days, reader.Int("expires_in_days", 0, 0, 36500));
  ASSIGN_OR_RETURN(std::string memo, reader.String("memo", "credit"));
  if (memo.size() > ledger::kMaxMemoBytes) return reader.Error("memo", "at most 1000 bytes");
  const TimePoint now = cp.clock().Now();
  std::optional<TimePoint> expires;
  if (days > 0) expires = now + std::chrono::hours(24) * days;
  ASSIGN_OR_RETURN(ledger::Transaction t, cp.billing().Post(ledger::Grant(tenant, grant, amount, expires, now, memo)));
  return Reply::Json(TransactionJson(t), 201);
}

absl::StatusOr<Reply> PostPayout(ControlPlane& cp, const Request& r) {
  const std::string provider = r.param("name");
  RETURN_IF_ERROR(api::ValidateName("name", provider, api::NameKind::kJob));
  ASSIGN_OR_RETURN(J body, r.JsonBody());
  api::JsonReader reader(body, "");
  RETURN_IF_ERROR(reader.CheckObject({"amount", "id"}));
  ASSIGN_OR_RETURN(Money amount, AmountField(reader, body));
  ASSIGN_OR_RETURN(std::string key, reader.String("id"));
  RETURN_IF_ERROR(api::ValidateName("id", key, api::NameKind::kJob));
  ASSIGN_OR_RETURN(ledger::Transaction t, cp.billing().PayOut("payout/" + provider + "/" + key, provider, amount));
  return Reply::Json(TransactionJson(t), 201);
}

absl::StatusOr<Reply> GetOffers(ControlPlane& cp, const Principal& who, const Request& r) {
  OfferFilter filter{
      .gpu = r.query_value("gpu"), .region = r.query_value("region"), .tenant = who.tenant, .admin = who.admin()};
  if (const std::string c = r.query_value("capacity"); !c.empty()) {
    if (c != "on-demand" && c != "spot" && c != "reserved") {
      return absl::InvalidArgumentError(
          fmt::format("query parameter 'capacity' = '{}' must be on-demand, spot or reserved", c));
    }
    filter.capacity_type = c;
  }
  if (const std::string g = r.query_value("min_gpus"); !g.empty()) {
    if (g.size() > 3 || g.find_first_not_of("0123456789") != std::string::npos) {
      return absl::InvalidArgumentError(fmt::format("query parameter 'min_gpus' = '{}' must be 0..999", g));
    }
    filter.min_gpus_free = std::stoi(g);
  }
  J rows = J::array();
  for (const Offer& o : Offers(*cp.snapshot(), filter)) {
    rows.push_back({{"gpu_model", o.gpu_model},
                    {"capacity_type", o.capacity_type},
                    {"region", o.region},
                    {"provider", o.provider},
                    {"price_micros_per_gpu_hour", o.price_micros_per_gpu_hour},
                    {"min_rental_s", o.min_rental_s},
                    {"nodes", o.nodes},
                    {"gpus", o.gpus},
                    {"gpus_free", o.gpus_free},
                    {"max_gpus_free_on_node", o.max_gpus_free_on_node}});
  }
  return Reply::Json({{"offers", rows}});
}

}  // namespace

void RegisterBillingRoutes(http::Server& server, ControlPlane& cp, Accounts& accounts) {
  GuardedRoute(server, accounts, "GET", "/v1/offers",
               [&cp](const Principal& who, const Request& r) { return GetOffers(cp, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/balance",
               [&cp, &accounts](const Principal& who, const Request& r) { return GetBalance(cp, accounts, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/ledger",
               [&cp, &accounts](const Principal& who, const Request& r) { return GetLedger(cp, accounts, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/bill",
               [&cp, &accounts](const Principal& who, const Request& r) { return GetBill(cp, accounts, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/earnings",
               [&cp, &accounts](const Principal& who, const Request& r) { return GetEarnings(cp, accounts, who, r); });
  GuardedRoute(server, accounts, "GET", "/v1/cost-report", [&cp, &accounts](const Principal& who, const Request& r) {
    return GetCostReport(cp, accounts, who, r);
  });
  GuardedRoute(server, accounts, "POST", "/v1/tenants/{name}/top-ups",
               [&cp, &accounts](const Principal&, const Request& r) { return PostTopUp(cp, accounts, r); });
  GuardedRoute(server, accounts, "POST", "/v1/tenants/{name}/grants",
               [&cp, &accounts](const Principal&, const Request& r) { return PostGrant(cp, accounts, r); });
  GuardedRoute(server, accounts, "POST", "/v1/providers/{name}/payouts",
               [&cp](const Principal&, const Request& r) { return PostPayout(cp, r); });
}

}  // namespace gpugeek::controlplane
