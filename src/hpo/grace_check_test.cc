#include "hpo/grace_check.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpugeek::hpo {
namespace {

TEST(GraceCheckTest, SpearmanByHand) {
  EXPECT_DOUBLE_EQ(SpearmanRho({1, 2, 3, 4}, {10, 20, 30, 40}), 1.0);
  EXPECT_DOUBLE_EQ(SpearmanRho({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  // ranks (0,1,2,3) vs (1,0,3,2): 1 - 6 * 4 / (4 * 15) = 0.6
  EXPECT_NEAR(SpearmanRho({1, 2, 3, 4}, {2, 1, 4, 3}), 0.6, 1e-12);
  EXPECT_DOUBLE_EQ(SpearmanRho({1, 1, 1}, {1, 2, 3}), 0.0);
}

// Twelve trials whose step-1 losses rank them backwards while step 3 already agrees with the end.
std::vector<Trial> Curves() {
  std::vector<Trial> h;
  for (int i = 0; i < 12; ++i) {
    const double final_loss = 0.1 * i;
    h.push_back(Trial{.number = i,
                      .state = TrialState::kComplete,
                      .params = {0.0},
                      .value = final_loss,
                      .intermediate = {{1, 2.0 - 0.1 * i}, {3, final_loss + 0.5}, {9, final_loss}}});
  }
  return h;
}

TEST(GraceCheckTest, FlagsAGracePeriodWhoseRanksDisagree) {
  const GraceCheck c = CheckGracePeriod(Curves(), {1, 3}, 9);
  ASSERT_EQ(c.rungs.size(), 2u);
  EXPECT_EQ(c.rungs[0].pairs, 12);
  EXPECT_DOUBLE_EQ(c.rungs[0].rho, -1.0);
  EXPECT_DOUBLE_EQ(c.rungs[1].rho, 1.0);
  EXPECT_TRUE(c.too_small);
  EXPECT_EQ(c.suggested_grace, 3);
  EXPECT_THAT(c.message, ::testing::HasSubstr("grace period 1 is too small"));
  EXPECT_THAT(c.message, ::testing::HasSubstr("step 3 agrees"));
}

TEST(GraceCheckTest, SaysNothingWithoutEnoughTrials) {
  std::vector<Trial> h = Curves();
  h.resize(5);
  const GraceCheck c = CheckGracePeriod(h, {1, 3}, 9);
  EXPECT_FALSE(c.too_small);
  EXPECT_TRUE(c.message.empty());
}

}  // namespace
}  // namespace gpugeek::hpo
