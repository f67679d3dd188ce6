#include "sched/dot_product_policy.h"

#include <gtest/gtest.h>

#include "sched/policy_test_util.h"
#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers

TEST(DotProductScoreTest, HandComputed) {
  // a: 64 cores, 4 GPUs free. Pod: 16 cores, 1 GPU.
  // dot = (64/128)(16/128) + (4/8)(1/8) = .0625 + .0625 = .125; score = int(100 (1 - .0625)) = 93.
  // b: 128 cores, 8 GPUs: dot = .125 + .125 = .25 -> int(87.5) = 87. Fuller a wins.
  auto c = Cluster::Create({Node("a", 64000, 4, "T4"), Node("b", 128000, 8, "T4")});
  ASSERT_TRUE(c.ok());
  DotProductScore plugin;
  Rng rng(1);
  EXPECT_EQ(ScoreAll(plugin, Compile(Shape(16000, 1, 1000), *c), *c, rng), (std::vector<int64_t>{93, 87}));
}

}  // namespace
}  // namespace gpugeek::sched
