#include "sched/fgd_policy.h"

#include <gtest/gtest.h>

#include "sched/policy_test_util.h"
#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers

std::vector<TypicalPod> Typical() {
  TypicalPod share{1000, 500, 1, "", true, 0, 0.5, 0};
  TypicalPod whole{2000, 1000, 1, "", true, 0, 0.25, 0};
  TypicalPod cpu{1000, 0, 0, "", true, 0, 0.25, 0};
  return {share, whole, cpu};
}

TEST(FgdScoreTest, SigmoidOfFragDelta) {
  EXPECT_EQ(FgdScoreOfDelta(1000, 1000), 50);
  EXPECT_EQ(FgdScoreOfDelta(550, 350), 54);  // sigmoid(.2) = .5498
  EXPECT_EQ(FgdScoreOfDelta(550, 700), 46);  // sigmoid(-.15) = .4626
}

TEST(FgdScoreTest, ShareGoesToTheGpuThatFragmentsLeast) {
  // Node a: 2 GPUs, GPU 0 has 300 free, F_a = 550 (see frag_test). A 200-milli share on GPU 0
  // leaves [100, 1000], F = .5x100 + .25x100 + .25x1100 = 350 -> 54; on GPU 1 it leaves
  // [300, 800]: the whole-GPU spec no longer fits, F = .5x300 + .25x1100 + .25x1100 = 700 -> 46.
  auto c = Cluster::Create({Node("a", 8000, 2, "T4")});
  ASSERT_TRUE(c.ok());
  c->Bind(Place(0, 0, {0}, 700));
  FgdScore plugin(Typical());
  Rng rng(1);
  const PodShape share = Compile(Shape(1000, 1, 200), *c);
  EXPECT_EQ(ScoreAll(plugin, share, *c, rng), (std::vector<int64_t>{54}));
  CycleState state{&rng};
  const GpuChoice g = plugin.SelectGpus(share, *c, 0, state);
  ASSERT_EQ(g.num, 1);
  EXPECT_EQ(g.gpus[0], 0);
  // The cache follows the node's version: after a change the score is recomputed.
  c->Bind(Place(0, 0, {1}, 1000));
  EXPECT_EQ(ScoreAll(plugin, share, *c, rng), (std::vector<int64_t>{FgdScoreOfDelta(300, 100)}));
}

TEST(FgdScoreTest, WholeGpusUseTheSubtractionOfTheSimulator) {
  auto c = Cluster::Create({Node("a", 8000, 4, "T4")});
  ASSERT_TRUE(c.ok());
  c->Bind(Place(0, 0, {1}, 500));
  std::array<int32_t, kMaxGpusPerNode> after{};
  const int64_t cpu = StateAfter(Compile(Shape(1000, 2, 1000), *c), *c, 0, -1, std::span<int32_t>(after.data(), 4));
  EXPECT_EQ(cpu, 7000);
  EXPECT_EQ(std::vector<int32_t>(after.begin(), after.begin() + 4), (std::vector<int32_t>{0, 500, 0, 1000}));
}

}  // namespace
}  // namespace gpugeek::sched
