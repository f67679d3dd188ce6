#include "api/price_table.h"

#include <gtest/gtest.h>

namespace gpugeek::api {
namespace {

TEST(PriceTable, LinesBecomeMicroUnitsPerModelAndCapacity) {
  auto t = ParsePriceTable(
      "gpu_model,capacity,price\n# list prices, 2024\n\nA100-SXM-80GB,on-demand,4.096\n A100-SXM-80GB , spot , 1.2288\n"
      "H100-SXM-80GB,reserved,2\n",
      "p.csv");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, (PriceTable{{{"A100-SXM-80GB", "on-demand"}, 4'096'000},
                            {{"A100-SXM-80GB", "spot"}, 1'228'800},
                            {{"H100-SXM-80GB", "reserved"}, 2'000'000}}));
}

TEST(PriceTable, BadLinesNameFileLineAndTheFix) {
  const std::pair<const char*, const char*> cases[] = {
      {"A100,spot\n", "p.csv:1: 2 fields; want GPU_MODEL,CAPACITY,PRICE such as A100-SXM-80GB,spot,1.23"},
      {"# c\n,spot,1\n", "p.csv:2: empty GPU model: name a catalog id such as A100-SXM-80GB (gpugeek catalog)"},
      {"A100,preemptible,1\n", "p.csv:1: capacity 'preemptible' must be on-demand, spot or reserved"},
      {"A100,spot,1\nA100,spot,2\n", "p.csv:2: A100 spot is priced twice"},
      {"# nothing\n", "p.csv: no price line (GPU_MODEL,CAPACITY,PRICE)"},
  };
  for (const auto& [text, message] : cases) {
    auto t = ParsePriceTable(text, "p.csv");
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().message(), message) << text;
  }
  auto money = ParsePriceTable("A100,spot,-1\n", "p.csv");
  ASSERT_FALSE(money.ok());
  EXPECT_TRUE(std::string(money.status().message()).starts_with("p.csv:1: price: ")) << money.status();
  EXPECT_EQ(ReadPriceTable("/nonexistent/prices.csv").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpugeek::api
