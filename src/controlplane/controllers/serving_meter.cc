#include "controlplane/controllers/serving_meter.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/absl_fmt.h"
#include "controlplane/billing.h"
#include "controlplane/secrets.h"

namespace gpugeek::controlplane {

void ServingMeterController::Report(const ServingReport& report) {
  if (report.requests < 0 || report.tokens < 0) return;
  MutexLock lock(&mu_);
  const Key key{report.service_id, report.version, report.instance};
  auto it = pending_.find(key);
  if (it == pending_.end()) {
    if (pending_.size() >= kMaxPending) return;
    pending_.emplace(key, report);
    return;
  }
  it->second.requests = std::max(it->second.requests, report.requests);
  it->second.tokens = std::max(it->second.tokens, report.tokens);
}

void ServingMeterController::Forget() { stored_.clear(); }

void ServingMeterController::Reconcile(ControllerContext& ctx) {
  std::map<Key, ServingReport> reports;
  {
    MutexLock lock(&mu_);
    reports.swap(pending_);
  }
  for (const auto& [key, report] : reports) {
    const auto& [service_id, version, instance] = key;
    auto rows = stored_.find(service_id);
    if (rows == stored_.end()) {
      absl::StatusOr<std::vector<store::ServiceUsageRecord>> read = ctx.store.ListServiceUsage(service_id);
      if (!read.ok()) {
        spdlog::warn("services: reading the usage of {} (retried at the next report): {}", service_id, read.status());
        continue;
      }
      rows = stored_.emplace(service_id, std::map<Key, store::ServiceUsageRecord>{}).first;
      for (store::ServiceUsageRecord& r : *read) {
        rows->second[{r.service_id, r.version_name, r.instance}] = std::move(r);
      }
    }
    store::ServiceUsageRecord before{.service_id = service_id, .version_name = version, .instance = instance};
    if (auto it = rows->second.find(key); it != rows->second.end()) before = it->second;
    store::ServiceUsageRecord after = before;
    after.requests = std::max(before.requests, report.requests);
    after.tokens = std::max(before.tokens, report.tokens);
    if (after.requests == before.requests && after.tokens == before.tokens) continue;
    // The row and its charge commit in the pass's one transaction (billing.h).
    if (absl::Status st = ctx.store.PutServiceUsage(after); !st.ok()) {
      spdlog::warn("services: storing the usage of {} {} (retried at the next report): {}", service_id, version, st);
      stored_.erase(service_id);
      continue;
    }
    rows->second[key] = after;
    if (ctx.billing == nullptr) continue;
    const ledger::RequestChargeInput in{
        .id = fmt::format("serve/{}/{}/{}/{}-{}", service_id, version, instance, after.requests, after.tokens),
        .tenant = SecretTenant(report.tenant),
        .service = service_id,
        .user = report.user,
        .requests_before = before.requests,
        .requests_after = after.requests,
        .tokens_before = before.tokens,
        .tokens_after = after.tokens,
        .memo = fmt::format("{} requests and {} tokens of {} {} through gateway {}", after.requests - before.requests,
                            after.tokens - before.tokens, service_id, version, instance)};
    if (absl::StatusOr<std::optional<ledger::Transaction>> charge = ctx.billing->ChargeRequests(in); !charge.ok()) {
      spdlog::error("billing: charging {} (usage stored without its charge): {}", in.id, charge.status());
    }
  }
}

}  // namespace gpugeek::controlplane
