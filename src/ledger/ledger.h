#pragma once
// The ledger: an append-only list of balanced transactions and the balance of every account they
// touch. Pure (no I/O, no clock, no threads): the control plane's billing keeps one in memory, posts to
// the store first and then here, and rebuilds it at start by replaying the stored transactions in order.
//
// Invariants (ledger_property_test.cc checks them over random sequences):
//   - every transaction's postings sum to zero, so all balances together sum to zero;
//   - a balance changes only by a transaction's posting, so replaying the entries reproduces every
//     balance (Replay);
//   - posting the same id again is a no-op when it is the same transaction (a retried write), and an error
//     when it is not.
//
// Thread-safety: none (one owner; controlplane/billing.h guards its copy).

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "ledger/transaction.h"

namespace gpugeek::ledger {

class Ledger {
 public:
  // Appends `txn`. Returns true when posted, false when a transaction with its id is there already and
  // equal to it (nothing changes). Errors, with nothing changed: InvalidArgument from Validate;
  // AlreadyExists when the id is taken by a different transaction; OutOfRange when a balance would
  // leave int64.
  absl::StatusOr<bool> Post(const Transaction& txn);

  // The balance of an account (0 for one never posted to).
  Money Balance(const std::string& account) const;
  // Every account ever posted to, with its balance, by name.
  const std::map<std::string, Money>& balances() const { return balances_; }
  // The accounts whose names start with `prefix`, by name.
  std::vector<std::pair<std::string, Money>> BalancesWithPrefix(const std::string& prefix) const;
  // When a credit account expires (the grant that opened it said so); nullopt when it does not.
  std::optional<TimePoint> ExpiresAt(const std::string& account) const;
  // The sub-micro carry the payer's next charge starts from (its last charge's Transaction::carry).
  int64_t Carry(const std::string& tenant) const;

  // Every transaction in posting order.
  const std::vector<Transaction>& entries() const { return entries_; }
  const Transaction* Find(const std::string& id) const;

  // A ledger with `entries` posted in order; the first error (as Post's) when one does not post.
  static absl::StatusOr<Ledger> Replay(const std::vector<Transaction>& entries);

 private:
  std::vector<Transaction> entries_;
  std::unordered_map<std::string, size_t> by_id_;
  std::map<std::string, Money> balances_;
  std::map<std::string, TimePoint> expires_;
  std::map<std::string, int64_t> carry_;
};

}  // namespace gpugeek::ledger
