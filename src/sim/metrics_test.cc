#include "sim/metrics.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gpugeek::sim {
namespace {

sched::NodeSpec Node(std::string name, int32_t gpus) {
  sched::NodeSpec n;
  n.name = std::move(name);
  n.cpu_milli = 64000;
  n.memory_bytes = 1ull << 40;
  n.gpu_count = gpus;
  n.gpu_model = "T4";
  return n;
}

TEST(FgdRecorderTest, BucketsByRoundedArrivedPercent) {
  // 10 GPUs = 10000 milli. Offer five 1000-milli pods: arrived 10..50 %; the third fails.
  auto c = sched::Cluster::Create({Node("a", 10)});
  ASSERT_TRUE(c.ok());
  FgdRecorder rec(*c, {});
  for (int i = 0; i < 5; ++i) {
    sched::Decision d;
    if (i != 2) {
      sched::Placement p;
      p.node = 0;
      p.num_gpus = 1;
      p.gpu_milli = 1000;
      p.gpus[0] = static_cast<uint8_t>(i);
      c->Bind(p);
      d.scheduled = true;
      d.placements = {p};
    }
    rec.Record(*c, 1000, d);
  }
  const FgdCurves curves = rec.Finish();
  EXPECT_EQ(curves.pods_offered, 5);
  EXPECT_EQ(curves.pods_failed, 1);
  EXPECT_DOUBLE_EQ(curves.alloc_pct[10], 10);
  EXPECT_DOUBLE_EQ(curves.alloc_pct[30], 20);  // the failed pod's event
  EXPECT_DOUBLE_EQ(curves.alloc_pct[50], 40);
  // Empty bucket 11: falls back to [10, 12] = the 10 % event. 20 has its own event.
  EXPECT_DOUBLE_EQ(curves.alloc_pct[11], 10);
  EXPECT_DOUBLE_EQ(curves.alloc_pct[20], 20);
  EXPECT_TRUE(std::isnan(curves.alloc_pct[0]));  // no event within [0, 1]
  // No typical pods: no fragmentation.
  EXPECT_DOUBLE_EQ(curves.frag_pct[50], 0);
}

}  // namespace
}  // namespace gpugeek::sim
