#include "data/shingles.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace gpugeek::data {
namespace {

TEST(NormalizeText, LowersAsciiAndFoldsEveryOtherRunIntoOneSpace) {
  EXPECT_EQ(NormalizeText("Copyright (C) 2020,\n  Foo"), "copyright c 2020 foo");
  EXPECT_EQ(NormalizeText("  --Hello--  "), "hello");
  EXPECT_EQ(NormalizeText(""), "");
  EXPECT_EQ(NormalizeText("\t\n;;"), "");
  // Bytes of UTF-8 sequences are kept as they are (no Unicode case folding): "Ünïcode—dash".
  EXPECT_EQ(NormalizeText("\xC3\x9Cn\xC3\xAF"
                          "code\xE2\x80\x94"
                          "Dash!"),
            "\xC3\x9Cn\xC3\xAF"
            "code\xE2\x80\x94"
            "dash");
}

std::vector<uint64_t> Sorted(std::vector<uint64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(Shingles, WordNGramsAreDistinctAndSorted) {
  // "a b c a b": 2-grams "a b", "b c", "c a", "a b" -> three distinct.
  EXPECT_EQ(Shingles("a b c a b", {ShingleUnit::kWord, 2}), Sorted({Hash64("a b"), Hash64("b c"), Hash64("c a")}));
  EXPECT_EQ(Shingles("one two three", {ShingleUnit::kWord, 3}), std::vector<uint64_t>{Hash64("one two three")});
}

TEST(Shingles, ShortAndEmptyTexts) {
  EXPECT_EQ(Shingles("a b", {ShingleUnit::kWord, 5}), std::vector<uint64_t>{Hash64("a b")});
  EXPECT_EQ(Shingles("ab", {ShingleUnit::kChar, 3}), std::vector<uint64_t>{Hash64("ab")});
  EXPECT_TRUE(Shingles("", {ShingleUnit::kWord, 5}).empty());
}

TEST(Shingles, CharacterNGramsAreBytes) {
  EXPECT_EQ(Shingles("abcd", {ShingleUnit::kChar, 3}), Sorted({Hash64("abc"), Hash64("bcd")}));
  EXPECT_EQ(Shingles("aaaa", {ShingleUnit::kChar, 2}), std::vector<uint64_t>{Hash64("aa")});
}

TEST(Jaccard, IntersectionOverUnion) {
  EXPECT_DOUBLE_EQ(Jaccard({1, 2, 3}, {2, 3, 4}), 0.5);
  EXPECT_DOUBLE_EQ(Jaccard({1, 2, 3}, {1, 2, 3}), 1.0);
  EXPECT_DOUBLE_EQ(Jaccard({1}, {2}), 0.0);
  EXPECT_DOUBLE_EQ(Jaccard({}, {1}), 0.0);
  EXPECT_DOUBLE_EQ(Jaccard({}, {}), 1.0);
}

TEST(Hash64, IsXxh3WithSeedZero) {
  // XXH3_64bits of the empty input (xxHash's own test vector, tests/sanity_test_vectors.h: 0x2D06800538D394C2).
  EXPECT_EQ(Hash64(""), 0x2D06800538D394C2ull);
}

}  // namespace
}  // namespace gpugeek::data
