#include "common/units.h"

#include <array>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_format.h"

namespace gpugeek {

std::string FormatMoney(int64_t micros) {
  if (micros < 0) return "-" + FormatMoney(micros == INT64_MIN ? INT64_MAX : -micros);
  if (micros >= 1'000'000) return absl::StrFormat("%d.%02d", micros / 1'000'000, (micros % 1'000'000) / 10'000);
  return absl::StrFormat("0.%04d", micros / 100);
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr std::array<const char*, 5> kNames = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t i = 0;
  while (value >= 1024.0 && i + 1 < kNames.size()) {
    value /= 1024.0;
    ++i;
  }
  if (i == 0) return absl::StrFormat("%d B", bytes);
  return absl::StrFormat("%.1f %s", value, kNames[i]);
}

namespace {
std::string FormatDecimal(double value, const char* unit) {
  static constexpr std::array<const char*, 6> kPrefixes = {"", "K", "M", "G", "T", "P"};
  size_t i = 0;
  while (std::fabs(value) >= 1000.0 && i + 1 < kPrefixes.size()) {
    value /= 1000.0;
    ++i;
  }
  // Three significant digits, as datasheets print them.
  if (value >= 100) return absl::StrFormat("%.0f %s%s", value, kPrefixes[i], unit);
  if (value >= 10) return absl::StrFormat("%.1f %s%s", value, kPrefixes[i], unit);
  return absl::StrFormat("%.2f %s%s", value, kPrefixes[i], unit);
}
}  // namespace

std::string FormatBytesPerSecond(double bytes_per_second) { return FormatDecimal(bytes_per_second, "B/s"); }

std::string FormatFlops(double flops) { return FormatDecimal(flops, "FLOP/s"); }

}  // namespace gpugeek
