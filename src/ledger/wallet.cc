#include "ledger/wallet.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "absl/numeric/int128.h"

namespace gpugeek::ledger {

std::string CashAccount(const std::string& tenant) { return "tenant:" + tenant + ":cash"; }
std::string CreditAccount(const std::string& tenant, const std::string& grant) {
  return "tenant:" + tenant + ":credit:" + grant;
}
std::string ProviderAccount(const std::string& provider) { return "provider:" + provider + ":payable"; }

TenantBalance BalanceOf(const Ledger& ledger, const std::string& tenant, TimePoint now) {
  TenantBalance b;
  b.cash = ledger.Balance(CashAccount(tenant));
  for (const auto& [account, balance] : ledger.BalancesWithPrefix("tenant:" + tenant + ":credit:")) {
    const std::optional<TimePoint> expires = ledger.ExpiresAt(account);
    if (balance.micros <= 0 || (expires && *expires <= now)) continue;
    b.credits.push_back({account, balance, expires});
    b.credit += balance;
  }
  std::stable_sort(b.credits.begin(), b.credits.end(), [](const CreditLine& x, const CreditLine& y) {
    // Soonest expiry first; no expiry last.
    if (x.expires_at.has_value() != y.expires_at.has_value()) return x.expires_at.has_value();
    return x.expires_at && *x.expires_at < *y.expires_at;
  });
  return b;
}

Transaction Grant(const std::string& tenant, const std::string& grant, Money amount,
                  std::optional<TimePoint> expires_at, TimePoint at, const std::string& memo) {
  return Transaction{.id = "grant/" + tenant + "/" + grant,
                     .kind = Kind::kGrant,
                     .at = at,
                     .tenant = tenant,
                     .memo = memo,
                     .postings = {{CreditAccount(tenant, grant), amount}, {kGrantsAccount, -amount}},
                     .expires_at = expires_at};
}

Transaction TopUp(const std::string& id, const std::string& tenant, Money amount, TimePoint at,
                  const std::string& memo) {
  return Transaction{.id = id,
                     .kind = Kind::kTopUp,
                     .at = at,
                     .tenant = tenant,
                     .memo = memo,
                     .postings = {{CashAccount(tenant), amount}, {kTopUpsAccount, -amount}}};
}

namespace {

// Posts `cost` out of `tenant`'s unexpired credits at `at`, soonest-expiring first, then its cash, into `txn`.
void TakeFromTenant(const Ledger& ledger, const std::string& tenant, TimePoint at, Money cost, Transaction& txn) {
  Money left = cost;
  for (const CreditLine& c : BalanceOf(ledger, tenant, at).credits) {
    if (left.micros == 0) break;
    const Money take = std::min(left, c.remaining);
    txn.postings.push_back({c.account, -take});
    left -= take;
  }
  if (left.micros > 0) txn.postings.push_back({CashAccount(tenant), -left});
}

// floor(count x price / 10^6): what `count` requests or tokens cost at `price` per million.
absl::int128 PerMillion(int64_t count, Money price) { return absl::int128(count) * price.micros / 1'000'000; }

}  // namespace

absl::StatusOr<std::optional<Transaction>> Charge(const Ledger& ledger, const ChargeInput& in) {
  if (in.fee_bps < 0 || in.fee_bps > 10'000) {
    return absl::InvalidArgumentError(fmt::format("ledger: fee of {} basis points; it must be 0..10000", in.fee_bps));
  }
  absl::StatusOr<Prorated> cost = Prorate(in.milli, in.millis, in.price_per_gpu_hour, ledger.Carry(in.tenant));
  if (!cost.ok()) return cost.status();
  if (cost->cost.micros == 0) return std::nullopt;
  absl::StatusOr<Prorated> on_demand = Prorate(in.milli, in.millis, in.on_demand_per_gpu_hour, 0);
  if (!on_demand.ok()) return on_demand.status();
  Transaction txn{.id = in.id,
                  .kind = Kind::kCharge,
                  .at = in.at,
                  .tenant = in.tenant,
                  .job = in.job,
                  .user = in.user,
                  .memo = in.memo,
                  .carry = cost->carry,
                  .gpu_milli_seconds = in.milli * in.millis / 1000,
                  .on_demand_micros = on_demand->cost.micros,
                  .idle_gpu_milli_seconds = in.milli * std::clamp<int64_t>(in.idle_millis, 0, in.millis) / 1000,
                  .gpu_model = in.gpu_model,
                  .capacity_type = in.capacity_type};
  TakeFromTenant(ledger, in.tenant, in.at, cost->cost, txn);
  if (in.provider.empty()) {
    txn.postings.push_back({kRevenueAccount, cost->cost});
  } else {
    const Money fee = BasisPoints(cost->cost, in.fee_bps);
    if (cost->cost > fee) txn.postings.push_back({ProviderAccount(in.provider), cost->cost - fee});
    if (fee.micros > 0) txn.postings.push_back({kFeesAccount, fee});
  }
  return txn;
}

absl::StatusOr<std::optional<Transaction>> ChargeRequests(const Ledger& ledger, const RequestChargeInput& in) {
  if (in.requests_before < 0 || in.requests_after < in.requests_before || in.tokens_before < 0 ||
      in.tokens_after < in.tokens_before || in.price_per_million_requests.micros < 0 ||
      in.price_per_million_tokens.micros < 0) {
    return absl::InvalidArgumentError(fmt::format(
        "ledger: request charge {}: counters must be >= 0 and not decrease, prices >= 0 (requests {} -> {}, tokens "
        "{} -> {})",
        in.id, in.requests_before, in.requests_after, in.tokens_before, in.tokens_after));
  }
  const absl::int128 cost = PerMillion(in.requests_after, in.price_per_million_requests) -
                            PerMillion(in.requests_before, in.price_per_million_requests) +
                            PerMillion(in.tokens_after, in.price_per_million_tokens) -
                            PerMillion(in.tokens_before, in.price_per_million_tokens);
  if (cost > kMaxPostingMicros) {
    return absl::OutOfRangeError(
        fmt::format("ledger: request charge {}: cost over {} micro-units", in.id, kMaxPostingMicros));
  }
  if (cost <= 0) return std::nullopt;
  const Money amount = Money::Micros(static_cast<int64_t>(cost));
  Transaction txn{.id = in.id,
                  .kind = Kind::kCharge,
                  .at = in.at,
                  .tenant = in.tenant,
                  .job = in.service,
                  .user = in.user,
                  .memo = in.memo,
                  .capacity_type = "serverless",
                  .requests = in.requests_after - in.requests_before,
                  .tokens = in.tokens_after - in.tokens_before};
  TakeFromTenant(ledger, in.tenant, in.at, amount, txn);
  txn.postings.push_back({kRevenueAccount, amount});
  return txn;
}

Transaction Refund(const std::string& id, const std::string& tenant, const std::string& job, Money amount, TimePoint at,
                   const std::string& memo) {
  return Transaction{.id = id,
                     .kind = Kind::kRefund,
                     .at = at,
                     .tenant = tenant,
                     .job = job,
                     .memo = memo,
                     .postings = {{CashAccount(tenant), amount}, {kRefundsAccount, -amount}}};
}

Money TenantChange(const Transaction& txn) {
  const std::string prefix = "tenant:" + txn.tenant + ":";
  Money change;
  for (const Posting& p : txn.postings) {
    if (!txn.tenant.empty() && p.account.starts_with(prefix)) change += p.amount;
  }
  return change;
}

namespace {

// `total` (0 <= total <= the sum of `weights`, each > 0) split in proportion to the weights: floor shares,
// the remainder one micro-unit at a time to the first with room, so no share passes its weight.
std::vector<int64_t> Apportion(const std::vector<int64_t>& weights, int64_t total) {
  absl::int128 sum = 0;
  for (int64_t w : weights) sum += w;
  std::vector<int64_t> shares;
  int64_t given = 0;
  for (int64_t w : weights) {
    shares.push_back(sum > 0 ? static_cast<int64_t>(absl::int128(w) * total / sum) : 0);
    given += shares.back();
  }
  for (size_t i = 0; i < shares.size() && given < total; ++i) {
    const int64_t more = std::min(weights[i] - shares[i], total - given);
    shares[i] += more;
    given += more;
  }
  return shares;
}

}  // namespace

std::optional<Transaction> RefundFor(const Transaction& charge, int64_t lost_millis, int64_t segment_millis,
                                     TimePoint at, const std::string& memo) {
  const Money cost = -TenantChange(charge);
  if (charge.kind != Kind::kCharge || cost.micros <= 0 || segment_millis <= 0) return std::nullopt;
  const int64_t lost = std::clamp<int64_t>(lost_millis, 0, segment_millis);
  const int64_t amount = static_cast<int64_t>(absl::int128(cost.micros) * lost / absl::int128(segment_millis));
  if (amount <= 0) return std::nullopt;
  // The charge reversed in proportion: what each of the tenant's accounts paid goes back to it (credit to
  // its grant, cash to cash), and each account that received (the provider, the fees, the platform's
  // revenue) gives back its share.
  const std::string prefix = "tenant:" + charge.tenant + ":";
  std::vector<const Posting*> paid, received;
  std::vector<int64_t> paid_w, received_w;
  for (const Posting& p : charge.postings) {
    if (p.account.starts_with(prefix) && p.amount.micros < 0) {
      paid.push_back(&p);
      paid_w.push_back(-p.amount.micros);
    } else if (!p.account.starts_with(prefix) && p.amount.micros > 0) {
      received.push_back(&p);
      received_w.push_back(p.amount.micros);
    }
  }
  const std::vector<int64_t> back = Apportion(paid_w, amount), taken = Apportion(received_w, amount);
  constexpr std::string_view kUsage = "usage/";
  const std::string suffix = charge.id.starts_with(kUsage) ? charge.id.substr(kUsage.size()) : charge.id;
  Transaction refund{.id = "refund/" + suffix,
                     .kind = Kind::kRefund,
                     .at = at,
                     .tenant = charge.tenant,
                     .job = charge.job,
                     .user = charge.user,
                     .memo = memo};
  for (size_t i = 0; i < paid.size(); ++i) {
    if (back[i] > 0) refund.postings.push_back({paid[i]->account, Money::Micros(back[i])});
  }
  for (size_t i = 0; i < received.size(); ++i) {
    if (taken[i] > 0) refund.postings.push_back({received[i]->account, Money::Micros(-taken[i])});
  }
  return refund;
}

absl::StatusOr<Transaction> Payout(const Ledger& ledger, const std::string& id, const std::string& provider,
                                   Money amount, TimePoint at) {
  const Money owed = ledger.Balance(ProviderAccount(provider));
  if (amount > owed) {
    return absl::FailedPreconditionError(fmt::format("ledger: provider {} is owed {}, less than the payout of {}",
                                                     provider, owed.ToString(), amount.ToString()));
  }
  return Transaction{.id = id,
                     .kind = Kind::kPayout,
                     .at = at,
                     .memo = "payout to " + provider,
                     .postings = {{ProviderAccount(provider), -amount}, {kPayoutsAccount, amount}}};
}

std::vector<Transaction> ExpiriesDue(const Ledger& ledger, TimePoint now) {
  std::vector<Transaction> out;
  for (const auto& [account, balance] : ledger.BalancesWithPrefix("tenant:")) {
    if (balance.micros <= 0) continue;
    const std::optional<TimePoint> expires = ledger.ExpiresAt(account);
    if (!expires || *expires > now) continue;
    // tenant:T:credit:G
    const size_t colon = account.find(':', 7);
    out.push_back(Transaction{.id = "expire/" + account,
                              .kind = Kind::kExpire,
                              .at = now,
                              .tenant = account.substr(7, colon - 7),
                              .memo = "unused credit expired",
                              .postings = {{account, -balance}, {kGrantsAccount, balance}}});
  }
  return out;
}

}  // namespace gpugeek::ledger
