#include "hpo/report.h"

#include <cmath>

#include "gtest/gtest.h"

namespace gpugeek::hpo {
namespace {

TEST(ReportTest, BestSoFarSkipsRunningAndPruned) {
  std::vector<Trial> t = {
      {.number = 0, .state = TrialState::kPruned, .params = {0}},
      {.number = 1, .state = TrialState::kComplete, .params = {0}, .value = 3.0},
      {.number = 2, .state = TrialState::kComplete, .params = {0}, .value = 5.0},
      {.number = 3, .state = TrialState::kRunning, .params = {0}},
      {.number = 4, .state = TrialState::kComplete, .params = {0}, .value = 1.0},
  };
  const std::vector<double> b = BestSoFar(t);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_TRUE(std::isnan(b[0]));
  EXPECT_EQ(b[1], 3.0);
  EXPECT_EQ(b[2], 3.0);
  EXPECT_EQ(b[3], 3.0);
  EXPECT_EQ(b[4], 1.0);
}

TEST(ReportTest, ImportanceByHand) {
  const SearchSpace space = *SearchSpace::Create({
      {.name = "opt", .kind = ParamKind::kCategorical, .choices = {"a", "b"}},
      {.name = "noise", .kind = ParamKind::kFloat, .low = 0, .high = 1},
  });
  // The loss is decided by opt alone: a -> 1..4, b -> 11..14. noise is unrelated to the loss ranks.
  std::vector<Trial> t;
  const double noise[] = {0.9, 0.1, 0.5, 0.3, 0.2, 0.8, 0.4, 0.6};
  for (int i = 0; i < 8; ++i) {
    t.push_back({.number = i,
                 .state = TrialState::kComplete,
                 .params = {double(i / 4), noise[i]},
                 .value = (i / 4) * 10.0 + i % 4 + 1});
  }
  const std::vector<Importance> imp = ParameterImportance(space, t);
  ASSERT_EQ(imp.size(), 2u);
  EXPECT_EQ(imp[0].param, "opt");
  // Ranks 0..7; groups {0,1,2,3} and {4,5,6,7}: between = 4 * 2 * 2^2 = 32, total = 42; eta^2 = 32 / 42.
  EXPECT_NEAR(imp[0].eta_squared, 32.0 / 42, 1e-12);
  EXPECT_EQ(imp[0].trials, 8);
  // noise: 3 equal-count bins by its rank: ranks of noise 7,0,4,2,1,6,3,5 -> bins 2,0,1,0,0,2,1,1;
  // loss ranks per bin: {1,3,4} mean 8/3, {2,6,7} mean 5, {0,5} mean 2.5; between =
  // 3 (8/3 - 3.5)^2 + 3 (5 - 3.5)^2 + 2 (2.5 - 3.5)^2 = 2.0833 + 6.75 + 2 = 10.8333; eta^2 = 10.8333 / 42.
  EXPECT_NEAR(imp[1].eta_squared, (3 * std::pow(8.0 / 3 - 3.5, 2) + 3 * 2.25 + 2 * 1.0) / 42, 1e-12);
  EXPECT_NEAR(imp[0].share + imp[1].share, 1.0, 1e-12);
}

TEST(ReportTest, TrialsCsvIsExact) {
  const SearchSpace space = *SearchSpace::Create({
      {.name = "opt", .kind = ParamKind::kCategorical, .choices = {"adam", "sgd,nesterov"}},
      {.name = "lr", .kind = ParamKind::kFloat, .low = 1e-5, .high = 1, .log = true},
      {.name = "layers", .kind = ParamKind::kInt, .low = 1, .high = 8},
      {.name = "momentum", .kind = ParamKind::kFloat, .low = 0, .high = 1, .parent = "opt", .when = {"sgd,nesterov"}},
  });
  Study study(space, Direction::kMaximize, *MakeSampler("random"), nullptr, 1);
  ASSERT_TRUE(study.Enqueue({0, 0.001, 3, kInactive}).ok());
  ASSERT_TRUE(study.Enqueue({1, 0.1, 8, 0.9}).ok());
  ASSERT_TRUE(*study.Report(0, 1, 0.5) == false);
  ASSERT_TRUE(study.Tell(0, 0.875).ok());
  ASSERT_TRUE(study.Report(1, 3, 0.25).ok());
  ASSERT_TRUE(study.Prune(1).ok());
  EXPECT_EQ(TrialsCsv(study),
            "number,state,value,opt,lr,layers,momentum,last_step,last_intermediate\n"
            "0,complete,0.875,adam,0.001,3,,1,0.5\n"
            "1,pruned,,\"sgd,nesterov\",0.1,8,0.9,3,0.25\n");
}

}  // namespace
}  // namespace gpugeek::hpo
