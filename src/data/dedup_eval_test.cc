#include "data/dedup_eval.h"

#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace gpugeek::data {
namespace {

std::string Words(int from, int to) {
  std::string s;
  for (int i = from; i < to; ++i) s += fmt::format("{}w{}", i == from ? "" : " ", i);
  return s;
}

TEST(DedupEvaluation, AgainstBruteForceOnAHandComputedChain) {
  // A = w0..w99, B = w10..w109, C = w20..w119, and an exact copy of A (left out of the comparison).
  // J(A, B) = J(B, C) = 86 / 106 (bin [0.80, 0.85)), J(A, C) = 76 / 116 (bin [0.65, 0.70)).
  const std::vector<std::string> texts{Words(0, 100), Words(10, 110), Words(0, 100), Words(20, 120)};
  std::vector<std::string_view> views(texts.begin(), texts.end());
  NearDuplicateOptions o;
  o.lsh = {.bands = 20, .rows = 5, .seed = 1};
  o.threads = 2;
  const std::vector<DocumentSketch> sketches = SketchDocuments(views, o);
  const NearDuplicateResult found = FindNearDuplicates(sketches, o.threshold);
  const DedupEvaluation e = EvaluateNearDuplicates(sketches, found, o);

  EXPECT_EQ(e.documents, 3u);
  EXPECT_EQ(e.pairs, 3u);
  // True pairs: (A, B) and (B, C); LSH at 20 x 5 finds both (probability 0.9998 each).
  EXPECT_EQ(e.finder_pairs.truth, 2u);
  EXPECT_EQ(e.finder_pairs.both, 2u);
  EXPECT_DOUBLE_EQ(e.finder_pairs.precision(), 1.0);
  EXPECT_DOUBLE_EQ(e.finder_pairs.recall(), 1.0);
  EXPECT_GE(e.lsh_pairs.found, 2u);
  // Brute force removes B only (C's one true partner, B, is gone), as the finder does.
  EXPECT_EQ(e.removed.truth, 1u);
  EXPECT_EQ(e.removed.found, 1u);
  EXPECT_EQ(e.removed.both, 1u);
  EXPECT_DOUBLE_EQ(e.removed.f1(), 1.0);

  ASSERT_EQ(e.s_curve.size(), 20u);
  EXPECT_DOUBLE_EQ(e.s_curve[16].lo, 0.8);
  EXPECT_EQ(e.s_curve[16].pairs, 2u);
  EXPECT_EQ(e.s_curve[16].candidates, 2u);
  EXPECT_NEAR(e.s_curve[16].theoretical(), CandidateProbability(86.0 / 106.0, 20, 5), 1e-12);
  EXPECT_EQ(e.s_curve[13].pairs, 1u);
  uint64_t pairs = 0;
  for (const JaccardBin& b : e.s_curve) pairs += b.pairs;
  EXPECT_EQ(pairs, 3u);
}

TEST(DedupEvaluation, ScoresOfEmptySets) {
  const Score none;
  EXPECT_DOUBLE_EQ(none.precision(), 1.0);
  EXPECT_DOUBLE_EQ(none.recall(), 1.0);
  EXPECT_DOUBLE_EQ(none.f1(), 1.0);
  const Score half{.truth = 4, .found = 2, .both = 2};
  EXPECT_DOUBLE_EQ(half.precision(), 1.0);
  EXPECT_DOUBLE_EQ(half.recall(), 0.5);
  EXPECT_DOUBLE_EQ(half.f1(), 2.0 / 3.0);
}

}  // namespace
}  // namespace gpugeek::data
