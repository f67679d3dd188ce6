// `gpugeek data push/log/diff/checkout/branch/tag/gc/fsck` end to end: the built binary on a store and a
// dataset folder in a temporary folder.

#include <sys/stat.h>
#include <unistd.h>

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

class DataVersionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("gpugeek-data-version-{}", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "src" / "sub");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / "src" / name, std::ios::binary | std::ios::trunc) << text;
  }
  std::pair<int, std::string> Data(std::vector<std::string> args) {
    args.insert(args.begin(), "data");
    args.insert(args.begin() + 2, {"--store", (dir_ / "store").string()});
    return subprocess::RunCli(args, dir_ / "cli.log");
  }
  nlohmann::json Json(std::vector<std::string> args) {
    args.push_back("--json");
    auto [rc, out] = Data(args);
    EXPECT_EQ(rc, 0) << out;
    return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  }
  fs::path dir_;
};

TEST_F(DataVersionTest, PushTwiceDiffCheckoutTagAndCollect) {
  Write("a.txt", "alpha\n");
  Write("sub/b.txt", std::string(5000, 'b'));
  const std::string src = (dir_ / "src").string();
  const nlohmann::json v1 = Json({"push", src, "--dataset", "docs", "-m", "first", "--author", "ada"});
  EXPECT_EQ(v1["files"], 2);
  EXPECT_EQ(v1["bytes"], 5006);
  EXPECT_EQ(v1["unchanged"], false);
  Write("a.txt", "alpha, edited\n");
  Write("c.txt", "new");
  const nlohmann::json v2 = Json({"push", src, "--dataset", "docs", "-m", "second"});
  // New: a.txt's and c.txt's chunks, the top tree, the commit (sub/ is unchanged).
  EXPECT_EQ(v2["new_objects"], 4);
  EXPECT_EQ(Json({"push", src, "--dataset", "docs"})["unchanged"], true);

  const nlohmann::json log = Json({"log", "--dataset", "docs"});
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["commit"], v2["commit"]);
  EXPECT_EQ(log[0]["message"], "second");
  EXPECT_EQ(log[1]["commit"], v1["commit"]);
  EXPECT_EQ(log[1]["author"], "ada");

  // A table line per file; a name's control bytes cannot forge lines or colours.
  Write("evil\n\x1b[31mname", "x");
  Json({"push", src, "--dataset", "docs", "--branch", "evil-branch"});
  auto [diff_rc, diff_out] = Data({"diff", "--dataset", "docs", "main", "evil-branch"});
  EXPECT_EQ(diff_rc, 0) << diff_out;
  EXPECT_NE(diff_out.find("A evil\\x0a\\x1b[31mname  (0 B -> 1 B)\n"), std::string::npos) << diff_out;
  fs::remove(dir_ / "src" / "evil\n\x1b[31mname");

  const nlohmann::json diff = Json({"diff", "--dataset", "docs", "main~1"});
  EXPECT_EQ(diff["added"], 1);
  EXPECT_EQ(diff["modified"], 1);
  EXPECT_EQ(diff["removed"], 0);
  EXPECT_EQ(diff["files"][0]["path"], "a.txt");
  EXPECT_EQ(diff["files"][0]["bytes_before"], 6);
  EXPECT_EQ(diff["files"][0]["bytes_after"], 14);
  EXPECT_EQ(diff["files"][1]["path"], "c.txt");
  EXPECT_EQ(diff["files"][1]["change"], "added");

  ASSERT_EQ(Json({"tag", "--dataset", "docs", "v1", "main~1"}).size(), 3u);  // evil-branch, main and v1
  const std::string out = (dir_ / "out").string();
  const nlohmann::json co = Json({"checkout", "--dataset", "docs", "v1", out});
  EXPECT_EQ(co["commit"], v1["commit"]);
  EXPECT_EQ(subprocess::ReadFile(dir_ / "out" / "a.txt"), "alpha\n");
  EXPECT_EQ(subprocess::ReadFile(dir_ / "out" / "sub" / "b.txt"), std::string(5000, 'b'));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "c.txt"));

  // A branch made and deleted: its commit becomes garbage, which gc removes (commit, tree, chunk).
  ASSERT_EQ(Json({"branch", "--dataset", "docs", "scratch"}).size(), 4u);
  Write("d.txt", "scratch only");
  EXPECT_EQ(Json({"push", src, "--dataset", "docs", "--branch", "scratch"})["new_objects"], 3);
  Json({"branch", "--dataset", "docs", "--delete", "scratch"});
  const nlohmann::json gc = Json({"gc"});
  EXPECT_EQ(gc["removed_objects"], 3);
  const nlohmann::json fsck = Json({"fsck"});
  EXPECT_EQ(fsck["ok"], true);
  EXPECT_EQ(fsck["unreferenced_objects"], 0);
  EXPECT_EQ(fsck["objects"], gc["kept_objects"]);
}

TEST_F(DataVersionTest, DamageAndBadInputExitNonZeroNamingTheProblem) {
  Write("a.txt", "alpha\n");
  const std::string src = (dir_ / "src").string();
  auto [rc, out] = Data({"push", src, "--dataset", "bad name"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("gpugeek data push: dataset name \"bad name\" is not valid"), std::string::npos) << out;
  std::tie(rc, out) = Data({"log", "--dataset", "docs"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("dataset \"docs\" has no branch, tag or commit \"main\""), std::string::npos) << out;

  // A mistyped --store is not taken for an empty store.
  std::tie(rc, out) = subprocess::RunCli({"data", "fsck", "--store", (dir_ / "typo").string()}, dir_ / "cli.log");
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("no dataset store at " + (dir_ / "typo").string()), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "typo"));

  const nlohmann::json v1 = Json({"push", src, "--dataset", "docs"});
  // Flip a byte of a.txt's chunk (the only 6-byte object).
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "store" / "objects")) {
    if (e.is_regular_file() && e.file_size() == 6) {
      ::chmod(e.path().c_str(), 0644);
      std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << "alphA\n";
    }
  }
  std::tie(rc, out) = Data({"fsck"});
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("1 damaged"), std::string::npos) << out;
  std::tie(rc, out) = Data({"checkout", "--dataset", "docs", "main", (dir_ / "out").string()});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("is damaged"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(DataVersionTest, CleanCommitsTheKeptRecordsAndAReport) {
  Write("a.jsonl", "{\"text\":\"the same words\",\"n\":1}\n{\"text\":\"the same words\",\"n\":2}\nbroken\n");
  Write("sub/b.csv", "id,text\n1,something else entirely\n");
  const std::string src = (dir_ / "src").string();
  const nlohmann::json v1 = Json({"push", src, "--dataset", "docs"});
  const nlohmann::json clean = Json({"clean", "--dataset", "docs", "main"});
  EXPECT_EQ(clean["records"], 3);
  EXPECT_EQ(clean["kept"], 2);
  EXPECT_EQ(clean["removed_by_reason"]["exact_duplicate"], 1);
  EXPECT_EQ(clean["unparsable_rows"], 1);
  EXPECT_EQ(clean["branch"], "cleaned");
  // The cleaned version's parent is the version cleaned; it holds the kept records and the report.
  const nlohmann::json log = Json({"log", "--dataset", "docs", "cleaned"});
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["commit"], clean["commit"]);
  EXPECT_EQ(log[1]["commit"], v1["commit"]);
  Json({"checkout", "--dataset", "docs", "cleaned", (dir_ / "clean").string()});
  EXPECT_EQ(subprocess::ReadFile(dir_ / "clean" / "a.jsonl"),
            "{\"fields\":{\"n\":1,\"text\":\"the same words\"},\"line\":1,\"source\":\"a.jsonl\",\"text\":"
            "\"the same words\"}\n");
  EXPECT_TRUE(fs::exists(dir_ / "clean" / "sub" / "b.csv.jsonl"));
  const nlohmann::json report = nlohmann::json::parse(subprocess::ReadFile(dir_ / "clean" / "cleaning-report.json"));
  EXPECT_EQ(report["source_commit"], v1["commit"]);
  EXPECT_EQ(report["removed"][0]["line"], 2);
  EXPECT_EQ(report["removed"][0]["duplicate_of"]["line"], 1);
  EXPECT_EQ(report["errors"][0]["line"], 3);
  auto [rc, out] = Data({"clean", "--dataset", "docs", "--drop", "colour"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("--drop \"colour\": not an anomaly kind"), std::string::npos) << out;
}

}  // namespace
}  // namespace gpugeek::cli
