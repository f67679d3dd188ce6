// Autoscaler: KPA's decisions (Knative Serving pkg/autoscaler/scaling/autoscaler.go and config-autoscaler
// defaults: target 70 = 100 x 70 %, stable window 60 s, panic window 10 % = 6 s, panic threshold 200 %, max
// scale-up rate 1000, max scale-down rate 2, scale-to-zero grace 30 s), hand-computed per case.
#include "sched/autoscaler.h"

#include <gtest/gtest.h>

namespace gpugeek::sched {
namespace {

using std::chrono::seconds;

MonoTime At(double s) { return MonoTime(std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s))); }

// One sample per second from `from` (inclusive) to `to` (exclusive) with `concurrency` in flight.
void Load(Autoscaler& a, int from, int to, double concurrency) {
  for (int t = from; t < to; ++t) a.Record({.at = At(t), .value = {concurrency, 0, 0, 0}});
}

TEST(AutoscalerTest, SteadyLoadNeedsTheAverageOverTheTarget) {
  Autoscaler a{AutoscalerSpec{}};
  Load(a, 0, 60, 140);
  ScaleDecision d = a.Decide(At(59.5), 2);
  EXPECT_EQ(d.desired, 2);  // ceil(140 / 70)
  EXPECT_FALSE(d.panicking);
  EXPECT_DOUBLE_EQ(d.stable_average, 140);
  EXPECT_EQ(d.reason, "140.0 in flight over 60 s (target 70 per replica)");
  Load(a, 60, 120, 141);
  EXPECT_EQ(a.Decide(At(119.5), 2).desired, 3);  // ceil(141 / 70)
}

TEST(AutoscalerTest, ABurstPanicsAndNeverScalesDownUntilAStableWindowAfterIt) {
  Autoscaler a{AutoscalerSpec{}};
  Load(a, 0, 54, 10);
  Load(a, 54, 60, 350);  // 1 -> 50 clients of 7 requests each, say
  ScaleDecision d = a.Decide(At(59.5), 1);
  // Panic window: 350 -> ceil(350 / 70) = 5 >= 2 x 1 ready. Stable: (54 x 10 + 6 x 350) / 60 = 44 -> 1.
  EXPECT_TRUE(d.panicking);
  EXPECT_EQ(d.desired, 5);
  EXPECT_DOUBLE_EQ(d.panic_average, 350);
  EXPECT_DOUBLE_EQ(d.stable_average, 44);
  EXPECT_EQ(d.reason, "panic: 350.0 in flight over 6 s (target 70 per replica)");

  Load(a, 60, 100, 10);  // the burst is over
  d = a.Decide(At(99.5), 5);
  EXPECT_TRUE(d.panicking);  // within 60 s of the last crossing (59.5 s)
  EXPECT_EQ(d.desired, 5);   // never down while panicking
  Load(a, 100, 120, 10);
  d = a.Decide(At(119.6), 5);  // 60.1 s after: panic over, stable decides, halved at most (5 / 2 -> 2)
  EXPECT_FALSE(d.panicking);
  EXPECT_EQ(d.desired, 2);
  // The stable window (seconds 60..119, all at 10) wants ceil(10 / 70) = 1, the floor with 2 ready is 2 / 2.
  EXPECT_EQ(a.Decide(At(119.7), 2).desired, 1);
}

TEST(AutoscalerTest, ScaleRatesBoundEachStep) {
  AutoscalerSpec spec;
  spec.max_scale_up_rate = 2;
  Autoscaler up{spec};
  Load(up, 0, 60, 1000);
  EXPECT_EQ(up.Decide(At(59.5), 1).desired, 2);  // ceil(1000 / 70) = 15, at most 2 x 1
  EXPECT_EQ(up.Decide(At(59.6), 4).desired, 8);

  Autoscaler down{AutoscalerSpec{}};
  Load(down, 0, 60, 70);
  EXPECT_EQ(down.Decide(At(59.5), 8).desired, 4);  // wants 1; at least floor(8 / 2)
}

TEST(AutoscalerTest, ANewIdleServiceKeepsItsReplicasForAWholeStableWindowThenTheGrace) {
  Autoscaler a{AutoscalerSpec{}};  // stable window 60 s, grace 30 s
  // Deployed with 1 replica (initial), still starting (0 ready), no request yet: seconds 0..t span less than the
  // window until t = 59.
  for (int t = 0; t < 59; ++t) {
    a.Record({.at = At(t), .value = {0, 0, 0, 0}});
    const ScaleDecision d = a.Decide(At(t + 0.5), 0, 1);
    ASSERT_EQ(d.desired, 1) << "at " << t << ": " << d.reason;
  }
  // From 59.5 the samples span the window, all idle; the last decision above zero was at 58.5: the grace (30 s)
  // keeps the replica, now ready, until 88.5.
  for (int t = 59; t < 90; ++t) a.Record({.at = At(t), .value = {0, 0, 0, 0}});
  EXPECT_EQ(a.Decide(At(59.5), 1, 1).desired, 1);
  EXPECT_EQ(a.Decide(At(88.4), 1, 1).desired, 1);
  const ScaleDecision idle = a.Decide(At(89.5), 1, 1);
  EXPECT_EQ(idle.desired, 0);
  EXPECT_EQ(idle.reason, "idle: no load over the stable window");
}

TEST(AutoscalerTest, IdleScalesToZeroOnlyAfterTheWindowAndTheGrace) {
  Autoscaler a{AutoscalerSpec{}};
  Load(a, 0, 10, 35);
  EXPECT_EQ(a.Decide(At(9.5), 1).desired, 1);
  Load(a, 10, 70, 0);  // idle from second 10
  // At 69.5 the stable window (seconds 10..69) is all idle: 0 wanted; the last decision above zero, at 9.5,
  // was 60 s ago, past the 30 s grace -> 0.
  ScaleDecision idle = a.Decide(At(69.5), 1);
  EXPECT_EQ(idle.desired, 0);
  EXPECT_EQ(idle.reason, "idle: no load over the stable window");

  Autoscaler b{AutoscalerSpec{}};
  Load(b, 0, 60, 35);
  for (int t = 60; t < 120; ++t) {  // idle, deciding every second as the controller does
    b.Record({.at = At(t), .value = {0, 0, 0, 0}});
    const ScaleDecision d = b.Decide(At(t + 0.5), 1);
    if (t < 119) {
      EXPECT_EQ(d.desired, 1) << "at " << t;  // seconds 60..t still see load in the window until t = 119
    }
  }
  // The window is idle from 119.5 on; the last decision above zero was at 118.5: grace until 148.5.
  EXPECT_EQ(b.Decide(At(119.5), 1).desired, 1);
  EXPECT_EQ(b.Decide(At(148.4), 1).desired, 1);
  EXPECT_EQ(b.Decide(At(148.6), 1).desired, 0);
  // From zero, one buffered request (the activator reports it as in flight) wants a replica at once.
  b.Record({.at = At(149), .value = {1, 0, 0, 0}});
  ScaleDecision wake = b.Decide(At(149.1), 0);
  EXPECT_EQ(wake.desired, 1);
}

TEST(AutoscalerTest, LlmSignalsScaleOnWhatSaturatesTheEngine) {
  AutoscalerSpec spec;
  spec.target = {70, 0, 0, 0.8};  // concurrency, and KV-cache use 80 % per replica
  Autoscaler a{spec};
  for (int t = 0; t < 60; ++t) a.Record({.at = At(t), .value = {20, 0, 0, 2.7}});  // 3 replicas at 90 %
  ScaleDecision d = a.Decide(At(59.5), 3);
  EXPECT_EQ(d.desired, 4);  // ceil(2.7 / 0.8); concurrency alone would say 1
  EXPECT_EQ(d.deciding, ScaleSignal::kKvCacheUse);
  EXPECT_EQ(d.reason, "2.7 KV-cache use over 60 s (target 0.8 per replica)");
}

TEST(AutoscalerTest, MinAndMaxReplicasBoundTheResult) {
  AutoscalerSpec spec;
  spec.min_replicas = 2;
  spec.max_replicas = 3;
  Autoscaler a{spec};
  EXPECT_EQ(a.Decide(At(0), 0).desired, 2);  // no load reported yet: the floor
  Load(a, 0, 60, 0);
  EXPECT_EQ(a.Decide(At(59.5), 2).desired, 2);
  Load(a, 60, 120, 700);
  EXPECT_EQ(a.Decide(At(119.5), 2).desired, 3);
}

TEST(AutoscalerTest, ShortHistoryAveragesOverWhatWasSeenAndSamplesInOneSecondAverage) {
  Autoscaler a{AutoscalerSpec{}};
  a.Record({.at = At(0.1), .value = {100, 0, 0, 0}});
  a.Record({.at = At(0.6), .value = {200, 0, 0, 0}});  // second 0 averages 150
  a.Record({.at = At(1.2), .value = {150, 0, 0, 0}});
  a.Record({.at = At(0.9), .value = {9999, 0, 0, 0}});  // out of order: dropped
  const ScaleDecision d = a.Decide(At(1.5), 1);
  EXPECT_DOUBLE_EQ(d.stable_average, 150);  // 2 seconds of history, not 60
  EXPECT_EQ(d.desired, 3);                  // ceil(150 / 70) = 3 >= 2 x 1: panic
  EXPECT_TRUE(d.panicking);
}

TEST(AutoscalerTest, SpecsOutsideTheirRangesNameTheField) {
  AutoscalerSpec spec;
  spec.target = {0, 0, 0, 0};
  EXPECT_NE(ValidateAutoscalerSpec(spec).message().find("autoscaling.target"), std::string_view::npos);
  spec = AutoscalerSpec{};
  spec.target[1] = -1;
  EXPECT_NE(ValidateAutoscalerSpec(spec).message().find("autoscaling.target.queue_depth"), std::string_view::npos);
  spec = AutoscalerSpec{};
  spec.max_replicas = 1;
  spec.min_replicas = 2;
  EXPECT_NE(ValidateAutoscalerSpec(spec).message().find("max_replicas"), std::string_view::npos);
  spec = AutoscalerSpec{};
  spec.stable_window = seconds(2);
  EXPECT_NE(ValidateAutoscalerSpec(spec).message().find("stable_window"), std::string_view::npos);
  spec = AutoscalerSpec{};
  spec.max_scale_down_rate = 1;
  EXPECT_FALSE(ValidateAutoscalerSpec(spec).ok());
  EXPECT_TRUE(ValidateAutoscalerSpec(AutoscalerSpec{}).ok());
}

}  // namespace
}  // namespace gpugeek::sched
