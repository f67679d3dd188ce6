#pragma once
// Parsers for the quantities users write in job specs and on the command line.
//
// Each returns InvalidArgument with a message that says what was expected; callers prefix the field
// name. None of them accepts negative values, NaN or overflow.

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace gpugeek::api {

// Memory: a plain integer is bytes; suffixes Ki Mi Gi Ti (2^10..2^40, Kubernetes style) and
// K/KB M/MB G/GB T/TB (10^3..10^12), case-sensitive as in Kubernetes. "512Gi", "80GB", "1.5Ti".
absl::StatusOr<uint64_t> ParseBytes(std::string_view text);

// CPU in milli-CPU: "8" -> 8000, "2.5" -> 2500, "500m" -> 500 (Kubernetes notation).
absl::StatusOr<int64_t> ParseMilliCpu(std::string_view text);

// Money in integer micro-units, without floating point: "0.85" -> 850000, "12" -> 12000000, at most six
// decimals, at most 10^12 units. InvalidArgument naming the form otherwise.
absl::StatusOr<int64_t> ParseMoneyMicros(std::string_view text);

// Duration: one or more <number><unit> with units ms, s, m, h, d: "30s", "1h30m", "250ms".
absl::StatusOr<Duration> ParseDuration(std::string_view text);

// A non-negative count that may be written in scientific notation: "2e8", "200000000", "1.5e9".
// Must be an integer value below 2^63.
absl::StatusOr<int64_t> ParseCount(std::string_view text);

// Formats a duration compactly for display: "30s", "1h30m", "250ms".
std::string FormatDuration(Duration d);

}  // namespace gpugeek::api
