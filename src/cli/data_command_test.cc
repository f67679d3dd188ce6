// `gpugeek data dedup` end to end: the built binary over files in a temporary folder.

#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/testing/process.h"

namespace gpugeek::cli {
namespace {

namespace fs = std::filesystem;

std::string Words(int from, int to) {
  std::string s;
  for (int i = from; i < to; ++i) s += fmt::format("{}w{}", i == from ? "" : " ", i);
  return s;
}

class DataDedupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("gpugeek-data-dedup-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "corpus" / "sub");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ / "corpus" / name) << text; }
  std::pair<int, std::string> Dedup(std::vector<std::string> args) {
    args.insert(args.begin(), {"data", "dedup"});
    return subprocess::RunCli(args, dir_ / "cli.log");
  }
  fs::path dir_;
};

TEST_F(DataDedupTest, FindsExactAndNearCopiesInAFolderTree) {
  // a: w0..w99; b: a copy in other case and punctuation; c: w10..w109 (J = 86 / 106 with a);
  // sub/d: unrelated; sub/e: w20..w119 (J = 76 / 116 with a, so it stays though J(c, e) = 86 / 106).
  Write("a.txt", Words(0, 100));
  std::string shouted = Words(0, 100);
  for (char& ch : shouted) ch = static_cast<char>(std::toupper(ch));
  Write("b.txt", shouted + "!!");
  Write("c.txt", Words(10, 110));
  Write("sub/d.txt", Words(5000, 5100));
  Write("sub/e.txt", Words(20, 120));
  auto [rc, out] = Dedup({(dir_ / "corpus").string(), "--bands", "20", "--rows", "5", "--evaluate", "--json", "--out",
                          (dir_ / "report").string()});
  ASSERT_EQ(rc, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["documents"], 5);
  EXPECT_EQ(j["kept"], 3);
  EXPECT_EQ(j["exact_duplicates"], 1);
  EXPECT_EQ(j["near_duplicates"], 1);
  EXPECT_EQ(j["evaluation"]["documents"], 4);
  EXPECT_EQ(j["evaluation"]["pairs"], 6);
  EXPECT_EQ(j["evaluation"]["finder_pairs"]["truth"], 2);  // (a, c) and (c, e)
  EXPECT_EQ(j["evaluation"]["removed"]["f1"], 1.0);
  const std::string corpus = (dir_ / "corpus").string();
  EXPECT_EQ(subprocess::ReadFile(dir_ / "report" / "duplicates.csv"),
            fmt::format("file,verdict,duplicate_of,jaccard\n{0}/b.txt,exact,{0}/a.txt,1.0000\n"
                        "{0}/c.txt,near,{0}/a.txt,{1:.4f}\n",
                        corpus, 86.0 / 106.0));
  const std::string curve = subprocess::ReadFile(dir_ / "report" / "s_curve.csv");
  EXPECT_NE(curve.find("0.80,0.85,2,2,1.000000,"), std::string::npos) << curve;
  EXPECT_NE(subprocess::ReadFile(dir_ / "report" / "s_curve.svg").find("<svg"), std::string::npos);
}

TEST_F(DataDedupTest, BadOptionsNameTheFieldAndExit2) {
  Write("a.txt", "x");
  auto [rc, out] = Dedup({(dir_ / "corpus").string(), "--threshold", "1.5"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("--threshold: 1.5 is outside (0, 1]"), std::string::npos) << out;
  std::tie(rc, out) = Dedup({(dir_ / "corpus").string(), "--max-bytes", "0"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("(--max-bytes)"), std::string::npos) << out;
  std::tie(rc, out) = Dedup({(dir_ / "missing").string()});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("missing: not a file or folder"), std::string::npos) << out;
  std::tie(rc, out) = Dedup({(dir_ / "corpus").string(), "--bands", "4"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("--bands and --rows go together"), std::string::npos) << out;
}

TEST_F(DataDedupTest, BandsAndRowsAreChosenForTheThreshold) {
  Write("a.txt", Words(0, 100));
  auto [rc, out] = Dedup({(dir_ / "corpus").string(), "--threshold", "0.7"});
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("LSH 17 bands x 4 rows: a pair at Jaccard 0.7 becomes a candidate with probability 0.99"),
            std::string::npos)
      << out;
}

}  // namespace
}  // namespace gpugeek::cli
