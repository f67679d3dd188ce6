// TLS on http::Server and http::Client, against real clients: `openssl s_client` and `curl` processes,
// OpenSSL in-process for what those cannot show (one connection kept across a certificate reload), and
// http::Client itself. Certificates come from pki::EnsureLocalPki in a temporary directory.

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "common/testing/process.h"
#include "http/client.h"
#include "http/server.h"
#include "http/upgrade_client.h"
#include "pki/pki.h"

namespace gpugeek::http {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

int64_t Ms(Duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void Spit(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

bool HaveTool(const std::string& tool) { return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0; }

// A shell command's exit status and its stdout + stderr. `timeout` stops a hung process (exit 124).
struct RunResult {
  int exit_code = -1;
  std::string output;
};
RunResult RunShell(const std::string& command, const std::filesystem::path& scratch) {
  const std::string out = (scratch / "run.out").string();
  const int status = std::system(fmt::format("timeout 30 {} >{} 2>&1", command, out).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, Slurp(out)};
}

// The first PEM certificate in `text` (s_client prints the server's), or "".
std::string FirstPem(const std::string& text) {
  const size_t begin = text.find("-----BEGIN CERTIFICATE-----");
  const std::string end_marker = "-----END CERTIFICATE-----";
  const size_t end = text.find(end_marker, begin == std::string::npos ? 0 : begin);
  if (begin == std::string::npos || end == std::string::npos) return "";
  return text.substr(begin, end + end_marker.size() - begin) + "\n";
}

std::string SerialOf(const std::string& pem) {
  auto info = pki::InspectCertificate(pem);
  return info.ok() ? info->serial_hex : "(" + std::string(info.status().message()) + ")";
}

int ConnectTcp(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  // No read may hang a test.
  timeval tv{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  return fd;
}

// `openssl s_server -www` in a child process, killed on destruction.
class OpensslServer {
 public:
  OpensslServer(int port, const std::string& version_flag, const std::string& cert, const std::string& key) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string accept = fmt::format("127.0.0.1:{}", port);
      ::execlp("openssl", "openssl", "s_server", "-quiet", "-www", "-accept", accept.c_str(), version_flag.c_str(),
               "-cert", cert.c_str(), "-key", key.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Ready once it accepts a TCP connection.
    for (int i = 0; i < 200 && !ready_; ++i) {
      const int fd = ConnectTcp(port);
      if (fd >= 0) {
        ::close(fd);
        ready_ = true;
      } else {
        std::this_thread::sleep_for(milliseconds(50));
      }
    }
  }
  ~OpensslServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  OpensslServer(const OpensslServer&) = delete;
  OpensslServer& operator=(const OpensslServer&) = delete;

  bool ready() const { return ready_; }

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
};

// A blocking TLS client in-process (OpenSSL), for one connection's view: its peer certificate, and
// requests over it after the server changed certificates.
class TlsConnection {
 public:
  TlsConnection(int port, const std::string& ca_file) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx_, ca_file.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    fd_ = ConnectTcp(port);
    if (fd_ < 0) return;
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    SSL_set1_host(ssl_, "localhost");
    SSL_set_tlsext_host_name(ssl_, "localhost");
    handshake_ok_ = SSL_connect(ssl_) == 1;
    ERR_clear_error();
  }
  ~TlsConnection() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (fd_ >= 0) ::close(fd_);
    SSL_CTX_free(ctx_);
  }
  TlsConnection(const TlsConnection&) = delete;
  TlsConnection& operator=(const TlsConnection&) = delete;

  bool handshake_ok() const { return handshake_ok_; }

  std::string PeerSerial() const {
    const X509* cert = SSL_get0_peer_certificate(ssl_);
    if (cert == nullptr) return "";
    BIO* bio = BIO_new(BIO_s_mem());
    PEM_write_bio_X509(bio, const_cast<X509*>(cert));
    char* data = nullptr;
    const long n = BIO_get_mem_data(bio, &data);
    const std::string pem(data, static_cast<size_t>(n));
    BIO_free(bio);
    return SerialOf(pem);
  }

  // Sends a keep-alive GET and reads one response with a Content-Length; "" on failure.
  std::string Get(const std::string& path) {
    const std::string request = fmt::format("GET {} HTTP/1.1\r\nHost: localhost\r\n\r\n", path);
    if (SSL_write(ssl_, request.data(), static_cast<int>(request.size())) <= 0) return "";
    std::string out;
    for (;;) {
      const size_t head_end = out.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const size_t cl = out.find("Content-Length: ");
        if (cl != std::string::npos && cl < head_end && out.size() >= head_end + 4 + std::stoul(out.substr(cl + 16))) {
          return out;
        }
      }
      char buf[4096];
      const int n = SSL_read(ssl_, buf, sizeof(buf));
      if (n <= 0) {
        ERR_clear_error();
        return "";
      }
      out.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool handshake_ok_ = false;
};

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("gpugeek_tls_test_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto local = pki::EnsureLocalPki({.dir = (dir_ / "pki").string(), .add_hostname = false});
    ASSERT_TRUE(local.ok()) << local.status();
    pki_ = *local;
    auto ca = pki::CertificateAuthority::Load(pki_.ca_cert_file, pki_.ca_key_file);
    ASSERT_TRUE(ca.ok()) << ca.status();
    ca_.emplace(*ca);
  }
  void TearDown() override {
    if (server_) server_->Stop();
    std::filesystem::remove_all(dir_);
  }

  TlsOptions ServerTls() const { return {.cert_file = pki_.server_cert_file, .key_file = pki_.server_key_file}; }

  void StartServer(TlsOptions tls, Duration header_timeout = seconds(10)) {
    auto server = Server::Create(
        {.host = "127.0.0.1", .port = 0, .name = "tls-test", .header_timeout = header_timeout, .tls = std::move(tls)});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    server_->Route("GET", "/x", [](const Request&) -> absl::StatusOr<Reply> { return Reply::Text("hello over tls"); });
    server_->Route("GET", "/whoami", [](const Request& r) -> absl::StatusOr<Reply> {
      return Reply::Json(
          {{"cn", r.peer_common_name},
           {"authorization", r.headers.count("authorization") > 0 ? r.headers.at("authorization") : ""}});
    });
    server_->Route("POST", "/echo", [](const Request& r) -> absl::StatusOr<Reply> {
      auto body = r.JsonBody();
      if (!body.ok()) return body.status();
      return Reply::Json({{"bytes", r.body.size()}, {"n", (*body)["items"].size()}});
    });
    server_->Route("GET", "/stream", [](const Request&) -> absl::StatusOr<Reply> {
      Reply reply;
      reply.content_type = "text/plain";
      reply.stream = [](const ChunkWriter& write) {
        for (int i = 0; i < 3; ++i) write(fmt::format("chunk{};", i));
      };
      return reply;
    });
    server_->Route("POST", "/upgrade", [](const Request&) -> absl::StatusOr<Reply> {
      Reply reply;
      reply.upgrade_protocol = "echo";
      reply.upgrade = [](ByteStream& s) {
        std::string piece;
        while (s.Read(piece) && s.Write("echo:" + piece)) {
        }
      };
      return reply;
    });
    ASSERT_TRUE(server_->Start().ok());
  }

  // A certificate for `cn` from the local CA (or `ca`), written to <dir>/<name>.crt/.key.
  std::pair<std::string, std::string> WriteCert(const std::string& name, pki::CertRequest request,
                                                const pki::CertificateAuthority* ca = nullptr) {
    auto issued = pki::IssueCertificate(ca != nullptr ? *ca : *ca_, request);
    EXPECT_TRUE(issued.ok()) << issued.status();
    const std::string cert = (dir_ / (name + ".crt")).string();
    const std::string key = (dir_ / (name + ".key")).string();
    Spit(cert, issued->cert_pem);
    Spit(key, issued->key_pem);
    return {cert, key};
  }

  std::string SClient(const std::string& extra) const {
    return fmt::format("openssl s_client -connect 127.0.0.1:{} -servername localhost {}", server_->port(), extra);
  }

  std::filesystem::path dir_;
  pki::LocalPki pki_;
  std::optional<pki::CertificateAuthority> ca_;
  std::unique_ptr<Server> server_;
};

TEST_F(TlsTest, CreateChecksTheTlsFilesAndOptions) {
  auto missing = Server::Create({.tls = {.cert_file = (dir_ / "nope.crt").string(), .key_file = pki_.server_key_file}});
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("nope.crt"), std::string::npos);

  auto mismatch = Server::Create({.tls = {.cert_file = pki_.server_cert_file, .key_file = pki_.ca_key_file}});
  EXPECT_TRUE(absl::IsInvalidArgument(mismatch.status())) << mismatch.status();
  EXPECT_NE(mismatch.status().message().find(pki_.ca_key_file), std::string::npos) << mismatch.status();

  Spit((dir_ / "garbage.crt").string(), "garbage");
  auto garbage =
      Server::Create({.tls = {.cert_file = (dir_ / "garbage.crt").string(), .key_file = pki_.server_key_file}});
  EXPECT_TRUE(absl::IsInvalidArgument(garbage.status())) << garbage.status();
  EXPECT_NE(garbage.status().message().find("garbage.crt"), std::string::npos);

  EXPECT_TRUE(absl::IsInvalidArgument(Server::Create({.tls = {.cert_file = pki_.server_cert_file}}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      Server::Create(
          {.tls = {.cert_file = pki_.server_cert_file, .key_file = pki_.server_key_file, .require_client_cert = true}})
          .status()));
  auto plain = Server::Create({});
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition((*plain)->ReloadCertificates()));
}

TEST_F(TlsTest, OpensslSClientGetsTheReplyOverTls13AndVerifiesTheServer) {
  if (!HaveTool("openssl")) GTEST_SKIP() << "openssl (the command) is not installed";
  StartServer(ServerTls());
  EXPECT_TRUE(server_->url().starts_with("https://127.0.0.1:")) << server_->url();
  Spit((dir_ / "get.txt").string(), "GET /x HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");

  const RunResult ok = RunShell(SClient(fmt::format("-tls1_3 -CAfile {} -verify_return_error -ign_eof <{}",
                                                    pki_.ca_cert_file, (dir_ / "get.txt").string())),
                                dir_);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("TLSv1.3"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("Verify return code: 0 (ok)"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("HTTP/1.1 200 OK"), std::string::npos) << ok.output;
  EXPECT_NE(ok.output.find("hello over tls"), std::string::npos) << ok.output;
  EXPECT_EQ(SerialOf(FirstPem(ok.output)), SerialOf(Slurp(pki_.server_cert_file)));

  // TLS 1.2 is refused at the handshake: no reply.
  const int64_t failures = server_->stats().tls_handshake_failures;
  const RunResult tls12 = RunShell(SClient(fmt::format("-tls1_2 -CAfile {} -verify_return_error -ign_eof <{}",
                                                       pki_.ca_cert_file, (dir_ / "get.txt").string())),
                                   dir_);
  EXPECT_NE(tls12.exit_code, 0) << tls12.output;
  EXPECT_EQ(tls12.output.find("hello over tls"), std::string::npos) << tls12.output;
  EXPECT_NE(tls12.output.find("alert protocol version"), std::string::npos) << tls12.output;
  EXPECT_EQ(server_->stats().tls_handshake_failures, failures + 1);

  // Without our CA the client cannot verify the server and, with -verify_return_error, gives up.
  const RunResult unverified =
      RunShell(SClient(fmt::format("-tls1_3 -verify_return_error -ign_eof <{}", (dir_ / "get.txt").string())), dir_);
  EXPECT_NE(unverified.exit_code, 0) << unverified.output;
  EXPECT_NE(unverified.output.find("verify error"), std::string::npos) << unverified.output;
  EXPECT_EQ(unverified.output.find("hello over tls"), std::string::npos) << unverified.output;
}

TEST_F(TlsTest, CurlWithTheCaWorksAndTls12IsRefused) {
  if (!HaveTool("curl")) GTEST_SKIP() << "curl is not installed";
  StartServer(ServerTls());
  const std::string url = fmt::format("https://localhost:{}/x", server_->port());
  const std::string resolve = fmt::format("--resolve localhost:{}:127.0.0.1", server_->port());
  const RunResult ok = RunShell(fmt::format("curl -sS --cacert {} {} {}", pki_.ca_cert_file, resolve, url), dir_);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(ok.output, "hello over tls");
  // By IP address too: the certificate names 127.0.0.1.
  const RunResult by_ip =
      RunShell(fmt::format("curl -sS --cacert {} https://127.0.0.1:{}/x", pki_.ca_cert_file, server_->port()), dir_);
  EXPECT_EQ(by_ip.exit_code, 0) << by_ip.output;
  EXPECT_EQ(by_ip.output, "hello over tls");

  const RunResult tls12 =
      RunShell(fmt::format("curl -sS --cacert {} --tls-max 1.2 {} {}", pki_.ca_cert_file, resolve, url), dir_);
  EXPECT_EQ(tls12.exit_code, 35) << tls12.output;  // CURLE_SSL_CONNECT_ERROR
  EXPECT_EQ(tls12.output.find("hello over tls"), std::string::npos);
  const RunResult no_ca = RunShell(fmt::format("curl -sS {} {}", resolve, url), dir_);
  EXPECT_EQ(no_ca.exit_code, 60) << no_ca.output;  // CURLE_PEER_FAILED_VERIFICATION
}

TEST_F(TlsTest, PlainHttpToATlsPortIsClosedWithoutAReply) {
  StartServer(ServerTls());
  const int fd = ConnectTcp(server_->port());
  ASSERT_GE(fd, 0);
  const std::string request = "GET /x HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_EQ(got.find("hello over tls"), std::string::npos);
  EXPECT_EQ(n, 0) << "the server should close the connection";  // not the 10 s receive timeout
  EXPECT_EQ(server_->stats().tls_handshake_failures, 1);
}

TEST_F(TlsTest, HttpClientOverHttpsVerifiesTheServerAndSendsTheBearerToken) {
  StartServer(ServerTls());
  auto client = Client::Create({.base_url = server_->url(), .ca_file = pki_.ca_cert_file, .bearer_token = "tok-123"});
  ASSERT_TRUE(client.ok()) << client.status();
  for (int i = 0; i < 3; ++i) {
    auto who = (*client)->Get("/whoami");
    ASSERT_TRUE(who.ok()) << who.status();
    EXPECT_EQ((*who)["authorization"], "Bearer tok-123");
    EXPECT_EQ((*who)["cn"], "");  // no client certificate
  }
  EXPECT_EQ(server_->stats().connections_open, 1);  // keep-alive over TLS: one connection for three calls

  // A body bigger than a TLS record, and a chunked stream.
  nlohmann::json items = nlohmann::json::array();
  for (int i = 0; i < 5000; ++i) items.push_back(fmt::format("item-{}", i));
  auto echo = (*client)->Post("/echo", {{"items", items}});
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ((*echo)["n"], 5000);
  EXPECT_GT((*echo)["bytes"].get<int>(), 50000);
  std::string streamed;
  ASSERT_TRUE((*client)
                  ->GetStream("/stream",
                              [&](const std::string& chunk) {
                                streamed += chunk;
                                return true;
                              })
                  .ok());
  EXPECT_EQ(streamed, "chunk0;chunk1;chunk2;");

  // The CA as text works the same.
  auto from_pem = Client::Create({.base_url = server_->url(), .ca_pem = Slurp(pki_.ca_cert_file)});
  ASSERT_TRUE(from_pem.ok()) << from_pem.status();
  EXPECT_TRUE((*from_pem)->GetText("/x").ok());
  EXPECT_EQ(*(*from_pem)->GetText("/x"), "hello over tls");
}

TEST_F(TlsTest, UpgradedConnectionsRunOverTlsAndVerifyTheServer) {
  StartServer(ServerTls());
  auto tunnel = OpenUpgrade({.base_url = server_->url(), .ca_file = pki_.ca_cert_file}, "POST", "/upgrade", "echo");
  ASSERT_TRUE(tunnel.ok()) << tunnel.status();
  std::string piece;
  ASSERT_TRUE((*tunnel)->Write("ping"));
  ASSERT_TRUE((*tunnel)->Read(piece));
  EXPECT_EQ(piece, "echo:ping");
  (*tunnel)->Close();
  EXPECT_FALSE((*tunnel)->Read(piece));
  // No CA: refused before connecting; another CA: the handshake fails.
  EXPECT_EQ(OpenUpgrade({.base_url = server_->url()}, "POST", "/upgrade", "echo").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto other = pki::EnsureLocalPki({.dir = (dir_ / "other").string(), .add_hostname = false});
  ASSERT_TRUE(other.ok());
  auto refused = OpenUpgrade({.base_url = server_->url(), .ca_file = other->ca_cert_file}, "POST", "/upgrade", "echo");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("TLS handshake"), std::string::npos) << refused.status();
}

TEST_F(TlsTest, HttpClientRefusesAServerItCannotVerify) {
  StartServer(ServerTls());
  // No CA at all: refused up front.
  auto no_ca = Client::Create({.base_url = server_->url()});
  EXPECT_TRUE(absl::IsInvalidArgument(no_ca.status())) << no_ca.status();
  EXPECT_NE(no_ca.status().message().find("ca_file"), std::string::npos);

  // Another CA: the handshake fails verification, Unavailable saying why.
  auto other_ca = pki::EnsureLocalPki({.dir = (dir_ / "other").string(), .add_hostname = false});
  ASSERT_TRUE(other_ca.ok());
  auto wrong = Client::Create({.base_url = server_->url(), .ca_file = other_ca->ca_cert_file});
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  auto got = (*wrong)->GetText("/x");
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("verif"), std::string::npos) << got.status();

  // The right CA but a certificate that does not name the host: one for "localhost" only, reached by IP.
  auto named = pki::IssueCertificate(*ca_, {.common_name = "localhost only", .dns_names = {"localhost"}});
  ASSERT_TRUE(named.ok());
  Spit(pki_.server_cert_file, named->cert_pem);
  Spit(pki_.server_key_file, named->key_pem);
  ASSERT_TRUE(server_->ReloadCertificates().ok());
  auto by_ip = Client::Create({.base_url = server_->url(), .ca_file = pki_.ca_cert_file});
  ASSERT_TRUE(by_ip.ok());
  auto mismatch = (*by_ip)->GetText("/x");
  EXPECT_TRUE(absl::IsUnavailable(mismatch.status())) << mismatch.status();
  EXPECT_NE(mismatch.status().message().find("does not name this host"), std::string::npos) << mismatch.status();
  auto by_name =
      Client::Create({.base_url = fmt::format("https://localhost:{}", server_->port()), .ca_file = pki_.ca_cert_file});
  ASSERT_TRUE(by_name.ok());
  auto named_ok = (*by_name)->GetText("/x");
  EXPECT_TRUE(named_ok.ok()) << named_ok.status();

  auto missing = Client::Create({.base_url = server_->url(), .ca_file = (dir_ / "nope.crt").string()});
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  Spit((dir_ / "garbage.crt").string(), "garbage");
  auto garbage = Client::Create({.base_url = server_->url(), .ca_file = (dir_ / "garbage.crt").string()});
  EXPECT_TRUE(absl::IsInvalidArgument(garbage.status())) << garbage.status();
}

TEST_F(TlsTest, HttpClientRefusesATls12Server) {
  if (!HaveTool("openssl")) GTEST_SKIP() << "openssl (the command) is not installed";
  for (const std::string version : {"-tls1_3", "-tls1_2"}) {
    const int port = subprocess::FreeLoopbackPort();
    OpensslServer server(port, version, pki_.server_cert_file, pki_.server_key_file);
    ASSERT_TRUE(server.ready()) << "openssl s_server " << version << " did not start on port " << port;
    auto client = Client::Create({.base_url = fmt::format("https://127.0.0.1:{}", port), .ca_file = pki_.ca_cert_file});
    ASSERT_TRUE(client.ok());
    auto page = (*client)->GetText("/");  // s_server -www answers with its status page
    if (version == "-tls1_3") {
      // The control: the same server speaking TLS 1.3 is reached, so the refusal below is the version's.
      ASSERT_TRUE(page.ok()) << page.status();
      EXPECT_NE(page->find("TLSv1.3"), std::string::npos) << *page;
    } else {
      EXPECT_TRUE(absl::IsUnavailable(page.status())) << page.status();
      EXPECT_NE(page.status().message().find("protocol"), std::string::npos) << page.status();
    }
  }
}

TEST_F(TlsTest, ReloadCertificatesServesTheNewCertificateToNewConnectionsOnly) {
  if (!HaveTool("openssl")) GTEST_SKIP() << "openssl (the command) is not installed";
  StartServer(ServerTls());
  const std::string old_serial = SerialOf(Slurp(pki_.server_cert_file));
  TlsConnection before(server_->port(), pki_.ca_cert_file);
  ASSERT_TRUE(before.handshake_ok());
  EXPECT_EQ(before.PeerSerial(), old_serial);
  EXPECT_NE(before.Get("/x").find("hello over tls"), std::string::npos);

  // A renewal: new key and certificate from the same CA, written over the files.
  auto renewed = pki::IssueCertificate(
      *ca_, {.common_name = "gpugeek server", .dns_names = {"localhost"}, .ip_addresses = {"127.0.0.1"}});
  ASSERT_TRUE(renewed.ok());
  ASSERT_TRUE(pki::WriteFileAtomically(pki_.server_key_file, renewed->key_pem, 0600).ok());
  ASSERT_TRUE(pki::WriteFileAtomically(pki_.server_cert_file, renewed->cert_pem, 0644).ok());
  const std::string new_serial = SerialOf(renewed->cert_pem);
  ASSERT_NE(new_serial, old_serial);
  ASSERT_TRUE(server_->ReloadCertificates().ok());

  const std::string s_client =
      SClient(fmt::format("-tls1_3 -CAfile {} -verify_return_error </dev/null", pki_.ca_cert_file));
  const RunResult after = RunShell(s_client, dir_);
  EXPECT_EQ(after.exit_code, 0) << after.output;
  EXPECT_EQ(SerialOf(FirstPem(after.output)), new_serial) << after.output;
  // The connection made before the reload keeps working on its own certificate.
  EXPECT_NE(before.Get("/x").find("hello over tls"), std::string::npos);
  EXPECT_EQ(before.PeerSerial(), old_serial);

  // A corrupt file: the reload fails naming it, and the server keeps serving the last good certificate.
  Spit(pki_.server_cert_file, "-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n");
  const absl::Status bad = server_->ReloadCertificates();
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_NE(bad.message().find(pki_.server_cert_file), std::string::npos) << bad;
  EXPECT_NE(bad.message().find("previous certificate"), std::string::npos) << bad;
  const RunResult still = RunShell(s_client, dir_);
  EXPECT_EQ(still.exit_code, 0) << still.output;
  EXPECT_EQ(SerialOf(FirstPem(still.output)), new_serial) << still.output;
  TlsConnection later(server_->port(), pki_.ca_cert_file);
  ASSERT_TRUE(later.handshake_ok());
  EXPECT_NE(later.Get("/x").find("hello over tls"), std::string::npos);
}

TEST_F(TlsTest, MutualTlsRefusesClientsWithoutACertificateAndNamesTheOthers) {
  StartServer({.cert_file = pki_.server_cert_file,
               .key_file = pki_.server_key_file,
               .client_ca_file = pki_.ca_cert_file,
               .require_client_cert = true});
  const auto [node_cert, node_key] = WriteCert("node-7", {.common_name = "node-7", .server_auth = false});
  auto node = Client::Create({.base_url = server_->url(),
                              .ca_file = pki_.ca_cert_file,
                              .client_cert_file = node_cert,
                              .client_key_file = node_key});
  ASSERT_TRUE(node.ok()) << node.status();
  auto who = (*node)->Get("/whoami");
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_EQ((*who)["cn"], "node-7");

  auto anonymous = Client::Create({.base_url = server_->url(), .ca_file = pki_.ca_cert_file});
  ASSERT_TRUE(anonymous.ok());
  auto refused = (*anonymous)->Get("/whoami");
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();

  // A certificate from another CA is refused as well.
  auto other = pki::CertificateAuthority::Generate("other CA", pki::Days(30));
  ASSERT_TRUE(other.ok());
  const auto [stray_cert, stray_key] = WriteCert("stray", {.common_name = "node-7", .server_auth = false}, &*other);
  auto stray = Client::Create({.base_url = server_->url(),
                               .ca_file = pki_.ca_cert_file,
                               .client_cert_file = stray_cert,
                               .client_key_file = stray_key});
  ASSERT_TRUE(stray.ok());
  auto stray_who = (*stray)->Get("/whoami");
  EXPECT_TRUE(absl::IsUnavailable(stray_who.status())) << stray_who.status();
  // In TLS 1.3 the server checks the client's certificate after the client has sent its Finished: the
  // client can see the refusal before the server's I/O thread has counted it.
  for (int i = 0; i < 100 && server_->stats().tls_handshake_failures < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GE(server_->stats().tls_handshake_failures, 2);

  // openssl s_client with the node's certificate, as a second real client.
  if (HaveTool("openssl")) {
    Spit((dir_ / "get.txt").string(), "GET /whoami HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    const RunResult with_cert =
        RunShell(SClient(fmt::format("-tls1_3 -CAfile {} -cert {} -key {} -ign_eof <{}", pki_.ca_cert_file, node_cert,
                                     node_key, (dir_ / "get.txt").string())),
                 dir_);
    EXPECT_NE(with_cert.output.find(R"("cn":"node-7")"), std::string::npos) << with_cert.output;
  }

  // A client key that does not match its certificate is caught at Create.
  auto mismatched = Client::Create({.base_url = server_->url(),
                                    .ca_file = pki_.ca_cert_file,
                                    .client_cert_file = node_cert,
                                    .client_key_file = stray_key});
  EXPECT_TRUE(absl::IsInvalidArgument(mismatched.status())) << mismatched.status();
  EXPECT_TRUE(absl::IsInvalidArgument(
      Client::Create({.base_url = server_->url(), .ca_file = pki_.ca_cert_file, .client_cert_file = node_cert})
          .status()));
}

TEST_F(TlsTest, OptionalClientCertificatesAreVerifiedWhenPresented) {
  StartServer(
      {.cert_file = pki_.server_cert_file, .key_file = pki_.server_key_file, .client_ca_file = pki_.ca_cert_file});
  auto anonymous = Client::Create({.base_url = server_->url(), .ca_file = pki_.ca_cert_file});
  ASSERT_TRUE(anonymous.ok());
  auto who = (*anonymous)->Get("/whoami");
  ASSERT_TRUE(who.ok()) << who.status();
  EXPECT_EQ((*who)["cn"], "");
  const auto [cert, key] = WriteCert("node-9", {.common_name = "node-9", .server_auth = false});
  auto node = Client::Create(
      {.base_url = server_->url(), .ca_file = pki_.ca_cert_file, .client_cert_file = cert, .client_key_file = key});
  ASSERT_TRUE(node.ok());
  auto node_who = (*node)->Get("/whoami");
  ASSERT_TRUE(node_who.ok()) << node_who.status();
  EXPECT_EQ((*node_who)["cn"], "node-9");
}

TEST_F(TlsTest, AClientThatNeverSendsAClientHelloIsClosedWithinHeaderTimeout) {
  StartServer(ServerTls(), /*header_timeout=*/seconds(1));
  const auto start = std::chrono::steady_clock::now();
  const int fd = ConnectTcp(server_->port());
  ASSERT_GE(fd, 0);
  char buf[64];
  const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);  // blocks until the server closes (or 10 s)
  const auto waited = std::chrono::steady_clock::now() - start;
  ::close(fd);
  EXPECT_EQ(n, 0) << "expected the server to close the connection";
  EXPECT_GE(Ms(waited), 900);
  EXPECT_LT(Ms(waited), 8000);
  EXPECT_EQ(server_->stats().timeouts, 1);
  EXPECT_EQ(server_->stats().tls_handshake_failures, 0);
}

}  // namespace
}  // namespace gpugeek::http
