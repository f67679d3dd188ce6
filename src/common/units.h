#pragma once
// Units used across gpugeek (ARCHITECTURE.md "Units and names"): memory in bytes, GPU share in
// milli-GPU, CPU in milli-CPU, money in integer micro-units. Printing uses binary prefixes
// (1 GiB = 2^30 bytes) and says so.

#include <cstdint>
#include <string>

namespace gpugeek {

inline constexpr uint64_t kKiB = uint64_t{1} << 10;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;
inline constexpr uint64_t kTiB = uint64_t{1} << 40;
// Decimal units, as GPU datasheets quote memory bandwidth and link speed (1 GB/s = 1e9 B/s).
inline constexpr uint64_t kGB = 1'000'000'000;

inline constexpr int64_t kMilliPerUnit = 1000;  // 1000 milli-GPU = one GPU; 1000 milli-CPU = one core

// Formats bytes with a binary prefix and one decimal, e.g. 85899345920 -> "80.0 GiB".
std::string FormatBytes(uint64_t bytes);

// Formats a rate in bytes/s with a decimal prefix, e.g. 3.35e12 -> "3.35 TB/s".
std::string FormatBytesPerSecond(double bytes_per_second);

// Formats FLOP/s with a decimal prefix, e.g. 9.89e14 -> "989 TFLOP/s".
std::string FormatFlops(double flops);

// Integer micro-units of money as a decimal amount: cents from one unit up ("2.05", truncated), four
// decimals below ("0.0042"); a minus sign for a negative amount.
std::string FormatMoney(int64_t micros);

}  // namespace gpugeek
