#include "data/minhash.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "common/rng.h"
#include "data/shingles.h"

namespace gpugeek::data {
namespace {

// 1 - (1 - J^r)^b at datatrove's 14 x 8: 0.924 at J = 0.8 and 0.053 at J = 0.5 (datatrove's MinhashConfig
// documentation); 1 at J = 1, 0 at J = 0.
TEST(CandidateProbability, DatatroveDefaults) {
  EXPECT_NEAR(CandidateProbability(0.8, 14, 8), 0.9236, 5e-4);
  EXPECT_NEAR(CandidateProbability(0.5, 14, 8), 0.0533, 5e-4);
  EXPECT_DOUBLE_EQ(CandidateProbability(1.0, 14, 8), 1.0);
  EXPECT_DOUBLE_EQ(CandidateProbability(0.0, 14, 8), 0.0);
}

// The choices the header names, and the target met.
TEST(ChooseLsh, LeastFalsePositiveAreaThatCatchesPairsAtTheThreshold) {
  auto pick = [](double t) {
    const LshOptions o = ChooseLsh(t);
    return std::pair(o.bands, o.rows);
  };
  EXPECT_EQ(pick(0.8), std::pair(16, 6));
  EXPECT_EQ(pick(0.7), std::pair(17, 4));
  EXPECT_EQ(pick(0.5), std::pair(35, 3));
  for (double t : {0.3, 0.5, 0.7, 0.8, 0.9, 0.95}) {
    const LshOptions o = ChooseLsh(t);
    EXPECT_LE(o.bands * o.rows, 128) << t;
    EXPECT_GE(CandidateProbability(t, o.bands, o.rows), 0.99) << t;
  }
  // Out of reach with 4 functions at 0.99 for J = 0.5: the best try, 4 bands of 1 (1 - 0.5^4 = 0.9375).
  EXPECT_EQ(ChooseLsh(0.5, 4).bands, 4);
  EXPECT_EQ(ChooseLsh(0.5, 4).rows, 1);
}

std::vector<uint64_t> Range(int from, int to) {
  std::set<uint64_t> s;
  for (int i = from; i < to; ++i) s.insert(Hash64(std::to_string(i)));
  return {s.begin(), s.end()};
}

TEST(MinHasher, AgreementEstimatesJaccard) {
  // A = 0..999, B = 500..1499: J = 500 / 1500. With 1024 functions the share of equal minima has a
  // standard error of sqrt(J (1 - J) / 1024) = 0.015.
  const MinHasher hasher({.bands = 64, .rows = 16, .seed = 7});
  const std::vector<uint32_t> a = hasher.Signature(Range(0, 1000));
  const std::vector<uint32_t> b = hasher.Signature(Range(500, 1500));
  ASSERT_EQ(a.size(), 1024u);
  int equal = 0;
  for (size_t i = 0; i < a.size(); ++i) equal += a[i] == b[i];
  EXPECT_NEAR(equal / 1024.0, 1.0 / 3.0, 0.06);
  // The same set, the same signature; a different seed, different functions.
  EXPECT_EQ(hasher.Signature(Range(0, 1000)), a);
  EXPECT_NE(MinHasher({.bands = 64, .rows = 16, .seed = 8}).Signature(Range(0, 1000)), a);
}

// The S-curve on independent pairs: for each J in {0.3, 0.5, 0.7, 0.8}, 1000 pairs of random 200-element
// sets sharing s elements (J = s / (400 - s)); the count that become candidates at 14 x 8 is within 4
// standard deviations of the sum of 1 - (1 - J^8)^14 over the pairs.
TEST(MinHasher, CandidateRateFollowsTheSCurveOnIndependentPairs) {
  const MinHasher hasher({.bands = 14, .rows = 8, .seed = 3});
  Rng rng(11);
  for (int shared : {92, 133, 165, 178}) {
    double expected = 0, variance = 0;
    int candidates = 0;
    for (int pair = 0; pair < 1000; ++pair) {
      std::vector<uint64_t> a, b;
      for (int i = 0; i < shared; ++i) a.push_back(rng.engine()());
      b = a;
      for (int i = shared; i < 200; ++i) {
        a.push_back(rng.engine()());
        b.push_back(rng.engine()());
      }
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      const double j = Jaccard(a, b);
      const double p = CandidateProbability(j, 14, 8);
      expected += p;
      variance += p * (1 - p);
      const std::vector<uint64_t> ka = hasher.BandKeys(hasher.Signature(a));
      const std::vector<uint64_t> kb = hasher.BandKeys(hasher.Signature(b));
      bool collide = false;
      for (size_t band = 0; band < ka.size(); ++band) collide |= ka[band] == kb[band];
      candidates += collide;
    }
    EXPECT_NEAR(candidates, expected, 4 * std::sqrt(variance)) << shared << " shared of 200";
  }
}

TEST(MinHasher, EmptySetAndBandKeys) {
  const MinHasher hasher({.bands = 3, .rows = 2, .seed = 1});
  EXPECT_EQ(hasher.Signature({}), std::vector<uint32_t>(6, 0xFFFFFFFFu));
  const std::vector<uint32_t> sig{1, 2, 1, 2, 9, 9};
  const std::vector<uint64_t> keys = hasher.BandKeys(sig);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_NE(keys[0], keys[1]);  // equal values in different bands: different buckets
  const std::vector<uint32_t> other{1, 2, 5, 5, 9, 9};
  const std::vector<uint64_t> other_keys = hasher.BandKeys(other);
  EXPECT_EQ(other_keys[0], keys[0]);
  EXPECT_NE(other_keys[1], keys[1]);
  EXPECT_EQ(other_keys[2], keys[2]);
}

TEST(CandidatePairs, PairsSharingAnyBandOnceEach) {
  // Documents 0 and 2 share band 0; 1 and 2 share band 1; 3 has no keys.
  const std::vector<std::vector<uint64_t>> keys{{10, 20}, {11, 21}, {10, 21}, {}};
  EXPECT_EQ(CandidatePairs(keys), (std::vector<std::pair<uint32_t, uint32_t>>{{0, 2}, {1, 2}}));
  EXPECT_TRUE(CandidatePairs({}).empty());
}

}  // namespace
}  // namespace gpugeek::data
