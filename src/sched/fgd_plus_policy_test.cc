#include "sched/fgd_plus_policy.h"

#include <gtest/gtest.h>

#include "sched/policy_test_util.h"
#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers

TEST(FgdPlusScoreTest, EqualGradientsPreferTheFullerNode) {
  // Whole-GPU typical pods; a whole-GPU request leaves dF = 0 on both nodes (same FGD score), so
  // FGD would let the node order decide. FGDPlus takes the node with the least leftover.
  auto c = Cluster::Create({Node("big", 96000, 8, "G2"), Node("small", 16000, 2, "G2")});
  ASSERT_TRUE(c.ok());
  FgdPlusScore plugin({TypicalPod{0, 1000, 1, "", true, 0, 1.0, 1}});
  Rng rng(1);
  const auto s = ScoreAll(plugin, Compile(Shape(1000, 1, 1000), *c), *c, rng);
  EXPECT_EQ(s[0] >> 20, s[1] >> 20);  // same gradient level
  EXPECT_GT(s[1], s[0]);
}

TEST(FgdPlusScoreTest, GradientDominatesAndShareTakesTheFragment) {
  // "half" has GPU 1 at 500 free: a 500 share there removes the fragment (dF = +500); anywhere else
  // it creates one (dF = -500).
  auto c = Cluster::Create({Node("fresh", 8000, 4, "V100"), Node("half", 64000, 2, "V100")});
  ASSERT_TRUE(c.ok());
  c->Bind(Place(1, 0, {1}, 500));
  FgdPlusScore plugin({TypicalPod{0, 1000, 1, "", true, 0, 1.0, 1}});
  Rng rng(1);
  const PodShape share = Compile(Shape(1000, 1, 500), *c);
  const auto s = ScoreAll(plugin, share, *c, rng);
  EXPECT_EQ(s[1] >> 20, static_cast<int64_t>(50 / (1 + std::exp(-0.5))));
  EXPECT_EQ(s[0] >> 20, static_cast<int64_t>(50 / (1 + std::exp(0.5))));
  CycleState state{&rng};
  const GpuChoice g = plugin.SelectGpus(share, *c, 1, state);
  ASSERT_EQ(g.num, 1);
  EXPECT_EQ(g.gpus[0], 1);
}

}  // namespace
}  // namespace gpugeek::sched
