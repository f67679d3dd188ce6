#include "gateway/balancer.h"

#include <gtest/gtest.h>

#include <map>

namespace gpugeek::gateway {
namespace {

ReplicaEndpoint R(std::string id, int64_t capacity = 1000) {
  return ReplicaEndpoint{.id = std::move(id), .host = "127.0.0.1", .port = 1, .capacity_milli = capacity};
}

TEST(Balancer, RoundRobinSplitIsExactOverEveryHundred) {
  Balancer b(7);
  b.Update({{.name = "v1", .weight_percent = 90, .replicas = {R("a")}},
            {.name = "v2", .weight_percent = 10, .replicas = {R("b")}}},
           {});
  for (int block = 0; block < 100; ++block) {
    int v2 = 0;
    for (int i = 0; i < 100; ++i) v2 += b.PickVersion(std::nullopt)->version == 1 ? 1 : 0;
    ASSERT_EQ(v2, 10) << "block " << block;
  }
}

TEST(Balancer, HeaderStickinessIsStableAndNearWeight) {
  Balancer b(7);
  b.Update({{.name = "v1", .weight_percent = 70, .replicas = {R("a")}},
            {.name = "v2", .weight_percent = 30, .replicas = {R("b")}}},
           {.kind = StickyKind::kHeader, .name = "X-User"});
  int v2 = 0;
  for (int u = 0; u < 10000; ++u) {
    const std::string user = "user-" + std::to_string(u);
    const int first = b.PickVersion(user)->version;
    for (int again = 0; again < 3; ++again) ASSERT_EQ(b.PickVersion(user)->version, first);
    v2 += first;
  }
  // 10,000 users hashed into 100 buckets, 30 of them v2's: 30 % within a point.
  EXPECT_NEAR(v2 / 100.0, 30.0, 1.0);
  EXPECT_EQ(StickyHash("user-1"), StickyHash("user-1"));
  EXPECT_NE(StickyHash("user-1"), StickyHash("user-2"));
}

TEST(Balancer, CookieNamesVersionUntilItTakesNoTraffic) {
  Balancer b(7);
  std::vector<VersionEndpoints> versions = {{.name = "v1", .weight_percent = 50, .replicas = {R("a")}},
                                            {.name = "v2", .weight_percent = 50, .replicas = {R("b")}}};
  b.Update(versions, {.kind = StickyKind::kCookie, .name = "gv"});
  auto c = b.PickVersion(std::nullopt);
  EXPECT_TRUE(c->set_cookie);
  auto pinned = b.PickVersion(std::string_view("v2"));
  EXPECT_EQ(pinned->version, 1);
  EXPECT_FALSE(pinned->set_cookie);
  // Rollback: v2 at 0 % -> its cookie no longer holds, every request goes to v1 and the cookie is reset.
  versions[0].weight_percent = 100;
  versions[1].weight_percent = 0;
  b.Update(versions, {.kind = StickyKind::kCookie, .name = "gv"});
  for (int i = 0; i < 100; ++i) {
    auto r = b.PickVersion(std::string_view("v2"));
    ASSERT_EQ(r->version, 0);
    ASSERT_TRUE(r->set_cookie);
  }
}

TEST(Balancer, PowerOfTwoChoicesPrefersLessLoadedPerCapacity) {
  Balancer b(11);
  b.Update({{.name = "v1", .weight_percent = 100, .replicas = {R("small", 500), R("big", 2000)}}}, {});
  const MonoTime t0{};
  ReplicaState* small = b.replicas(0)[0];
  ReplicaState* big = b.replicas(0)[1];
  // With two replicas P2C compares both: big has 4x the capacity, so it takes requests until its load per capacity
  // passes small's: (out+1)/2000 vs (0+1)/500 -> big takes 4 before small takes one.
  std::map<ReplicaState*, int> taken;
  for (int i = 0; i < 5; ++i) {
    ReplicaState* r = b.PickReplica(0, t0);
    b.Begin(r);
    ++taken[r];
  }
  EXPECT_EQ(taken[big], 4);
  EXPECT_EQ(taken[small], 1);
}

TEST(Balancer, OutlierEjectionAfterFiveFailuresForThirtySecondsTimesN) {
  Balancer b(3);  // Envoy's defaults: 5 consecutive 5xx, 30 s x n, at least one host ejectable
  b.Update({{.name = "v1", .weight_percent = 100, .replicas = {R("a"), R("b")}}}, {});
  ReplicaState* a = b.replicas(0)[0];
  ReplicaState* bb = b.replicas(0)[1];
  MonoTime t{};
  for (int i = 0; i < 4; ++i) {
    b.Begin(a);
    b.Finish(a, Outcome::kServerError, t);
  }
  EXPECT_FALSE(a->ejected_until.has_value());
  b.Begin(a);
  b.Finish(a, Outcome::kConnectFailure, t);
  ASSERT_TRUE(a->ejected_until.has_value());
  EXPECT_EQ(*a->ejected_until - t, std::chrono::seconds(30));
  for (int i = 0; i < 50; ++i) ASSERT_EQ(b.PickReplica(0, t + std::chrono::seconds(29)), bb);
  // The other cannot be ejected too (10 % of 2, at least one): it keeps serving through its failures.
  for (int i = 0; i < 5; ++i) {
    b.Begin(bb);
    b.Finish(bb, Outcome::kServerError, t);
  }
  EXPECT_FALSE(bb->ejected_until.has_value());
  // Back after 30 s; ejected again: 60 s.
  t += std::chrono::seconds(31);
  for (int i = 0; i < 5; ++i) {
    b.Begin(a);
    b.Finish(a, Outcome::kServerError, t);
  }
  EXPECT_EQ(*a->ejected_until - t, std::chrono::seconds(60));
  EXPECT_EQ(b.ejections(), 2u);
}

TEST(Balancer, UpdateKeepsStateByIdAndRetiredReplicasLiveWhileUsed) {
  Balancer b(3);
  b.Update({{.name = "v1", .weight_percent = 100, .replicas = {R("a"), R("b")}}}, {});
  ReplicaState* a = b.replicas(0)[0];
  b.Begin(a);
  b.Update({{.name = "v1", .weight_percent = 100, .replicas = {R("b"), R("c")}}}, {});
  EXPECT_TRUE(a->retired);
  EXPECT_EQ(a->outstanding, 1);
  b.Finish(a, Outcome::kSuccess, MonoTime{});  // frees it
  ReplicaState* kept = b.replicas(0)[0];
  b.Begin(kept);
  b.Update({{.name = "v1", .weight_percent = 100, .replicas = {R("c"), R("b")}}}, {});
  EXPECT_EQ(b.replicas(0)[1], kept);
  EXPECT_EQ(kept->outstanding, 1);
  EXPECT_EQ(b.PickReplica(0, MonoTime{}, {b.replicas(0)[0], kept}), nullptr);
}

}  // namespace
}  // namespace gpugeek::gateway
