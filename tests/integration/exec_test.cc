// `gpugeek exec` end to end, with real processes: `gpugeek server`, one `gpugeek agent` (its node API on
// --metrics-listen 127.0.0.1:0), the CLI, and curl for the raw stream and the exact HTTP statuses.
// A job writes a file and sleeps; exec then sees the member's environment and working folder, gets its
// stdout and stderr apart and byte for byte, and exits with the command's code. Another tenant gets 404,
// a viewer 403, a finished job 409. Port forwarding on the same pool: a member serving HTTP with Python's
// http.server is listed by `gpugeek ports` and reached by curl through `gpugeek port-forward`, byte for
// byte; no other port of the node is reachable.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "absl/strings/match.h"
#include "common/testing/process.h"
#include "http/client.h"
#include "http/upgrade_client.h"

extern char** environ;

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using subprocess::Process;

struct Output {
  int code = -1;
  std::string out, err;
};

// Runs `args` with stdout and stderr in two files (at most 60 s); returns the exit code and both.
Output RunSplit(const std::vector<std::string>& args, const fs::path& dir) {
  const fs::path out = dir / "split.out", err = dir / "split.err";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  Output r;
  if (posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) != 0) return r;
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  for (int i = 0; i < 1200; ++i) {
    if (waitpid(pid, &status, WNOHANG) == pid) break;
    std::this_thread::sleep_for(milliseconds(50));
    if (i == 1199) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
  }
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = subprocess::ReadFile(out);
  r.err = subprocess::ReadFile(err);
  return r;
}

class ExecEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpugeek_exec_e2e_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    subprocess::StartedServer server = subprocess::StartServer(GPUGEEK_BINARY, dir_ / "server", dir_ / "server.log");
    server_ = std::move(server.process);
    url_ = server.url;
    ASSERT_FALSE(url_.empty()) << server_->output();
    token_ = subprocess::UseAdminToken(dir_ / "server");
    ca_ = subprocess::UseServerCa(dir_ / "server");
    auto join = Client(token_).Post("/v1/join-tokens", {{"uses", 1}});
    ASSERT_TRUE(join.ok()) << join.status();
    subprocess::UseJoinToken((*join)["token"]);
    agent_ = std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "agent", "--server", server.agent_url, "--ca-file", ca_, "--name",
                                 node_, "--emulate", "1xH100-SXM-80GB", "--data-dir", (dir_ / "agent").string(),
                                 "--metrics-listen", metrics_listen_},
        dir_ / "agent.log");
    bool registered = false;
    for (int i = 0; i < 200 && !registered; ++i) {
      auto nodes = Client(token_).Get("/v1/nodes");
      registered = nodes.ok() && (*nodes)["nodes"].size() == 1;
      if (!registered) std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_TRUE(registered) << agent_->output();
    // Another tenant's member, and a viewer of the admin's own tenant.
    ASSERT_TRUE(Client(token_).Post("/v1/tenants", {{"name", "team-b"}}).ok());
    ASSERT_TRUE(
        Client(token_).Post("/v1/users", {{"name", "member-b"}, {"tenant", "team-b"}, {"role", "member"}}).ok());
    ASSERT_TRUE(
        Client(token_).Post("/v1/users", {{"name", "viewer-d"}, {"tenant", "default"}, {"role", "viewer"}}).ok());
    other_ = (*Client(token_).Post("/v1/tokens", {{"user", "member-b"}}))["token"];
    viewer_ = (*Client(token_).Post("/v1/tokens", {{"user", "viewer-d"}}))["token"];
  }
  void TearDown() override {
    agent_.reset();
    server_.reset();
    fs::remove_all(dir_);
  }

  http::Client& Client(const std::string& token) {
    client_ = *http::Client::Create({.base_url = url_, .ca_file = ca_, .bearer_token = token});
    return *client_;
  }
  std::string Submit(const std::string& yaml) {
    auto reply = Client(token_).Post("/v1/jobs", {{"spec_yaml", yaml}});
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? (*reply)["id"].get<std::string>() : "";
  }
  std::string WaitState(const std::string& id, const std::vector<std::string>& states) {
    std::string state;
    for (int i = 0; i < 600; ++i) {
      auto j = Client(token_).Get("/v1/jobs/" + id);
      if (j.ok()) state = (*j).value("state", "");
      for (const std::string& s : states) {
        if (s == state) return state;
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    return state;
  }
  Output Exec(const std::string& id, const std::vector<std::string>& command) {
    std::vector<std::string> args = {GPUGEEK_BINARY, "exec", id, "--server", url_, "--"};
    args.insert(args.end(), command.begin(), command.end());
    return RunSplit(args, dir_);
  }
  // curl's HTTP status and body for POST /v1/jobs/ID/exec with `body`, as the holder of `token`.
  Output Curl(const std::string& token, const std::string& id, const std::string& body) {
    return RunSplit({"/usr/bin/curl", "-sS", "--cacert", ca_, "-H", "Authorization: Bearer " + token, "-H",
                     "Content-Type: application/json", "--data-binary", body, "-o", (dir_ / "curl.body").string(), "-w",
                     "%{http_code}", url_ + "/v1/jobs/" + id + "/exec"},
                    dir_);
  }
  std::string CurlBody() { return subprocess::ReadFile(dir_ / "curl.body"); }

  std::string metrics_listen_ = "127.0.0.1:0";  // the agent's node API listener

  // Unique per process: ctest runs this file's tests in parallel, and an agent's name is its cgroup's.

  std::string node_ = "node-exec-" + std::to_string(::getpid());
  fs::path dir_;
  std::string url_, token_, ca_, other_, viewer_;
  std::unique_ptr<Process> server_, agent_;
  std::unique_ptr<http::Client> client_;
};

TEST_F(ExecEndToEnd, RunsBesideTheMemberAndEndsWithItsExitCode) {
  const std::string id = Submit(
      "name: sleeper\nresources: {accelerators: H100-SXM-80GB:1}\nenv: {GREETING: hello}\n"
      "run: printf 'data in the file\\n' > file.txt; exec sleep 300\n");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(WaitState(id, {"RUNNING", "FAILED", "SUCCEEDED"}), "RUNNING") << agent_->output();
  // The file appears once the member's shell ran; until then cat fails.
  Output r;
  for (int i = 0; i < 100; ++i) {
    r = Exec(id, {"sh", "-c", "echo out; echo err >&2; cat file.txt; exit 7"});
    if (r.out == "out\ndata in the file\n") break;
    std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(r.out, "out\ndata in the file\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.code, 7) << server_->output() << agent_->output();

  // The member's environment and working folder, without a shell in between.
  const fs::path workdir = dir_ / "agent" / "work" / (id + "-0");
  r = Exec(id, {"sh", "-c", "echo \"$GPUGEEK_JOB_ID $GREETING $GPUGEEK_NODE_RANK\"; pwd -P"});
  EXPECT_EQ(r.out, fmt::format("{} hello 0\n{}\n", id, fs::canonical(workdir).string()));
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.code, 0);
  r = Exec(id, {"printf", "%s|", "a b", "$HOME", "*"});
  EXPECT_EQ(r.out, "a b|$HOME|*|");  // argv as given: no shell expands anything
  EXPECT_EQ(r.code, 0);
  r = Exec(id, {"no-such-command-xyz"});
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "gpugeek exec: no-such-command-xyz: exec: no such file or directory\n");
  EXPECT_EQ(r.code, 127);
  // Killed by a signal: 128 + N, as a shell says.
  r = Exec(id, {"sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.code, 137);

  // A user who goes away ends the command: the server closes its connection to the agent, whose next write
  // fails, and it kills the command's group (the agent writes at least every 2 s: within a few of those).
  {
    Process cli({GPUGEEK_BINARY, "exec", id, "--server", url_, "--", "sh", "-c", "echo started; exec sleep 4242"},
                dir_ / "left.log");
    ASSERT_EQ(cli.WaitForOutput(std::regex("(started)")), "started") << cli.output();
    cli.Stop();
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {  // 10 s: a few keep-alives
      gone = subprocess::Run({"/usr/bin/pgrep", "-f", "^sleep 4242$"}, dir_ / "pgrep.log").first == 1;
      if (!gone) std::this_thread::sleep_for(milliseconds(100));
    }
    EXPECT_TRUE(gone) << "the command outlived its client by 10 s";
  }

  // The raw stream, byte for byte, through curl.
  r = Curl(token_, id, R"({"argv": ["sh", "-c", "printf abc; printf de >&2"]})");
  EXPECT_EQ(r.out, "200");
  const std::string body = CurlBody();
  EXPECT_TRUE(body == "stdout 3\nabcstderr 2\ndeexit 15\n{\"exit_code\":0}" ||
              body == "stderr 2\ndestdout 3\nabcexit 15\n{\"exit_code\":0}")
      << body;

  // Another tenant's member sees no such job; a viewer may not exec; bad input is 400.
  r = Curl(other_, id, R"({"argv": ["true"]})");
  EXPECT_EQ(r.out, "404");
  EXPECT_TRUE(absl::StrContains(CurlBody(), fmt::format("store: no job '{}'", id))) << CurlBody();
  r = Curl(viewer_, id, R"({"argv": ["true"]})");
  EXPECT_EQ(r.out, "403");
  r = Curl(token_, id, R"({"argv": []})");
  EXPECT_EQ(r.out, "400");
  r = Curl(token_, id, R"({"argv": ["true"], "rank": 1})");
  EXPECT_EQ(r.out, "400");
  EXPECT_TRUE(absl::StrContains(CurlBody(), "rank: must be 0..0")) << CurlBody();

  // A finished job: 409, and the CLI says why and exits 1.
  ASSERT_TRUE(Client(token_).Post("/v1/jobs/" + id + "/cancel", nlohmann::json::object()).ok());
  ASSERT_EQ(WaitState(id, {"CANCELLED"}), "CANCELLED");
  r = Curl(token_, id, R"({"argv": ["true"]})");
  EXPECT_EQ(r.out, "409");
  r = Exec(id, {"true"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, fmt::format("gpugeek exec: job {} is CANCELLED: exec needs a RUNNING job\n", id));

  // Every exec is in the audit log.
  auto audit = Client(token_).Get("/v1/audit?limit=1000");
  ASSERT_TRUE(audit.ok()) << audit.status();
  EXPECT_TRUE(absl::StrContains(audit->dump(), "/v1/jobs/{id}/exec")) << audit->dump();
}

TEST_F(ExecEndToEnd, PortForwardCarriesCurlToTheMembersServerAndToNoOtherPort) {
  const int port = subprocess::FreeLoopbackPort();
  const int foreign = subprocess::FreeLoopbackPort();
  // Beside the web server, a listener bound with IP_FREEBIND (15) to an address that is not the node's
  // (192.0.2.1, TEST-NET-1): the agent must never dial it.
  const std::string id = Submit(
      fmt::format("name: web\nresources: {{accelerators: H100-SXM-80GB:1}}\n"
                  "run: head -c 1048576 /dev/urandom > big.bin; printf 'hello through the tunnel\\n' > hello.txt; "
                  "/usr/bin/python3 -c \"import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_IP, 15, 1); "
                  "s.bind(('192.0.2.1', {})); s.listen(); time.sleep(600)\" & "
                  "exec /usr/bin/python3 -m http.server {} --bind 127.0.0.1\n",
                  foreign, port));
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(WaitState(id, {"RUNNING", "FAILED", "SUCCEEDED"}), "RUNNING") << agent_->output();

  // `gpugeek ports` lists the member's listener once Python bound it.
  const std::regex row(fmt::format("\n0 +{} +{} +127\\.0\\.0\\.1 *\n", node_, port));
  Output listed;
  for (int i = 0; i < 100 && !std::regex_search(listed.out, row); ++i) {
    listed = RunSplit({GPUGEEK_BINARY, "ports", id, "--server", url_}, dir_);
    if (!std::regex_search(listed.out, row)) std::this_thread::sleep_for(milliseconds(100));
  }
  ASSERT_TRUE(std::regex_search(listed.out, row)) << listed.out << listed.err << agent_->output();
  EXPECT_EQ(listed.code, 0);

  Process forward({GPUGEEK_BINARY, "port-forward", id, fmt::format(":{}", port), "--server", url_},
                  dir_ / "forward.log");
  const std::string local = forward.WaitForOutput(
      std::regex(fmt::format("Forwarding from 127\\.0\\.0\\.1:(\\d+) -> job {} rank 0 port {}", id, port)));
  ASSERT_FALSE(local.empty()) << forward.output();
  const std::string base = "http://127.0.0.1:" + local;
  Output got = RunSplit({"/usr/bin/curl", "-sS", base + "/hello.txt"}, dir_);
  EXPECT_EQ(got.out, "hello through the tunnel\n") << got.err << forward.output();
  EXPECT_EQ(got.code, 0);
  // 1 MiB of random bytes, byte for byte, and three connections at once.
  const fs::path copy = dir_ / "big.copy";
  got = RunSplit({"/bin/sh", "-c",
                  fmt::format("for i in 1 2 3; do curl -sS -o {}.$i {}/big.bin & done; wait", copy.string(), base)},
                 dir_);
  EXPECT_EQ(got.code, 0) << got.err;
  const std::string original = subprocess::ReadFile(dir_ / "agent" / "work" / (id + "-0") / "big.bin");
  ASSERT_EQ(original.size(), 1u << 20);
  for (int i = 1; i <= 3; ++i) {
    EXPECT_TRUE(subprocess::ReadFile(fmt::format("{}.{}", copy.string(), i)) == original) << "copy " << i;
  }

  // No other port of the node: the control plane's own port is on the same loopback, and is refused naming
  // the member's ports; so is a port nothing listens on.
  const int server_port = std::stoi(url_.substr(url_.rfind(':') + 1));
  auto open = [&](const std::string& token, int p) {
    return http::OpenUpgrade({.base_url = url_, .ca_file = ca_, .bearer_token = token}, "POST",
                             fmt::format("/v1/jobs/{}/port-forward?port={}", id, p), "gpugeek-tcp");
  };
  auto refused = open(token_, server_port);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_EQ(refused.status().message(), fmt::format("job {} rank 0 does not listen on port {} (its ports: {}, {})", id,
                                                    server_port, std::min(port, foreign), std::max(port, foreign)));
  auto ssrf = open(token_, foreign);
  ASSERT_EQ(ssrf.status().code(), absl::StatusCode::kPermissionDenied) << ssrf.status();
  EXPECT_EQ(ssrf.status().message(),
            fmt::format("job {} rank 0 listens on port {} at 192.0.2.1, not on the loopback or all addresses: "
                        "port-forward reaches only those (bind 127.0.0.1 or 0.0.0.0)",
                        id, foreign));
  EXPECT_EQ(open(token_, 0).status().message(), "port: must be a number 1..65535, got '0'");
  EXPECT_EQ(open(token_, port).status().code(), absl::StatusCode::kOk);
  // Another tenant: 404 word for word as a job that does not exist; a viewer: 403.
  EXPECT_EQ(open(other_, port).status().message(), fmt::format("store: no job '{}'", id));
  EXPECT_EQ(open(viewer_, port).status().code(), absl::StatusCode::kPermissionDenied);
  // A plain POST (no Upgrade) is 426 naming the protocol.
  got = RunSplit({"/usr/bin/curl", "-sS", "--cacert", ca_, "-H", "Authorization: Bearer " + token_, "-X", "POST", "-o",
                  (dir_ / "curl.body").string(), "-w", "%{http_code}",
                  fmt::format("{}/v1/jobs/{}/port-forward?port={}", url_, id, port)},
                 dir_);
  EXPECT_EQ(got.out, "426");
  EXPECT_TRUE(absl::StrContains(CurlBody(), "'Upgrade: gpugeek-tcp'")) << CurlBody();

  // The job ending ends port-forward (it checks every 5 s) with exit 0.
  ASSERT_TRUE(Client(token_).Post("/v1/jobs/" + id + "/cancel", nlohmann::json::object()).ok());
  bool exited = false;
  for (int i = 0; i < 300 && !exited; ++i) {
    exited = !forward.alive();
    if (!exited) std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_TRUE(exited) << forward.output();
  EXPECT_EQ(WEXITSTATUS(forward.Stop()), 0);
  EXPECT_TRUE(absl::StrContains(forward.output(), fmt::format("job {} is CANCELLED: port-forward stops", id)))
      << forward.output();
  got = RunSplit({GPUGEEK_BINARY, "ports", id, "--server", url_}, dir_);
  EXPECT_EQ(got.code, 1);
  EXPECT_EQ(got.err, fmt::format("gpugeek ports: job {} is CANCELLED: ports needs a RUNNING job\n", id));
}

// An agent started with --metrics-listen off has no node API: exec says so, naming the flag.
class ExecWithoutNodeApi : public ExecEndToEnd {
 protected:
  ExecWithoutNodeApi() { metrics_listen_ = "off"; }
};

TEST_F(ExecWithoutNodeApi, AnswersUnavailableNamingTheFlag) {
  const std::string id = Submit("name: sleeper\nresources: {accelerators: H100-SXM-80GB:1}\nrun: exec sleep 300\n");
  ASSERT_FALSE(id.empty());
  ASSERT_EQ(WaitState(id, {"RUNNING", "FAILED", "SUCCEEDED"}), "RUNNING") << agent_->output();
  Output r = Curl(token_, id, R"({"argv": ["true"]})");
  EXPECT_EQ(r.out, "503");
  r = Exec(id, {"true"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, fmt::format("gpugeek exec: node {} serves no node API, so exec cannot reach job {} rank 0: "
                               "start its agent with --metrics-listen HOST:PORT (not off)\n",
                               node_, id));
}

}  // namespace
}  // namespace gpugeek
