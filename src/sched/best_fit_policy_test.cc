#include "sched/best_fit_policy.h"

#include <gtest/gtest.h>

#include "sched/framework.h"
#include "sched/policy_test_util.h"
#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers

TEST(BestFitScoreTest, HandComputedRawScores) {
  // a: 32 cores, 2 GPUs; pod: 0 cores, 1 GPU. leftover = 32/128 x .5 + 1/8 x .5 = .1875 -> 81.
  // b: 128 cores, 8 GPUs: .5 x (128/128) + .5 x (7/8) = .9375 -> 6.
  auto c = Cluster::Create({Node("a", 32000, 2, "T4"), Node("b", 128000, 8, "T4")});
  ASSERT_TRUE(c.ok());
  BestFitScore plugin;
  Rng rng(1);
  EXPECT_EQ(ScoreAll(plugin, Compile(Shape(0, 1, 1000), *c), *c, rng), (std::vector<int64_t>{81, 6}));
  EXPECT_TRUE(plugin.normalize());
}

TEST(BestFitScoreTest, FrameworkPicksLeastLeftoverAndBestFitGpu) {
  auto c = Cluster::Create({Node("big", 128000, 8, "T4"), Node("small", 16000, 2, "T4")});
  ASSERT_TRUE(c.ok());
  c->Bind(Place(1, 0, {1}, 600));
  FrameworkOptions o;
  o.policy = "BestFit";
  auto fw = Framework::Create(o, &*c);
  ASSERT_TRUE(fw.ok());
  AcceptAllBinder binder;
  auto d = (*fw)->Schedule(Req("r", Shape(1000, 1, 300)), binder);
  ASSERT_TRUE(d.ok());
  ASSERT_TRUE(d->scheduled);
  EXPECT_EQ(d->placements[0].node, 1);
  EXPECT_EQ(d->placements[0].gpus[0], 1);  // 400 free: the tightest GPU that fits
}

}  // namespace
}  // namespace gpugeek::sched
