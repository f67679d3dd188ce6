#include "common/fake_clock.h"

#include <gtest/gtest.h>

namespace gpugeek {
namespace {

TEST(FakeClock, AdvancesOnlyWhenTold) {
  FakeClock clock;
  const TimePoint start = clock.Now();
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(std::chrono::seconds(3));
  EXPECT_EQ(clock.Now() - start, std::chrono::seconds(3));
}

TEST(RealClock, MovesForward) {
  const TimePoint a = RealClock().Now();
  const TimePoint b = RealClock().Now();
  EXPECT_LE(a, b);
  EXPECT_GT(a.time_since_epoch(), std::chrono::hours(24 * 365 * 50));  // after 2020
}

}  // namespace
}  // namespace gpugeek
