#include "data/near_duplicates.h"

#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace gpugeek::data {
namespace {

// Words w<from> .. w<to - 1>: all distinct, so the shingles of two such texts overlap exactly where
// their word ranges do.
std::string Words(int from, int to, const char* separator = " ") {
  std::string s;
  for (int i = from; i < to; ++i) s += fmt::format("{}w{}", i == from ? "" : separator, i);
  return s;
}

// 20 bands x 5 rows: pairs at J >= 0.8 become candidates with probability >= 0.9997, so the verdicts
// below do not hang on the seed.
NearDuplicateOptions Options() {
  NearDuplicateOptions o;
  o.lsh = {.bands = 20, .rows = 5, .seed = 1};
  o.threads = 2;
  return o;
}

NearDuplicateResult Find(const std::vector<std::string>& texts, const NearDuplicateOptions& o = Options()) {
  std::vector<std::string_view> views(texts.begin(), texts.end());
  return FindNearDuplicates(SketchDocuments(views, o), o.threshold);
}

TEST(NearDuplicates, ExactCopiesNearCopiesAndUnrelatedText) {
  std::string edited = Words(0, 100);
  edited.replace(edited.find("w50 "), 3, "changed");
  const NearDuplicateResult r = Find({
      Words(0, 100), Words(0, 100, ",\n  ") + ".",  // the same words: an exact copy once normalised
      edited,                                       // one word of 100 changed: 5 of 96 5-grams, J = 91 / 101
      Words(1000, 1100),                            // unrelated
  });
  ASSERT_EQ(r.verdicts.size(), 4u);
  EXPECT_EQ(r.verdicts[0].verdict, Verdict::kKept);
  EXPECT_EQ(r.verdicts[1].verdict, Verdict::kExactDuplicate);
  EXPECT_EQ(r.verdicts[1].duplicate_of, 0u);
  EXPECT_EQ(r.verdicts[2].verdict, Verdict::kNearDuplicate);
  EXPECT_EQ(r.verdicts[2].duplicate_of, 0u);
  EXPECT_DOUBLE_EQ(r.verdicts[2].jaccard, 91.0 / 101.0);
  EXPECT_EQ(r.verdicts[3].verdict, Verdict::kKept);
  EXPECT_EQ(r.kept, 2u);
  EXPECT_EQ(r.exact_duplicates, 1u);
  EXPECT_EQ(r.near_duplicates, 1u);
}

TEST(NearDuplicates, AChainDoesNotGlueUnlikeDocuments) {
  // A = w0..w99, B = w10..w109, C = w20..w119: J(A, B) = J(B, C) = 86 / 106 = 0.81 but J(A, C) = 76 / 116
  // = 0.66. B goes as A's near copy; C stays, being unlike A, the only earlier document kept (clustering
  // by LSH buckets or by union-find over the pairs would put all three in one cluster).
  const NearDuplicateResult r = Find({Words(0, 100), Words(10, 110), Words(20, 120)});
  EXPECT_EQ(r.verdicts[0].verdict, Verdict::kKept);
  EXPECT_EQ(r.verdicts[1].verdict, Verdict::kNearDuplicate);
  EXPECT_DOUBLE_EQ(r.verdicts[1].jaccard, 86.0 / 106.0);
  EXPECT_EQ(r.verdicts[2].verdict, Verdict::kKept);
  EXPECT_EQ(r.kept, 2u);
  // C met A as a candidate only if they collided in a band; if so, the check rejected it.
  EXPECT_EQ(r.candidates_checked - r.candidates_rejected, 1u);
}

TEST(NearDuplicates, TheThresholdIsTheExactJaccardIndex) {
  NearDuplicateOptions o = Options();
  o.threshold = 0.82;  // above 86 / 106
  const NearDuplicateResult r = Find({Words(0, 100), Words(10, 110)}, o);
  EXPECT_EQ(r.verdicts[1].verdict, Verdict::kKept);
  EXPECT_EQ(r.near_duplicates, 0u);
}

TEST(NearDuplicates, TheNearestEarlierKeptDocumentIsNamed) {
  // A = w0..w99, B = w8..w107, C = w9..w108 at threshold 0.9: J(A, B) = 88 / 104 = 0.85, so B is kept;
  // C is nearer to B (J = 95 / 97) than to A (J = 87 / 105 = 0.83, below the threshold anyway).
  NearDuplicateOptions o = Options();
  o.threshold = 0.9;
  const NearDuplicateResult r = Find({Words(0, 100), Words(8, 108), Words(9, 109)}, o);
  EXPECT_EQ(r.verdicts[1].verdict, Verdict::kKept);
  EXPECT_EQ(r.verdicts[2].verdict, Verdict::kNearDuplicate);
  EXPECT_EQ(r.verdicts[2].duplicate_of, 1u);
  EXPECT_DOUBLE_EQ(r.verdicts[2].jaccard, 95.0 / 97.0);
}

TEST(NearDuplicates, AnExactCopyOfANearDuplicateIsAnExactDuplicate) {
  // The exact count does not depend on the threshold: C copies B, which is A's near copy.
  const NearDuplicateResult r = Find({Words(0, 100), Words(10, 110), Words(10, 110)});
  EXPECT_EQ(r.verdicts[1].verdict, Verdict::kNearDuplicate);
  EXPECT_EQ(r.verdicts[2].verdict, Verdict::kExactDuplicate);
  EXPECT_EQ(r.verdicts[2].duplicate_of, 1u);
  EXPECT_EQ(r.exact_duplicates, 1u);
  EXPECT_EQ(r.near_duplicates, 1u);
}

TEST(NearDuplicates, EmptyAndShortDocuments) {
  const NearDuplicateResult r = Find({"", "", "...", "a b", "A, b!"});
  EXPECT_EQ(r.verdicts[0].verdict, Verdict::kKept);
  EXPECT_EQ(r.verdicts[1].verdict, Verdict::kExactDuplicate);
  EXPECT_EQ(r.verdicts[2].verdict, Verdict::kExactDuplicate);  // normalises to ""
  EXPECT_EQ(r.verdicts[3].verdict, Verdict::kKept);
  EXPECT_EQ(r.verdicts[4].verdict, Verdict::kExactDuplicate);
  EXPECT_EQ(r.verdicts[4].duplicate_of, 3u);
}

TEST(NearDuplicates, SketchesDoNotDependOnTheThreadCount) {
  std::vector<std::string> texts;
  for (int i = 0; i < 50; ++i) texts.push_back(Words(i * 3, i * 3 + 40));
  std::vector<std::string_view> views(texts.begin(), texts.end());
  NearDuplicateOptions one = Options();
  one.threads = 1;
  NearDuplicateOptions four = Options();
  four.threads = 4;
  const std::vector<DocumentSketch> a = SketchDocuments(views, one);
  const std::vector<DocumentSketch> b = SketchDocuments(views, four);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].shingles, b[i].shingles);
    EXPECT_EQ(a[i].band_keys, b[i].band_keys);
  }
}

TEST(NearDuplicates, ProgressCountsEveryDocument) {
  std::vector<std::string> texts(100, "x");
  std::vector<std::string_view> views(texts.begin(), texts.end());
  size_t last = 0, total = 0;
  SketchDocuments(views, Options(), [&](size_t done, size_t all) {
    EXPECT_GT(done, last);
    last = done;
    total = all;
  });
  EXPECT_EQ(last, 100u);
  EXPECT_EQ(total, 100u);
}

TEST(NearDuplicates, OptionsOutOfRangeNameTheField) {
  NearDuplicateOptions o;
  o.shingles.n = 0;
  EXPECT_EQ(ValidateNearDuplicateOptions(o).message(),
            "ngram: 0 is outside 1..64; 5 words (or 5 to 9 characters) is usual");
  o = {};
  o.lsh.bands = 0;
  EXPECT_EQ(ValidateNearDuplicateOptions(o).message(), "bands: 0 is outside 1..1024; 14 is usual");
  o = {};
  o.lsh.rows = 65;
  EXPECT_EQ(ValidateNearDuplicateOptions(o).message(), "rows: 65 is outside 1..64; 8 is usual");
  o = {};
  o.threshold = 0;
  EXPECT_EQ(ValidateNearDuplicateOptions(o).message(),
            "threshold: 0 is outside (0, 1]; it is a Jaccard index, 0.8 is usual");
  o = {};
  o.threads = -1;
  EXPECT_FALSE(ValidateNearDuplicateOptions(o).ok());
  EXPECT_TRUE(ValidateNearDuplicateOptions({}).ok());
}

}  // namespace
}  // namespace gpugeek::data
