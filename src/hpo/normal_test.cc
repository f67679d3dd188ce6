#include "hpo/normal.h"

#include <cmath>

#include "gtest/gtest.h"

namespace gpugeek::hpo {
namespace {

TEST(NormalTest, KnownValues) {
  // Abramowitz & Stegun table 26.1: Phi(1.96) = 0.9750021048517795, Phi^-1(0.975) = 1.959963984540054.
  EXPECT_NEAR(NormalCdf(1.96), 0.9750021048517795, 1e-15);
  EXPECT_NEAR(NormalQuantile(0.975), 1.959963984540054, 1e-12);
  EXPECT_NEAR(NormalQuantile(1e-10), -6.361340902404056, 1e-9);
  EXPECT_NEAR(NormalQuantile(0.5), 0.0, 1e-15);
  EXPECT_NEAR(NormalPdf(0), 0.3989422804014327, 1e-16);
}

TEST(NormalTest, LogCdfStaysFiniteInTheTail) {
  EXPECT_NEAR(NormalLogCdf(-5), std::log(2.866515718791939e-07), 1e-12);
  // log Phi(-40) = -804.6084420137538 (mpmath).
  EXPECT_NEAR(NormalLogCdf(-40), -804.6084420137538, 1e-6);
  EXPECT_TRUE(std::isfinite(LogNormalMass(35, 36)));
  EXPECT_NEAR(LogNormalMass(-1, 1), std::log(0.6826894921370859), 1e-13);
  EXPECT_NEAR(LogNormalMass(1, 2), LogNormalMass(-2, -1), 1e-15);
}

TEST(NormalTest, TruncatedNormalMeanAndBounds) {
  // E[Z | 0 <= Z <= 10] = phi(0) / (Phi(10) - Phi(0)) = 0.7978845608.
  Rng rng(7);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = SampleTruncatedNormal(0, 1, 0, 10, rng);
    ASSERT_GE(x, 0);
    ASSERT_LE(x, 10);
    sum += x;
  }
  EXPECT_NEAR(sum / n, 0.7978845608, 0.005);
  // Far in the upper tail (mirrored): N(0, 1) on [8, 9]: mean 8 + about 1/8.
  sum = 0;
  for (int i = 0; i < 10000; ++i) sum += SampleTruncatedNormal(0, 1, 8, 9, rng);
  EXPECT_NEAR(sum / 10000, 8.12, 0.01);
  // Density integrates to 1 over the interval.
  double integral = 0;
  for (double x = -2; x < 3; x += 0.0005)
    integral += std::exp(TruncatedNormalLogPdf(x + 0.00025, 0.5, 0.7, -2, 3)) * 0.0005;
  EXPECT_NEAR(integral, 1.0, 1e-6);
}

}  // namespace
}  // namespace gpugeek::hpo
