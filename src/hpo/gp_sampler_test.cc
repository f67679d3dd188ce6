#include "hpo/gp_sampler.h"

#include <cmath>
#include <numbers>
#include <set>

#include "gtest/gtest.h"
#include "hpo/gaussian_process.h"
#include "hpo/normal.h"
#include "hpo/study.h"
#include "hpo/testing/functions.h"

namespace gpugeek::hpo {
namespace {

TEST(GaussianProcessTest, InterpolatesAndIsUncertainAway) {
  const int n = 12;
  Eigen::MatrixXd X(n, 1);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    X(i, 0) = i / 11.0 * 0.5;  // data on [0, 0.5] only
    y[i] = std::sin(6 * X(i, 0));
  }
  const GaussianProcess gp = GaussianProcess::Fit(X, y);
  double mean, var;
  gp.Predict(X.row(5).transpose(), mean, var);
  EXPECT_NEAR(mean, y[5], 1e-2);
  EXPECT_LT(var, 1e-3);
  Eigen::VectorXd far(1);
  far << 1.0;
  double far_mean, far_var;
  gp.Predict(far, far_mean, far_var);
  EXPECT_GT(far_var, 100 * var);
}

TEST(GaussianProcessTest, LogMarginalLikelihoodByHand) {
  // Two points, l = 1, sigma_f^2 = 1, sigma_n^2 = e^-10: K = [[1+s, k], [k, 1+s]], k = Matern52(0.5).
  Eigen::MatrixXd X(2, 1);
  X << 0.0, 0.5;
  Eigen::VectorXd y(2);
  y << 1.0, -1.0;
  GpHyper h;
  h.log_lengthscale = Eigen::VectorXd::Zero(1);
  h.log_signal = 0;
  h.log_noise = -10;
  const auto gp = GaussianProcess::WithHyper(X, y, h);
  ASSERT_TRUE(gp.has_value());
  const double s = std::exp(-10), k = Matern52(0.5), d = 1 + s;
  // y^T K^-1 y = (y1^2 + y2^2) d - 2 y1 y2 k) / (d^2 - k^2); log|K| = log(d^2 - k^2).
  const double quad = (2 * d + 2 * k) / (d * d - k * k);
  const double expected = -0.5 * quad - 0.5 * std::log(d * d - k * k) - std::log(2 * std::numbers::pi);
  EXPECT_NEAR(gp->log_marginal_likelihood(), expected, 1e-9);
  EXPECT_NEAR(Matern52(0.5), (1 + std::sqrt(5) * 0.5 + 5.0 / 12) * std::exp(-std::sqrt(5) * 0.5), 1e-15);
}

TEST(GpSamplerTest, LogExpectedImprovementMatchesTheClosedFormAndStaysFinite) {
  // EI = s (z Phi(z) + phi(z)), z = (best - mean) / s.
  const double best = 0, mean = 0.3, var = 0.04, s = 0.2, z = -1.5;
  EXPECT_NEAR(LogExpectedImprovement(best, mean, var), std::log(s * (z * NormalCdf(z) + NormalPdf(z))), 1e-12);
  // 40 standard deviations away: EI underflows a double, log EI does not, and it keeps decreasing.
  const double a = LogExpectedImprovement(0, 8, 0.04), b = LogExpectedImprovement(0, 9, 0.04);
  EXPECT_TRUE(std::isfinite(a));
  EXPECT_LT(b, a);
  // log phi(-40) + log(1/t^2 - 3/t^4 + 15/t^6 - 105/t^8) + log 0.2, t = 40 (A&S 26.2.12).
  const double t2 = 1600;
  EXPECT_NEAR(a, NormalLogPdf(-40) + std::log(1 / t2 - 3 / (t2 * t2) + 15 / (t2 * t2 * t2)) + std::log(0.2), 1e-6);
}

TEST(GpSamplerTest, FindsBraninsMinimumWithinTwentyFiveTrials) {
  const testing::TestFunction branin = testing::ReferenceFunctions()[0];
  Study study(branin.space, Direction::kMinimize, std::make_unique<GpSampler>(), nullptr, 0);
  for (int i = 0; i < 25; ++i) {
    const Trial& t = study.Ask();
    ASSERT_TRUE(study.Tell(t.number, branin.f(t.params)).ok());
  }
  // Random search needs about 2,000 trials for a regret of 0.05 on Branin.
  EXPECT_LT(*study.Best()->value - branin.minimum, 0.05);
}

// Constant liar: a running trial at the point the GP would choose next counts as the worst loss seen, so
// the next worker is sent elsewhere.
TEST(GpSamplerTest, RunningTrialsSendTheNextWorkerElsewhere) {
  const testing::TestFunction branin = testing::ReferenceFunctions()[0];
  Study study(branin.space, Direction::kMinimize, std::make_unique<GpSampler>(), nullptr, 4);
  for (int i = 0; i < 15; ++i) {
    const Trial& t = study.Ask();
    ASSERT_TRUE(study.Tell(t.number, branin.f(t.params)).ok());
  }
  const GpSampler gp;
  std::vector<Trial> history = study.trials();
  const Point next = gp.Suggest(branin.space, history, 4, 15);
  history.push_back(Trial{.number = 15, .state = TrialState::kRunning, .params = next});
  const Point other = gp.Suggest(branin.space, history, 4, 16);
  double d2 = 0;
  for (size_t i = 0; i < 2; ++i) d2 += std::pow(branin.space.ToUnit(i, next[i]) - branin.space.ToUnit(i, other[i]), 2);
  EXPECT_GT(std::sqrt(d2), 0.01);
}

TEST(GpSamplerTest, HandlesCategoricalAndIntegerParameters) {
  // Few trials: the GP is slow unoptimised (ASan lane). Its quality on this space is measured by bench/hpo.sh.
  const testing::TestFunction mixed = testing::ReferenceFunctions()[4];
  Study study(mixed.space, Direction::kMinimize, std::make_unique<GpSampler>(), nullptr, 0);
  std::set<Point> seen;
  for (int i = 0; i < 16; ++i) {
    const Trial& t = study.Ask();
    EXPECT_EQ(t.params[2], std::round(t.params[2]));  // layers stays an integer
    EXPECT_EQ(t.params[3], std::round(t.params[3]));
    EXPECT_TRUE(t.params[0] >= 0 && t.params[0] <= 3 && t.params[0] == std::round(t.params[0]));  // a choice index
    EXPECT_TRUE(seen.insert(t.params).second) << "trial " << i << " repeats a point";
    ASSERT_TRUE(study.Tell(t.number, mixed.f(t.params)).ok());
  }
}

}  // namespace
}  // namespace gpugeek::hpo
