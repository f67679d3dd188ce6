#include "sched/gpu_packing_policy.h"

#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers

TEST(GpuPackingScoreTest, ThreeTiers) {
  auto c =
      Cluster::Create({Node("idle8", 96000, 8, "G2"), Node("idle2", 16000, 2, "T4"), Node("used", 96000, 8, "G2")});
  ASSERT_TRUE(c.ok());
  c->Bind(Place(2, 0, {3}, 600));  // GPU 3 of "used" has 400 free
  const PodShape share = Compile(Shape(1000, 1, 300), *c);
  const PodShape whole2 = Compile(Shape(1000, 2, 1000), *c);
  // Idle nodes: max(33 - #GPUs, #GPUs).
  EXPECT_EQ(GpuPackingNodeScore(share, *c, 0), 25);
  EXPECT_EQ(GpuPackingNodeScore(share, *c, 1), 31);
  // Share on the used GPU (40 % free): 100 - 40 / 10 = 96.
  EXPECT_EQ(GpuPackingNodeScore(share, *c, 2), 96);
  // Two whole GPUs on a used node: 50 - 2 = 48.
  EXPECT_EQ(GpuPackingNodeScore(whole2, *c, 2), 48);
  // CPU-only pods: 0.
  EXPECT_EQ(GpuPackingNodeScore(Compile(Shape(1000, 0, 0), *c), *c, 2), 0);
}

}  // namespace
}  // namespace gpugeek::sched
