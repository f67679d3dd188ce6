#include "ledger/ledger.h"

#include <gtest/gtest.h>

#include "ledger/wallet.h"

namespace gpugeek::ledger {
namespace {

TimePoint At(int64_t seconds) { return TimePoint(std::chrono::seconds(seconds)); }

Transaction Move(const std::string& id, const std::string& from, const std::string& to, int64_t micros) {
  return Transaction{.id = id,
                     .kind = Kind::kTopUp,
                     .at = At(1),
                     .postings = {{from, Money::Micros(-micros)}, {to, Money::Micros(micros)}}};
}

TEST(TransactionTest, ValidateNamesWhatIsWrong) {
  EXPECT_TRUE(Validate(Move("t1", "external:topups", "tenant:a:cash", 5)).ok());
  Transaction unbalanced = Move("t1", "external:topups", "tenant:a:cash", 5);
  unbalanced.postings[1].amount = Money::Micros(6);
  EXPECT_EQ(Validate(unbalanced).message(),
            "ledger: transaction t1: postings sum to 1 micro-units, not 0 (double entry)");
  Transaction one = unbalanced;
  one.postings.pop_back();
  EXPECT_EQ(Validate(one).message(), "ledger: transaction t1 has 1 postings; it needs 2..64");
  Transaction twice = Move("t1", "tenant:a:cash", "tenant:a:cash", 5);
  EXPECT_EQ(Validate(twice).message(),
            "ledger: transaction t1: account tenant:a:cash is posted twice; merge its postings");
  EXPECT_FALSE(Validate(Move("", "a:b", "c:d", 1)).ok());
  EXPECT_FALSE(Validate(Move("has space", "a:b", "c:d", 1)).ok());
  EXPECT_FALSE(Validate(Move("t", "nocolon", "c:d", 1)).ok());
  EXPECT_FALSE(Validate(Move("t", "a:b", "c:d", 0)).ok());
  EXPECT_FALSE(Validate(Move("t", "a:b", "c:d", kMaxPostingMicros + 1)).ok());
}

TEST(TransactionTest, TextRoundTripsAndRejectsDamage) {
  Transaction g = Grant("acme", "trial", Money::Units(10), At(86400), At(5), "trial credit");
  absl::StatusOr<Transaction> back = FromText(ToText(g));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, g);
  EXPECT_EQ(
      ToText(g),
      R"({"at_ms":5000,"expires_at_ms":86400000,"id":"grant/acme/trial","job":"","kind":"grant","memo":"trial credit",)"
      R"("postings":[["tenant:acme:credit:trial",10000000],["platform:grants",-10000000]],"tenant":"acme"})");
  EXPECT_EQ(FromText("[").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(FromText(R"({"id":"x","kind":"grant","postings":[["a:b",1],["c:d",-2]]})").status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(FromText(R"({"id":"x","kind":"bribe","postings":[["a:b",1],["c:d",-1]]})").status().code(),
            absl::StatusCode::kDataLoss);
  // 2^64 - 1 would wrap to -1 and balance the other posting: refused.
  EXPECT_EQ(
      FromText(R"({"id":"x","kind":"grant","postings":[["a:b",1],["c:d",18446744073709551615]]})").status().code(),
      absl::StatusCode::kDataLoss);
}

TEST(LedgerTest, PostIsIdempotentByIdAndAllOrNothing) {
  Ledger ledger;
  EXPECT_EQ(ledger.Post(Move("t1", "external:topups", "tenant:a:cash", 5)).value_or(false), true);
  EXPECT_EQ(ledger.Post(Move("t1", "external:topups", "tenant:a:cash", 5)).value_or(true), false);  // a retried write
  EXPECT_EQ(ledger.Post(Move("t1", "external:topups", "tenant:a:cash", 6)).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ledger.Balance("tenant:a:cash").micros, 5);
  EXPECT_EQ(ledger.Balance("external:topups").micros, -5);
  EXPECT_EQ(ledger.entries().size(), 1u);
  // Overflow of one account leaves the other untouched.
  ASSERT_TRUE(ledger.Post(Move("t2", "x:y", "big:a", kMaxPostingMicros)).ok());
  for (int i = 3; i < 9300; ++i) {
    absl::StatusOr<bool> p =
        ledger.Post(Move("t" + std::to_string(i), "x:y" + std::to_string(i), "big:a", kMaxPostingMicros));
    if (!p.ok()) {
      EXPECT_EQ(p.status().code(), absl::StatusCode::kOutOfRange);
      EXPECT_EQ(ledger.Balance("x:y" + std::to_string(i)).micros, 0);
      break;
    }
  }
}

TEST(WalletTest, ChargeSpendsSoonestExpiringCreditThenCashAndPaysTheProviderLessTheFee) {
  Ledger ledger;
  ASSERT_TRUE(ledger.Post(Grant("acme", "trial", Money::Units(1), At(1000), At(0), "trial")).ok());
  ASSERT_TRUE(ledger.Post(Grant("acme", "promo", Money::Units(1), At(500), At(0), "promo")).ok());
  ASSERT_TRUE(ledger.Post(TopUp("top-up/acme/1", "acme", Money::Units(5), At(0), "card")).ok());
  // 2 GPUs for 30 minutes at 3.00/GPU-hour = 3.00: promo (expires first) 1.00, trial 1.00, cash 1.00;
  // provider p1 gets 3.00 less 10% = 2.70, the platform 0.30.
  absl::StatusOr<std::optional<Transaction>> c = Charge(ledger, {.id = "usage/j1/e1/r0",
                                                                 .tenant = "acme",
                                                                 .provider = "p1",
                                                                 .job = "j1",
                                                                 .milli = 2000,
                                                                 .millis = 1'800'000,
                                                                 .price_per_gpu_hour = Money::Units(3),
                                                                 .fee_bps = 1000,
                                                                 .at = At(100)});
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status();
  EXPECT_EQ((*c)->postings, (std::vector<Posting>{{"tenant:acme:credit:promo", Money::Units(-1)},
                                                  {"tenant:acme:credit:trial", Money::Units(-1)},
                                                  {"tenant:acme:cash", Money::Units(-1)},
                                                  {"provider:p1:payable", Money::Micros(2'700'000)},
                                                  {"platform:fees", Money::Micros(300'000)}}));
  EXPECT_EQ((*c)->gpu_milli_seconds, 3'600'000);
  ASSERT_TRUE(ledger.Post(**c).ok());
  EXPECT_EQ(BalanceOf(ledger, "acme", At(100)).available(), Money::Units(4));
  // A payout above what is owed is refused; the rest is paid.
  EXPECT_EQ(Payout(ledger, "payout/p1/1", "p1", Money::Units(3), At(200)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(ledger.Post(*Payout(ledger, "payout/p1/1", "p1", Money::Micros(2'700'000), At(200))).ok());
  EXPECT_EQ(ledger.Balance("provider:p1:payable").micros, 0);
}

TEST(WalletTest, ExpiredCreditIsNotSpentAndIsTakenBack) {
  Ledger ledger;
  ASSERT_TRUE(ledger.Post(Grant("acme", "trial", Money::Units(10), At(1000), At(0), "trial")).ok());
  EXPECT_EQ(BalanceOf(ledger, "acme", At(999)).credit, Money::Units(10));
  EXPECT_EQ(BalanceOf(ledger, "acme", At(1000)).credit, Money{});
  EXPECT_TRUE(ExpiriesDue(ledger, At(999)).empty());
  // A charge after the expiry goes to cash (below zero: the time was used).
  absl::StatusOr<std::optional<Transaction>> c = Charge(ledger, {.id = "u1",
                                                                 .tenant = "acme",
                                                                 .milli = 1000,
                                                                 .millis = 3'600'000,
                                                                 .price_per_gpu_hour = Money::Units(1),
                                                                 .at = At(1001)});
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->postings,
            (std::vector<Posting>{{"tenant:acme:cash", Money::Units(-1)}, {"platform:revenue", Money::Units(1)}}));
  std::vector<Transaction> due = ExpiriesDue(ledger, At(1000));
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].id, "expire/tenant:acme:credit:trial");
  EXPECT_EQ(due[0].tenant, "acme");
  ASSERT_TRUE(ledger.Post(due[0]).ok());
  EXPECT_EQ(ledger.Balance("platform:grants").micros, 0);
  EXPECT_TRUE(ExpiriesDue(ledger, At(2000)).empty());
}

TEST(WalletTest, ChargeCarriesTheRemainderAndSkipsSubMicroCosts) {
  Ledger ledger;
  const ChargeInput second{.id = "s1",
                           .tenant = "acme",
                           .milli = 1000,
                           .millis = 1000,
                           .price_per_gpu_hour = Money::Micros(2'500'000),
                           .at = At(1)};
  absl::StatusOr<std::optional<Transaction>> first = Charge(ledger, second);
  ASSERT_TRUE(ledger.Post(**first).ok());
  EXPECT_EQ(ledger.Carry("acme"), 1'600'000'000);
  ChargeInput next = second;
  next.id = "s2";
  // 694.444 + 0.444 carried: 694 again, carry 3.2e9; the third second reaches 695.
  ASSERT_TRUE(ledger.Post(**Charge(ledger, next)).ok());
  next.id = "s3";
  EXPECT_EQ((**Charge(ledger, next)).postings[0].amount.micros, -695);
  EXPECT_EQ(*Charge(ledger, {.id = "tiny",
                             .tenant = "acme",
                             .milli = 1,
                             .millis = 1,
                             .price_per_gpu_hour = Money::Micros(1),
                             .at = At(1)}),
            std::nullopt);
}

TEST(WalletTest, ChargeRequestsChargesTheCumulativeCountersDifference) {
  Ledger ledger;
  ASSERT_TRUE(ledger.Post(TopUp("top-up/acme/1", "acme", Money::Units(10), At(0), "card")).ok());
  // 0.30 per million requests = 0.3 micro-units each: the first 3 requests cost floor(0.9) = 0, the next 4
  // bring the row to 7 requests, floor(2.1) = 2 micro-units; 5,000 tokens at 2.00 per million = 10,000.
  const RequestChargeInput base{.id = "serve/s-1/v1/gw/3",
                                .tenant = "acme",
                                .service = "s-1",
                                .user = "alice",
                                .requests_after = 3,
                                .price_per_million_requests = Money::Micros(300'000),
                                .price_per_million_tokens = Money::Units(2),
                                .at = At(1)};
  EXPECT_EQ(*ChargeRequests(ledger, base), std::nullopt);
  RequestChargeInput next = base;
  next.id = "serve/s-1/v1/gw/7";
  next.requests_before = 3;
  next.requests_after = 7;
  next.tokens_after = 5'000;
  absl::StatusOr<std::optional<Transaction>> c = ChargeRequests(ledger, next);
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status();
  EXPECT_EQ((*c)->capacity_type, "serverless");
  EXPECT_EQ((*c)->job, "s-1");
  EXPECT_EQ((*c)->requests, 4);
  EXPECT_EQ((*c)->tokens, 5'000);
  EXPECT_EQ((*c)->postings, (std::vector<Posting>{{"tenant:acme:cash", Money::Micros(-10'002)},
                                                  {"platform:revenue", Money::Micros(10'002)}}));
  EXPECT_EQ(FromText(ToText(**c)).value(), **c);
  // Counters that go down, or negative prices, are refused.
  next.requests_after = 2;
  EXPECT_EQ(ChargeRequests(ledger, next).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(WalletTest, ChargeCarriesIdleTimeAndRefundForTakesBackTheLostShare) {
  Ledger ledger;
  ASSERT_TRUE(ledger.Post(TopUp("top-up/acme/1", "acme", Money::Units(10), At(0), "card")).ok());
  // 1 GPU for 10 minutes at 6.00/GPU-hour = 1.00, of which 4 minutes idle.
  absl::StatusOr<std::optional<Transaction>> c = Charge(ledger, {.id = "usage/j1/e2/r1",
                                                                 .tenant = "acme",
                                                                 .job = "j1",
                                                                 .user = "alice",
                                                                 .milli = 1000,
                                                                 .millis = 600'000,
                                                                 .idle_millis = 240'000,
                                                                 .price_per_gpu_hour = Money::Units(6),
                                                                 .at = At(100)});
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status();
  EXPECT_EQ((*c)->gpu_milli_seconds, 600'000);
  EXPECT_EQ((*c)->idle_gpu_milli_seconds, 240'000);
  EXPECT_EQ(TenantChange(**c), Money::Units(-1));
  // The stored form keeps the idle time.
  EXPECT_EQ(FromText(ToText(**c)).value(), **c);
  ASSERT_TRUE(ledger.Post(**c).ok());
  // 7 of its 10 minutes lost since the last checkpoint: 0.70 back, with the charge's id.
  std::optional<Transaction> r = RefundFor(**c, 420'000, 600'000, At(101), "node n1 lost");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->id, "refund/j1/e2/r1");
  EXPECT_EQ(r->job, "j1");
  EXPECT_EQ(r->user, "alice");
  // The charge reversed in proportion: the cash it took, from the revenue it made.
  EXPECT_EQ(r->postings, (std::vector<Posting>{{"tenant:acme:cash", Money::Micros(700'000)},
                                               {"platform:revenue", Money::Micros(-700'000)}}));
  EXPECT_EQ(TenantChange(*r), Money::Micros(700'000));
  // Never more than the charge; nothing for nothing lost, or for what is not a charge.
  EXPECT_EQ(RefundFor(**c, 900'000, 600'000, At(101), "")->postings[0].amount, Money::Units(1));
  EXPECT_FALSE(RefundFor(**c, 0, 600'000, At(101), "").has_value());
  EXPECT_FALSE(RefundFor(*r, 600'000, 600'000, At(101), "").has_value());
  ASSERT_TRUE(ledger.Post(*r).ok());
  EXPECT_EQ(BalanceOf(ledger, "acme", At(102)).cash, Money::Micros(9'700'000));
  // A charge of 3.00 paid 1.00 from a grant and 2.00 from cash, owed to provider p1 less a 10% fee: a third
  // of it back goes to each account in proportion (credit stays credit; the odd micro-unit to the first),
  // taken from p1 and the fees alike.
  ASSERT_TRUE(ledger.Post(Grant("acme", "promo", Money::Units(1), At(1000), At(103), "promo")).ok());
  absl::StatusOr<std::optional<Transaction>> mixed = Charge(ledger, {.id = "usage/j2/e1/r0",
                                                                     .tenant = "acme",
                                                                     .provider = "p1",
                                                                     .job = "j2",
                                                                     .milli = 1000,
                                                                     .millis = 3'600'000,
                                                                     .price_per_gpu_hour = Money::Units(3),
                                                                     .fee_bps = 1000,
                                                                     .at = At(104)});
  ASSERT_TRUE(mixed.ok() && mixed->has_value()) << mixed.status();
  ASSERT_TRUE(ledger.Post(**mixed).ok());
  std::optional<Transaction> third = RefundFor(**mixed, 1'200'000, 3'600'000, At(105), "reclaimed");
  ASSERT_TRUE(third.has_value());
  EXPECT_EQ(third->postings, (std::vector<Posting>{{"tenant:acme:credit:promo", Money::Micros(333'334)},
                                                   {"tenant:acme:cash", Money::Micros(666'666)},
                                                   {"provider:p1:payable", Money::Micros(-900'000)},
                                                   {"platform:fees", Money::Micros(-100'000)}}));
  ASSERT_TRUE(ledger.Post(*third).ok());
  EXPECT_EQ(ledger.Balance("provider:p1:payable"), Money::Micros(1'800'000));
  // An idle time above the segment's is out of range for a stored transaction.
  Transaction bad = **c;
  bad.idle_gpu_milli_seconds = bad.gpu_milli_seconds + 1;
  EXPECT_EQ(Validate(bad).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpugeek::ledger
