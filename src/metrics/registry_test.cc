#include "metrics/registry.h"

#include <cmath>
#include <limits>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpugeek::metrics {
namespace {

using ::testing::HasSubstr;

TEST(RegistryTest, CountersAndGaugesRenderWithHelpTypeAndLabels) {
  Registry r;
  auto& placed = r.AddCounter("gpugeek_scheduling_placements_total", "Jobs placed.", {"policy"});
  auto& gpus = r.AddGauge("gpugeek_pool_gpus", "GPUs.", {"model", "capacity_type"});
  placed.With({"FGDFit"}).Inc();
  placed.With({"FGDFit"}).Inc(2);
  placed.With({"BestFit"}).Inc(-5);  // ignored: counters only go up
  gpus.With({"A100-SXM-80GB", "spot"}).Set(8);
  gpus.With({"A100-SXM-80GB", "spot"}).Add(-1);
  EXPECT_EQ(r.Render(),
            "# HELP gpugeek_scheduling_placements_total Jobs placed.\n"
            "# TYPE gpugeek_scheduling_placements_total counter\n"
            "gpugeek_scheduling_placements_total{policy=\"BestFit\"} 0\n"
            "gpugeek_scheduling_placements_total{policy=\"FGDFit\"} 3\n"
            "# HELP gpugeek_pool_gpus GPUs.\n"
            "# TYPE gpugeek_pool_gpus gauge\n"
            "gpugeek_pool_gpus{model=\"A100-SXM-80GB\",capacity_type=\"spot\"} 7\n");
}

TEST(RegistryTest, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  Registry r;
  auto& h = r.AddHistogram("gpugeek_x_seconds", "X.", {}, {0.1, 1, 0.01});  // sorted on add
  for (double v : {0.005, 0.01, 0.5, 2.0, 0.1}) h.With({}).Observe(v);
  h.With({}).Observe(std::nan(""));  // dropped
  EXPECT_EQ(r.Render(),
            "# HELP gpugeek_x_seconds X.\n"
            "# TYPE gpugeek_x_seconds histogram\n"
            "gpugeek_x_seconds_bucket{le=\"0.01\"} 2\n"  // le is inclusive: 0.01 counts here
            "gpugeek_x_seconds_bucket{le=\"0.1\"} 3\n"
            "gpugeek_x_seconds_bucket{le=\"1\"} 4\n"
            "gpugeek_x_seconds_bucket{le=\"+Inf\"} 5\n"
            "gpugeek_x_seconds_sum 2.615\n"
            "gpugeek_x_seconds_count 5\n");
}

TEST(RegistryTest, LabelValuesAreEscapedAndSpecialValuesSpelledAsGoReadsThem) {
  Registry r;
  r.AddCollector([](Writer& w) {
    w.Family("gpugeek_g", "Help with \\ and\nnewline.", Type::kGauge);
    w.Sample({{"name", "a\"b\\c\nd"}}, std::numeric_limits<double>::infinity());
    w.Sample({{"name", "nan"}}, std::nan(""));
    w.Sample({{"name", "neg"}}, -std::numeric_limits<double>::infinity());
    w.Sample({{"name", "big"}}, 1.5e20);
  });
  EXPECT_EQ(r.Render(),
            "# HELP gpugeek_g Help with \\\\ and\\nnewline.\n"
            "# TYPE gpugeek_g gauge\n"
            "gpugeek_g{name=\"a\\\"b\\\\c\\nd\"} +Inf\n"
            "gpugeek_g{name=\"nan\"} NaN\n"
            "gpugeek_g{name=\"neg\"} -Inf\n"
            "gpugeek_g{name=\"big\"} 1.5e+20\n");
}

TEST(RegistryTest, DuplicateOrMisnamedFamiliesAndLabelsAreDroppedNotWritten) {
  Registry r;
  r.AddGauge("gpugeek_dup", "First.", {}).With({}).Set(1);
  r.AddCollector([](Writer& w) {
    w.Family("gpugeek_dup", "Second.", Type::kGauge);
    w.Sample({}, 2);
    w.Family("9bad", "Bad.", Type::kGauge);
    w.Sample({}, 3);
    w.Family("gpugeek_ok", "Ok.", Type::kGauge);
    w.Sample({{"__reserved", "x"}}, 4);
    w.Sample({{"bad-label", "x"}}, 5);
    w.Sample({{"good", "x"}}, 6);
  });
  const std::string text = r.Render();
  EXPECT_EQ(text,
            "# HELP gpugeek_dup First.\n# TYPE gpugeek_dup gauge\ngpugeek_dup 1\n"
            "# HELP gpugeek_ok Ok.\n# TYPE gpugeek_ok gauge\ngpugeek_ok{good=\"x\"} 6\n");
}

TEST(RegistryTest, WrongNumberOfLabelValuesIsPaddedNotACrash) {
  Registry r;
  auto& g = r.AddGauge("gpugeek_two", "Two labels.", {"a", "b"});
  g.With({"x"}).Set(1);
  EXPECT_THAT(r.Render(), HasSubstr("gpugeek_two{a=\"x\",b=\"\"} 1\n"));
}

TEST(RegistryTest, NameRules) {
  EXPECT_TRUE(ValidMetricName("gpugeek_a:b_1"));
  EXPECT_FALSE(ValidMetricName("1abc"));
  EXPECT_FALSE(ValidMetricName(""));
  EXPECT_FALSE(ValidMetricName("a-b"));
  EXPECT_TRUE(ValidLabelName("le"));
  EXPECT_FALSE(ValidLabelName("a:b"));
  EXPECT_FALSE(ValidLabelName("__name__"));
}

TEST(RegistryTest, ConcurrentIncrementsAreAllCounted) {
  Registry r;
  auto& c = r.AddCounter("gpugeek_c_total", "C.", {"t"});
  auto& h = r.AddHistogram("gpugeek_h_seconds", "H.", {}, ExponentialBuckets(0.001, 10, 4));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        c.With({t % 2 == 0 ? "even" : "odd"}).Inc();
        h.With({}).Observe(0.05);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.With({"even"}).Value(), 20000);
  EXPECT_EQ(c.With({"odd"}).Value(), 20000);
  const Histogram::Snapshot s = h.With({}).Take();
  EXPECT_EQ(s.count, 40000u);
  EXPECT_EQ(s.bounds, (std::vector<double>{0.001, 0.01, 0.1, 1}));
  EXPECT_EQ(s.cumulative, (std::vector<uint64_t>{0, 0, 40000, 40000, 40000}));
}

}  // namespace
}  // namespace gpugeek::metrics
