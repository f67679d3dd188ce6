#include "api/region_latency.h"

#include <gtest/gtest.h>

namespace gpugeek::api {
namespace {

TEST(RegionLatency, EachLineServesBothDirections) {
  auto t = ParseRegionLatency(
      "region_a,region_b,latency_ms\n# measured\n us-east-1 , us-west-2 , 62\neu,us-east-1,75\n", "r.csv");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, (RegionLatency{{{"us-east-1", "us-west-2"}, 62},
                               {{"us-west-2", "us-east-1"}, 62},
                               {{"eu", "us-east-1"}, 75},
                               {{"us-east-1", "eu"}, 75}}));
}

TEST(RegionLatency, BadLinesNameFileLineAndTheFix) {
  const std::pair<const char*, const char*> cases[] = {
      {"a,b\n", "r.csv:1: 2 fields; want REGION_A,REGION_B,LATENCY_MS such as us-east-1,us-west-2,62"},
      {"# c\n,b,1\n", "r.csv:2: empty region: name both regions, e.g. us-east-1,us-west-2,62"},
      {"a,a,0\n", "r.csv:1: a is paired with itself: a region is 0 ms from itself"},
      {"a,b,1.5\n", "r.csv:1: latency '1.5' must be whole milliseconds, 0..60000"},
      {"a,b,-1\n", "r.csv:1: latency '-1' must be whole milliseconds, 0..60000"},
      {"a,b,60001\n", "r.csv:1: latency '60001' must be whole milliseconds, 0..60000"},
      {"a,b,1\nb,a,2\n", "r.csv:2: b and a are paired twice"},
      {"\n", "r.csv: no latency line (REGION_A,REGION_B,LATENCY_MS)"},
  };
  for (const auto& [text, message] : cases) {
    auto t = ParseRegionLatency(text, "r.csv");
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().message(), message) << text;
  }
  EXPECT_EQ(ReadRegionLatency("/nonexistent/latency.csv").status().code(), absl::StatusCode::kNotFound);
}

TEST(RegionLatency, NearestFirstPutsTheRegionItselfThenByLatencyThenTheUnknown) {
  const RegionLatency t = *ParseRegionLatency("b,a,80\nb,c,10\nb,d,10\n", "r.csv");
  EXPECT_EQ(NearestFirst(t, "b", {"z", "a", "d", "b", "c", "a"}), (std::vector<std::string>{"b", "c", "d", "a", "z"}));
  EXPECT_EQ(NearestFirst(t, "unknown", {"b", "a"}), (std::vector<std::string>{"a", "b"}));
}

}  // namespace
}  // namespace gpugeek::api
