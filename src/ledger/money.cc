#include "ledger/money.h"

#include <limits>

#include "absl/numeric/int128.h"
#include "api/quantity.h"
#include "common/units.h"

namespace gpugeek::ledger {

std::string Money::ToString() const { return FormatMoney(micros); }

absl::StatusOr<Money> ParseMoney(std::string_view text) {
  absl::StatusOr<int64_t> micros = api::ParseMoneyMicros(text);
  if (!micros.ok()) return micros.status();
  if (*micros > kMaxPostingMicros) {
    return absl::InvalidArgumentError("money: '" + std::string(text) + "' is more than 1000000000 units");
  }
  return Money::Micros(*micros);
}

absl::StatusOr<Money> CheckedAdd(Money a, Money b) {
  int64_t sum = 0;
  if (__builtin_add_overflow(a.micros, b.micros, &sum)) {
    return absl::OutOfRangeError("money: " + a.ToString() + " + " + b.ToString() + " overflows");
  }
  return Money::Micros(sum);
}

absl::StatusOr<Prorated> Prorate(int64_t milli, int64_t millis, Money price_per_gpu_hour, int64_t carry_in) {
  if (milli < 0 || millis < 0 || price_per_gpu_hour.micros < 0) {
    return absl::InvalidArgumentError("money: prorating a negative milli-GPU, duration or price");
  }
  if (carry_in < 0 || carry_in >= kProrateDenominator) {
    return absl::InvalidArgumentError("money: carry " + std::to_string(carry_in) + " is outside [0, 3600000000)");
  }
  // milli <= 2^63 and millis <= 2^63 would overflow even 128 bits with the price: each is checked.
  absl::int128 numerator = absl::int128(milli) * millis;
  if (numerator > absl::int128(std::numeric_limits<int64_t>::max())) {
    return absl::OutOfRangeError("money: milli-GPU x milliseconds overflows");
  }
  numerator = numerator * price_per_gpu_hour.micros + carry_in;
  const absl::int128 cost = numerator / kProrateDenominator;
  if (cost > absl::int128(kMaxPostingMicros)) return absl::OutOfRangeError("money: a charge above 1000000000 units");
  return Prorated{.cost = Money::Micros(static_cast<int64_t>(cost)),
                  .carry = static_cast<int64_t>(numerator % kProrateDenominator)};
}

Money BasisPoints(Money amount, int64_t bps) {
  return Money::Micros(static_cast<int64_t>(absl::int128(amount.micros) * bps / 10'000));
}

}  // namespace gpugeek::ledger
