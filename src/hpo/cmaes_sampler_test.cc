#include "hpo/cmaes_sampler.h"

#include <cmath>

#include "gtest/gtest.h"
#include "hpo/study.h"

namespace gpugeek::hpo {
namespace {

SearchSpace Box(int dims) {
  std::vector<ParamSpec> params;
  for (int i = 0; i < dims; ++i) params.push_back({.name = "x" + std::to_string(i), .low = -1, .high = 1});
  return *SearchSpace::Create(std::move(params));
}

double Sphere(const Point& x) {
  double s = 0;
  for (double v : x) s += (v - 0.3) * (v - 0.3);
  return s;
}

TEST(CmaEsTest, ConvergesOnASphere) {
  Study study(Box(4), Direction::kMinimize, std::make_unique<CmaEsSampler>(), nullptr, 1);
  for (int i = 0; i < 300; ++i) {
    const Trial& t = study.Ask();
    ASSERT_TRUE(study.Tell(t.number, Sphere(t.params)).ok());
  }
  // Random search's best of 300 in 4-D is about 0.05 away in squared distance; CMA-ES closes in.
  EXPECT_LT(*study.Best()->value, 1e-4);
}

TEST(CmaEsTest, ReplaysTheSameSearchFromTheHistory) {
  const SearchSpace space = Box(3);
  Study a(space, Direction::kMinimize, std::make_unique<CmaEsSampler>(), nullptr, 9);
  for (int i = 0; i < 40; ++i) {
    const Trial& t = a.Ask();
    ASSERT_TRUE(a.Tell(t.number, Sphere(t.params)).ok());
  }
  // A search restored from the first 25 trials proposes what the original did next.
  Study b(space, Direction::kMinimize, std::make_unique<CmaEsSampler>(), nullptr, 9);
  ASSERT_TRUE(b.Restore({a.trials().begin(), a.trials().begin() + 25}).ok());
  for (int i = 25; i < 40; ++i) {
    const Trial& t = b.Ask();
    EXPECT_EQ(t.params, a.trials()[i].params) << "trial " << i;
    ASSERT_TRUE(b.Tell(t.number, Sphere(t.params)).ok());
  }
}

TEST(CmaEsTest, ParallelWorkersGetDistinctSlotsThenExtras) {
  const SearchSpace space = Box(2);  // lambda = 4 + floor(3 ln 2) = 6
  Study study(space, Direction::kMinimize, std::make_unique<CmaEsSampler>(), nullptr, 3);
  for (int i = 0; i < 10; ++i) {
    const Trial& t = study.Ask();
    ASSERT_TRUE(study.Tell(t.number, Sphere(t.params)).ok());
  }
  // Eight asked at once: six generation slots, then two extra draws; all distinct.
  std::set<Point> points;
  for (int i = 0; i < 8; ++i) points.insert(study.Ask().params);
  EXPECT_EQ(points.size(), 8u);
}

}  // namespace
}  // namespace gpugeek::hpo
