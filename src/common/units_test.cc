#include "common/units.h"

#include <gtest/gtest.h>

namespace gpugeek {
namespace {

TEST(FormatMoney, CentsFromOneUnitFourDecimalsBelow) {
  EXPECT_EQ(FormatMoney(2'050'000), "2.05");
  EXPECT_EQ(FormatMoney(1'700'000), "1.70");
  EXPECT_EQ(FormatMoney(4'200), "0.0042");
  EXPECT_EQ(FormatMoney(0), "0.0000");
  EXPECT_EQ(FormatMoney(-1'700'000), "-1.70");
}

TEST(FormatBytes, UsesBinaryPrefixes) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(80 * kGiB), "80.0 GiB");
  EXPECT_EQ(FormatBytes(1536 * kMiB), "1.5 GiB");
}

TEST(FormatRates, UseDecimalPrefixesWithThreeDigits) {
  // H100 SXM HBM3: 3.35 TB/s (NVIDIA H100 datasheet).
  EXPECT_EQ(FormatBytesPerSecond(3.35e12), "3.35 TB/s");
  // H100 SXM dense BF16: 989 TFLOP/s (same datasheet, without sparsity).
  EXPECT_EQ(FormatFlops(989.4e12), "989 TFLOP/s");
  EXPECT_EQ(FormatFlops(19.5e12), "19.5 TFLOP/s");
}

}  // namespace
}  // namespace gpugeek
