// Property test of the ledger's invariants over random sequences of grants, top-ups, usage charges,
// refunds, payouts, expiries and retried posts (issue "The marketplace", Done when 1):
//   - all balances sum to zero after every step;
//   - no balance changes without an entry: each balance equals the sum of its postings in the entries;
//   - replaying the stored form of the entries (ToText, then FromText) reproduces every balance and carry;
//   - credit never goes below zero, and a charge takes exactly its cost from the tenant.
#include <random>

#include <gtest/gtest.h>

#include "ledger/ledger.h"
#include "ledger/wallet.h"

namespace gpugeek::ledger {
namespace {

TimePoint At(int64_t seconds) { return TimePoint(std::chrono::seconds(seconds)); }

void ExpectInvariants(const Ledger& ledger, TimePoint now) {
  int64_t total = 0;
  for (const auto& [account, balance] : ledger.balances()) {
    total += balance.micros;
    if (account.find(":credit:") != std::string::npos) {
      EXPECT_GE(balance.micros, 0) << account;
    }
  }
  EXPECT_EQ(total, 0);
  std::map<std::string, int64_t> recomputed;
  std::vector<Transaction> stored;
  for (const Transaction& t : ledger.entries()) {
    for (const Posting& p : t.postings) recomputed[p.account] += p.amount.micros;
    absl::StatusOr<Transaction> back = FromText(ToText(t));
    ASSERT_TRUE(back.ok()) << back.status();
    stored.push_back(*back);
  }
  ASSERT_EQ(recomputed.size(), ledger.balances().size());
  for (const auto& [account, micros] : recomputed) EXPECT_EQ(ledger.Balance(account).micros, micros) << account;
  absl::StatusOr<Ledger> replayed = Ledger::Replay(stored);
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_EQ(replayed->balances(), ledger.balances());
  for (const char* tenant : {"t0", "t1", "t2"}) {
    EXPECT_EQ(replayed->Carry(tenant), ledger.Carry(tenant));
    EXPECT_EQ(BalanceOf(*replayed, tenant, now).available(), BalanceOf(ledger, tenant, now).available());
  }
}

TEST(LedgerPropertyTest, RandomSequencesKeepEveryInvariant) {
  const std::vector<std::string> tenants = {"t0", "t1", "t2"};
  const std::vector<std::string> providers = {"", "p0", "p1"};
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE(seed);
    std::mt19937_64 rng(seed);
    auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
    Ledger ledger;
    int64_t now = 0;
    int posted = 0;
    for (int step = 0; step < 400; ++step) {
      now += pick(0, 600);
      const std::string tenant = tenants[static_cast<size_t>(pick(0, 2))];
      const std::string id = std::to_string(seed) + "-" + std::to_string(step);
      switch (pick(0, 6)) {
        case 0: {
          std::optional<TimePoint> expires;
          if (pick(0, 1) == 1) expires = At(now + pick(1, 20'000));
          ASSERT_TRUE(
              ledger.Post(Grant(tenant, "g" + id, Money::Micros(pick(1, 20'000'000)), expires, At(now), "")).ok());
          break;
        }
        case 1:
          ASSERT_TRUE(ledger.Post(TopUp("top-up/" + id, tenant, Money::Micros(pick(1, 50'000'000)), At(now), "")).ok());
          break;
        case 2:
        case 3: {
          const Money before = BalanceOf(ledger, tenant, At(now)).available();
          ChargeInput in{.id = "usage/" + id,
                         .tenant = tenant,
                         .provider = providers[static_cast<size_t>(pick(0, 2))],
                         .milli = pick(1, 8) * pick(1, 1000),
                         .millis = pick(0, 7'200'000),
                         .price_per_gpu_hour = Money::Micros(pick(0, 12'000'000)),
                         .fee_bps = pick(0, 3000),
                         .at = At(now)};
          const int64_t carry = ledger.Carry(tenant);
          absl::StatusOr<std::optional<Transaction>> c = Charge(ledger, in);
          ASSERT_TRUE(c.ok()) << c.status();
          const Prorated expected = *Prorate(in.milli, in.millis, in.price_per_gpu_hour, carry);
          if (!c->has_value()) {
            EXPECT_EQ(expected.cost.micros, 0);
            break;
          }
          ASSERT_TRUE(ledger.Post(**c).ok());
          EXPECT_EQ(BalanceOf(ledger, tenant, At(now)).available(), before - expected.cost);
          EXPECT_EQ(ledger.Carry(tenant), expected.carry);
          break;
        }
        case 4:
          ASSERT_TRUE(
              ledger.Post(Refund("refund/" + id, tenant, "j", Money::Micros(pick(1, 3'000'000)), At(now), "")).ok());
          break;
        case 5: {
          const std::string provider = providers[static_cast<size_t>(pick(1, 2))];
          const Money owed = ledger.Balance(ProviderAccount(provider));
          const Money amount = Money::Micros(pick(1, 10'000'000));
          absl::StatusOr<Transaction> p = Payout(ledger, "payout/" + id, provider, amount, At(now));
          if (amount > owed) {
            EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
          } else {
            ASSERT_TRUE(ledger.Post(*p).ok());
          }
          break;
        }
        case 6:
          for (const Transaction& e : ExpiriesDue(ledger, At(now))) ASSERT_EQ(ledger.Post(e).value_or(false), true);
          EXPECT_TRUE(ExpiriesDue(ledger, At(now)).empty());
          break;
      }
      // A retried write of an earlier entry changes nothing.
      if (!ledger.entries().empty()) {
        const Transaction again = ledger.entries()[static_cast<size_t>(pick(0, ledger.entries().size() - 1))];
        ASSERT_EQ(ledger.Post(again).value_or(true), false);
      }
      posted = static_cast<int>(ledger.entries().size());
      if (step % 50 == 49) ExpectInvariants(ledger, At(now));
    }
    ExpectInvariants(ledger, At(now));
    EXPECT_GT(posted, 200);
  }
}

}  // namespace
}  // namespace gpugeek::ledger
