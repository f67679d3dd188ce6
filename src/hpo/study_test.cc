#include "hpo/study.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hpo/testing/functions.h"

namespace gpugeek::hpo {
namespace {

using ::testing::HasSubstr;

TEST(StudyTest, ReportTellAndTheirErrors) {
  const SearchSpace space = *SearchSpace::Create({{.name = "x", .low = 0, .high = 1}});
  Study study(space, Direction::kMaximize, *MakeSampler("tpe"), *MakePruner({.name = "none"}), 1);
  const int64_t n = study.Ask().number;
  EXPECT_EQ(*study.Report(n, 1, 0.5), false);
  EXPECT_THAT(std::string(study.Report(n, 1, 0.6).status().message()), HasSubstr("steps must increase"));
  EXPECT_EQ(study.Report(7, 1, 0.5).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(study.Tell(n, 0.75).ok());
  EXPECT_EQ(study.Tell(n, 0.8).code(), absl::StatusCode::kFailedPrecondition);
  // Maximising: samplers see the loss -0.75; the value reads back as 0.75.
  EXPECT_EQ(*study.trials()[0].value, -0.75);
  EXPECT_EQ(study.ValueOf(*study.Best()->value), 0.75);
  const int64_t m = study.Ask().number;
  ASSERT_TRUE(study.Tell(m, std::nan("")).ok());
  EXPECT_EQ(study.trials()[1].state, TrialState::kFailed);
  EXPECT_THAT(std::string(MakeSampler("bohb").status().message()), HasSubstr("choose auto, random, tpe"));
}

TEST(StudyTest, EnqueuedPointsAreChecked) {
  const SearchSpace space = *SearchSpace::Create({{.name = "x", .kind = ParamKind::kInt, .low = 0, .high = 4}});
  Study study(space, Direction::kMinimize, *MakeSampler("random"), nullptr, 1);
  EXPECT_TRUE(study.Enqueue({3}).ok());
  EXPECT_THAT(std::string(study.Enqueue({9}).status().message()), HasSubstr("params.x: 9 is outside [0, 4]"));
}

// Every sampler is a pure function of the history: a study restored from its first trials continues
// exactly as the original did.
TEST(StudyTest, RestoredStudiesContinueIdentically) {
  for (const char* name : {"random", "tpe", "tpe-multivariate", "cmaes", "gp", "auto"}) {
    const testing::TestFunction fn = testing::ReferenceFunctions()[4];  // mixed: categorical and integer
    Study a(fn.space, Direction::kMinimize, *MakeSampler(name), nullptr, 42);
    for (int i = 0; i < 16; ++i) {
      const Trial& t = a.Ask();
      ASSERT_TRUE(a.Tell(t.number, fn.f(t.params)).ok());
    }
    Study b(fn.space, Direction::kMinimize, *MakeSampler(name), nullptr, 42);
    ASSERT_TRUE(b.Restore({a.trials().begin(), a.trials().begin() + 12}).ok());
    for (int i = 12; i < 16; ++i) {
      const Trial& t = b.Ask();
      EXPECT_EQ(t.params, a.trials()[i].params) << name << " trial " << i;
      ASSERT_TRUE(b.Tell(t.number, fn.f(t.params)).ok());
    }
  }
}

TEST(StudyTest, PrunedTrialsStopAndCount) {
  const SearchSpace space = *SearchSpace::Create({{.name = "x", .low = 0, .high = 1}});
  Study study(space, Direction::kMinimize, *MakeSampler("random"), *MakePruner({.name = "asha", .max_resource = 9}), 3);
  int pruned = 0;
  for (int i = 0; i < 30; ++i) {
    const Trial& t = study.Ask();
    const int64_t n = t.number;
    const double x = t.params[0];
    bool stopped = false;
    for (int step = 1; step <= 9 && !stopped; ++step) {
      if (*study.Report(n, step, x + 1.0 / step)) {
        ASSERT_TRUE(study.Prune(n).ok());
        stopped = true;
        ++pruned;
      }
    }
    if (!stopped) {
      ASSERT_TRUE(study.Tell(n, x).ok());
    }
  }
  EXPECT_GT(pruned, 15);
  EXPECT_LT(*study.Best()->value, 0.1);
}

}  // namespace
}  // namespace gpugeek::hpo
