#pragma once
// Money: one type for every amount the ledger moves, in integer micro-units of the pool's currency
// (ARCHITECTURE.md "Units and names": 1 unit = 1,000,000 micro-units; "4.10" = 4,100,000). Never a
// floating-point number: amounts add exactly, and a cost is an exact integer quotient whose sub-micro
// remainder is carried to the next charge (Prorate), so a million one-second charges sum to the
// whole million seconds' price.

#include <compare>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace gpugeek::ledger {

struct Money {
  int64_t micros = 0;

  static constexpr Money Micros(int64_t m) { return Money{m}; }
  static constexpr Money Units(int64_t u) { return Money{u * 1'000'000}; }
  constexpr Money operator-() const { return Money{-micros}; }
  constexpr Money operator+(Money o) const { return Money{micros + o.micros}; }
  constexpr Money operator-(Money o) const { return Money{micros - o.micros}; }
  constexpr Money& operator+=(Money o) {
    micros += o.micros;
    return *this;
  }
  constexpr Money& operator-=(Money o) {
    micros -= o.micros;
    return *this;
  }
  constexpr auto operator<=>(const Money&) const = default;
  // "4.10", "-0.0042" (common/units.h FormatMoney).
  std::string ToString() const;
};

// The largest amount one posting may carry: 10^9 units (10^15 micro-units). Balances are sums of
// postings checked for overflow when posted (Ledger::Post), so this bound keeps every sum exact.
inline constexpr int64_t kMaxPostingMicros = 1'000'000'000'000'000;

// "4.10" -> 4,100,000 micro-units; at most six decimals, non-negative, at most kMaxPostingMicros.
// InvalidArgument naming the form otherwise.
absl::StatusOr<Money> ParseMoney(std::string_view text);

// a + b, OutOfRange when the sum leaves int64.
absl::StatusOr<Money> CheckedAdd(Money a, Money b);

// What `milli` milli-GPU for `millis` milliseconds cost at `price_per_gpu_hour`:
// milli x millis x price / (1000 x 3,600,000), as an exact quotient. `carry_in` is the sub-micro
// remainder left by the previous charge of the same payer (0 <= carry_in < kProrateDenominator); the
// result's carry goes to the next one, so consecutive charges never drift from one charge of the total.
inline constexpr int64_t kProrateDenominator = 3'600'000'000;  // 1000 milli x 3,600,000 ms per hour
struct Prorated {
  Money cost;
  int64_t carry = 0;  // 0 <= carry < kProrateDenominator
};
// InvalidArgument for a negative input or a carry out of range; OutOfRange when the cost exceeds
// kMaxPostingMicros.
absl::StatusOr<Prorated> Prorate(int64_t milli, int64_t millis, Money price_per_gpu_hour, int64_t carry_in);

// floor(amount x bps / 10000) for 0 <= bps <= 10000 (a platform fee in basis points); amount >= 0.
Money BasisPoints(Money amount, int64_t bps);

}  // namespace gpugeek::ledger
