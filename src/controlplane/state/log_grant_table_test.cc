#include "controlplane/state/log_grant_table.h"

#include <gtest/gtest.h>

namespace gpugeek::controlplane {
namespace {

MonoTime At(int seconds) { return MonoTime{} + std::chrono::seconds(seconds); }

TEST(LogGrantTable, OnlyTheGrantedNodeMayWriteEachMemberAtEachEpoch) {
  LogGrantTable t;
  t.Place("j-1", "acme", 0, {"a", "b"});
  EXPECT_TRUE(t.WriterTenant("j-1", 0, 0, "a").has_value());
  EXPECT_TRUE(t.WriterTenant("j-1", 0, 1, "b").has_value());
  EXPECT_FALSE(t.WriterTenant("j-1", 0, 1, "a").has_value());
  EXPECT_FALSE(t.WriterTenant("j-1", 1, 0, "a").has_value());  // no epoch 1 yet
  EXPECT_FALSE(t.WriterTenant("j-2", 0, 0, "a").has_value());
  // Requeued and placed again at epoch 1 on c: epoch 0's late bytes still land from a.
  t.Place("j-1", "acme", 1, {"c"});
  EXPECT_TRUE(t.WriterTenant("j-1", 0, 0, "a").has_value());
  EXPECT_TRUE(t.WriterTenant("j-1", 1, 0, "c").has_value());
  const std::optional<LogGrant> g = t.Get("j-1");
  ASSERT_TRUE(g.has_value());
  EXPECT_EQ(g->ranks, 1);
  EXPECT_TRUE(g->live);
  EXPECT_EQ(g->members.size(), 3u);
}

TEST(LogGrantTable, ReleasedGrantsExpireInReleaseOrderUnlessPlacedOrReleasedAgain) {
  LogGrantTable t;
  t.Place("j-1", "acme", 0, {"a"});
  t.Place("j-2", "acme", 0, {"a"});
  t.Place("j-3", "acme", 0, {"a"});
  t.Release("j-1", At(10));
  t.Release("j-2", At(20));
  t.Release("j-3", At(30));
  t.Place("j-2", "acme", 1, {"b"});  // requeued: live again, its release entry must not drop it
  t.Release("j-3", At(40));          // released again later: expires by the later time only
  EXPECT_EQ(t.Expire(At(9)), 0u);
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.Expire(At(35)), 1u);  // j-1 only
  EXPECT_FALSE(t.Get("j-1").has_value());
  EXPECT_TRUE(t.Get("j-2").has_value());
  EXPECT_TRUE(t.Get("j-3").has_value());
  EXPECT_EQ(t.Expire(At(40)), 1u);  // j-3 at its second release
  EXPECT_FALSE(t.Get("j-3").has_value());
  EXPECT_EQ(t.size(), 1u);
  t.Erase("j-2");
  EXPECT_EQ(t.size(), 0u);
  EXPECT_EQ(t.Expire(At(1000)), 0u);
}

}  // namespace
}  // namespace gpugeek::controlplane
