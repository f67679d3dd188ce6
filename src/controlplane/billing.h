#pragma once
// Billing: the control plane's ledger (ledger/ledger.h), durable in the store, with the marketplace's
// rules (ledger/wallet.h): trial credit for every tenant, top-ups and grants by the operator, a charge
// for every metered segment of GPU time (usage.h) at its node's price, the platform's fee on providers'
// sales, payouts, and the expiry of unused credit.
//
// The problem: a charge must be stored exactly once, with the usage it is for, even when the server is
// SIGKILLed between the two. The job lifecycle controller charges a member's segment when it meters it
// (controllers/metering.h MeterMember), inside the writer's pass, whose writes form one store
// transaction: the job's usage and its charge commit together or not at all. Its id,
// "usage/JOB/eEPOCH/rRANK" (a second segment of the same member and epoch: "/2", ...), makes a retried write a
// no-op. A pass that fails to commit is followed by Reload, so memory never holds what the store lost.
//
// Writes go to the store first, then to memory, with no lock held across the store call. Only the
// writer's pass spends (charges and expiries: their split over credits and their carry depend on the
// balances, so they are computed and applied by one thread); other threads only add (grants, top-ups,
// refunds) or pay providers out, which commute with it.
//
// Time: TimePoint from Clock::Now (wall) for every entry, as bills are by calendar period.
// Thread-safety: every method may be called concurrently.

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "controlplane/budgets.h"
#include "controlplane/options.h"
#include "controlplane/reservations.h"
#include "ledger/ledger.h"
#include "ledger/wallet.h"
#include "store/store.h"

namespace gpugeek::controlplane {

class Billing {
 public:
  // Replays every stored transaction. Errors: the store's; DataLoss for a stored row that does not
  // parse or post (the message names its id).
  static absl::StatusOr<std::unique_ptr<Billing>> Open(store::Store& store, Clock& clock,
                                                       const BillingOptions& options);
  // Drops memory and replays the store again (after a pass whose commit failed), budgets and reservations
  // included.
  absl::Status Reload();

  const BillingOptions& options() const { return options_; }
  // The tenants' and users' monthly spending limits (budgets.h).
  Budgets& budgets() { return *budgets_; }
  // Reserved capacity (reservations.h).
  Reservations& reservations() { return *reservations_; }

  // What `tenant` (user "": all of it; else the jobs `user` submitted) was charged in calendar month
  // `period` ("2026-12", UTC, by the entries' time), net of refunds. 0 for none.
  ledger::Money MonthSpend(const std::string& tenant, const std::string& user, const std::string& period) const;
  // "2026-12": the calendar month (UTC) of `at`.
  static std::string Period(TimePoint at);

  // Stores `txn` and applies it. Returns the ledger's entry: `txn` when new, the stored one when the id
  // was posted already and nothing changed (callers that retry with a fresh `at` get the first).
  // InvalidArgument (ledger::Validate); OutOfRange; the store's errors (then nothing changed).
  absl::StatusOr<ledger::Transaction> Post(const ledger::Transaction& txn);

  // The trial credit of `tenant` ("grant/T/trial"), once; nullopt when options grant none.
  absl::StatusOr<std::optional<ledger::Transaction>> GrantTrial(const std::string& tenant);
  // Writer's pass only (see above). Charges a metered segment (ledger::Charge): nullopt when under a
  // micro-unit. The id is tried with "/2", "/3"... (up to "/1000") when taken by a different segment; with
  // `once`, a taken id means charged already: nullopt, nothing posted (a reservation's hour).
  absl::StatusOr<std::optional<ledger::Transaction>> Charge(ledger::ChargeInput in, bool once = false);
  // Writer's pass only. Charges a service's requests and tokens (ledger::ChargeRequests) at the options' prices:
  // nullopt when they cost under a micro-unit, or when the id (which names the row's counters after the
  // report) is charged already.
  absl::StatusOr<std::optional<ledger::Transaction>> ChargeRequests(ledger::RequestChargeInput in);
  // Writer's pass only. Posts every expiry due now; returns how many.
  absl::StatusOr<int> ExpireDue();

  // What the tenant may spend now (unexpired credit + cash).
  ledger::TenantBalance Balance(const std::string& tenant) const;
  // The provider's payable balance.
  ledger::Money Owed(const std::string& provider) const;
  // Entries of `tenant` ("" = all) in posting order after index `after` (0 = from the start), at most
  // `limit`; with the index of the last one returned (0 when none).
  struct Page {
    std::vector<ledger::Transaction> entries;
    size_t last = 0;
  };
  Page Entries(const std::string& tenant, size_t after, size_t limit) const;
  // Entries of `tenant` ("" = all) with `from <= at < to`, in posting order.
  std::vector<ledger::Transaction> Between(const std::string& tenant, TimePoint from, TimePoint to) const;
  // What each tenant was charged in all, per (tenant, GPU model, capacity type), for Prometheus
  // (gpugeek_spend_micros_total); kept up to date as charges post.
  struct SpendKey {
    std::string tenant, gpu_model, capacity_type;
    auto operator<=>(const SpendKey&) const = default;
  };
  std::map<SpendKey, int64_t> Spend() const;
  // Every tenant:T:... and provider:P:payable balance, by account (a snapshot for metrics).
  std::map<std::string, ledger::Money> Balances() const;
  // Sum of every balance (0 unless the ledger is broken: a check for tests and metrics).
  ledger::Money Total() const;
  // The payout of `amount` to `provider` (ledger::Payout). One payout at a time (no lock is held across
  // the store write: a second concurrent one is Unavailable, retry).
  absl::StatusOr<ledger::Transaction> PayOut(const std::string& id, const std::string& provider, ledger::Money amount);

 private:
  Billing(store::Store& store, Clock& clock, const BillingOptions& options);

  store::Store& store_;
  Clock& clock_;
  const BillingOptions options_;
  mutable Mutex mu_;
  // Applies a stored transaction to memory: the ledger and the spend totals.
  absl::StatusOr<bool> ApplyLocked(const ledger::Transaction& txn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  ledger::Ledger ledger_ ABSL_GUARDED_BY(mu_);
  std::map<SpendKey, int64_t> spend_ ABSL_GUARDED_BY(mu_);
  // MonthSpend: by (tenant, user or "", period).
  std::map<std::tuple<std::string, std::string, std::string>, int64_t> month_spend_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Budgets> budgets_;
  std::unique_ptr<Reservations> reservations_;
  std::atomic<bool> paying_{false};
};

}  // namespace gpugeek::controlplane
