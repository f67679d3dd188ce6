#include "ledger/ledger.h"

#include <fmt/format.h>

namespace gpugeek::ledger {

absl::StatusOr<bool> Ledger::Post(const Transaction& txn) {
  if (absl::Status st = Validate(txn); !st.ok()) return st;
  if (const Transaction* existing = Find(txn.id)) {
    if (*existing == txn) return false;
    return absl::AlreadyExistsError(
        fmt::format("ledger: transaction id {} is taken by a different transaction", txn.id));
  }
  // Check every posting before applying any: all or nothing.
  std::vector<Money> next;
  next.reserve(txn.postings.size());
  for (const Posting& p : txn.postings) {
    absl::StatusOr<Money> sum = CheckedAdd(Balance(p.account), p.amount);
    if (!sum.ok()) {
      return absl::OutOfRangeError(fmt::format("ledger: transaction {}: account {}: {}", txn.id, p.account,
                                               std::string(sum.status().message())));
    }
    next.push_back(*sum);
  }
  for (size_t i = 0; i < txn.postings.size(); ++i) {
    balances_[txn.postings[i].account] = next[i];
    if (txn.expires_at && txn.postings[i].amount.micros > 0) expires_[txn.postings[i].account] = *txn.expires_at;
  }
  if (txn.kind == Kind::kCharge) carry_[txn.tenant] = txn.carry;
  by_id_.emplace(txn.id, entries_.size());
  entries_.push_back(txn);
  return true;
}

Money Ledger::Balance(const std::string& account) const {
  auto it = balances_.find(account);
  return it == balances_.end() ? Money{} : it->second;
}

std::vector<std::pair<std::string, Money>> Ledger::BalancesWithPrefix(const std::string& prefix) const {
  std::vector<std::pair<std::string, Money>> out;
  for (auto it = balances_.lower_bound(prefix); it != balances_.end() && it->first.starts_with(prefix); ++it) {
    out.emplace_back(it->first, it->second);
  }
  return out;
}

std::optional<TimePoint> Ledger::ExpiresAt(const std::string& account) const {
  auto it = expires_.find(account);
  if (it == expires_.end()) return std::nullopt;
  return it->second;
}

int64_t Ledger::Carry(const std::string& tenant) const {
  auto it = carry_.find(tenant);
  return it == carry_.end() ? 0 : it->second;
}

const Transaction* Ledger::Find(const std::string& id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &entries_[it->second];
}

absl::StatusOr<Ledger> Ledger::Replay(const std::vector<Transaction>& entries) {
  Ledger ledger;
  for (const Transaction& txn : entries) {
    absl::StatusOr<bool> posted = ledger.Post(txn);
    if (!posted.ok()) return posted.status();
  }
  return ledger;
}

}  // namespace gpugeek::ledger
