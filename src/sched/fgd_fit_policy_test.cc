#include "sched/fgd_fit_policy.h"

#include <cmath>

#include <gtest/gtest.h>

#include "sched/policy_test_util.h"
#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers

constexpr int64_t kLevel = FgdFitScore::kBonusRange;

TypicalPod Typical(int64_t cpu, int32_t num, int32_t milli, double p, uint64_t model_mask = 0) {
  return TypicalPod{cpu, milli, num, "", model_mask == 0, model_mask, p, 1};
}

TEST(FgdFitScoreTest, PrimaryAndBonusByHand) {
  EXPECT_EQ(FgdFitPrimary(0, 0), 25);           // int(50 x 0.5)
  EXPECT_EQ(FgdFitPrimary(500, 0), 31);         // int(50 x sigmoid(0.5)) = int(31.12)
  EXPECT_EQ(FgdFitPrimary(0, 2000), 5);         // int(50 x sigmoid(-2)) = int(5.96)
  EXPECT_EQ(FgdFitPrimary(0, 1e9), 0);          // saturates
  EXPECT_EQ(FgdFitBonus(15000, 1000), 225000);  // 256000 - 15000 - 16 x 1000
  EXPECT_EQ(FgdFitBonus(95000, 7000), 49000);
  EXPECT_EQ(FgdFitBonus(128000, 8000), 0);
  EXPECT_EQ(FgdFitBonus(128000, 16000), 0);  // floored
}

TEST(FgdFitScoreTest, EqualGradientsPreferTheFullerNode) {
  // One whole GPU leaves dF = 0 on both nodes (primary 25); FGD would let the node order decide.
  auto c = Cluster::Create({Node("big", 96000, 8, "G2"), Node("small", 16000, 2, "G2")});
  ASSERT_TRUE(c.ok());
  FgdFitScore plugin({Typical(0, 1, 1000, 1.0)});
  Rng rng(1);
  const auto s = ScoreAll(plugin, Compile(Shape(1000, 1, 1000), *c), *c, rng);
  EXPECT_EQ(s[0], 25 * kLevel + 49000);   // 95000 CPU, 7000 GPU left
  EXPECT_EQ(s[1], 25 * kLevel + 225000);  // 15000 CPU, 1000 GPU left
}

TEST(FgdFitScoreTest, ModelsConstrainedPodsNeedGetNoBonus) {
  // 2 % of the typical pods need a T4: best fit would fill the small T4 node first (bonus 225000);
  // FGDFit keeps its bonus at 0 so the unconstrained pod goes to the G2 node. Primaries are equal:
  // dF = 0 on t4; on g2 the T4 pod counts all free GPU, dF = 0.02 x 1000 = 20, int(50 x 0.505) = 25.
  auto c = Cluster::Create({Node("t4", 16000, 2, "T4"), Node("g2", 96000, 8, "G2")});
  ASSERT_TRUE(c.ok());
  const int t4 = c->FindModel("T4");
  ASSERT_GE(t4, 0);
  FgdFitScore plugin({Typical(0, 1, 1000, 0.98), Typical(0, 1, 1000, 0.02, uint64_t{1} << t4)});
  Rng rng(1);
  const auto s = ScoreAll(plugin, Compile(Shape(1000, 1, 1000), *c), *c, rng);
  EXPECT_EQ(s[0], 25 * kLevel);
  EXPECT_EQ(s[1], 25 * kLevel + 49000);
}

TEST(FgdFitScoreTest, GradientDominatesTheBonus) {
  // A CPU-only pod of 3 cores on "tight" leaves 1 core, too little for the 2-core typical GPU pod:
  // both of its GPUs become fragmented (dF = -2000, primary 5) although it would fit best there.
  auto c = Cluster::Create({Node("tight", 4000, 2, "G2"), Node("roomy", 64000, 8, "G2")});
  ASSERT_TRUE(c.ok());
  FgdFitScore plugin({Typical(2000, 1, 1000, 1.0)});
  Rng rng(1);
  const auto s = ScoreAll(plugin, Compile(Shape(3000, 0, 0), *c), *c, rng);
  EXPECT_EQ(s[0], 5 * kLevel + 223000);  // 1000 CPU, 2000 GPU left
  EXPECT_EQ(s[1], 25 * kLevel + 67000);  // 61000 CPU, 8000 GPU left
  EXPECT_GT(s[1], s[0]);
}

TEST(FgdFitScoreTest, SharesScoreAndChooseTheGpuAsFgd) {
  // "half" has GPU 1 at 500 free: a 500 share there removes the fragment (dF = +500); on "fresh"
  // it creates one (dF = -500). Scores are FGD's int(100 x sigmoid(dF / 1000)).
  auto c = Cluster::Create({Node("fresh", 8000, 4, "V100"), Node("half", 64000, 2, "V100")});
  ASSERT_TRUE(c.ok());
  c->Bind(Place(1, 0, {1}, 500));
  FgdFitScore plugin({Typical(0, 1, 1000, 1.0)});
  Rng rng(1);
  const PodShape share = Compile(Shape(1000, 1, 500), *c);
  const auto s = ScoreAll(plugin, share, *c, rng);
  EXPECT_EQ(s[0], static_cast<int64_t>(100 / (1 + std::exp(0.5))));   // 37
  EXPECT_EQ(s[1], static_cast<int64_t>(100 / (1 + std::exp(-0.5))));  // 62
  CycleState state{&rng};
  const GpuChoice g = plugin.SelectGpus(share, *c, 1, state);
  ASSERT_EQ(g.num, 1);
  EXPECT_EQ(g.gpus[0], 1);
}

}  // namespace
}  // namespace gpugeek::sched
