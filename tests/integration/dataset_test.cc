// A job's dataset end to end, with real processes: `gpugeek server`, one `gpugeek agent`, `gpugeek data
// push --remote` of a folder, and `gpugeek submit` of a spec with `dataset: corpus@main`. The member reads
// the version's files from $GPUGEEK_DATASET_DIR (their SHA-256 in the job's log equal the files pushed);
// a second version changes one file, and the node downloads only that version's new objects (its cache
// is by digest) and keeps one checkout per version. `data log / diff / checkout --remote` read it back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/format.h>

#include "absl/strings/match.h"
#include "archive/digest.h"
#include "common/testing/process.h"
#include "pool_fixture.h"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using subprocess::Process;
using subprocess::ReadFile;
using subprocess::WriteFile;

// Objects in a version store's objects/ folder (not objects/tmp).
int CountObjects(const fs::path& store) {
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(store / "objects")) {
    n += e.is_regular_file() && e.path().parent_path().filename() != "tmp";
  }
  return n;
}

class DatasetEndToEnd : public testing::PoolFixture {
 protected:
  void SetUp() override {
    const std::string agent_url = StartPool("dataset_e2e", 1);
    ASSERT_FALSE(agent_url.empty());
    StartAgent(agent_url, "node-ds-" + std::to_string(::getpid()));
  }
  // `gpugeek data ARGS --remote --store <dir_/cache>`.
  std::pair<int, std::string> Data(std::vector<std::string> args) {
    args.insert(args.begin(), "data");
    for (const char* a : {"--remote", "--store"}) args.push_back(a);
    args.push_back((dir_ / "cache").string());
    return Cli(args);
  }
  // Submits a job reading the dataset; its log.
  std::string RunJob(const std::string& name) {
    WriteFile(dir_ / (name + ".yaml"),
              "name: " + name +
                  "\nresources: {accelerators: H100-SXM-80GB:1}\ndataset: corpus@main\n"
                  "run: cd \"$GPUGEEK_DATASET_DIR\" && sha256sum train/big.txt eval/small.txt && "
                  "echo \"$GPUGEEK_DATASET\"\n");
    const std::string id = Submit(dir_ / (name + ".yaml"));
    EXPECT_FALSE(id.empty());
    const nlohmann::json job = WaitEnded(id);
    EXPECT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump() << "\n" << agents_[0]->output();
    return Log(id);
  }
};

TEST_F(DatasetEndToEnd, AJobReadsThePushedVersionAndTheNodeFetchesEachObjectOnce) {
  const fs::path corpus = dir_ / "corpus";
  std::string big;
  for (int i = 0; big.size() < (size_t{3} << 20); ++i) big += "record " + std::to_string(i * 7919 % 100003) + "\n";
  WriteFile(corpus / "train" / "big.txt", big);  // about 3 chunks of the default 1 MiB
  WriteFile(corpus / "eval" / "small.txt", "held-out set, first cut\n");
  auto [code, out] = Data({"push", corpus.string(), "--dataset", "corpus", "-m", "v1"});
  ASSERT_EQ(code, 0) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("corpus@main -> ([0-9a-f]{12}) on the server"))) << out;
  const std::string v1_short = m[1];
  ASSERT_TRUE(std::regex_search(out, m, std::regex("sent (\\d+) of (\\d+) objects"))) << out;
  EXPECT_EQ(m[1], m[2]) << out;  // a new dataset: every object
  const int v1_objects = std::stoi(m[2]);
  // Pushed again unchanged: nothing sent.
  std::tie(code, out) = Data({"push", corpus.string(), "--dataset", "corpus"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "nothing changed, nothing sent")) << out;

  std::string log = RunJob("read-v1");
  EXPECT_TRUE(absl::StrContains(log, archive::Sha256Hex(big) + "  train/big.txt\n" +
                                         archive::Sha256Hex("held-out set, first cut\n") + "  eval/small.txt\n"))
      << log;
  EXPECT_TRUE(absl::StrContains(log, "corpus@" + v1_short)) << log;
  const fs::path node_cache = dir_ / "agent" / "datasets";
  EXPECT_EQ(CountObjects(node_cache / "store"), v1_objects);

  // v2: one small file changed. The push sends its chunk, the eval/ and top trees and the commit.
  WriteFile(corpus / "eval" / "small.txt", "held-out set, second cut\n");
  std::tie(code, out) = Data({"push", corpus.string(), "--dataset", "corpus", "-m", "v2"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, fmt::format("sent 4 of {} objects", v1_objects))) << out;
  log = RunJob("read-v2");
  EXPECT_TRUE(absl::StrContains(log, archive::Sha256Hex(big) + "  train/big.txt\n" +
                                         archive::Sha256Hex("held-out set, second cut\n") + "  eval/small.txt\n"))
      << log;
  // The node fetched only v2's 4 new objects; two checkouts, one per version.
  EXPECT_EQ(CountObjects(node_cache / "store"), v1_objects + 4);
  int versions = 0;
  for (const auto& e : fs::directory_iterator(node_cache / "versions")) versions += e.is_directory();
  EXPECT_EQ(versions, 2);
  // Other tenants' users cannot list the checkouts, nor enter this one (its tenant's group only), nor
  // read the node's objects.
  const auto mode = [](const fs::path& p) { return static_cast<int>(fs::status(p).permissions()); };
  EXPECT_EQ(mode(node_cache / "versions"), 0711);
  EXPECT_EQ(mode(node_cache / "store"), 0700);
  if (::geteuid() == 0) {  // the agent switches to the tenant's user: the checkout is closed to its group
    for (const auto& e : fs::directory_iterator(node_cache / "versions")) EXPECT_EQ(mode(e.path()), 0750) << e.path();
  }

  // Read back from the server: log, diff, and a checkout of v1 into a fresh cache.
  std::tie(code, out) = Data({"log", "--dataset", "corpus"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, v1_short)) << out;
  EXPECT_TRUE(absl::StrContains(out, " v2\n")) << out;
  std::tie(code, out) = Data({"diff", "main~1", "main", "--dataset", "corpus"});
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "M eval/small.txt  (24 B -> 25 B)\n0 added, 0 removed, 1 modified\n")) << out;
  auto [checkout_code, checkout_out] = Cli({"data", "checkout", "main~1", (dir_ / "out").string(), "--dataset",
                                            "corpus", "--remote", "--store", (dir_ / "cache2").string()});
  EXPECT_EQ(checkout_code, 0) << checkout_out;
  EXPECT_EQ(ReadFile(dir_ / "out" / "train" / "big.txt"), big);
  EXPECT_EQ(ReadFile(dir_ / "out" / "eval" / "small.txt"), "held-out set, first cut\n");
}

}  // namespace
}  // namespace gpugeek
