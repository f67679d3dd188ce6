#include "sched/cluster.h"

#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using testing::Node;
using testing::Place;

TEST(ClusterTest, BindAndReleaseKeepSummariesExact) {
  auto c = Cluster::Create({Node("a", 8000, 4, "V100"), Node("b", 4000, 0, "")});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->total_gpu_milli(), 4000);
  EXPECT_EQ(c->model_id(1), -1);
  EXPECT_EQ(c->FindModel("V100"), 0);
  const uint32_t v0 = c->version(0);
  const Placement share = Place(0, 1000, {2}, 300, kGiB);
  c->Bind(share);
  EXPECT_EQ(c->cpu_free(0), 7000);
  EXPECT_EQ(c->memory_free(0), 255 * kGiB);
  EXPECT_EQ(c->gpu_free(0)[2], 700);
  EXPECT_EQ(c->gpu_free_total(0), 3700);
  EXPECT_EQ(c->full_free_gpus(0), 3);
  EXPECT_EQ(c->max_gpu_free(0), 1000);
  EXPECT_EQ(c->class_count(0, GpuClassOf(1, 300)), 1);
  EXPECT_EQ(c->distinct_gpu_classes(0), 1);
  EXPECT_NE(c->version(0), v0);
  const Placement whole = Place(0, 1000, {0, 1, 3}, 1000);
  c->Bind(whole);
  EXPECT_EQ(c->full_free_gpus(0), 0);
  EXPECT_EQ(c->max_gpu_free(0), 700);
  EXPECT_EQ(c->distinct_gpu_classes(0), 2);
  EXPECT_EQ(c->allocated_gpu_milli(), 3300);
  c->Release(share);
  c->Release(whole);
  EXPECT_EQ(c->gpu_free_total(0), 4000);
  EXPECT_EQ(c->cpu_free(0), 8000);
  EXPECT_EQ(c->distinct_gpu_classes(0), 0);
  EXPECT_EQ(c->allocated_gpu_milli(), 0);
}

TEST(ClusterTest, CanBindRejectsOverCommit) {
  auto c = Cluster::Create({Node("a", 8000, 2, "T4")});
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->CanBind(Place(0, 9000, {}, 0)));      // CPU
  EXPECT_FALSE(c->CanBind(Place(0, 0, {0, 0}, 1000)));  // same GPU twice
  EXPECT_FALSE(c->CanBind(Place(0, 0, {2}, 100)));      // no such GPU
  EXPECT_FALSE(c->CanBind(Place(1, 0, {}, 0)));         // no such node
  c->Bind(Place(0, 0, {0}, 600));
  EXPECT_FALSE(c->CanBind(Place(0, 0, {0}, 500)));  // only 400 left
  EXPECT_TRUE(c->CanBind(Place(0, 0, {0}, 400)));
  EXPECT_DEATH(c->Bind(Place(0, 0, {0}, 500)), "over-commits");
  EXPECT_DEATH(c->Release(Place(0, 0, {1}, 500)), "never bound");
}

TEST(ClusterTest, CreateRejectsBadNodes) {
  EXPECT_FALSE(Cluster::Create({Node("a", 1, 1, "T4"), Node("a", 1, 1, "T4")}).ok());
  EXPECT_FALSE(Cluster::Create({Node("", 1, 1, "T4")}).ok());
  EXPECT_FALSE(Cluster::Create({Node("a", 1, 17, "T4")}).ok());
  NodeSpec no_model = Node("a", 1, 2, "T4");
  no_model.gpu_model = "";
  EXPECT_FALSE(Cluster::Create({no_model}).ok());
  NodeSpec bad_domains = Node("a", 1, 2, "T4");
  bad_domains.nvlink_domain = {0};
  EXPECT_FALSE(Cluster::Create({bad_domains}).ok());
}

}  // namespace
}  // namespace gpugeek::sched
