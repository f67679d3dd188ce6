#include "api/quantity.h"

#include <gtest/gtest.h>

namespace gpugeek::api {
namespace {

TEST(ParseBytes, BinaryAndDecimalSuffixes) {
  EXPECT_EQ(*ParseBytes("512Gi"), 512ull << 30);
  EXPECT_EQ(*ParseBytes("80GB"), 80'000'000'000ull);
  EXPECT_EQ(*ParseBytes("1.5Ti"), 3ull << 39);
  EXPECT_EQ(*ParseBytes("4096"), 4096u);
  EXPECT_EQ(*ParseBytes(" 16MiB "), 16ull << 20);
}

TEST(ParseBytes, RejectsWithAHint) {
  auto bad = ParseBytes("12 parsecs");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown unit"), std::string::npos) << bad.status();
  EXPECT_FALSE(ParseBytes("").ok());
  EXPECT_FALSE(ParseBytes("-5Gi").ok());
  EXPECT_FALSE(ParseBytes("1e30").ok());
  EXPECT_FALSE(ParseBytes("99999999999Ti").ok());
}

TEST(ParseMilliCpu, KubernetesNotation) {
  EXPECT_EQ(*ParseMilliCpu("8"), 8000);
  EXPECT_EQ(*ParseMilliCpu("2.5"), 2500);
  EXPECT_EQ(*ParseMilliCpu("500m"), 500);
  EXPECT_FALSE(ParseMilliCpu("0.0005").ok());  // finer than 1 milli-CPU
  EXPECT_FALSE(ParseMilliCpu("4 cores").ok());
}

TEST(ParseMoneyMicros, ExactWithoutFloatingPoint) {
  EXPECT_EQ(*ParseMoneyMicros("0.85"), 850'000);
  EXPECT_EQ(*ParseMoneyMicros("12"), 12'000'000);
  EXPECT_EQ(*ParseMoneyMicros(".5"), 500'000);
  EXPECT_EQ(*ParseMoneyMicros("2.000001"), 2'000'001);
  for (const char* bad : {"", ".", "1.", "-1", "1.2345678", "1e3", "0x10", "1,5", "1.5.2", " 1", "9999999999999"}) {
    EXPECT_FALSE(ParseMoneyMicros(bad).ok()) << bad;
  }
  EXPECT_EQ(ParseMoneyMicros("abc").status().message(),
            "'abc' is not an amount: digits with at most six decimals, e.g. 0.85 or 2.5");
}

TEST(ParseDuration, CompoundUnits) {
  EXPECT_EQ(*ParseDuration("30s"), std::chrono::seconds(30));
  EXPECT_EQ(*ParseDuration("1h30m"), std::chrono::minutes(90));
  EXPECT_EQ(*ParseDuration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(*ParseDuration("1.5s"), std::chrono::milliseconds(1500));
  EXPECT_FALSE(ParseDuration("30").ok());
  EXPECT_FALSE(ParseDuration("3 weeks").ok());
  EXPECT_FALSE(ParseDuration("").ok());
}

TEST(ParseCount, ScientificNotation) {
  EXPECT_EQ(*ParseCount("2e8"), 200'000'000);
  EXPECT_EQ(*ParseCount("1.5e9"), 1'500'000'000);
  EXPECT_EQ(*ParseCount("42"), 42);
  EXPECT_FALSE(ParseCount("1.5").ok());
  EXPECT_FALSE(ParseCount("1e19").ok());
  EXPECT_FALSE(ParseCount("12abc").ok());
}

TEST(FormatDuration, RoundTrips) {
  for (const char* s : {"30s", "1h30m", "250ms", "2h", "5m"}) EXPECT_EQ(FormatDuration(*ParseDuration(s)), s);
}

}  // namespace
}  // namespace gpugeek::api
