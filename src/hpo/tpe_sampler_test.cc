#include "hpo/tpe_sampler.h"

#include <cmath>

#include "gtest/gtest.h"
#include "hpo/parzen_estimator.h"
#include "hpo/study.h"

namespace gpugeek::hpo {
namespace {

SearchSpace OneFloat(double low, double high) {
  return *SearchSpace::Create({{.name = "x", .kind = ParamKind::kFloat, .low = low, .high = high}});
}

double LogPdfAt(const ParzenEstimator& pe, double x) { return pe.LogPdf(Point{x}); }

// Expected values: Optuna 3.1.0's _ParzenEstimator on the same observations (consider_prior, magic clip,
// no endpoints, default weights): python3 -c "from optuna.samplers._tpe.parzen_estimator import ..."
TEST(ParzenEstimatorTest, MatchesOptunaUnivariate) {
  const SearchSpace space = OneFloat(0, 1);
  std::vector<Point> obs = {{0.2}, {0.5}, {0.9}, {0.1}};
  std::vector<const Point*> ptrs;
  for (const Point& p : obs) ptrs.push_back(&p);
  const std::vector<double> w = TpeDefaultWeights(obs.size());
  const std::vector<size_t> group = {0};
  const ParzenEstimator pe(space, group, ptrs, w, {});
  EXPECT_NEAR(LogPdfAt(pe, 0.05), -0.84175227, 1e-7);
  EXPECT_NEAR(LogPdfAt(pe, 0.3), -0.74643471, 1e-7);
  EXPECT_NEAR(LogPdfAt(pe, 0.7), -0.86307479, 1e-7);
  EXPECT_NEAR(LogPdfAt(pe, 0.95), -1.03101695, 1e-7);
}

TEST(ParzenEstimatorTest, MatchesOptunaWithRampWeights) {
  const SearchSpace space = OneFloat(-5, 10);
  std::vector<Point> obs;
  for (int i = 0; i < 30; ++i) obs.push_back({0.01 + 0.98 * i / 29});
  std::vector<const Point*> ptrs;
  for (const Point& p : obs) ptrs.push_back(&p);
  const std::vector<double> w = TpeDefaultWeights(obs.size());
  const std::vector<size_t> group = {0};
  const ParzenEstimator pe(space, group, ptrs, w, {});
  EXPECT_NEAR(LogPdfAt(pe, 0.05), -1.31655037, 1e-7);
  EXPECT_NEAR(LogPdfAt(pe, 0.3), -1.06730368, 1e-7);
  EXPECT_NEAR(LogPdfAt(pe, 0.7), -1.03650231, 1e-7);
  EXPECT_NEAR(LogPdfAt(pe, 0.95), -1.24771461, 1e-7);
}

TEST(TpeTest, GammaAndWeights) {
  EXPECT_EQ(TpeGamma(10), 1u);
  EXPECT_EQ(TpeGamma(11), 2u);
  EXPECT_EQ(TpeGamma(100), 10u);
  EXPECT_EQ(TpeGamma(1000), 25u);
  const std::vector<double> w = TpeDefaultWeights(30);  // ramp over the oldest 5: linspace(1/30, 1, 5)
  ASSERT_EQ(w.size(), 30u);
  EXPECT_DOUBLE_EQ(w[0], 1.0 / 30);
  EXPECT_DOUBLE_EQ(w[2], (1.0 / 30 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(w[4], 1.0);
  EXPECT_DOUBLE_EQ(w[29], 1.0);
}

}  // namespace
}  // namespace gpugeek::hpo
