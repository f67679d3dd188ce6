#include "archive/ignore_rules.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace gpugeek::archive {
namespace {

// The paths of `tree` (folders end in '/') that `text` (a root ignore file) keeps.
std::vector<std::string> Kept(const std::string& text, const std::vector<std::string>& tree) {
  const std::vector<IgnoreRule> rules = ParseIgnoreRules(text, "");
  std::vector<std::string> kept;
  for (std::string p : tree) {
    const bool dir = p.back() == '/';
    if (dir) p.pop_back();
    if (!IsIgnored(rules, p, dir)) kept.push_back(p + (dir ? "/" : ""));
  }
  return kept;
}

const std::vector<std::string> kTree = {"a.py",      "b.pyc",          "data/",     "data/x.bin", "src/",
                                        "src/data/", "src/data/y.bin", "src/m.pyc", "logs/",      "logs/1.txt",
                                        "src/logs/", "src/logs/2.txt", "keep.pyc",  "ab.txt",     "abc.txt"};

TEST(IgnoreRulesTest, BlankAndCommentLinesAreSkipped) {
  EXPECT_TRUE(ParseIgnoreRules("\n# comment\n   \n", "").empty());
  const auto rules = ParseIgnoreRules("\\#lit\n", "");
  ASSERT_EQ(rules.size(), 1u);
  EXPECT_TRUE(IsIgnored(rules, "#lit", false));
}

TEST(IgnoreRulesTest, StarMatchesNamesAtAnyDepth) {
  EXPECT_EQ(Kept("*.pyc\n", kTree),
            (std::vector<std::string>{"a.py", "data/", "data/x.bin", "src/", "src/data/", "src/data/y.bin", "logs/",
                                      "logs/1.txt", "src/logs/", "src/logs/2.txt", "ab.txt", "abc.txt"}));
}

TEST(IgnoreRulesTest, QuestionMarkIsOneCharacter) {
  EXPECT_EQ(Kept("a?.txt\n", {"ab.txt", "abc.txt", "a/.txt"}), (std::vector<std::string>{"abc.txt", "a/.txt"}));
}

TEST(IgnoreRulesTest, TrailingSlashMatchesFoldersOnly) {
  // "data/" excludes both data folders; a file named data would stay.
  EXPECT_EQ(Kept("data/\n", {"data/", "src/data/", "data"}), (std::vector<std::string>{"data"}));
}

TEST(IgnoreRulesTest, LeadingSlashAnchorsToTheIgnoreFilesFolder) {
  EXPECT_EQ(Kept("/data\n", {"data/", "src/data/"}), (std::vector<std::string>{"src/data/"}));
  EXPECT_EQ(Kept("src/data\n", {"data/", "src/data/", "x/src/data/"}),
            (std::vector<std::string>{"data/", "x/src/data/"}));
}

TEST(IgnoreRulesTest, DoubleStarSpansFolders) {
  EXPECT_EQ(Kept("**/logs\n", {"logs/", "src/logs/", "a/b/logs", "logsx"}), (std::vector<std::string>{"logsx"}));
  EXPECT_EQ(Kept("logs/**\n", {"logs/", "logs/1.txt", "logs/a/b"}), (std::vector<std::string>{"logs/"}));
  EXPECT_EQ(Kept("a/**/b\n", {"a/b", "a/x/b", "a/x/y/b", "a/xb", "b"}), (std::vector<std::string>{"a/xb", "b"}));
}

TEST(IgnoreRulesTest, NegationReincludesAndTheLastMatchWins) {
  EXPECT_EQ(Kept("*.pyc\n!keep.pyc\n", {"b.pyc", "keep.pyc", "src/keep.pyc"}),
            (std::vector<std::string>{"keep.pyc", "src/keep.pyc"}));
  EXPECT_EQ(Kept("!keep.pyc\n*.pyc\n", {"keep.pyc"}), (std::vector<std::string>{}));
}

TEST(IgnoreRulesTest, RulesOfASubfolderApplyBelowItOnly) {
  const auto rules = ParseIgnoreRules("*.bin\n/top.txt\n", "src");
  EXPECT_TRUE(IsIgnored(rules, "src/data/y.bin", false));
  EXPECT_FALSE(IsIgnored(rules, "data/x.bin", false));
  EXPECT_TRUE(IsIgnored(rules, "src/top.txt", false));
  EXPECT_FALSE(IsIgnored(rules, "src/a/top.txt", false));
  EXPECT_FALSE(IsIgnored(rules, "src", true));
}

TEST(IgnoreRulesTest, PathologicalPatternsStayLinear) {
  const std::string pattern = std::string(200, '*') + "a" + std::string(200, '*') + "b\n";
  const auto rules = ParseIgnoreRules(pattern, "");
  EXPECT_FALSE(IsIgnored(rules, std::string(3000, 'a'), false));
  EXPECT_TRUE(IsIgnored(rules, std::string(3000, 'a') + "b", false));
}

}  // namespace
}  // namespace gpugeek::archive
