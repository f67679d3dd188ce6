#include "controlplane/controllers/budget.h"

#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/numeric/int128.h"
#include "common/absl_fmt.h"
#include "controlplane/billing.h"
#include "controlplane/controllers/metering.h"
#include "controlplane/controllers/transitions.h"
#include "controlplane/secrets.h"
#include "controlplane/usage.h"

namespace gpugeek::controlplane {

void BudgetController::Reconcile(ControllerContext& ctx, MonoTime now) {
  if (ctx.billing == nullptr) return;
  if (!last_expiry_ || now - *last_expiry_ >= kExpiryInterval) {
    last_expiry_ = now;
    if (absl::StatusOr<int> expired = ctx.billing->ExpireDue(); !expired.ok()) {
      spdlog::warn("billing: posting credit expiries (retried next time): {}", expired.status());
    }
  }
  // What each tenant's (and user's) open segments cost so far; the jobs over their own max_cost.
  std::map<std::string, ledger::Money> open;
  std::map<std::string, std::vector<std::string>> jobs;
  std::map<std::pair<std::string, std::string>, ledger::Money> scope_open;
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> scope_jobs;
  std::vector<std::pair<std::string, std::string>> over;  // (job, reason)
  for (const auto& [id, live] : ctx.state.live) {
    if (api::IsTerminal(live.record.state)) continue;
    ledger::Money cost;
    for (const AllocationMember& member : live.allocation.members) {
      const MemberStatus& m = live.members[static_cast<size_t>(member.rank)];
      if (!m.running_since || m.exited) continue;
      const int64_t price = SegmentTerms(ctx.state, live, member.rank).price;
      const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - *m.running_since).count();
      absl::StatusOr<ledger::Prorated> p =
          ledger::Prorate(static_cast<int64_t>(member.gpu_uuids.size()) * member.gpu_milli, std::max<int64_t>(ms, 0),
                          ledger::Money::Micros(price), 0);
      if (p.ok()) cost += p->cost;
    }
    if (live.spec.max_cost_micros) {
      // Its placements' metered usage so far, and its open segments up to now.
      ledger::Money spent = cost;
      for (const UsageLine& l : UsageFromText(live.record.usage_json).value_or(Usage{})) {
        spent += ledger::Money::Micros(l.cost_micros);
      }
      if (spent.micros >= *live.spec.max_cost_micros) {
        over.emplace_back(id,
                          fmt::format("budget: the job's max_cost {} is reached ({} metered)",
                                      ledger::Money::Micros(*live.spec.max_cost_micros).ToString(), spent.ToString()));
      }
    }
    const std::string tenant = SecretTenant(live.record.tenant);  // the ledger's name for it
    scope_open[{tenant, ""}] += cost;
    scope_jobs[{tenant, ""}].push_back(id);
    if (!live.record.submitted_by.empty()) {
      scope_open[{tenant, live.record.submitted_by}] += cost;
      scope_jobs[{tenant, live.record.submitted_by}].push_back(id);
    }
    if (cost.micros == 0) continue;
    open[tenant] += cost;
    jobs[tenant].push_back(id);
  }
  for (const auto& [id, reason] : over) Stop(ctx, id, reason);
  EnforceMonthly(ctx, scope_open, scope_jobs);
  if (!ctx.billing->options().enforce) return;
  for (const auto& [tenant, cost] : open) {
    const ledger::Money available = ctx.billing->Balance(tenant).available();
    if (available - cost > ledger::Money{}) continue;
    const std::string reason = fmt::format(
        "budget: tenant '{}' has spent its credit and cash ({} left, {} running unbilled); top up to run "
        "again",
        tenant, available.ToString(), cost.ToString());
    for (const std::string& id : jobs[tenant]) Stop(ctx, id, reason);
  }
}

void BudgetController::EnforceMonthly(
    ControllerContext& ctx, const std::map<std::pair<std::string, std::string>, ledger::Money>& open,
    const std::map<std::pair<std::string, std::string>, std::vector<std::string>>& jobs) {
  const std::string period = Billing::Period(ctx.clock.Now());
  for (const store::BudgetRecord& b : ctx.billing->budgets().List("")) {
    const std::pair<std::string, std::string> scope{b.tenant, b.user};
    auto o = open.find(scope);
    const ledger::Money spent =
        ctx.billing->MonthSpend(b.tenant, b.user, period) + (o == open.end() ? ledger::Money{} : o->second);
    const std::string whose = b.user.empty() ? fmt::format("tenant '{}'", b.tenant)
                                             : fmt::format("user '{}' of tenant '{}'", b.user, b.tenant);
    const ledger::Money limit = ledger::Money::Micros(b.monthly_limit_micros);
    // The highest alert percent reached (spent x 100 >= limit x percent), once a month.
    int reached = 0;
    for (int percent : b.alert_percents) {
      if (absl::int128(spent.micros) * 100 >= absl::int128(b.monthly_limit_micros) * percent) reached = percent;
    }
    const int alerted = b.alerted_period == period ? b.alerted_percent : 0;
    if (reached > alerted) {
      spdlog::warn("budget alert: {} has spent {} of its monthly budget of {} in {} ({}% reached)", whose,
                   spent.ToString(), limit.ToString(), period, reached);
      if (absl::Status st = ctx.billing->budgets().MarkAlerted(b.tenant, b.user, period, reached); !st.ok()) {
        spdlog::warn("budget: recording the alert of {} (retried next pass): {}", whose, st);
      }
    }
    if (spent < limit) continue;
    auto running = jobs.find(scope);
    if (running == jobs.end()) continue;
    const std::string reason = fmt::format(
        "budget: {} reached its monthly budget of {} in {} ({} spent); an operator raises it with "
        "`gpugeek budget set`",
        whose, limit.ToString(), period, spent.ToString());
    for (const std::string& id : running->second) Stop(ctx, id, reason);
  }
}

void BudgetController::Stop(ControllerContext& ctx, const std::string& id, const std::string& reason) {
  auto it = ctx.state.live.find(id);
  if (it == ctx.state.live.end() || api::IsTerminal(it->second.record.state)) return;
  if (absl::Status st = CommitJobState(ctx, it->second, api::JobState::kCancelled, reason); !st.ok()) {
    spdlog::warn("billing: stopping {} at its budget (retried next pass): {}", id, st);
    return;
  }
  spdlog::info("billing: stopped {}: {}", id, reason);
  if (absl::Status st = ReleaseIfDone(ctx, id); !st.ok()) spdlog::warn("billing: releasing {}: {}", id, st);
}

}  // namespace gpugeek::controlplane
