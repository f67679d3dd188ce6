#pragma once
// PoolFixture: what the end-to-end tests of a real `gpugeek server` share. StartPool makes a scratch folder
// (/tmp/gpugeek_<name>_<pid>), starts the server on loopback ports the kernel chose, takes its admin token
// and CA (exported for the CLI processes, common/testing/process.h) and a join token good for the agents
// the test starts; WaitForNodes waits for them to register. Then the calls tests make: JSON over the API
// (Client), the CLI with --server (Cli), a spec submitted through the CLI (Submit), a job's log (Log), and
// waiting for a job to end (WaitEnded). Each fixture starts its own agents (options differ) into agents_.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/testing/process.h"
#include "http/client.h"

namespace gpugeek::testing {

namespace fs = std::filesystem;

class PoolFixture : public ::testing::Test {
 protected:
  // Starts one `gpugeek agent` named `node` with emulated GPUs `emulate` (and `extra_args`), joining at
  // `agent_url` (StartPool's); waits for it to be ready. The first agent keeps its data in dir_/agent and its
  // log in dir_/agent.log, later ones in dir_/agent-NODE and dir_/agent-NODE.log.
  void StartAgent(const std::string& agent_url, const std::string& node, const std::string& emulate = "1xH100-SXM-80GB",
                  const std::vector<std::string>& extra_args = {}) {
    const std::string folder = agents_.empty() ? "agent" : "agent-" + node;
    std::vector<std::string> args = {GPUGEEK_BINARY, "agent", "--server",   agent_url,
                                     "--ca-file",    ca_,     "--name",     node,
                                     "--emulate",    emulate, "--data-dir", (dir_ / folder).string()};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    agents_.push_back(std::make_unique<subprocess::Process>(args, dir_ / (folder + ".log")));
    ASSERT_TRUE(WaitForNodes(agents_.size()));
  }
  // Starts the server under a new dir_; returns the agents' URL ("" after a failed assertion).
  std::string StartPool(const std::string& name, int agents) {
    MakeScratch(name);
    return StartServer(agents);
  }
  // A new, empty dir_ (world-traversable: the tenants' uids reach their working folders below it).
  void MakeScratch(const std::string& name) {
    dir_ = fs::temp_directory_path() / ("gpugeek_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::all, fs::perm_options::replace);
  }
  // Starts the server in dir_/server (with `server_args` added to `gpugeek server`'s) with a join token for
  // `agents` registrations; the agents' URL.
  std::string StartServer(int agents, const std::vector<std::string>& server_args = {}) {
    subprocess::StartedServer server =
        subprocess::StartServer(GPUGEEK_BINARY, dir_ / "server", dir_ / "server.log", server_args);
    server_ = std::move(server.process);
    url_ = server.url;
    EXPECT_FALSE(url_.empty()) << server_->output();
    if (url_.empty()) return "";
    token_ = subprocess::UseAdminToken(dir_ / "server");
    ca_ = subprocess::UseServerCa(dir_ / "server");
    auto join = Client().Post("/v1/join-tokens", {{"uses", agents}});
    EXPECT_TRUE(join.ok()) << join.status();
    if (!join.ok()) return "";
    subprocess::UseJoinToken((*join)["token"]);
    return server.agent_url;
  }
  // Waits (at most 20 s) until `n` nodes are registered; false (with a failure naming the agents' output)
  // otherwise.
  bool WaitForNodes(size_t n) {
    for (int i = 0; i < 400; ++i) {
      auto nodes = Client().Get("/v1/nodes");
      if (nodes.ok() && (*nodes)["nodes"].size() == n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the agents did not register: " << AgentOutputs();
    return false;
  }
  // Everything the agents printed, one after another (for failure messages).
  std::string AgentOutputs() const {
    std::string outputs;
    for (const auto& a : agents_) outputs += a->output();
    return outputs;
  }
  void TearDown() override {
    agents_.clear();
    server_.reset();
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  // The API as the admin (a new client each call: a client is one thread's).
  http::Client& Client() {
    client_ = *http::Client::Create({.base_url = url_, .ca_file = ca_, .bearer_token = token_});
    return *client_;
  }
  // `gpugeek ARGS... --server URL`: {exit code, output}.
  std::pair<int, std::string> Cli(std::vector<std::string> args) {
    args.push_back("--server");
    args.push_back(url_);
    return subprocess::RunCli(args, dir_ / "cli.log");
  }
  // `gpugeek submit SPEC`; the new job's id ("" and a failure when it was not submitted).
  std::string Submit(const fs::path& spec, std::string* out_text = nullptr) {
    auto [code, out] = Cli({"submit", spec.string()});
    EXPECT_EQ(code, 0) << out;
    if (out_text != nullptr) *out_text = out;
    std::smatch m;
    static const std::regex submitted("submitted (\\S+) ");
    return std::regex_search(out, m, submitted) ? m[1].str() : "";
  }
  std::string Log(const std::string& id) { return Cli({"logs", id}).second; }
  // The job's log once it holds `text` (polled every 100 ms, at most 30 s), or as it was then.
  std::string WaitForLog(const std::string& id, const std::string& text) {
    std::string log;
    for (int i = 0; i < 300 && log.find(text) == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      log = Log(id);
    }
    return log;
  }
  // The job once SUCCEEDED, FAILED or CANCELLED, or as it was after `limit`.
  nlohmann::json WaitEnded(const std::string& id, std::chrono::seconds limit = std::chrono::seconds(60)) {
    nlohmann::json job;
    for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
      auto j = Client().Get("/v1/jobs/" + id);
      if (j.ok()) job = *j;
      const std::string state = job.value("state", "");
      if (state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED") return job;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return job;
  }

  fs::path dir_;
  std::string url_, token_, ca_;
  std::unique_ptr<subprocess::Process> server_;
  std::vector<std::unique_ptr<subprocess::Process>> agents_;
  std::unique_ptr<http::Client> client_;
};

}  // namespace gpugeek::testing
