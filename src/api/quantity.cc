#include "api/quantity.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/core.h>

#include "absl/strings/numbers.h"
#include "common/absl_fmt.h"

namespace gpugeek::api {
namespace {

// Parses a leading non-negative decimal number (digits, optional fraction, optional exponent) and
// returns it with the rest of the text. Rejects an empty number.
absl::StatusOr<double> LeadingNumber(std::string_view text, std::string_view& rest, bool allow_exponent) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  if (allow_exponent && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) ++j;
    size_t digits = j;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j > digits) i = j;
  }
  if (i == 0) return absl::InvalidArgumentError(fmt::format("'{}' does not start with a number", text));
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + i, value);
  if (ec != std::errc() || ptr != text.data() + i || !std::isfinite(value)) {
    return absl::InvalidArgumentError(fmt::format("'{}' is not a valid number", text.substr(0, i)));
  }
  rest = text.substr(i);
  return value;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// Converts value * scale to an integer, rejecting overflow and (when exact) fractions.
absl::StatusOr<int64_t> Scale(double value, double scale, std::string_view text, bool require_integer) {
  const double v = value * scale;
  if (!(v < 9.2e18)) return absl::InvalidArgumentError(fmt::format("'{}' is too large", text));
  const double rounded = std::round(v);
  if (require_integer && std::fabs(rounded - v) > 1e-6 * std::max(1.0, v)) {
    return absl::InvalidArgumentError(fmt::format("'{}' is not a whole number", text));
  }
  return static_cast<int64_t>(rounded);
}

}  // namespace

absl::StatusOr<uint64_t> ParseBytes(std::string_view text) {
  text = Trim(text);
  std::string_view unit;
  auto value = LeadingNumber(text, unit, /*allow_exponent=*/false);
  if (!value.ok())
    return absl::InvalidArgumentError(fmt::format("{}; expected bytes like 512Gi or 80GB", value.status().message()));
  struct Suffix {
    std::string_view name;
    double scale;
  };
  static constexpr Suffix kSuffixes[] = {
      {"", 1},         {"B", 1},        {"Ki", 0x1p10},  {"Mi", 0x1p20},  {"Gi", 0x1p30}, {"Ti", 0x1p40},
      {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30}, {"TiB", 0x1p40}, {"K", 1e3},     {"M", 1e6},
      {"G", 1e9},      {"T", 1e12},     {"KB", 1e3},     {"MB", 1e6},     {"GB", 1e9},    {"TB", 1e12}};
  for (const Suffix& s : kSuffixes) {
    if (unit == s.name) {
      auto bytes = Scale(*value, s.scale, text, /*require_integer=*/false);
      if (!bytes.ok()) return bytes.status();
      return static_cast<uint64_t>(*bytes);
    }
  }
  return absl::InvalidArgumentError(
      fmt::format("'{}' has unknown unit '{}'; use Ki, Mi, Gi, Ti (binary) or K, M, G, T (decimal)", text, unit));
}

absl::StatusOr<int64_t> ParseMoneyMicros(std::string_view text) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        fmt::format("'{}' is not an amount: digits with at most six decimals, e.g. 0.85 or 2.5", text));
  };
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  std::string frac(dot == std::string_view::npos ? "" : text.substr(dot + 1));
  const auto digits = [](std::string_view d) {
    return std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if ((whole.empty() && frac.empty()) || whole.size() > 12 || frac.size() > 6 || !digits(whole) || !digits(frac) ||
      (dot != std::string_view::npos && frac.empty())) {
    return bad();
  }
  frac.resize(6, '0');
  int64_t w = 0, f = 0;
  if (!absl::SimpleAtoi(whole.empty() ? std::string("0") : std::string(whole), &w) || !absl::SimpleAtoi(frac, &f)) {
    return bad();
  }
  return w * 1'000'000 + f;
}

absl::StatusOr<int64_t> ParseMilliCpu(std::string_view text) {
  text = Trim(text);
  std::string_view unit;
  auto value = LeadingNumber(text, unit, /*allow_exponent=*/false);
  if (!value.ok())
    return absl::InvalidArgumentError(fmt::format("{}; expected CPUs like 8, 2.5 or 500m", value.status().message()));
  if (unit.empty()) return Scale(*value, 1000, text, /*require_integer=*/true);
  if (unit == "m") return Scale(*value, 1, text, /*require_integer=*/true);
  return absl::InvalidArgumentError(
      fmt::format("'{}' has unknown unit '{}'; write CPUs (8, 2.5) or milli-CPU (500m)", text, unit));
}

absl::StatusOr<Duration> ParseDuration(std::string_view text) {
  text = Trim(text);
  if (text.empty()) return absl::InvalidArgumentError("empty duration; expected e.g. 30s, 5m, 1h30m");
  std::string_view rest = text;
  double total_ns = 0;
  while (!rest.empty()) {
    std::string_view after;
    auto value = LeadingNumber(rest, after, /*allow_exponent=*/false);
    if (!value.ok())
      return absl::InvalidArgumentError(fmt::format("'{}' is not a duration; expected e.g. 30s, 5m, 1h30m", text));
    size_t n = 0;
    while (n < after.size() && std::isalpha(static_cast<unsigned char>(after[n]))) ++n;
    const std::string_view unit = after.substr(0, n);
    double scale = 0;
    if (unit == "ms")
      scale = 1e6;
    else if (unit == "s")
      scale = 1e9;
    else if (unit == "m")
      scale = 60e9;
    else if (unit == "h")
      scale = 3600e9;
    else if (unit == "d")
      scale = 86400e9;
    else
      return absl::InvalidArgumentError(fmt::format("'{}': unit '{}' must be one of ms, s, m, h, d", text, unit));
    total_ns += *value * scale;
    rest = after.substr(n);
  }
  if (!(total_ns < 9.2e18)) return absl::InvalidArgumentError(fmt::format("'{}' is too long", text));
  return Duration(static_cast<int64_t>(std::llround(total_ns)));
}

absl::StatusOr<int64_t> ParseCount(std::string_view text) {
  text = Trim(text);
  std::string_view rest;
  auto value = LeadingNumber(text, rest, /*allow_exponent=*/true);
  if (!value.ok() || !rest.empty()) {
    return absl::InvalidArgumentError(fmt::format("'{}' is not a count; expected e.g. 200000000 or 2e8", text));
  }
  return Scale(*value, 1, text, /*require_integer=*/true);
}

std::string FormatDuration(Duration d) {
  using std::chrono::duration_cast;
  const int64_t ms = duration_cast<std::chrono::milliseconds>(d).count();
  if (ms % 1000 != 0 || ms == 0) return fmt::format("{}ms", ms);
  int64_t s = ms / 1000;
  std::string out;
  if (s >= 3600) out += fmt::format("{}h", s / 3600), s %= 3600;
  if (s >= 60) out += fmt::format("{}m", s / 60), s %= 60;
  if (s > 0) out += fmt::format("{}s", s);
  return out;
}

}  // namespace gpugeek::api
