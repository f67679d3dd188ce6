// Active/standby control plane (`gpugeek server --ha`, docs/postgres.md "Active/standby"): two servers on one
// PostgreSQL database (the CTest fixture `postgres`, a schema of its own) and one shared data directory, both
// with one certificate (openssl) so clients trust one CA; two agents and the CLI's client given both servers'
// URLs.
//   1. SIGKILL the leader while a job runs: the standby leads within 10 s (default --leader-lease 4s), the
//      agents follow it, and the job's process keeps running through the fencing timeline (same pid, never
//      started twice, restarts 0).
//   2. The killed server comes back on its ports as a standby; the leader is SIGSTOPped (a frozen host) and the
//      standby leads within 10 s while it is still stopped; when the old leader resumes, a write sent to it while
//      it was stopped is refused (nothing of it is stored) and it exits 75.

#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <regex>

#include <fmt/format.h>

#include "common/testing/services.h"
#include "pool_fixture.h"

namespace gpugeek::testing {
namespace {

using Clock = std::chrono::steady_clock;

class HaFailoverTest : public PoolFixture {
 protected:
  struct Server {
    std::unique_ptr<subprocess::Process> process;
    std::string api, agents;  // its own URLs
  };
  // Starts `gpugeek server --ha` on loopback ports the kernel chose; waits for its "standby on" line.
  // `api_port`, `agent_port`: 0 = any free one (a restarted server comes back on its own ports).
  Server StartHa(const std::string& name, int api_port = 0, int agent_port = 0) {
    Server s;
    s.process = std::make_unique<subprocess::Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "server", "--listen", fmt::format("127.0.0.1:{}", api_port),
                                 "--agent-listen", fmt::format("127.0.0.1:{}", agent_port), "--data-dir",
                                 (dir_ / "server").string(), "--store", store_, "--ha", "--tls-cert",
                                 (dir_ / "cert.pem").string(), "--tls-key", (dir_ / "key.pem").string()},
        dir_ / (name + ".log"));
    s.api = s.process->WaitForOutput(std::regex(R"(standby on (https://127\.0\.0\.1:[0-9]+), agents)"));
    s.agents =
        s.process->WaitForOutput(std::regex(R"(standby on https://\S+, agents on (https://127\.0\.0\.1:[0-9]+))"));
    EXPECT_FALSE(s.api.empty()) << s.process->output();
    return s;
  }
  // Waits (at most `limit`) until `s` says it leads under `token`.
  static bool WaitLeader(const Server& s, int token, std::chrono::milliseconds limit) {
    return !s.process->WaitForOutput(std::regex(fmt::format(R"(leader \(lease token ({})\))", token)), limit).empty();
  }
  static int Port(const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); }
  std::string store_;
};

TEST_F(HaFailoverTest, KillingTheLeaderMovesLeadershipAndAgentsKeepTheirJobsAndADeposedLeaderCommitsNothing) {
  const std::string base = PostgresTestUrl();
  if (base.empty()) {
    if (InCi()) FAIL() << "no PostgreSQL (scripts/postgres-test-server.sh up failed)";
    GTEST_SKIP() << "no PostgreSQL here";
  }
  const std::string schema = "ha_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(fmt::format("psql -q '{}' -c 'CREATE SCHEMA {}' >/dev/null", base, schema).c_str()), 0);
  store_ = base + (base.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema;
  MakeScratch("ha_failover");
  ::signal(SIGPIPE, SIG_IGN);
  ASSERT_EQ(std::system(fmt::format("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
                                    "-subj /CN=gpugeek-ha-test -addext subjectAltName=IP:127.0.0.1 -keyout {} -out {} "
                                    ">/dev/null 2>&1",
                                    (dir_ / "key.pem").string(), (dir_ / "cert.pem").string())
                            .c_str()),
            0);

  Server a = StartHa("a");
  ASSERT_TRUE(WaitLeader(a, 1, std::chrono::seconds(20))) << a.process->output();
  Server b = StartHa("b");
  ASSERT_FALSE(b.process->WaitForOutput(std::regex("standby; the leader is at (" + a.api + ")")).empty())
      << b.process->output();

  // Clients and agents know both servers.
  url_ = a.api + "," + b.api;
  ca_ = (dir_ / "cert.pem").string();
  ::setenv("GPUGEEK_CA_FILE", ca_.c_str(), 1);
  token_ = subprocess::UseAdminToken(dir_ / "server");
  auto join = Client().Post("/v1/join-tokens", {{"uses", 2}});
  ASSERT_TRUE(join.ok()) << join.status();
  subprocess::UseJoinToken((*join)["token"]);
  const std::string agents = a.agents + "," + b.agents;
  StartAgent(agents, "n1");
  StartAgent(agents, "n2");

  const fs::path pids = dir_ / "pids";
  auto job = Client().Post("/v1/jobs",
                           {{"spec_yaml", fmt::format("name: steady\nresources: {{accelerators: H100-SXM-80GB:1}}\n"
                                                      "run: echo $$ >> {}; exec sleep 600\n",
                                                      pids.string())}});
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = (*job)["id"];
  std::string pid;
  for (int i = 0; i < 400 && pid.empty(); ++i) {
    std::ifstream in(pids);
    std::getline(in, pid);
    if (pid.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(pid.empty()) << "the job never started: " << AgentOutputs();
  absl::StatusOr<nlohmann::json> before;
  for (int i = 0; i < 400; ++i) {  // the agent's report of the start follows the start
    before = Client().Get("/v1/jobs/" + id);
    if (before.ok() && (*before)["state"] == "RUNNING") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_EQ((*before)["state"], "RUNNING");

  // A plain client at the standby: a redirect to the same path on the leader (curl -L would follow it).
  auto [curl_exit, curl_out] =
      subprocess::Run({"/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", "--cacert", ca_,
                       "-H", "Authorization: Bearer " + token_, b.api + "/v1/jobs/" + id + "?watch=0"},
                      dir_ / "curl.log");
  EXPECT_EQ(curl_out, fmt::format("307 {}/v1/jobs/{}?watch=0", a.api, id));
  auto [health_exit, health] = subprocess::Run(
      {"/usr/bin/curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", ca_, b.api + "/v1/healthz"},
      dir_ / "curl.log");
  EXPECT_EQ(health, "503");  // alive, not serving: a load balancer picks the leader

  // 1. SIGKILL the leader.
  const auto killed = Clock::now();
  kill(a.process->pid(), SIGKILL);
  a.process->Stop();
  ASSERT_TRUE(WaitLeader(b, 2, std::chrono::seconds(15))) << b.process->output();
  auto listed = http::Client::Create({.base_url = url_, .ca_file = ca_, .bearer_token = token_});
  ASSERT_TRUE(listed.ok()) << listed.status();
  absl::StatusOr<nlohmann::json> served;
  for (int i = 0; i < 200; ++i) {  // the new leader answers through the clients' list
    served = (*listed)->Get("/v1/jobs/" + id);
    if (served.ok()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double failover = std::chrono::duration<double>(Clock::now() - killed).count();
  ASSERT_TRUE(served.ok()) << served.status();
  fmt::print("leader SIGKILLed: the standby leads and serves after {:.1f} s\n", failover);
  EXPECT_LT(failover, 10.0);
  EXPECT_EQ((*listed)->current_base_url(), b.api);
  auto [cli_exit, cli_out] = Cli({"jobs"});  // the CLI with --server A,B: A is gone, B leads
  EXPECT_EQ(cli_exit, 0) << cli_out;
  EXPECT_NE(cli_out.find(id), std::string::npos) << cli_out;

  // Past the whole fencing timeline counted from the new leader's start (--lease 12s + grace + margin): a node
  // whose agent had not found the new leader would be down and its job requeued by now.
  std::this_thread::sleep_for(std::chrono::seconds(15));
  auto after = Client().Get("/v1/jobs/" + id);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ((*after)["state"], "RUNNING") << after->dump();
  EXPECT_EQ((*after)["restarts"], 0);
  EXPECT_EQ((*after)["epoch"], (*before)["epoch"]);
  EXPECT_EQ(kill(std::stoi(pid), 0), 0) << "the job's process is gone";
  std::ifstream lines(pids);
  int started = 0;
  for (std::string line; std::getline(lines, line);) ++started;
  EXPECT_EQ(started, 1) << "the job started twice";
  auto nodes = Client().Get("/v1/nodes");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  for (const auto& n : (*nodes)["nodes"]) EXPECT_EQ(n["state"], "ready") << n.dump();

  // 2. The old leader's host comes back as a standby; the new leader freezes past its lease.
  Server a2 = StartHa("a2", Port(a.api), Port(a.agents));
  ASSERT_FALSE(a2.process->WaitForOutput(std::regex("standby; the leader is at (" + b.api + ")")).empty())
      << a2.process->output();
  const auto frozen = Clock::now();
  kill(b.process->pid(), SIGSTOP);
  // a2 leads while b is still frozen (a takeover ends b's sessions if b froze inside a write).
  ASSERT_TRUE(WaitLeader(a2, 3, std::chrono::seconds(15))) << a2.process->output();
  const double takeover = std::chrono::duration<double>(Clock::now() - frozen).count();
  fmt::print("leader SIGSTOPped: the standby leads after {:.1f} s, the frozen leader still stopped\n", takeover);
  EXPECT_LT(takeover, 10.0);
  // A write sent to the frozen leader: its connection waits in the kernel until b runs again.
  absl::StatusOr<nlohmann::json> late = absl::UnknownError("not sent");
  std::thread late_writer([&] {
    auto c = http::Client::Create({.base_url = b.api, .ca_file = ca_, .bearer_token = token_});
    if (c.ok()) {
      late = (*c)->Post("/v1/jobs", {{"spec_yaml",
                                      "name: late-write\nresources: {accelerators: H100-SXM-80GB:1}\n"
                                      "run: true\n"}});
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(b.process->pid(), SIGCONT);
  late_writer.join();
  EXPECT_FALSE(late.ok()) << "the deposed leader acknowledged a write: " << late->dump();
  int status = -1;
  for (int i = 0; i < 200 && b.process->alive(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  status = b.process->Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 75) << "status " << status << "\n" << b.process->output();
  EXPECT_NE(b.process->output().find("exiting at once"), std::string::npos) << b.process->output();
  url_ = a2.api + "," + b.api;
  auto jobs = Client().Get("/v1/jobs?limit=100");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  for (const auto& j : (*jobs)["jobs"]) EXPECT_NE(j["name"], "late-write") << "a fenced write was stored";
  const std::string out = b.process->output();
  const size_t why = out.find("exiting at once");
  fmt::print("deposed leader: its late write answered '{}'; it exited {}: {}\n",
             late.ok() ? "ok" : std::string(late.status().message()).substr(0, 100),
             WIFEXITED(status) ? WEXITSTATUS(status) : -1,
             why == std::string::npos ? "" : out.substr(out.rfind('\n', why) + 1, why - out.rfind('\n', why) + 15));

  a2.process->Stop();
  std::system(fmt::format("psql -q '{}' -c 'DROP SCHEMA {} CASCADE' >/dev/null 2>&1", base, schema).c_str());
}

}  // namespace
}  // namespace gpugeek::testing
