#include "sched/topology_policy.h"

#include <gtest/gtest.h>

#include "sched/framework.h"
#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using namespace testing;  // NOLINT: test helpers

TEST(NvlinkTopologyTest, MultiGpuShapesStayInOneDomain) {
  NodeSpec split = Node("split", 64000, 4, "A100");
  split.nvlink_domain = {0, 0, 1, 1};
  NodeSpec pair = Node("pair", 64000, 4, "A100");
  pair.nvlink_domain = {0, 0, 1, 1};
  auto c = Cluster::Create({split, pair});
  ASSERT_TRUE(c.ok());
  c->Bind(Place(0, 0, {0}, 1000));
  c->Bind(Place(0, 0, {2}, 1000));     // split: one free GPU in each domain
  c->Bind(Place(1, 0, {0, 1}, 1000));  // pair: domain 1 whole
  const PodShape two = Compile(Shape(0, 2, 1000), *c);
  EXPECT_FALSE(FitsOneNvlinkDomain(two, *c, 0));
  EXPECT_TRUE(FitsOneNvlinkDomain(two, *c, 1));
  const GpuChoice g = BestFitGpus(two, *c, 1);
  EXPECT_EQ(g.num, 2);
  EXPECT_EQ(g.gpus[0], 2);
  EXPECT_EQ(g.gpus[1], 3);

  FrameworkOptions o;
  o.policy = "BestFit";  // alone it would prefer "split" (same leftover, tie order decides)
  o.topology_weight = 10000;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    o.seed = seed;
    auto copy = *c;
    auto fw = Framework::Create(o, &copy);
    ASSERT_TRUE(fw.ok());
    AcceptAllBinder binder;
    auto d = (*fw)->Schedule(Req("r", Shape(0, 2, 1000)), binder);
    ASSERT_TRUE(d.ok() && d->scheduled);
    EXPECT_EQ(d->placements[0].node, 1) << "seed " << seed;
  }
}

}  // namespace
}  // namespace gpugeek::sched
