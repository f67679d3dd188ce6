// TLS on every listener, checked from outside with `openssl s_client` and curl against the real
// processes: a `gpugeek server` with its zero-configuration local CA (API and agents' listener) and a
// `gpugeek agent` that pins that CA and serves its metrics over TLS with a certificate from the same CA.
// For each of the three listeners:
//   - TLS 1.3 with the CA is accepted (the certificate verifies and names 127.0.0.1);
//   - TLS 1.2 and TLS 1.1 are refused at the handshake;
//   - a client without the CA refuses the certificate;
//   - plain HTTP to the TLS port gets no HTTP answer;
//   - new certificate files and a SIGHUP: a new connection sees the new certificate, same process.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "common/testing/process.h"
#include "http/client.h"
#include "pki/pki.h"

namespace gpugeek {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using subprocess::Process;

struct Listener {
  std::string name;
  int port = 0;
};

int PortOf(const std::string& url) { return std::stoi(url.substr(url.rfind(':') + 1)); }

// Runs a shell command line (stdin /dev/null, at most 60 s); {exit code, stdout+stderr}.
std::pair<int, std::string> Shell(const std::string& command, const fs::path& log) {
  return subprocess::Run({"/bin/sh", "-c", "exec </dev/null; " + command}, log);
}

// `openssl s_client` to 127.0.0.1:port with `flags`, cut off after 20 s.
std::pair<int, std::string> SClient(int port, const std::string& flags, const fs::path& log) {
  return Shell(fmt::format("timeout 20 openssl s_client -connect 127.0.0.1:{} {}", port, flags), log);
}

std::string StripLeadingZeros(std::string hex) {
  while (hex.size() > 1 && hex.front() == '0') hex.erase(hex.begin());
  return hex;
}

class TlsListeners : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("gpugeek_tls_" + std::to_string(::getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    server_ = std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "server", "--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0",
                                 "--data-dir", (*dir_ / "server").string()},
        *dir_ / "server.log");
    std::smatch m;
    std::string out;  // m points into it
    const std::regex listening(
        R"(listening on (https://127\.0\.0\.1:[0-9]+), agents on (https://127\.0\.0\.1:[0-9]+))");
    for (int i = 0; i < 600 && !std::regex_search(out, m, listening); ++i) {
      std::this_thread::sleep_for(milliseconds(50));
      out = server_->output();
    }
    ASSERT_EQ(m.size(), 3u) << "server did not start over https: " << server_->output();
    *url_ = m[1];
    const std::string agent_url = m[2];
    token_ = new std::string(subprocess::UseAdminToken(*dir_ / "server"));
    ca_ = new std::string(subprocess::UseServerCa(*dir_ / "server"));
    ASSERT_TRUE(fs::exists(*ca_));
    {
      // The agent joins with an admin's join token, over the same TLS.
      auto admin = http::Client::Create({.base_url = *url_, .ca_file = *ca_, .bearer_token = *token_});
      ASSERT_TRUE(admin.ok()) << admin.status();
      auto join = (*admin)->Post("/v1/join-tokens", {{"uses", 1}});
      ASSERT_TRUE(join.ok()) << join.status();
      subprocess::UseJoinToken((*join)["token"]);
    }

    // The agent's metrics certificate: from the server's CA, naming the loopback address it binds.
    IssueInto("gpugeek agent metrics", *dir_ / "metrics.crt", *dir_ / "metrics.key");
    agent_ = std::make_unique<Process>(
        std::vector<std::string>{GPUGEEK_BINARY, "agent", "--server", agent_url, "--ca-file", *ca_, "--name",
                                 "tls-" + std::to_string(::getpid()), "--emulate", "1xL4", "--no-cgroups", "--data-dir",
                                 (*dir_ / "agent").string(), "--metrics-listen", "127.0.0.1:0", "--metrics-tls-cert",
                                 (*dir_ / "metrics.crt").string(), "--metrics-tls-key",
                                 (*dir_ / "metrics.key").string()},
        *dir_ / "agent.log");
    const std::string metrics_url =
        agent_->WaitForOutput(std::regex(R"(agent metrics on (https://127\.0\.0\.1:[0-9]+)/metrics)"), seconds(30));
    ASSERT_FALSE(metrics_url.empty()) << agent_->output();
    *listeners_ = {{"api", PortOf(*url_)}, {"agents", PortOf(agent_url)}, {"agent metrics", PortOf(metrics_url)}};

    // The agent registered over its https channel, trusting only the pinned CA.
    auto client = http::Client::Create({.base_url = *url_, .ca_file = *ca_, .bearer_token = *token_});
    ASSERT_TRUE(client.ok()) << client.status();
    bool registered = false;
    for (int i = 0; i < 600 && !registered; ++i) {
      auto nodes = (*client)->Get("/v1/nodes");
      registered = nodes.ok() && (*nodes)["nodes"].size() == 1;
      if (!registered) std::this_thread::sleep_for(milliseconds(50));
    }
    ASSERT_TRUE(registered) << "the agent did not register over TLS: " << agent_->output();
  }

  static void TearDownTestSuite() {
    agent_.reset();
    server_.reset();
    fs::remove_all(*dir_);
  }

  // Signs a new certificate for 127.0.0.1 and localhost with the server's CA and writes it over `cert`
  // and `key` (each atomically). Returns its serial, upper-case hex without leading zeros.
  static std::string IssueInto(const std::string& cn, const fs::path& cert, const fs::path& key) {
    auto ca = pki::CertificateAuthority::Load(*ca_, (*dir_ / "server" / "tls" / "ca.key").string());
    EXPECT_TRUE(ca.ok()) << ca.status();
    if (!ca.ok()) return "";
    auto issued = pki::IssueCertificate(
        *ca, {.common_name = cn, .dns_names = {"localhost"}, .ip_addresses = {"127.0.0.1", "::1"}});
    EXPECT_TRUE(issued.ok()) << issued.status();
    if (!issued.ok()) return "";
    // Key first: a reload between the two writes would pair the old certificate with the new key and
    // be refused (the old pair stays in use); the test signals only after both.
    EXPECT_TRUE(pki::WriteFileAtomically(key.string(), issued->key_pem, 0600).ok());
    EXPECT_TRUE(pki::WriteFileAtomically(cert.string(), issued->cert_pem, 0644).ok());
    auto info = pki::InspectCertificate(issued->cert_pem);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? StripLeadingZeros(info->serial_hex) : "";
  }

  // The serial of the certificate a new TLS 1.3 connection to `port` is served; "" when none.
  static std::string ServedSerial(int port) {
    auto [code, out] = Shell(fmt::format("timeout 20 openssl s_client -connect 127.0.0.1:{} -tls1_3 -CAfile {} "
                                         "-verify_return_error 2>/dev/null | openssl x509 -noout -serial",
                                         port, *ca_),
                             *dir_ / "serial.log");
    std::smatch m;
    if (code != 0 || !std::regex_search(out, m, std::regex("serial=([0-9A-F]+)"))) return "";
    return StripLeadingZeros(m[1]);
  }

  static inline fs::path* dir_ = nullptr;
  static inline std::string* url_ = new std::string();
  static inline std::string* token_ = nullptr;
  static inline std::string* ca_ = nullptr;
  static inline std::vector<Listener>* listeners_ = new std::vector<Listener>();
  static inline std::unique_ptr<Process> server_;
  static inline std::unique_ptr<Process> agent_;
};

TEST_F(TlsListeners, Tls13WithTheCaIsAccepted) {
  for (const Listener& l : *listeners_) {
    SCOPED_TRACE(l.name);
    auto [code, out] =
        SClient(l.port, fmt::format("-tls1_3 -CAfile {} -verify_return_error -verify_ip 127.0.0.1", *ca_),
                *dir_ / "s_client.log");
    EXPECT_EQ(code, 0) << out;
    EXPECT_NE(out.find("TLSv1.3"), std::string::npos) << out;
    EXPECT_NE(out.find("Verify return code: 0 (ok)"), std::string::npos) << out;
    EXPECT_NE(out.find("BEGIN CERTIFICATE"), std::string::npos) << out;
  }
}

TEST_F(TlsListeners, Tls12AndOlderAreRefused) {
  for (const Listener& l : *listeners_) {
    SCOPED_TRACE(l.name);
    auto [code, out] = SClient(l.port, "-tls1_2 -CAfile " + *ca_, *dir_ / "s_client.log");
    EXPECT_NE(code, 0) << out;
    EXPECT_EQ(out.find("BEGIN CERTIFICATE"), std::string::npos) << "no certificate without a handshake: " << out;
    // OpenSSL 3 may refuse TLS 1.1 on the client side already (security level); either way there is
    // no session.
    auto [code11, out11] = SClient(l.port, "-tls1_1 -CAfile " + *ca_, *dir_ / "s_client.log");
    EXPECT_NE(code11, 0) << out11;
    EXPECT_EQ(out11.find("BEGIN CERTIFICATE"), std::string::npos) << out11;
  }
}

TEST_F(TlsListeners, AClientWithoutTheCaRefusesTheCertificate) {
  for (const Listener& l : *listeners_) {
    SCOPED_TRACE(l.name);
    // The system's trust store only: the local CA is not in it.
    auto [code, out] = SClient(l.port, "-tls1_3 -verify_return_error", *dir_ / "s_client.log");
    EXPECT_NE(code, 0) << out;
    EXPECT_NE(out.find("verify error"), std::string::npos) << out;
  }
  // The CLI too: trusting anything but the CA (here a leaf certificate of it) fails the handshake.
  auto [code, out] = subprocess::RunCli({"nodes", "--server", *url_, "--ca-file", (*dir_ / "metrics.crt").string()},
                                        *dir_ / "cli.log");
  EXPECT_NE(code, 0) << out;
  auto [ok_code, ok_out] = subprocess::RunCli({"nodes", "--server", *url_}, *dir_ / "cli.log");  // $GPUGEEK_CA_FILE
  EXPECT_EQ(ok_code, 0) << ok_out;
}

TEST_F(TlsListeners, PlainHttpGetsNoHttpAnswer) {
  for (const Listener& l : *listeners_) {
    SCOPED_TRACE(l.name);
    auto [code, out] =
        Shell(fmt::format("curl -s -o /dev/null -w 'status=%{{http_code}}' --max-time 15 http://127.0.0.1:{}/metrics",
                          l.port),
              *dir_ / "curl.log");
    EXPECT_NE(code, 0) << out;
    EXPECT_NE(out.find("status=000"), std::string::npos) << out;
  }
  // And https with the CA answers.
  auto [code, out] = Shell(fmt::format("curl -s --fail --cacert {} -o /dev/null -w 'status=%{{http_code}}' "
                                       "--max-time 15 {}/v1/healthz",
                                       *ca_, *url_),
                           *dir_ / "curl.log");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("status=200"), std::string::npos) << out;
}

TEST_F(TlsListeners, SighupReloadsTheCertificatesWithoutRestart) {
  const pid_t server_pid = server_->pid();
  const pid_t agent_pid = agent_->pid();
  const std::vector<Listener>& ls = *listeners_;
  const std::string old_api = ServedSerial(ls[0].port);
  const std::string old_metrics = ServedSerial(ls[2].port);
  ASSERT_FALSE(old_api.empty());
  ASSERT_FALSE(old_metrics.empty());
  EXPECT_EQ(ServedSerial(ls[1].port), old_api) << "both server listeners serve one certificate";

  // The server: a new certificate from the same CA in place of its local one (kept by the renewal check:
  // signed by the CA, far from expiry), then SIGHUP.
  const std::string new_server =
      IssueInto("gpugeek server", *dir_ / "server" / "tls" / "server.crt", *dir_ / "server" / "tls" / "server.key");
  ASSERT_FALSE(new_server.empty());
  ASSERT_NE(new_server, old_api);
  // Files alone change nothing: the listeners read them on SIGHUP.
  EXPECT_EQ(ServedSerial(ls[0].port), old_api);
  ASSERT_EQ(::kill(server_pid, SIGHUP), 0);
  const std::string new_metrics = IssueInto("gpugeek agent metrics", *dir_ / "metrics.crt", *dir_ / "metrics.key");
  ASSERT_FALSE(new_metrics.empty());
  ASSERT_EQ(::kill(agent_pid, SIGHUP), 0);

  const auto wait_for = [](int port, const std::string& serial) {
    std::string served;
    for (auto end = std::chrono::steady_clock::now() + seconds(30); std::chrono::steady_clock::now() < end;) {
      served = ServedSerial(port);
      if (served == serial) break;
      std::this_thread::sleep_for(milliseconds(200));
    }
    return served;
  };
  EXPECT_EQ(wait_for(ls[0].port, new_server), new_server) << server_->output();
  EXPECT_EQ(wait_for(ls[1].port, new_server), new_server) << server_->output();
  EXPECT_EQ(wait_for(ls[2].port, new_metrics), new_metrics) << agent_->output();

  // The same processes, still serving.
  EXPECT_TRUE(server_->alive());
  EXPECT_TRUE(agent_->alive());
  EXPECT_EQ(server_->pid(), server_pid);
  EXPECT_EQ(agent_->pid(), agent_pid);
  EXPECT_NE(server_->output().find("SIGHUP received: certificates reloaded"), std::string::npos) << server_->output();
  EXPECT_NE(agent_->output().find("SIGHUP received: metrics certificate reloaded"), std::string::npos)
      << agent_->output();
  auto [code, out] = subprocess::RunCli({"nodes", "--server", *url_}, *dir_ / "cli.log");
  EXPECT_EQ(code, 0) << out;
}

}  // namespace
}  // namespace gpugeek
