// A job's workdir end to end, with real processes: `gpugeek server`, one `gpugeek agent`, and `gpugeek
// submit` of a spec with `workdir:` and `setup:`. The run step reads a file of the workdir and the job's
// log shows it after the setup's marker line; ignored files never reach the node; a failing setup fails
// the member with "setup failed (exit N)" in the job's events; a second job of the same tree uploads
// nothing and the node fetches the archive once.
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

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using subprocess::Process;
using subprocess::RunCli;

class WorkdirEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpugeek_workdir_e2e_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    subprocess::StartedServer server = subprocess::StartServer(GPUGEEK_BINARY, dir_ / "server", dir_ / "server.log");
    server_ = std::move(server.process);
    url_ = server.url;
    const std::string agent_url = server.agent_url;
    ASSERT_FALSE(url_.empty()) << server_->output();
    token_ = subprocess::UseAdminToken(dir_ / "server");
    ca_ = subprocess::UseServerCa(dir_ / "server");
    auto join = Client().Post("/v1/join-tokens", {{"uses", 1}});
    ASSERT_TRUE(join.ok()) << join.status();
    subprocess::UseJoinToken((*join)["token"]);
    node_ = "node-wd-" + std::to_string(::getpid());
    agent_ = std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "agent", "--server", agent_url, "--ca-file", ca_, "--name", node_,
                                 "--emulate", "1xH100-SXM-80GB", "--data-dir", (dir_ / "agent").string()},
        dir_ / "agent.log");
    for (int i = 0; i < 200; ++i) {
      auto nodes = Client().Get("/v1/nodes");
      if (nodes.ok() && (*nodes)["nodes"].size() == 1) return;
      std::this_thread::sleep_for(milliseconds(50));
    }
    FAIL() << "the agent did not register: " << agent_->output();
  }
  void TearDown() override {
    agent_.reset();
    server_.reset();
    fs::remove_all(dir_);
  }

  http::Client& Client() {
    client_ = *http::Client::Create({.base_url = url_, .ca_file = ca_, .bearer_token = token_});
    return *client_;
  }
  std::pair<int, std::string> Cli(std::vector<std::string> args) {
    args.push_back("--server");
    args.push_back(url_);
    return RunCli(args, dir_ / "cli.log");
  }
  nlohmann::json WaitEnded(const std::string& id) {
    nlohmann::json job;
    for (int i = 0; i < 600; ++i) {
      auto j = Client().Get("/v1/jobs/" + id);
      if (j.ok()) job = *j;
      const std::string state = job.value("state", "");
      if (state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED") return job;
      std::this_thread::sleep_for(milliseconds(100));
    }
    return job;
  }
  std::string Submit(const fs::path& spec, std::string* out_text = nullptr) {
    auto [code, out] = Cli({"submit", spec.string()});
    EXPECT_EQ(code, 0) << out;
    if (out_text != nullptr) *out_text = out;
    std::smatch m;
    static const std::regex submitted("submitted (\\S+) ");
    return std::regex_search(out, m, submitted) ? m[1].str() : "";
  }
  std::string Log(const std::string& id) {
    auto [code, out] = Cli({"logs", id});
    return out;
  }

  fs::path dir_;
  std::string url_, token_, ca_, node_;
  std::unique_ptr<Process> server_, agent_;
  std::unique_ptr<http::Client> client_;
};

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST_F(WorkdirEndToEnd, RunFindsTheWorkdirAfterSetup) {
  const fs::path project = dir_ / "project";
  Write(project / "data" / "greeting.txt", "hello from the workdir\n");
  Write(project / "secret.env", "NOT_FOR_THE_NODE=1\n");
  Write(project / ".gpugeekignore", "*.env\n");
  Write(project / "job.yaml",
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
  EXPECT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump() << "\n" << agent_->output();
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
  Write(project / "x.txt", "x\n");
  Write(project / "job.yaml",
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

}  // namespace
}  // namespace gpugeek
