// End to end: the built `gpugeek agent` (and `gpugeek up`) serving the agent's Prometheus metrics on
// --metrics-listen (--agent-metrics-listen) and announcing the address when registering. The control
// plane's two agent endpoints are played by an http::Server in this process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "api/agent_protocol.h"
#include "common/testing/process.h"
#include "http/client.h"
#include "http/server.h"

namespace gpugeek::cli {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// `gpugeek args...` with stdout+stderr in `log`; Stop() returns its exit code (-1 when a signal ended it).
class Gpugeek : public subprocess::Process {
 public:
  Gpugeek(std::vector<std::string> args, const fs::path& log) : Process(WithBinary(std::move(args)), log) {}
  int Stop() {
    const int status = Process::Stop();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // The exit code of a command that ends by itself (a usage error), waiting up to 20 s for it: a SIGTERM
  // sent while it is still exiting (slower under ASan, which checks for leaks at exit) would end it first.
  int WaitExit() {
    for (int i = 0; i < 400 && alive(); ++i) std::this_thread::sleep_for(50ms);
    return Stop();
  }

 private:
  static std::vector<std::string> WithBinary(std::vector<std::string> args) {
    args.insert(args.begin(), GPUGEEK_BINARY);
    return args;
  }
};

class StubControlPlane {
 public:
  StubControlPlane() {
    auto server = http::Server::Create({.host = "127.0.0.1", .port = 0, .threads = 2});
    EXPECT_TRUE(server.ok());
    server_ = std::move(*server);
    server_->Route("POST", "/v1/agents/register", [this](const http::Request& r) -> absl::StatusOr<http::Reply> {
      auto j = r.JsonBody();
      if (!j.ok()) return j.status();
      auto reg = api::RegistrationFromJson(*j);
      if (!reg.ok()) return reg.status();
      std::lock_guard<std::mutex> lock(mu_);
      registrations_.push_back(*reg);
      return http::Reply::Json(api::ToJson(api::RegistrationReply{.heartbeat_interval_ms = 100}));
    });
    server_->Route("POST", "/v1/agents/{node}/heartbeat", [](const http::Request&) -> absl::StatusOr<http::Reply> {
      return http::Reply::Json(api::ToJson(api::HeartbeatReply{}));
    });
    EXPECT_TRUE(server_->Start().ok());
  }
  std::string url() const { return server_->url(); }
  // The first registration within 20 s.
  std::optional<api::Registration> WaitForRegistration() const {
    for (int i = 0; i < 400; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!registrations_.empty()) return registrations_.front();
      }
      std::this_thread::sleep_for(50ms);
    }
    return std::nullopt;
  }

 private:
  std::unique_ptr<http::Server> server_;
  mutable std::mutex mu_;
  std::vector<api::Registration> registrations_;
};

class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "gpugeek_cli_agent_XXXXXX";
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path path() const { return path_; }

 private:
  std::string path_;
};

// GET /metrics until `want` is a line of it (10 s); the last text. https:// trusts `ca_file`.
std::string ScrapeUntil(const std::string& url, const std::string& want, const std::string& ca_file = "") {
  auto client = http::Client::Create({.base_url = url, .ca_file = ca_file});
  EXPECT_TRUE(client.ok());
  std::string text;
  for (int i = 0; i < 200; ++i) {
    auto got = (*client)->GetText("/metrics");
    if (got.ok()) {
      text = *got;
      if (text.find("\n" + want + "\n") != std::string::npos) break;
    }
    std::this_thread::sleep_for(50ms);
  }
  return text;
}

const std::regex kMetricsLine(R"(agent metrics on (https?://127\.0\.0\.1:[0-9]+)/metrics)");

// The stub answers any registration; the agent still needs a join token to start.
void UseStubJoinToken() { ::setenv("GPUGEEK_JOIN_TOKEN", ("ggj_0123456789abcdef_" + std::string(43, 'J')).c_str(), 1); }

TEST(AgentCommand, ServesMetricsAndAnnouncesTheAddress) {
  UseStubJoinToken();
  StubControlPlane cp;
  TempDir dir;
  const std::string node = fmt::format("cli-metrics-{}", ::getpid());
  Gpugeek agent({"agent", "--server", cp.url(), "--name", node, "--emulate", "2xA100-SXM-80GB", "--data-dir",
                 (dir.path() / "agent").string(), "--no-cgroups", "--metrics-listen", "127.0.0.1:0"},
                dir.path() / "agent.log");
  const std::string url = agent.WaitForOutput(kMetricsLine);
  ASSERT_FALSE(url.empty()) << agent.output();
  const std::string host_port = url.substr(std::string("http://").size());

  const auto reg = cp.WaitForRegistration();
  ASSERT_TRUE(reg.has_value()) << agent.output();
  EXPECT_EQ(reg->node, node);
  EXPECT_EQ(reg->metrics_address, host_port) << "loopback: announced as bound";
  ASSERT_EQ(reg->inventory.gpus.size(), 2u);

  const std::string ok = fmt::format(R"(gpugeek_agent_heartbeats_total{{node="{}",result="ok"}} 2)", node);
  const std::string text = ScrapeUntil(url, ok);
  EXPECT_NE(text.find("\n" + ok + "\n"), std::string::npos) << text;
  const hw::GpuDevice& g = reg->inventory.gpus[1];
  EXPECT_NE(text.find(fmt::format("\ngpugeek_gpu_memory_total_bytes{{node=\"{}\",gpu=\"1\",uuid=\"{}\",model=\"A100-"
                                  "SXM-80GB\",vendor=\"nvidia\"}} 85899345920\n",
                                  node, g.uuid)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(fmt::format("\ngpugeek_gpu_power_watts{{node=\"{}\",gpu=\"1\",uuid=\"{}\",model=\"A100-SXM-"
                                  "80GB\",vendor=\"nvidia\"}} 40\n",
                                  node, g.uuid)),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(fmt::format("\ngpugeek_build_info{{node=\"{}\",version=\"", node)), std::string::npos);
  EXPECT_EQ(agent.Stop(), 0) << agent.output();
}

TEST(AgentCommand, MetricsOffAnnouncesNothing) {
  UseStubJoinToken();
  StubControlPlane cp;
  TempDir dir;
  Gpugeek agent({"agent", "--server", cp.url(), "--name", fmt::format("cli-nometrics-{}", ::getpid()), "--emulate",
                 "1xL4", "--data-dir", (dir.path() / "agent").string(), "--no-cgroups", "--metrics-listen", "off"},
                dir.path() / "agent.log");
  const auto reg = cp.WaitForRegistration();
  ASSERT_TRUE(reg.has_value()) << agent.output();
  EXPECT_EQ(reg->metrics_address, "");
  EXPECT_NE(agent.output().find("metrics off"), std::string::npos) << agent.output();
  EXPECT_EQ(agent.Stop(), 0) << agent.output();
}

TEST(AgentCommand, BadMetricsAddressIsAUsageError) {
  TempDir dir;
  Gpugeek agent({"agent", "--server", "http://127.0.0.1:1", "--emulate", "1xL4", "--data-dir",
                 (dir.path() / "agent").string(), "--no-cgroups", "--metrics-listen", "nowhere"},
                dir.path() / "agent.log");
  for (int i = 0; i < 200 && agent.output().find("--metrics-listen") == std::string::npos; ++i) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_NE(agent.output().find("gpugeek agent: --metrics-listen: metrics address 'nowhere' must be HOST:PORT"),
            std::string::npos)
      << agent.output();
  EXPECT_EQ(agent.WaitExit(), 2);
}

TEST(AgentCommand, AnHttpsServerNeedsTheCaFile) {
  TempDir dir;
  Gpugeek agent({"agent", "--server", "https://127.0.0.1:1", "--emulate", "1xL4", "--data-dir",
                 (dir.path() / "agent").string(), "--no-cgroups"},
                dir.path() / "agent.log");
  for (int i = 0; i < 200 && agent.alive(); ++i) std::this_thread::sleep_for(50ms);
  EXPECT_NE(agent.output().find("--ca-file is required"), std::string::npos) << agent.output();
  EXPECT_EQ(agent.WaitExit(), 2) << agent.output();
}

TEST(UpCommand, ServesTheAgentsMetricsApartFromTheServer) {
  TempDir dir;
  // `up` saves its CLI profile: in the test's folder, not the user's config.
  ::setenv("GPUGEEK_CONFIG", (dir.path() / "config.yaml").c_str(), 1);
  Gpugeek up({"up", "--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0", "--agent-metrics-listen", "127.0.0.1:0",
              "--emulate", "1xH100-SXM-80GB", "--data-dir", dir.path().string()},
             dir.path() / "up.log");
  const std::string url = up.WaitForOutput(kMetricsLine);
  ASSERT_FALSE(url.empty()) << up.output();
  // TLS with zero configuration: the server's local CA signs the certificate of every listener, the
  // agent's metrics included, and the saved profile trusts it.
  EXPECT_TRUE(url.starts_with("https://")) << url;
  const std::string ca = (dir.path() / "server" / "tls" / "ca.crt").string();
  ASSERT_TRUE(fs::exists(ca));
  EXPECT_NE(subprocess::ReadFile(dir.path() / "config.yaml").find("ca_file: " + ca), std::string::npos)
      << subprocess::ReadFile(dir.path() / "config.yaml");
  const std::string text = ScrapeUntil(url, "# TYPE gpugeek_gpu_info gauge", ca);
  EXPECT_NE(text.find("\n# TYPE gpugeek_gpu_info gauge\n"), std::string::npos) << text;
  EXPECT_NE(text.find("model=\"H100-SXM-80GB\",vendor=\"nvidia\",name="), std::string::npos) << text;
  EXPECT_EQ(up.Stop(), 0) << up.output();
}

}  // namespace
}  // namespace gpugeek::cli
