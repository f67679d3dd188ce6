// A job's workdir end to end, with real processes: `gpugeek server`, one `gpugeek agent`, and `gpugeek
// submit` of a spec with `workdir:` and `setup:`. The run step reads a file of the workdir and the job's
// log shows it after the setup's marker line; ignored files never reach the node; a failing setup fails
// the member with "setup failed (exit N)" in the job's events; a second job of the same tree uploads
// nothing and the node fetches the archive once. `files:` brings a folder, a file and a tar.gz archive
// from elsewhere on the submitting machine to their places in the working folder. `idle_timeout` ends a
// job that leaves its (emulated) GPU idle and spares one that keeps it busy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "absl/strings/match.h"
#include "common/testing/process.h"
#include "http/client.h"
#include "pool_fixture.h"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using subprocess::Process;
using subprocess::ReadFile;
using subprocess::WriteFile;

class WorkdirEndToEnd : public testing::PoolFixture {
 protected:
  void SetUp() override {
    const std::string agent_url = StartPool("workdir_e2e", 1);
    ASSERT_FALSE(agent_url.empty());
    node_ = "node-wd-" + std::to_string(::getpid());
    agents_.push_back(std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "agent", "--server", agent_url, "--ca-file", ca_, "--name", node_,
                                 "--emulate", "1xH100-SXM-80GB", "--data-dir", (dir_ / "agent").string()},
        dir_ / "agent.log"));
    ASSERT_TRUE(WaitForNodes(1));
  }

  std::string node_;
};

TEST_F(WorkdirEndToEnd, RunFindsTheWorkdirAfterSetup) {
  const fs::path project = dir_ / "project";
  WriteFile(project / "data" / "greeting.txt", "hello from the workdir\n");
  WriteFile(project / "secret.env", "NOT_FOR_THE_NODE=1\n");
  WriteFile(project / ".gpugeekignore", "*.env\n");
  WriteFile(project / "job.yaml",
            "name: wd\n"
            "resources: {accelerators: H100-SXM-80GB:1}\n"
            "workdir: .\n"
            "setup: echo preparing; touch setup-ran\n"
            "run: cat data/greeting.txt; ls; test -f setup-ran && test ! -e secret.env && test ! -e job.yaml.nope\n");
  std::string out;
  const std::string id = Submit(project / "job.yaml", &out);
  ASSERT_FALSE(id.empty()) << out;
  EXPECT_TRUE(absl::StrContains(out, "uploaded")) << out;
  const nlohmann::json job = WaitEnded(id);
  EXPECT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump() << "\n" << agents_[0]->output();
  const std::string log = Log(id);
  EXPECT_TRUE(absl::StrContains(log, "== gpugeek: setup (node rank 0) ==\npreparing\n")) << log;
  EXPECT_TRUE(absl::StrContains(log, "== gpugeek: run (node rank 0) ==\nhello from the workdir\n")) << log;
  EXPECT_FALSE(absl::StrContains(log, "secret.env")) << log;
  std::printf("[ log ]\n%s", log.c_str());

  // The same tree again: nothing uploaded, and the node uses its cached archive.
  const std::string again = Submit(project / "job.yaml", &out);
  EXPECT_TRUE(absl::StrContains(out, "the server has it already, nothing uploaded")) << out;
  EXPECT_EQ(WaitEnded(again).value("state", ""), "SUCCEEDED");
  int archives = 0;
  for (const auto& f : fs::directory_iterator(dir_ / "agent" / "archives")) archives += f.is_regular_file();
  EXPECT_EQ(archives, 1);
}

TEST_F(WorkdirEndToEnd, AFailingSetupFailsTheMemberWithItsExitCode) {
  const fs::path project = dir_ / "bad";
  WriteFile(project / "x.txt", "x\n");
  WriteFile(project / "job.yaml",
            "name: bad-setup\nresources: {accelerators: H100-SXM-80GB:1}\nworkdir: .\nsetup: echo trying; exit 3\n"
            "run: echo never\n");
  const std::string id = Submit(project / "job.yaml");
  ASSERT_FALSE(id.empty());
  const nlohmann::json job = WaitEnded(id);
  EXPECT_EQ(job.value("state", ""), "FAILED") << job.dump();
  auto events = Client().Get("/v1/events?job=" + id);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(absl::StrContains(events->dump(), "setup failed (exit 3)")) << events->dump(2);
  const std::string log = Log(id);
  EXPECT_TRUE(absl::StrContains(log, "trying\n")) << log;
  EXPECT_TRUE(absl::StrContains(log, "== gpugeek: setup failed (exit 3); run not started ==")) << log;
  EXPECT_FALSE(absl::StrContains(log, "never")) << log;
}

TEST_F(WorkdirEndToEnd, FilesLandWhereTheSpecSaysBesideTheWorkdir) {
  const fs::path project = dir_ / "files-project";
  WriteFile(project / "code" / "main.txt", "main from the workdir\n");
  WriteFile(dir_ / "shared-data" / "corpus" / "a.txt", "corpus a\n");
  WriteFile(dir_ / "shared-data" / "corpus" / "b" / "c.txt", "corpus b/c\n");
  WriteFile(dir_ / "shared-data" / "corpus" / ".gpugeekignore", "*.tmp\n");
  WriteFile(dir_ / "shared-data" / "corpus" / "scratch.tmp", "left out\n");
  WriteFile(project / "weights.bin", "initial weights\n");
  WriteFile(dir_ / "extra-src" / "notes.txt", "notes from the archive\n");
  ASSERT_EQ(std::system(("tar -czf " + (project / "extra.tar.gz").string() + " -C " + (dir_ / "extra-src").string() +
                         " notes.txt")
                            .c_str()),
            0);
  WriteFile(project / "job.yaml",
            "name: files\n"
            "resources: {accelerators: H100-SXM-80GB:1}\n"
            "workdir: code\n"
            "files:\n"
            "  data/corpus: ../shared-data/corpus\n"
            "  weights/init.bin: weights.bin\n"
            "  extras: extra.tar.gz\n"
            "run: cat main.txt data/corpus/a.txt data/corpus/b/c.txt weights/init.bin extras/notes.txt; "
            "test ! -e data/corpus/scratch.tmp && echo ignored-left-out\n");
  std::string out;
  const std::string id = Submit(project / "job.yaml", &out);
  ASSERT_FALSE(id.empty()) << out;
  EXPECT_TRUE(absl::StrContains(out, "files.data/corpus: folder ")) << out;
  EXPECT_TRUE(absl::StrContains(out, "files.weights/init.bin: file ")) << out;
  EXPECT_TRUE(absl::StrContains(out, "files.extras: archive ")) << out;
  const nlohmann::json job = WaitEnded(id);
  EXPECT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump() << "\n" << agents_[0]->output();
  EXPECT_TRUE(absl::StrContains(Log(id),
                                "main from the workdir\ncorpus a\ncorpus b/c\ninitial weights\nnotes from the "
                                "archive\nignored-left-out\n"))
      << Log(id);

  // Again: every archive is on the server already; nothing is uploaded.
  const std::string again = Submit(project / "job.yaml", &out);
  size_t cached = 0;
  for (size_t at = out.find("the server has it already, nothing uploaded"); at != std::string::npos;
       at = out.find("the server has it already, nothing uploaded", at + 1)) {
    ++cached;
  }
  EXPECT_EQ(cached, 4u) << out;  // the workdir and the three files: entries
  EXPECT_EQ(WaitEnded(again).value("state", ""), "SUCCEEDED");

  // DEST must stay inside the working folder; the CLI refuses before uploading anything.
  WriteFile(project / "escape.yaml",
            "name: escape\nresources: {accelerators: H100-SXM-80GB:1}\nfiles: {../outside: weights.bin}\nrun: x\n");
  auto [code, text] = Cli({"submit", (project / "escape.yaml").string()});
  EXPECT_NE(code, 0);
  EXPECT_TRUE(absl::StrContains(text, "files.../outside: the destination must be a path inside the working folder"))
      << text;
}

// On an emulated GPU the utilisation is the member's CPU use (agent/emulated_utilization.h): a member that
// sleeps is idle and idle_timeout ends it; one that spins keeps its GPU busy and runs to its end.
TEST_F(WorkdirEndToEnd, IdleTimeoutEndsAnIdleJobAndSparesABusyOne) {
  const fs::path project = dir_ / "idle";
  WriteFile(project / "idle.yaml",
            "name: idle\nresources: {accelerators: H100-SXM-80GB:1}\nidle_timeout: 3s\nrun: sleep 120\n");
  WriteFile(project / "busy.yaml",
            "name: busy\nresources: {accelerators: H100-SXM-80GB:1}\nidle_timeout: 3s\n"
            "run: end=$(($(date +%s) + 7)); while [ $(date +%s) -lt $end ]; do :; done; echo done spinning\n");
  const auto start = std::chrono::steady_clock::now();
  const std::string idle = Submit(project / "idle.yaml");
  const nlohmann::json ended = WaitEnded(idle);
  EXPECT_EQ(ended.value("state", ""), "FAILED") << ended.dump();
  EXPECT_EQ(ended.value("reason", ""), "idle_timeout 3s: its GPUs were idle (utilisation below 1%) for 3s")
      << ended.dump();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
  const std::string busy = Submit(project / "busy.yaml");
  const nlohmann::json done = WaitEnded(busy);
  EXPECT_EQ(done.value("state", ""), "SUCCEEDED") << done.dump();
  EXPECT_TRUE(absl::StrContains(Log(busy), "done spinning\n"));
}

}  // namespace
}  // namespace gpugeek
