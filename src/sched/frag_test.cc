#include "sched/frag.h"

#include <gtest/gtest.h>

#include "sched/test_util.h"

namespace gpugeek::sched {
namespace {

using testing::Node;
using testing::Place;
using testing::Shape;

TypicalPod Typical(int64_t cpu, int32_t num, int32_t milli, double p, std::string models = "", uint64_t mask = 0) {
  TypicalPod t;
  t.cpu_milli = cpu;
  t.num_gpus = num;
  t.gpu_milli = milli;
  t.probability = p;
  t.models = models;
  t.any_model = models.empty();
  t.model_mask = mask;
  return t;
}

// Node a: 2 x T4, 8 cores, GPU 0 has 300 milli free. Node b: 4 x V100, 1.5 cores free.
// Typical pods: a 500-milli share (p .5), one whole GPU with 2 cores (p .25), CPU-only (p .25).
class FragTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = Cluster::Create({Node("a", 8000, 2, "T4"), Node("b", 16000, 4, "V100"), Node("c", 4000, 0, "")});
    ASSERT_TRUE(c.ok());
    cluster_ = std::make_unique<Cluster>(*std::move(c));
    cluster_->Bind(Place(0, 0, {0}, 700));
    cluster_->Bind(Place(1, 14500, {}, 0));
    typical_ = {Typical(1000, 1, 500, 0.5), Typical(2000, 1, 1000, 0.25), Typical(1000, 0, 0, 0.25)};
  }
  std::unique_ptr<Cluster> cluster_;
  std::vector<TypicalPod> typical_;
};

TEST_F(FragTest, HandComputedPerPodFragments) {
  // a: the share fits (GPU 1), GPU 0's 300 < 500 is stranded.
  EXPECT_EQ(NodePodFragMilli(0, 8000, cluster_->gpu_free(0), typical_[0]), 300);
  // a: a whole GPU fits on GPU 1; GPU 0's 300 is stranded.
  EXPECT_EQ(NodePodFragMilli(0, 8000, cluster_->gpu_free(0), typical_[1]), 300);
  // CPU-only pods strand every idle GPU.
  EXPECT_EQ(NodePodFragMilli(0, 8000, cluster_->gpu_free(0), typical_[2]), 1300);
  // b: 1.5 cores free < 2 cores: the whole-GPU pod does not fit, all 4000 milli count.
  EXPECT_EQ(NodePodFragMilli(1, 1500, cluster_->gpu_free(1), typical_[1]), 4000);
  EXPECT_EQ(NodePodFragMilli(1, 1500, cluster_->gpu_free(1), typical_[0]), 0);
}

TEST_F(FragTest, HandComputedNodeFragmentation) {
  // F_a = .5 x 300 + .25 x 300 + .25 x 1300 = 550.
  EXPECT_DOUBLE_EQ(NodeFragMilli(*cluster_, 0, typical_), 550);
  // F_b = .5 x 0 + .25 x 4000 + .25 x 4000 = 2000.
  EXPECT_DOUBLE_EQ(NodeFragMilli(*cluster_, 1, typical_), 2000);
  // A node without GPUs has nothing to fragment.
  EXPECT_DOUBLE_EQ(NodeFragMilli(*cluster_, 2, typical_), 0);
  FragTracker tracker(*cluster_, typical_);
  EXPECT_DOUBLE_EQ(tracker.total(), 2550);
  cluster_->Bind(Place(0, 0, {1}, 1000));  // a: only 300 milli left anywhere
  tracker.Refresh(*cluster_, 0);
  // Nothing fits a any more: every typical pod strands its 300 milli.
  EXPECT_DOUBLE_EQ(tracker.node(0), 300);
  EXPECT_DOUBLE_EQ(tracker.total(), 2300);
}

TEST_F(FragTest, HandCountedUnallocatableGpus) {
  // a: GPU 0 has 300 free, below every typical share (500, 1000): stranded. GPU 1 (1000 free) takes
  // either GPU pod.
  EXPECT_EQ(NodeUnallocatableGpus(*cluster_, 0, typical_), 1);
  // b: 1.5 cores free; the whole-GPU pod (2 cores) does not fit, but the 500-milli share (1 core)
  // does, on any of the 4 idle GPUs.
  EXPECT_EQ(NodeUnallocatableGpus(*cluster_, 1, typical_), 0);
  // c: no GPUs.
  EXPECT_EQ(NodeUnallocatableGpus(*cluster_, 2, typical_), 0);
  // Only the whole-GPU pod: b's 4 idle GPUs are stranded by its CPU; a's GPU 0 by its 300 milli.
  const std::vector<TypicalPod> whole = {Typical(2000, 1, 1000, 1.0)};
  EXPECT_EQ(NodeUnallocatableGpus(*cluster_, 1, whole), 4);
  EXPECT_EQ(NodeUnallocatableGpus(*cluster_, 0, whole), 1);
  // A 2-GPU pod needs two GPUs with 1000 free: a has one, so both of a's GPUs with free milli count.
  EXPECT_EQ(NodeUnallocatableGpus(*cluster_, 0, std::vector<TypicalPod>{Typical(1000, 2, 1000, 1.0)}), 2);
  // A GPU with nothing free is allocated, not stranded.
  cluster_->Bind(Place(0, 0, {1}, 1000));
  EXPECT_EQ(NodeUnallocatableGpus(*cluster_, 0, typical_), 1);
  // No typical mix yet: nothing to judge by.
  EXPECT_EQ(NodeUnallocatableGpus(*cluster_, 0, {}), 0);
  // CPU-only typical pods use no GPU: every GPU with free milli is stranded.
  EXPECT_EQ(NodeUnallocatableGpus(*cluster_, 1, std::vector<TypicalPod>{Typical(1000, 0, 0, 1.0)}), 4);
}

TEST_F(FragTest, ModelConstraintMakesNodeInaccessible) {
  const TypicalPod t4_only = Typical(1000, 1, 500, 1.0, "T4", uint64_t{1} << cluster_->FindModel("T4"));
  EXPECT_EQ(NodePodFragMilli(0, 8000, cluster_->gpu_free(0), t4_only), 300);
  EXPECT_EQ(NodePodFragMilli(1, 16000, cluster_->gpu_free(1), t4_only), 4000);  // V100: no access
  EXPECT_EQ(NodeUnallocatableGpus(1, 16000, cluster_->gpu_free(1), std::vector<TypicalPod>{t4_only}), 4);
  EXPECT_EQ(NodeUnallocatableGpus(0, 8000, cluster_->gpu_free(0), std::vector<TypicalPod>{t4_only}), 1);
}

TEST(TypicalPodsTest, TopSpecsUntilPopularityAndRenormalised) {
  auto c = Cluster::Create({Node("a", 8000, 2, "T4")});
  ASSERT_TRUE(c.ok());
  std::vector<ResourceShape> pods;
  for (int i = 0; i < 6; ++i) pods.push_back(Shape(1000, 1, 500));
  for (int i = 0; i < 3; ++i) pods.push_back(Shape(2000, 1, 1000, {"T4"}));
  pods.push_back(Shape(4000, 0, 0));
  // 80 %: 6 + 3 = 9 of 10 pods >= 8, so two specs, p = 6/9 and 3/9.
  const auto t = ComputeTypicalPods(pods, 80, *c);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].gpu_milli, 500);
  EXPECT_DOUBLE_EQ(t[0].probability, 6.0 / 9);
  EXPECT_EQ(t[1].models, "T4");
  EXPECT_FALSE(t[1].any_model);
  EXPECT_EQ(t[1].model_mask, 1u);
  EXPECT_DOUBLE_EQ(t[1].probability, 3.0 / 9);
  EXPECT_EQ(ComputeTypicalPods(pods, 100, *c).size(), 3u);
  EXPECT_TRUE(ComputeTypicalPods({}, 95, *c).empty());
}

TEST(TypicalPodsTest, EqualCountsOrderLargerSpecFirst) {
  auto c = Cluster::Create({Node("a", 8000, 2, "T4")});
  ASSERT_TRUE(c.ok());
  const std::vector<ResourceShape> pods = {Shape(1000, 1, 200), Shape(3000, 1, 100)};
  const auto t = ComputeTypicalPods(pods, 50, *c);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].cpu_milli, 3000);
}

}  // namespace
}  // namespace gpugeek::sched
