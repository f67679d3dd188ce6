#include "common/line_chart.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpugeek {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(LineChartTest, LogAxisSpansWholeDecadesAndSkipsNonPositive) {
  const std::string svg =
      LineChartSvg("regret", "trials", "regret", {{"a<b", {{1, 100}, {2, 0.0}, {3, 0.001}}}}, 1, 3, {.log_y = true});
  // Decades 10^-3 .. 10^2, ticks at fifths: 0.001, 0.01, 0.1, 1, 10, 100.
  for (const char* tick : {">0.001<", ">0.01<", ">0.1<", ">1<", ">10<", ">100<"}) EXPECT_THAT(svg, HasSubstr(tick));
  // Two points drawn (the 0 cannot be on a log axis): one move, one line.
  EXPECT_THAT(svg, HasSubstr("<path d=\"M70.0,40.0 L570.0,390.0\""));
  EXPECT_THAT(svg, HasSubstr("a&lt;b"));
  EXPECT_THAT(svg, Not(HasSubstr("a<b")));
}

TEST(LineChartTest, LinearAxisKeepsOneDecimal) {
  const std::string svg = LineChartSvg("t", "x", "y", {{"s", {{0, 0}, {10, 5}}}}, 0, 10);
  EXPECT_THAT(svg, HasSubstr(">5.0<"));
  EXPECT_THAT(svg, HasSubstr(">0.0<"));
}

}  // namespace
}  // namespace gpugeek
