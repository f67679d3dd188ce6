#include "sched/gpu_clustering_policy.h"

#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers

TEST(GpuClusteringScoreTest, FourTiers) {
  auto c = Cluster::Create({Node("shares", 96000, 8, "G2"), Node("mixed", 96000, 8, "G2"), Node("idle", 96000, 8, "G2"),
                            Node("whole", 96000, 8, "G2")});
  ASSERT_TRUE(c.ok());
  c->Bind(Place(0, 0, {0}, 500));
  c->Bind(Place(1, 0, {0}, 500));
  c->Bind(Place(1, 0, {1}, 1000));
  c->Bind(Place(3, 0, {0, 1, 2, 3}, 1000));
  const PodShape share = Compile(Shape(1000, 1, 200), *c);
  // 25 x (8000 - free) / 8000 + tier base.
  EXPECT_EQ(GpuClusteringNodeScore(share, *c, 0), 25 * 500 / 8000 + 75);   // only shares: 76
  EXPECT_EQ(GpuClusteringNodeScore(share, *c, 1), 25 * 1500 / 8000 + 50);  // shares and 1-GPU: 54
  EXPECT_EQ(GpuClusteringNodeScore(share, *c, 2), 25);                     // idle
  EXPECT_EQ(GpuClusteringNodeScore(share, *c, 3), 25 * 4000 / 8000);       // other class only: 12
  EXPECT_EQ(GpuClusteringNodeScore(Compile(Shape(1000, 0, 0), *c), *c, 0), 0);
}

}  // namespace
}  // namespace gpugeek::sched
