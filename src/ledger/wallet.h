#pragma once
// The marketplace's money rules, as transactions for the ledger (ledger.h): trial credits and top-ups
// in, usage charges out (credits first, soonest-expiring first, then cash), the provider's share and the
// platform's fee, refunds for time lost to the platform, payouts, and the expiry of unused credit.
//
// Accounts:
//   tenant:T:cash            what tenant T topped up, less what it spent beyond its credits (may go
//                            below zero: usage already run is charged in full; budgets stop work first)
//   tenant:T:credit:G        what is left of grant G (trial credit), spent before cash, never below zero
//   provider:P:payable       what the platform owes provider P (its nodes' usage less the fee)
//   platform:revenue         the whole charge for GPU time of nodes without a provider (the platform's own)
//   platform:fees            the platform's fee on providers' sales
//   platform:grants          credit granted (negative) less credit expired (positive)
//   platform:refunds         goodwill refunds the platform paid (Refund); a refund of lost GPU time reverses its
//                            charge instead (RefundFor)
//   external:topups, external:payouts  money in from tenants and out to providers
// Names T, G, P follow api::ValidateName, so they never hold ':'.
//
// Every function is pure: it reads the ledger and returns what to post; Ledger::Post (or the store
// first, controlplane/billing.h) applies it.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ledger/ledger.h"

namespace gpugeek::ledger {

std::string CashAccount(const std::string& tenant);
std::string CreditAccount(const std::string& tenant, const std::string& grant);
std::string ProviderAccount(const std::string& provider);
inline constexpr char kRevenueAccount[] = "platform:revenue";
inline constexpr char kFeesAccount[] = "platform:fees";
inline constexpr char kGrantsAccount[] = "platform:grants";
inline constexpr char kRefundsAccount[] = "platform:refunds";
inline constexpr char kTopUpsAccount[] = "external:topups";
inline constexpr char kPayoutsAccount[] = "external:payouts";

struct CreditLine {
  std::string account;
  Money remaining;
  std::optional<TimePoint> expires_at;
};

// What tenant T may spend at `now`: its unexpired credits (by expiry, soonest first; those without
// expiry last) and its cash.
struct TenantBalance {
  std::vector<CreditLine> credits;
  Money credit;  // sum of credits' remaining
  Money cash;
  Money available() const { return credit + cash; }
};
TenantBalance BalanceOf(const Ledger& ledger, const std::string& tenant, TimePoint now);

// Trial or promotional credit: opens tenant:T:credit:G with `amount` (> 0), expiring at `expires_at`
// (none: never). Transaction id "grant/T/G".
Transaction Grant(const std::string& tenant, const std::string& grant, Money amount,
                  std::optional<TimePoint> expires_at, TimePoint at, const std::string& memo);
// Money in: tenant:T:cash += amount (> 0). `id` is the caller's idempotency key ("top-up/T/...").
Transaction TopUp(const std::string& id, const std::string& tenant, Money amount, TimePoint at,
                  const std::string& memo);

struct ChargeInput {
  std::string id;        // idempotency key, e.g. "usage/j-00000042/e3/r0"
  std::string tenant;    // who pays
  std::string provider;  // whose node ran it; "" = the platform's own
  std::string job;
  std::string user;              // who submitted the job ("" = none known)
  int64_t milli = 0;             // milli-GPU held (GPUs x milli per GPU)
  int64_t millis = 0;            // for how long, in milliseconds
  int64_t idle_millis = 0;       // how much of it its GPUs sat idle (0..millis; Transaction::idle_gpu_milli_seconds)
  Money price_per_gpu_hour;      // the node's price
  Money on_demand_per_gpu_hour;  // the on-demand reference price (Transaction::on_demand_micros); 0 = none
  int64_t fee_bps = 0;           // the platform's fee on a provider's sale, 0..10000 basis points
  std::string gpu_model;         // for bills
  std::string capacity_type;     // "on-demand" | "spot" | "reserved"
  TimePoint at;
  std::string memo;
};
// The charge for one metered segment: its cost (money.h Prorate, from the tenant's carry) taken from
// the tenant's unexpired credits at `at`, soonest-expiring first, then its cash; the provider's payable
// gets the cost less floor(cost x fee_bps / 10000), the fees account the rest (no provider: all to
// platform:revenue). nullopt when the cost is below one micro-unit (nothing to post; its fraction is not
// carried). InvalidArgument for negative inputs or fee_bps outside 0..10000; OutOfRange from Prorate.
absl::StatusOr<std::optional<Transaction>> Charge(const Ledger& ledger, const ChargeInput& in);

// Serverless metering (controlplane/controllers/serving_meter.h): a service's requests and tokens, charged at
// the operator's per-million prices, all to platform:revenue (the replicas' GPU time is charged as jobs').
struct RequestChargeInput {
  std::string id;       // idempotency key, e.g. "serve/s-000001/v1/GATEWAY-INSTANCE/1200"
  std::string tenant;   // who pays
  std::string service;  // the service id (Transaction::job)
  std::string user;     // who submitted the service
  // The row's counters before and after the report (cumulative, store/service_records.h ServiceUsageRecord):
  // the charge is cost(after) - cost(before), each floor(count x price / 10^6), so no sub-micro remainder is
  // ever lost or charged twice however the counts arrive.
  int64_t requests_before = 0;
  int64_t requests_after = 0;
  int64_t tokens_before = 0;
  int64_t tokens_after = 0;
  Money price_per_million_requests;
  Money price_per_million_tokens;
  TimePoint at;
  std::string memo;
};
// The charge for a service's requests and tokens since its row's last report (kind kCharge, capacity_type
// "serverless", requests and tokens set): taken like Charge's, from credits soonest-expiring first, then cash.
// nullopt when it costs under one micro-unit. InvalidArgument for negative or decreasing counters or prices;
// OutOfRange for a cost beyond kMaxPostingMicros.
absl::StatusOr<std::optional<Transaction>> ChargeRequests(const Ledger& ledger, const RequestChargeInput& in);

// A goodwill refund of `amount` (> 0) to tenant:T:cash, paid by platform:refunds. `id` is the caller's
// idempotency key. (Time lost to a node lost or reclaimed is refunded by RefundFor.)
Transaction Refund(const std::string& id, const std::string& tenant, const std::string& job, Money amount, TimePoint at,
                   const std::string& memo);

// What `txn` moved into (> 0) or out of (< 0) its tenant's accounts (tenant:T:...): minus the cost of a
// charge, the amount of a grant, top-up or refund, minus what an expiry took back.
Money TenantChange(const Transaction& txn);

// The refund of the part of a charged segment lost to the platform: `lost_millis` of its
// `segment_millis` (the work since the job's last checkpoint, which its next placement redoes), as
// floor(cost x lost / segment), never more than the charge's cost (lost is clamped to 0..segment). It reverses
// the charge in proportion: each tenant account the charge took from gets its share back (credit to the
// grant it came from, cash to cash), and each account the charge paid (the provider's payable, the fees,
// the platform's revenue) gives its share back, so a provider that loses or reclaims its own node gains
// nothing by it, and no credit turns into cash.
// Its id is the charge's with "refund/" for "usage/" ("refund/j-00000042/e3/r0"); it carries the charge's
// user. nullopt when that is
// below one micro-unit, or `charge` is not a charge.
std::optional<Transaction> RefundFor(const Transaction& charge, int64_t lost_millis, int64_t segment_millis,
                                     TimePoint at, const std::string& memo);

// Pays `amount` (> 0) of provider P's payable out. FailedPrecondition when it owes less than that.
absl::StatusOr<Transaction> Payout(const Ledger& ledger, const std::string& id, const std::string& provider,
                                   Money amount, TimePoint at);

// The expiries due at `now`: for each credit account whose expiry has passed and that holds money, a
// transaction "expire/ACCOUNT" returning what is left to platform:grants. Ordered by account.
std::vector<Transaction> ExpiriesDue(const Ledger& ledger, TimePoint now);

}  // namespace gpugeek::ledger
