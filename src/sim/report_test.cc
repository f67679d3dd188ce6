#include "sim/report.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpugeek::sim {
namespace {

FgdRunResult FakeRun(std::string policy, uint64_t seed, double alloc) {
  FgdRunResult r;
  r.workload = "default";
  r.policy = std::move(policy);
  r.seed = seed;
  r.curves.alloc_pct.fill(NAN);
  r.curves.frag_pct.fill(1);
  r.curves.frag_ratio_pct.fill(2);
  r.curves.alloc_pct[100] = alloc;
  r.curves.alloc_pct[130] = alloc + 1;
  return r;
}

TEST(ReportTest, SummaryStatisticsAndOutputs) {
  const std::vector<FgdRunResult> runs = {FakeRun("FGD", 1, 95), FakeRun("FGD", 2, 96), FakeRun("FGD", 3, 94)};
  const auto rows = Summarize(runs);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_DOUBLE_EQ(rows[0].unalloc100_mean, 5);
  EXPECT_DOUBLE_EQ(rows[0].unalloc100_sd, 1);
  EXPECT_DOUBLE_EQ(rows[0].unalloc130_median, 4);
  EXPECT_NE(SummaryCsv(rows).find("default,FGD,3,5.000,1.000,5.000"), std::string::npos);
  PublishedSummary published;
  published[{"default", "FGD"}] = PublishedRow{10, 4.77, 0.11, 4.61, 0.08, 4.7, 99};
  const std::string table = SummaryTable(rows, &published);
  EXPECT_NE(table.find("4.77 +/- 0.11"), std::string::npos);
  EXPECT_NE(table.find("+0.23"), std::string::npos);
  const std::string csv = RunCsv(runs[0]);
  EXPECT_NE(csv.find("\n100,95.00,5.00,1.00,2.00\n"), std::string::npos);
  const auto series = MedianSeries(runs, "default", CurveKind::kAlloc, true, 99, 100);
  ASSERT_EQ(series.size(), 1u);
  EXPECT_DOUBLE_EQ(series[0].points[1].second, 5);
  const std::string svg = LineChartSvg("t<1>", "x", "y", series, 99, 100);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("t&lt;1&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">FGD</text>"), std::string::npos);
}

TEST(PublishedTest, ParsesAuthorsNames) {
  auto p = ParsePublishedSummary(
      "workload,sc_policy,n_seeds,unalloc_pct_at_arrival100_mean,unalloc_pct_at_arrival100_sd,"
      "unalloc_pct_at_arrival130_mean,unalloc_pct_at_arrival130_sd,frag_pct_of_total_at_arrival100_median,"
      "frag_ratio_pct_of_idle_at_arrival100_median\r\nopenb_pod_list_default,06-FGD,10,4.773,0.106,4.609,0.082,"
      "4.735,99.23\r\n",
      "s.csv");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->at({"default", "FGD"}).unalloc100_mean, 4.773);
  auto bad = ParsePublishedSummary("workload,sc_policy\n", "s.csv");
  EXPECT_FALSE(bad.ok());
}

}  // namespace
}  // namespace gpugeek::sim
