#include "ledger/money.h"

#include <gtest/gtest.h>

namespace gpugeek::ledger {
namespace {

TEST(MoneyTest, ParsesAndFormatsWithoutFloatingPoint) {
  EXPECT_EQ(ParseMoney("4.10")->micros, 4'100'000);
  EXPECT_EQ(ParseMoney("0.000001")->micros, 1);
  EXPECT_EQ(Money::Units(3).ToString(), "3.00");
  EXPECT_EQ(Money::Micros(4200).ToString(), "0.0042");
  EXPECT_FALSE(ParseMoney("1e3").ok());
  EXPECT_FALSE(ParseMoney("-1").ok());
  EXPECT_FALSE(ParseMoney("0.0000001").ok());   // seven decimals
  EXPECT_FALSE(ParseMoney("1000000001").ok());  // over kMaxPostingMicros
  EXPECT_TRUE(ParseMoney("1000000000").ok());
}

TEST(MoneyTest, CheckedAddRefusesOverflow) {
  EXPECT_EQ(CheckedAdd(Money::Micros(2), Money::Micros(-5))->micros, -3);
  EXPECT_EQ(CheckedAdd(Money::Micros(INT64_MAX), Money::Micros(1)).status().code(), absl::StatusCode::kOutOfRange);
}

TEST(MoneyTest, ProrateIsTheExactQuotientWithItsRemainder) {
  // One whole GPU (1000 milli) for one hour at 2.50/GPU-hour is 2.50.
  absl::StatusOr<Prorated> hour = Prorate(1000, 3'600'000, Money::Micros(2'500'000), 0);
  ASSERT_TRUE(hour.ok());
  EXPECT_EQ(hour->cost.micros, 2'500'000);
  EXPECT_EQ(hour->carry, 0);
  // One second of it: 2,500,000 / 3600 = 694.444... micro-units: 694 and 1.6e9 / 3.6e9 carried.
  absl::StatusOr<Prorated> second = Prorate(1000, 1000, Money::Micros(2'500'000), 0);
  EXPECT_EQ(second->cost.micros, 694);
  EXPECT_EQ(second->carry, 1'600'000'000);
  // Half a GPU (500 milli) for 90 minutes at 4.00: 3.00.
  EXPECT_EQ(Prorate(500, 5'400'000, Money::Units(4), 0)->cost.micros, 3'000'000);
  EXPECT_FALSE(Prorate(-1, 1, Money::Units(1), 0).ok());
  EXPECT_FALSE(Prorate(1, 1, Money::Units(1), kProrateDenominator).ok());
  // 8 GPUs x a year at the largest price: over the per-posting bound, refused rather than wrapped.
  EXPECT_EQ(Prorate(8000, 31'536'000'000, Money::Micros(kMaxPostingMicros), 0).status().code(),
            absl::StatusCode::kOutOfRange);
}

TEST(MoneyTest, AMillionOneSecondChargesDoNotDrift) {
  // 1,000,000 charges of one second of one GPU at 2.50/GPU-hour, each carrying its remainder to the
  // next, sum to exactly the one charge of 1,000,000 seconds: floor(2.5e6 x 1e6 / 3600) = 694,444,444.
  const Money price = Money::Micros(2'500'000);
  int64_t carry = 0;
  Money total;
  for (int i = 0; i < 1'000'000; ++i) {
    absl::StatusOr<Prorated> p = Prorate(1000, 1000, price, carry);
    ASSERT_TRUE(p.ok());
    total += p->cost;
    carry = p->carry;
  }
  EXPECT_EQ(total.micros, 694'444'444);
  EXPECT_EQ(total, Prorate(1000, 1'000'000'000, price, 0)->cost);
}

TEST(MoneyTest, BasisPointsRoundDown) {
  EXPECT_EQ(BasisPoints(Money::Micros(694), 1500).micros, 104);  // 104.1
  EXPECT_EQ(BasisPoints(Money::Units(10), 10'000), Money::Units(10));
  EXPECT_EQ(BasisPoints(Money::Units(10), 0).micros, 0);
}

}  // namespace
}  // namespace gpugeek::ledger
