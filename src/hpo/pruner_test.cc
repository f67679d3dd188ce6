#include "hpo/pruner.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hpo/median_pruner.h"
#include "hpo/successive_halving_pruner.h"

namespace gpugeek::hpo {
namespace {

Trial WithCurve(int64_t number, TrialState state, std::vector<std::pair<int64_t, double>> curve) {
  Trial t{.number = number, .state = state, .params = {0.0}, .intermediate = std::move(curve)};
  if (state == TrialState::kComplete) t.value = t.intermediate.back().second;
  return t;
}

TEST(MedianPrunerTest, PrunesAboveTheMedianOfCompleteTrialsAtTheStep) {
  std::vector<Trial> h = {
      WithCurve(0, TrialState::kComplete, {{1, 0.9}, {2, 0.5}}),
      WithCurve(1, TrialState::kComplete, {{1, 0.8}, {2, 0.4}}),
      WithCurve(2, TrialState::kComplete, {{1, 0.7}, {2, 0.3}}),
      WithCurve(3, TrialState::kRunning, {{1, 0.95}, {2, 0.41}}),
  };
  const MedianPruner median(/*startup_trials=*/3, /*warmup_steps=*/0);
  EXPECT_TRUE(median.ShouldPrune(h[3], h, 0));  // best 0.41 > median 0.4 at step 2
  h[3].intermediate[1].second = 0.39;
  EXPECT_FALSE(median.ShouldPrune(h[3], h, 0));
  const MedianPruner waiting(/*startup_trials=*/4, /*warmup_steps=*/0);
  h[3].intermediate[1].second = 0.9;
  EXPECT_FALSE(waiting.ShouldPrune(h[3], h, 0));  // only 3 complete trials
  const MedianPruner warm(/*startup_trials=*/3, /*warmup_steps=*/3);
  EXPECT_FALSE(warm.ShouldPrune(h[3], h, 0));  // step 2 is within the warm-up
}

TEST(SuccessiveHalvingTest, KeepsTheTopThirdAtEachRung) {
  const SuccessiveHalvingPruner asha({.min_resource = 1, .reduction_factor = 3, .max_resource = 27});
  EXPECT_EQ(asha.RungSteps(100), (std::vector<int64_t>{1, 3, 9}));
  std::vector<Trial> h;
  // Losses at step 1, arriving one by one. With k losses at the rung, a trial continues when it is
  // within the best max(k / 3, 1).
  const std::vector<double> losses = {0.5, 0.7, 0.4, 0.6, 0.45, 0.3};
  const std::vector<bool> pruned = {false, true, false, true, true, false};
  // k=1: best; k=2: 0.7 > 0.5; k=3: 0.4 is best; k=4: 0.6 > 0.4; k=5: 0.45 > 0.4 (best 1 of 5); k=6: 0.3 <= 2nd (0.4)
  for (size_t i = 0; i < losses.size(); ++i) {
    h.push_back(WithCurve(static_cast<int64_t>(i), TrialState::kRunning, {{1, losses[i]}}));
    EXPECT_EQ(asha.ShouldPrune(h.back(), h, 0), pruned[i]) << "trial " << i;
  }
  // A report between rungs decides nothing; reaching rung 3 is judged among the losses at step 3.
  h[0].intermediate.push_back({2, 0.9});
  EXPECT_FALSE(asha.ShouldPrune(h[0], h, 0));
  h[0].intermediate.push_back({3, 0.2});
  EXPECT_FALSE(asha.ShouldPrune(h[0], h, 0));  // the only loss at rung 3 so far
  h[2].intermediate.push_back({3, 0.25});
  EXPECT_TRUE(asha.ShouldPrune(h[2], h, 0));  // 0.25 > 0.2 with 2 at the rung
  // NaN always stops a trial.
  h[5].intermediate.push_back({2, std::nan("")});
  EXPECT_TRUE(asha.ShouldPrune(h[5], h, 0));
}

TEST(HyperbandTest, BracketsFollowThePapersSizes) {
  const HyperbandPruner hb(/*min_resource=*/1, /*max_resource=*/27, /*reduction_factor=*/3);
  ASSERT_EQ(hb.brackets(), 4);
  // Budgets ceil(4 * 3^s / (s + 1)), s = 3..0: 27, 12, 6, 4 of 49.
  std::vector<int> count(4, 0);
  for (int64_t n = 0; n < 49000; ++n) ++count[hb.BracketOf(5, n)];
  EXPECT_NEAR(count[0] / 49000.0, 27.0 / 49, 0.01);
  EXPECT_NEAR(count[1] / 49000.0, 12.0 / 49, 0.01);
  EXPECT_NEAR(count[2] / 49000.0, 6.0 / 49, 0.01);
  EXPECT_NEAR(count[3] / 49000.0, 4.0 / 49, 0.01);
}

TEST(MakePrunerTest, NamesTheField) {
  EXPECT_THAT(std::string(MakePruner({.name = "asha", .min_resource = 0}).status().message()),
              ::testing::HasSubstr("pruner.min_resource"));
  EXPECT_THAT(std::string(MakePruner({.name = "hyperband", .min_resource = 4, .max_resource = 4}).status().message()),
              ::testing::HasSubstr("pruner.max_resource"));
  EXPECT_THAT(std::string(MakePruner({.name = "percentile"}).status().message()),
              ::testing::HasSubstr("choose none, median, asha or hyperband"));
  EXPECT_EQ((*MakePruner({.name = "asha"}))->name(), "asha");
}

}  // namespace
}  // namespace gpugeek::hpo
