// `gpugeek data shard` and `gpugeek data order` end to end: the built binary over files in a temporary folder.

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/testing/process.h"

namespace gpugeek::cli {
namespace {

namespace fs = std::filesystem;

class DataShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("gpugeek-data-shard-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "in" / "sub");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / "in" / name, std::ios::binary) << text;
  }
  std::pair<int, std::string> Cli(std::vector<std::string> args) {
    args.insert(args.begin(), "data");
    return subprocess::RunCli(args, dir_ / "cli.log");
  }
  fs::path dir_;
};

TEST_F(DataShardTest, LinesBecomeRecordsInShardsOfTheGivenSize) {
  // 10 lines of 9 bytes and a last line without '\n' across two files (sorted: a.txt, sub/b.txt). 100-byte
  // shards hold 4 records of 9 bytes (36 + 8 * 5 + 16 = 92), so 11 records make shards of 4, 4, 3.
  std::string a;
  for (int i = 0; i < 6; ++i) a += fmt::format("line-{:04d}\n", i);
  Write("a.txt", a);
  Write("sub/b.txt", "line-0006\nline-0007\nline-0008\nline-0009\nlast");
  const std::string out = (dir_ / "ds").string();
  auto [rc, text] =
      Cli({"shard", (dir_ / "in").string(), "--out", out, "--shard-size", "100", "--records", "line", "--json"});
  ASSERT_EQ(rc, 0) << text;
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["files"], 2);
  EXPECT_EQ(j["records"], 11);
  EXPECT_EQ(j["shards"], 3);
  EXPECT_EQ(j["input_bytes"], 6 * 10 + 4 * 10 + 4);
  EXPECT_EQ(j["bytes"], 92 + 92 + (9 + 9 + 4 + 8 * 4 + 16));
  const nlohmann::json index = nlohmann::json::parse(subprocess::ReadFile(dir_ / "ds" / "index.json"));
  EXPECT_EQ(index["shards"][2]["first_record"], 8);
  EXPECT_EQ(index["shards"][2]["records"], 3);
  const std::string shard2 = subprocess::ReadFile(dir_ / "ds" / "shard-00002.bin");
  EXPECT_EQ(shard2.substr(0, 22), "line-0008line-0009last");
  EXPECT_EQ(shard2.substr(shard2.size() - 8), "GGSHARD1");

  // Rank 1 of 4, pad: ceil(11 / 4) = 3 entries, the last a flagged repeat (11 = 4 * 3 - 1).
  std::tie(rc, text) = Cli({"order", "--index", out, "--world", "4", "--rank", "3", "--seed", "7", "--json"});
  ASSERT_EQ(rc, 0) << text;
  nlohmann::json o = nlohmann::json::parse(text);
  EXPECT_EQ(o["count"], 3);
  EXPECT_EQ(o["is_padding"], nlohmann::json::parse("[false, false, true]"));
  // All ranks together cover the 11 records once, plus one pad; under drop, 8 distinct records.
  for (const char* policy : {"pad", "drop"}) {
    std::multiset<int> seen;
    int pads = 0;
    for (int r = 0; r < 4; ++r) {
      std::tie(rc, text) = Cli({"order", "--index", out, "--world", "4", "--rank", std::to_string(r), "--seed", "7",
                                "--policy", policy, "--json"});
      ASSERT_EQ(rc, 0) << text;
      o = nlohmann::json::parse(text);
      for (size_t k = 0; k < o["samples"].size(); ++k) {
        if (o["is_padding"][k]) {
          ++pads;
        } else {
          seen.insert(o["samples"][k].get<int>());
        }
      }
    }
    EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), seen.size()) << policy;
    EXPECT_EQ(seen.size(), std::string(policy) == "pad" ? 11u : 8u) << policy;
    EXPECT_EQ(pads, std::string(policy) == "pad" ? 1 : 0) << policy;
  }
  // Text output: one sample per line, pads marked.
  std::tie(rc, text) = Cli({"order", "--index", out, "--world", "4", "--rank", "3", "--seed", "7"});
  ASSERT_EQ(rc, 0) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  EXPECT_NE(text.find(" pad\n"), std::string::npos) << text;
}

TEST_F(DataShardTest, FilesAreRecordsAndTheDefaultSizeIsOneShard) {
  Write("x.bin", std::string("\0\1\2", 3));
  Write("y.bin", "");
  auto [rc, text] = Cli({"shard", (dir_ / "in").string(), "--out", (dir_ / "ds").string(), "--json"});
  ASSERT_EQ(rc, 0) << text;
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["records"], 2);
  EXPECT_EQ(j["shards"], 1);
  EXPECT_EQ(j["bytes"], 3 + 8 * 3 + 16);
}

TEST_F(DataShardTest, BadArgumentsExit2WithTheReason) {
  Write("a.txt", "x");
  const std::string out = (dir_ / "ds").string();
  auto [rc, text] = Cli({"shard", (dir_ / "in").string(), "--out", out, "--shard-size", "lots"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(text.find("--shard-size"), std::string::npos) << text;
  std::tie(rc, text) = Cli({"shard", (dir_ / "in").string(), "--out", out, "--shard-size", "10"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(text.find("below the minimum of 64 bytes"), std::string::npos) << text;
  ASSERT_EQ(Cli({"shard", (dir_ / "in").string(), "--out", out}).first, 0);
  std::tie(rc, text) = Cli({"shard", (dir_ / "in").string(), "--out", out});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(text.find("holds a dataset already"), std::string::npos) << text;
  std::tie(rc, text) = Cli({"order", "--index", out, "--world", "2", "--rank", "2"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(text.find("rank 2 is not below the world size 2"), std::string::npos) << text;
  std::tie(rc, text) = Cli({"order", "--index", out, "--world", "2", "--rank", "0", "--consumed", "5"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(text.find("consumed 5 is past the epoch's 1 samples"), std::string::npos) << text;
  std::tie(rc, text) = Cli({"order", "--index", out, "--world", "2", "--rank", "0", "--policy", "repeat"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(text.find("--policy"), std::string::npos) << text;
  std::tie(rc, text) = Cli({"order", "--index", (dir_ / "in").string(), "--world", "1", "--rank", "0"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(text.find("index.json"), std::string::npos) << text;
}

}  // namespace
}  // namespace gpugeek::cli
