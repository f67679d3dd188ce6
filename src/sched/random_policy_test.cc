#include "sched/random_policy.h"

#include <gtest/gtest.h>

#include <set>

#include "sched/policy_test_util.h"
#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers

TEST(RandomScoreTest, OneNodeScoresMaxAndAllAreReachable) {
  auto c = Cluster::Create({Node("a", 8000, 2, "T4"), Node("b", 8000, 2, "T4"), Node("c", 8000, 2, "T4")});
  ASSERT_TRUE(c.ok());
  RandomScore plugin;
  Rng rng(7);
  std::set<int> chosen;
  for (int i = 0; i < 100; ++i) {
    const auto s = ScoreAll(plugin, Compile(Shape(1000, 1, 500), *c), *c, rng);
    ASSERT_EQ(std::count(s.begin(), s.end(), kMaxNodeScore), 1);
    ASSERT_EQ(std::count(s.begin(), s.end(), kMinNodeScore), 2);
    chosen.insert(static_cast<int>(std::find(s.begin(), s.end(), kMaxNodeScore) - s.begin()));
  }
  EXPECT_EQ(chosen.size(), 3u);
}

TEST(RandomScoreTest, ShareGoesToARandomFittingGpu) {
  auto c = Cluster::Create({Node("a", 8000, 4, "T4")});
  ASSERT_TRUE(c.ok());
  c->Bind(Place(0, 0, {1}, 900));  // GPU 1 has 100 left: never fits 500
  RandomScore plugin;
  Rng rng(3);
  CycleState state{&rng};
  std::set<int> gpus;
  for (int i = 0; i < 200; ++i) {
    const GpuChoice g = plugin.SelectGpus(Compile(Shape(0, 1, 500), *c), *c, 0, state);
    ASSERT_EQ(g.num, 1);
    gpus.insert(g.gpus[0]);
  }
  EXPECT_EQ(gpus, (std::set<int>{0, 2, 3}));
}

}  // namespace
}  // namespace gpugeek::sched
