#include "sim/fgd_protocol.h"

#include <gtest/gtest.h>

#include <set>

namespace gpugeek::sim {
namespace {

std::vector<TracePod> Pods(int n, int32_t num_gpu, int32_t milli) {
  std::vector<TracePod> pods;
  for (int i = 0; i < n; ++i) pods.push_back({"p" + std::to_string(100 + i), 1000, 1024, num_gpu, milli, ""});
  return pods;
}

TEST(FgdProtocolTest, ShuffleIsSeededAndAPermutation) {
  const auto pods = Pods(50, 1, 500);
  const auto a = FgdArrivalOrder(pods, 42, 0, 100000);
  EXPECT_EQ(a, FgdArrivalOrder(pods, 42, 0, 100000));
  EXPECT_NE(a, FgdArrivalOrder(pods, 43, 0, 100000));
  EXPECT_EQ(std::set<size_t>(a.begin(), a.end()).size(), 50u);
}

TEST(FgdProtocolTest, TuneUpStopsAtTheFirstDrawOverTarget) {
  // 10 pods x 1000 milli = 10000; target 1.3 x 20000 = 26000: clones are appended until the total
  // reaches exactly 26000 (the next draw of 1000 would exceed it).
  const auto pods = Pods(10, 1, 1000);
  const auto order = FgdArrivalOrder(pods, 1, 1.3, 20000);
  EXPECT_EQ(order.size(), 26u);
}

TEST(FgdProtocolTest, TuneUpChecksPerGpuMilliButAddsTheTotal) {
  // 2-GPU pods: the check adds 1000, the total grows by 2000 (the simulator's quirk), so the run
  // may end 1000 over target: 4000 + 2000 k <= 9000 + 1000 -> k = 3 clones, 10000 total.
  const auto pods = Pods(2, 2, 1000);
  const auto order = FgdArrivalOrder(pods, 5, 1.0, 9000);
  EXPECT_EQ(order.size(), 2u + 3u);
}

TEST(FgdProtocolTest, TuneDownRemovesUntilAtOrBelowTarget) {
  const auto pods = Pods(30, 1, 1000);
  const auto order = FgdArrivalOrder(pods, 9, 1.0, 12500);
  EXPECT_EQ(order.size(), 12u);
}

TEST(FgdProtocolTest, WorkloadsAndShapes) {
  EXPECT_EQ(FgdWorkloads().size(), 17u);
  EXPECT_EQ(*WorkloadFileName("gpuspec33"), "openb_pod_list_gpuspec33.csv");
  EXPECT_FALSE(WorkloadFileName("nope").ok());
  const auto s = ToShape({"p", 6000, 12288, 1, 460, "V100M16|V100M32"});
  EXPECT_EQ(s.memory_bytes, 12288ull << 20);
  EXPECT_EQ(s.allowed_models, (std::vector<std::string>{"V100M16", "V100M32"}));
}

}  // namespace
}  // namespace gpugeek::sim
