#include "controlplane/billing.h"

#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/absl_fmt.h"
#include "common/status_macros.h"

namespace gpugeek::controlplane {
namespace {

// How many segments one member may have in one epoch (a charge id and its "/2".."/N"): splits at
// reservation boundaries add segments.
constexpr int kMaxSegmentsPerId = 1000;

}  // namespace

Billing::Billing(store::Store& store, Clock& clock, const BillingOptions& options)
    : store_(store), clock_(clock), options_(options) {}

absl::StatusOr<std::unique_ptr<Billing>> Billing::Open(store::Store& store, Clock& clock,
                                                       const BillingOptions& options) {
  auto billing = std::unique_ptr<Billing>(new Billing(store, clock, options));
  ASSIGN_OR_RETURN(billing->budgets_, Budgets::Open(store, clock));
  ASSIGN_OR_RETURN(billing->reservations_, Reservations::Open(store, clock));
  RETURN_IF_ERROR(billing->Reload());
  return billing;
}

absl::StatusOr<bool> Billing::ApplyLocked(const ledger::Transaction& txn) {
  absl::StatusOr<bool> posted = ledger_.Post(txn);
  if (!posted.ok() || !*posted) return posted;
  if (txn.kind != ledger::Kind::kCharge && txn.kind != ledger::Kind::kRefund) return posted;
  const int64_t spent = -ledger::TenantChange(txn).micros;  // a refund: negative
  const std::string period = Period(txn.at);
  month_spend_[{txn.tenant, "", period}] += spent;
  if (!txn.user.empty()) month_spend_[{txn.tenant, txn.user, period}] += spent;
  if (txn.kind == ledger::Kind::kCharge) spend_[{txn.tenant, txn.gpu_model, txn.capacity_type}] += spent;
  return posted;
}

absl::Status Billing::Reload() {
  std::vector<ledger::Transaction> stored;
  int64_t after = 0;
  for (;;) {
    ASSIGN_OR_RETURN(std::vector<store::LedgerRecord> rows, store_.ListLedger({.after_seq = after, .limit = 10000}));
    for (const store::LedgerRecord& row : rows) {
      absl::StatusOr<ledger::Transaction> txn = ledger::FromText(row.body);
      if (!txn.ok()) {
        return absl::DataLossError(
            fmt::format("billing: ledger row {}: {}", row.id, std::string(txn.status().message())));
      }
      stored.push_back(*std::move(txn));
      after = row.seq;
    }
    if (rows.size() < 10000) break;
  }
  {
    MutexLock lock(&mu_);
    ledger_ = ledger::Ledger();
    spend_.clear();
    month_spend_.clear();
    for (const ledger::Transaction& txn : stored) {
      if (absl::StatusOr<bool> posted = ApplyLocked(txn); !posted.ok()) {
        return absl::DataLossError(
            fmt::format("billing: ledger row {}: {}", txn.id, std::string(posted.status().message())));
      }
    }
  }
  // The budgets and reservations after the ledger: a failure of one leaves the others reloaded all the same.
  const absl::Status budgets = budgets_->Reload();
  const absl::Status reservations = reservations_->Reload();
  return budgets.ok() ? reservations : budgets;
}

absl::StatusOr<ledger::Transaction> Billing::Post(const ledger::Transaction& txn) {
  RETURN_IF_ERROR(ledger::Validate(txn));
  {
    MutexLock lock(&mu_);
    if (const ledger::Transaction* existing = ledger_.Find(txn.id)) return *existing;
  }
  const absl::Status stored = store_.AppendLedger({{.id = txn.id,
                                                    .tenant = txn.tenant,
                                                    .kind = std::string(ledger::KindName(txn.kind)),
                                                    .at = txn.at,
                                                    .body = ledger::ToText(txn)}});
  MutexLock lock(&mu_);
  if (!stored.ok()) {
    // Another thread stored the same id meanwhile: its entry is the answer.
    if (stored.code() == absl::StatusCode::kAlreadyExists) {
      if (const ledger::Transaction* existing = ledger_.Find(txn.id)) return *existing;
    }
    return stored;
  }
  absl::StatusOr<bool> posted = ApplyLocked(txn);
  if (!posted.ok()) {
    // Stored but not applicable (an overflow): memory and store disagree until a reload.
    spdlog::error("billing: transaction {} is stored but does not post: {}", txn.id, posted.status());
    return posted.status();
  }
  return txn;
}

absl::StatusOr<std::optional<ledger::Transaction>> Billing::GrantTrial(const std::string& tenant) {
  if (options_.trial_credit_micros <= 0) return std::nullopt;
  const TimePoint now = clock_.Now();
  std::optional<TimePoint> expires;
  if (options_.trial_credit_ttl > Duration::zero()) expires = now + options_.trial_credit_ttl;
  ASSIGN_OR_RETURN(ledger::Transaction txn,
                   Post(ledger::Grant(tenant, "trial", ledger::Money::Micros(options_.trial_credit_micros), expires,
                                      now, "trial credit")));
  return txn;
}

absl::StatusOr<std::optional<ledger::Transaction>> Billing::Charge(ledger::ChargeInput in, bool once) {
  in.fee_bps = options_.platform_fee_bps;
  if (in.at == TimePoint{}) in.at = clock_.Now();
  const std::string base = in.id;
  for (int attempt = 1; attempt <= kMaxSegmentsPerId; ++attempt) {
    in.id = attempt == 1 ? base : fmt::format("{}/{}", base, attempt);
    absl::StatusOr<std::optional<ledger::Transaction>> txn;
    {
      MutexLock lock(&mu_);
      if (ledger_.Find(in.id) != nullptr) {
        if (once) return std::nullopt;  // charged already
        continue;                       // a different segment of the same member and epoch
      }
      txn = ledger::Charge(ledger_, in);
    }
    if (!txn.ok() || !txn->has_value()) return txn;
    ASSIGN_OR_RETURN(ledger::Transaction posted, Post(**txn));
    return posted;
  }
  return absl::ResourceExhaustedError(
      fmt::format("billing: {} segments charged as {} already", kMaxSegmentsPerId, base));
}

absl::StatusOr<std::optional<ledger::Transaction>> Billing::ChargeRequests(ledger::RequestChargeInput in) {
  in.price_per_million_requests = ledger::Money::Micros(options_.price_per_million_requests_micros);
  in.price_per_million_tokens = ledger::Money::Micros(options_.price_per_million_tokens_micros);
  if (in.at == TimePoint{}) in.at = clock_.Now();
  absl::StatusOr<std::optional<ledger::Transaction>> txn;
  {
    MutexLock lock(&mu_);
    if (ledger_.Find(in.id) != nullptr) return std::nullopt;  // charged already
    txn = ledger::ChargeRequests(ledger_, in);
  }
  if (!txn.ok() || !txn->has_value()) return txn;
  ASSIGN_OR_RETURN(ledger::Transaction posted, Post(**txn));
  return posted;
}

absl::StatusOr<int> Billing::ExpireDue() {
  std::vector<ledger::Transaction> due;
  {
    MutexLock lock(&mu_);
    due = ledger::ExpiriesDue(ledger_, clock_.Now());
  }
  for (const ledger::Transaction& txn : due) RETURN_IF_ERROR(Post(txn).status());
  return static_cast<int>(due.size());
}

std::string Billing::Period(TimePoint at) {
  const std::chrono::year_month_day day{std::chrono::floor<std::chrono::days>(at)};
  return fmt::format("{:04d}-{:02d}", static_cast<int>(day.year()), static_cast<unsigned>(day.month()));
}

ledger::Money Billing::MonthSpend(const std::string& tenant, const std::string& user, const std::string& period) const {
  MutexLock lock(&mu_);
  auto it = month_spend_.find({tenant, user, period});
  return ledger::Money::Micros(it == month_spend_.end() ? 0 : it->second);
}

ledger::TenantBalance Billing::Balance(const std::string& tenant) const {
  const TimePoint now = clock_.Now();
  MutexLock lock(&mu_);
  return ledger::BalanceOf(ledger_, tenant, now);
}

ledger::Money Billing::Owed(const std::string& provider) const {
  MutexLock lock(&mu_);
  return ledger_.Balance(ledger::ProviderAccount(provider));
}

Billing::Page Billing::Entries(const std::string& tenant, size_t after, size_t limit) const {
  Page page;
  MutexLock lock(&mu_);
  const std::vector<ledger::Transaction>& all = ledger_.entries();
  for (size_t i = after; i < all.size() && page.entries.size() < limit; ++i) {
    if (!tenant.empty() && all[i].tenant != tenant) continue;
    page.entries.push_back(all[i]);
    page.last = i + 1;
  }
  return page;
}

std::vector<ledger::Transaction> Billing::Between(const std::string& tenant, TimePoint from, TimePoint to) const {
  std::vector<ledger::Transaction> out;
  MutexLock lock(&mu_);
  for (const ledger::Transaction& t : ledger_.entries()) {
    if ((tenant.empty() || t.tenant == tenant) && t.at >= from && t.at < to) out.push_back(t);
  }
  return out;
}

std::map<Billing::SpendKey, int64_t> Billing::Spend() const {
  MutexLock lock(&mu_);
  return spend_;
}

std::map<std::string, ledger::Money> Billing::Balances() const {
  MutexLock lock(&mu_);
  std::map<std::string, ledger::Money> out;
  for (const auto& [account, balance] : ledger_.balances()) {
    if (account.starts_with("tenant:") || account.starts_with("provider:")) out.emplace(account, balance);
  }
  return out;
}

ledger::Money Billing::Total() const {
  MutexLock lock(&mu_);
  ledger::Money total;
  for (const auto& [account, balance] : ledger_.balances()) total += balance;
  return total;
}

absl::StatusOr<ledger::Transaction> Billing::PayOut(const std::string& id, const std::string& provider,
                                                    ledger::Money amount) {
  if (paying_.exchange(true)) return absl::UnavailableError("billing: another payout is being posted; retry");
  absl::StatusOr<ledger::Transaction> txn;
  bool fresh = false;
  {
    MutexLock lock(&mu_);
    if (const ledger::Transaction* existing = ledger_.Find(id)) {
      txn = *existing;
    } else {
      txn = ledger::Payout(ledger_, id, provider, amount, clock_.Now());
      fresh = true;
    }
  }
  if (fresh && txn.ok()) txn = Post(*txn);  // the store write, with no lock held
  paying_ = false;
  return txn;
}

}  // namespace gpugeek::controlplane
