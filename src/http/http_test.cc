#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>

#include <fmt/format.h>

#include "http/client.h"
#include "http/server.h"
#include "http/status_http.h"

namespace gpugeek::http {
namespace {

using std::chrono::milliseconds;

Duration Since(MonoTime start) { return RealClock().Monotonic() - start; }

int64_t Ms(Duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

// A plain TCP client on 127.0.0.1, for what an HTTP library will not send: slow, huge or broken requests.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawConnection() { Close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads until the server closes the connection or `timeout` passes; what arrived. closed() tells which.
  std::string ReadUntilClose(Duration timeout) {
    std::string out;
    const MonoTime deadline = RealClock().Monotonic() + timeout;
    while (ReadSome(out, deadline)) {
    }
    return out;
  }

  // Reads one response with a Content-Length (head and body); "" if it did not arrive within `timeout`.
  std::string ReadResponse(Duration timeout) {
    std::string out;
    const MonoTime deadline = RealClock().Monotonic() + timeout;
    for (;;) {
      const size_t head_end = out.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const size_t cl = out.find("Content-Length: ");
        if (cl != std::string::npos && cl < head_end) {
          const size_t length = std::stoul(out.substr(cl + 16));
          if (out.size() >= head_end + 4 + length) return out;
        }
      }
      if (!ReadSome(out, deadline)) return "";
    }
  }

  // Appends what arrives; false once the peer closed or `deadline` passed.
  bool ReadSome(std::string& out, MonoTime deadline) {
    const int64_t wait_ms = Ms(deadline - RealClock().Monotonic());
    if (wait_ms <= 0) return false;
    pollfd p{.fd = fd_, .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, static_cast<int>(wait_ms)) <= 0) return false;
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n <= 0) {
      closed_ = true;
      return false;
    }
    out.append(buf, static_cast<size_t>(n));
    return true;
  }

  bool closed() const { return closed_; }

  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
};

// The status code of a raw response ("HTTP/1.1 413 ..." -> 413); 0 when there is none.
int StatusOf(const std::string& response) {
  if (!response.starts_with("HTTP/1.1 ") || response.size() < 12) return 0;
  return std::stoi(response.substr(9, 3));
}

// The body of a raw response with a Content-Length, parsed as JSON (null when it is not).
nlohmann::json JsonBodyOf(const std::string& response) {
  const size_t head_end = response.find("\r\n\r\n");
  if (head_end == std::string::npos) return nullptr;
  return nlohmann::json::parse(response.substr(head_end + 4), nullptr, /*allow_exceptions=*/false);
}

struct CurlResult {
  int status = 0;
  std::string body;
};

// Runs curl (installed by scripts/install-deps.sh) with `args` and returns the status and body.
CurlResult Curl(const std::string& args) {
  const std::string command = "curl -s --max-time 5 -o - -w '\\n%{http_code}' " + args + " 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string out;
  if (pipe != nullptr) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
    ::pclose(pipe);
  }
  CurlResult r;
  const size_t nl = out.rfind('\n');
  if (nl == std::string::npos) return r;
  r.status = std::atoi(out.c_str() + nl + 1);
  r.body = out.substr(0, nl);
  return r;
}

// Counters move when a write completes, which may be just after the client has read the reply.
bool Eventually(const std::function<bool()>& condition) {
  const MonoTime deadline = RealClock().Monotonic() + std::chrono::seconds(1);
  while (!condition()) {
    if (RealClock().Monotonic() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

int ThreadsInThisProcess() {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) ++n;
  return n;
}

std::unique_ptr<Server> StartServer(ServerOptions options) {
  auto s = Server::Create(options);
  if (!s.ok()) return nullptr;
  (*s)->Route("GET", "/v1/items/{id}", [](const Request& r) -> absl::StatusOr<Reply> {
    return Reply::Json({{"id", r.param("id")}});
  });
  (*s)->Route("POST", "/v1/items", [](const Request& r) -> absl::StatusOr<Reply> {
    return Reply::Json({{"bytes", r.body.size()}}, 201);
  });
  if (!(*s)->Start().ok()) return nullptr;
  return std::move(*s);
}

TEST(StatusHttp, MapsEveryCodeOnceAndBack) {
  EXPECT_EQ(HttpStatusFor(absl::OkStatus()), 200);
  EXPECT_EQ(HttpStatusFor(absl::InvalidArgumentError("x")), 400);
  EXPECT_EQ(HttpStatusFor(absl::NotFoundError("x")), 404);
  EXPECT_EQ(HttpStatusFor(absl::AlreadyExistsError("x")), 409);
  EXPECT_EQ(HttpStatusFor(absl::FailedPreconditionError("x")), 409);
  EXPECT_EQ(HttpStatusFor(absl::ResourceExhaustedError("x")), 429);
  EXPECT_EQ(HttpStatusFor(absl::UnavailableError("x")), 503);
  EXPECT_EQ(HttpStatusFor(absl::InternalError("x")), 500);
  const absl::Status s = absl::FailedPreconditionError("job j-1 is SUCCEEDED; it cannot be cancelled");
  EXPECT_EQ(StatusFromHttp(409, ErrorBody(s).dump()), s);
  EXPECT_EQ(StatusFromHttp(404, "<html>").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(StatusFromHttp(204, "").ok());
  // 402: a marked FailedPrecondition, both ways.
  const absl::Status pay = PaymentRequiredError("tenant acme has 0.00 left");
  EXPECT_EQ(HttpStatusFor(pay), 402);
  EXPECT_EQ(ErrorBody(pay)["code"], "PAYMENT_REQUIRED");
  const absl::Status back = StatusFromHttp(402, ErrorBody(pay).dump());
  EXPECT_TRUE(IsPaymentRequired(back));
  EXPECT_EQ(back.message(), "tenant acme has 0.00 left");
  EXPECT_FALSE(IsPaymentRequired(s));
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.observer = [this](const std::string&, const std::string& route, int status, Duration) {
      if (route == "/v1/items/{id}" && status == 404) ++not_found_;
    };
    auto s = Server::Create(options);
    ASSERT_TRUE(s.ok());
    server_ = std::move(*s);
    server_->Route("GET", "/v1/items/{id}", [](const Request& r) -> absl::StatusOr<Reply> {
      if (r.param("id") == "missing") return absl::NotFoundError("no item 'missing'");
      return Reply::Json({{"id", r.param("id")}, {"verbose", r.query_value("verbose", "no")}});
    });
    server_->Route("POST", "/v1/items", [](const Request& r) -> absl::StatusOr<Reply> {
      auto body = r.JsonBody();
      if (!body.ok()) return body.status();
      return Reply::Json({{"echo", *body}}, 201);
    });
    server_->Route("GET", "/v1/count/{n}", [](const Request& r) -> absl::StatusOr<Reply> {
      Reply reply;
      reply.content_type = "text/plain";
      const int n = std::stoi(r.param("n"));
      reply.stream = [n](const ChunkWriter& write) {
        for (int i = 0; i < n; ++i) {
          if (!write(std::to_string(i) + "\n")) return;
        }
      };
      return reply;
    });
    ASSERT_TRUE(server_->Start().ok());
    auto c = Client::Create({.base_url = server_->url()});
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
  std::atomic<int> not_found_{0};
};

TEST_F(ServerTest, RoutesPathParamsAndQuery) {
  ASSERT_GT(server_->port(), 0);
  auto r = client_->Get("/v1/items/j-7?verbose=yes");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["id"], "j-7");
  EXPECT_EQ((*r)["verbose"], "yes");
}

TEST_F(ServerTest, ErrorsTravelAsStatus) {
  auto r = client_->Get("/v1/items/missing");
  EXPECT_EQ(r.status(), absl::NotFoundError("no item 'missing'"));
  EXPECT_EQ(not_found_.load(), 1);
  auto bad = client_->Post("/v1/items", "not json");  // a JSON string is fine...
  ASSERT_TRUE(bad.ok());
  auto unrouted = client_->Get("/v2/nothing");
  EXPECT_EQ(unrouted.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ServerTest, MalformedJsonBodyIs400NamingThePosition) {
  httplib::Client raw(server_->url());
  auto res = raw.Post("/v1/items", "{\"a\": ", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  auto status = StatusFromHttp(res->status, res->body);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("JSON syntax error at byte offset"), std::string::npos) << status;
}

TEST_F(ServerTest, GetTextReturnsTheBodyAsIsAndErrorsAsStatus) {
  auto text = client_->GetText("/v1/count/3");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "0\n1\n2\n");
  EXPECT_EQ(client_->GetText("/v1/items/missing").status(), absl::NotFoundError("no item 'missing'"));
}

TEST_F(ServerTest, StreamsChunks) {
  std::string all;
  ASSERT_TRUE(client_
                  ->GetStream("/v1/count/5",
                              [&](const std::string& c) {
                                all += c;
                                return true;
                              })
                  .ok());
  EXPECT_EQ(all, "0\n1\n2\n3\n4\n");
}

TEST_F(ServerTest, ConcurrentClients) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto c = Client::Create({.base_url = server_->url()});
      for (int i = 0; i < 25; ++i) {
        auto r = (*c)->Get("/v1/items/" + std::to_string(t * 100 + i));
        if (r.ok() && (*r)["id"] == std::to_string(t * 100 + i)) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 200);
}

TEST(ServerPortTest, APortInUseIsRefusedNotShared) {
  auto first = Server::Create({});
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->Start().ok());
  auto second = Server::Create({.port = (*first)->port()});
  ASSERT_TRUE(second.ok());
  const absl::Status s = (*second)->Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("the port is in use"), absl::string_view::npos) << s;
}

TEST(ServerLimitsTest, SlowHeaderClientIsCutAtHeaderTimeoutWhileOthersAreServed) {
  auto server = StartServer({.header_timeout = std::chrono::seconds(1)});
  ASSERT_NE(server, nullptr);
  const MonoTime start = RealClock().Monotonic();
  RawConnection slow(server->port());
  ASSERT_TRUE(slow.connected());
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    const std::string head = "GET /v1/items/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: abcdefgh\r\n\r\n";
    for (size_t i = 0; i < head.size() && !done; ++i) {
      if (!slow.Send(head.substr(i, 1))) return;
      std::this_thread::sleep_for(milliseconds(200));
    }
  });
  std::this_thread::sleep_for(milliseconds(300));
  auto client = Client::Create({.base_url = server->url()});
  ASSERT_TRUE(client.ok());
  const MonoTime asked = RealClock().Monotonic();
  auto r = (*client)->Get("/v1/items/fast");
  const Duration fast = Since(asked);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["id"], "fast");
  EXPECT_LT(Ms(fast), 500);

  const std::string response = slow.ReadUntilClose(std::chrono::seconds(3));
  const Duration cut = Since(start);
  done = true;
  trickle.join();
  EXPECT_TRUE(slow.closed());
  EXPECT_GE(Ms(cut), 950);
  EXPECT_LT(Ms(cut), 1500);
  EXPECT_EQ(StatusOf(response), 408) << response;
  const nlohmann::json body = JsonBodyOf(response);
  EXPECT_EQ(body["code"], "DEADLINE_EXCEEDED") << response;
  EXPECT_EQ(body["details"]["timeout_ms"], 1000);
  EXPECT_EQ(server->stats().timeouts, 1);
}

TEST(ServerLimitsTest, HoldsAThousandIdleKeepAliveConnectionsOnFewThreads) {
  auto server = StartServer({});
  ASSERT_NE(server, nullptr);
  constexpr int kConnections = 1000;
  std::vector<std::unique_ptr<RawConnection>> conns;
  for (int i = 0; i < kConnections; ++i) {
    auto c = std::make_unique<RawConnection>(server->port());
    ASSERT_TRUE(c->connected()) << i;
    // One request each, then the connection stays open and idle, as an agent's between heartbeats.
    ASSERT_TRUE(c->Send(fmt::format("GET /v1/items/{} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", i)));
    const std::string response = c->ReadResponse(std::chrono::seconds(2));
    ASSERT_EQ(StatusOf(response), 200) << i << ": " << response;
    conns.push_back(std::move(c));
  }
  EXPECT_EQ(server->stats().connections_open, kConnections);
  EXPECT_TRUE(Eventually([&] { return server->stats().requests_served == kConnections; }))
      << server->stats().requests_served;

  auto client = Client::Create({.base_url = server->url()});
  ASSERT_TRUE(client.ok());
  const MonoTime asked = RealClock().Monotonic();
  auto r = (*client)->Get("/v1/items/another");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["id"], "another");
  EXPECT_LT(Ms(Since(asked)), 500);
  EXPECT_EQ(server->stats().connections_open, kConnections + 1);
  EXPECT_LT(ThreadsInThisProcess(), 50);

  // The idle connections are still served.
  for (int i : {0, kConnections - 1}) {
    ASSERT_TRUE(conns[i]->Send("GET /v1/items/again HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    EXPECT_EQ(StatusOf(conns[i]->ReadResponse(std::chrono::seconds(2))), 200) << i;
  }
}

TEST(ServerLimitsTest, OversizeBodyIs413NamingTheLimit) {
  auto server = StartServer({.max_body_bytes = 1024});
  ASSERT_NE(server, nullptr);
  const std::string file = ::testing::TempDir() + "/http_test_body";
  std::ofstream(file) << std::string(4096, 'a');
  CurlResult r = Curl(fmt::format("-X POST --data-binary @{} {}/v1/items", file, server->url()));
  EXPECT_EQ(r.status, 413) << r.body;
  nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
  EXPECT_EQ(body["code"], "INVALID_ARGUMENT") << r.body;
  EXPECT_EQ(body["message"],
            "request body is 4096 bytes; the limit is 1024 bytes (max_body_bytes): send less per request");
  EXPECT_EQ(body["details"]["limit_bytes"], 1024);

  // Within the limit it is served.
  std::ofstream(file) << std::string(1024, 'a');
  r = Curl(fmt::format("-X POST --data-binary @{} {}/v1/items", file, server->url()));
  EXPECT_EQ(r.status, 201) << r.body;
  EXPECT_EQ(r.body, R"({"bytes":1024})");

  // A chunked body has no length up front: it is cut when it passes the limit.
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.Send(fmt::format(
      "POST /v1/items HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n{}\r\n0\r\n\r\n",
      std::string(2048, 'b'))));
  const std::string response = raw.ReadUntilClose(std::chrono::seconds(3));
  EXPECT_TRUE(raw.closed());
  EXPECT_EQ(StatusOf(response), 413) << response;
  EXPECT_EQ(JsonBodyOf(response)["details"]["limit_bytes"], 1024);
}

TEST(ServerLimitsTest, HugeHeaderIs431) {
  auto server = StartServer({});
  ASSERT_NE(server, nullptr);
  const CurlResult r = Curl(fmt::format("-H 'X-Big: {}' {}/v1/items/x", std::string(20 << 10, 'h'), server->url()));
  EXPECT_EQ(r.status, 431) << r.body;
  const nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
  EXPECT_EQ(body["code"], "INVALID_ARGUMENT") << r.body;
  EXPECT_EQ(body["details"]["limit_bytes"], 16384);
  EXPECT_NE(body["message"].get<std::string>().find("the limit is 16384 bytes"), std::string::npos) << r.body;

  // Past the parser's limit for the whole head (over 25 KiB), the same answer.
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.Send(fmt::format("GET /v1/items/x HTTP/1.1\r\nX-Big: {}\r\n\r\n", std::string(40 << 10, 'h'))));
  const std::string response = raw.ReadUntilClose(std::chrono::seconds(3));
  EXPECT_EQ(StatusOf(response), 431) << response.substr(0, 200);
}

TEST(ServerLimitsTest, LongUriIs414) {
  auto server = StartServer({});
  ASSERT_NE(server, nullptr);
  const CurlResult r = Curl(fmt::format("{}/v1/items/{}", server->url(), std::string(9 << 10, 'u')));
  EXPECT_EQ(r.status, 414) << r.body;
  const nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
  EXPECT_EQ(body["code"], "INVALID_ARGUMENT") << r.body;
  EXPECT_EQ(body["details"]["limit_bytes"], 8192);
  EXPECT_EQ(body["details"]["target_bytes"], 9216 + 10);

  RawConnection raw(server->port());
  ASSERT_TRUE(raw.Send(fmt::format("GET /{} HTTP/1.1\r\n\r\n", std::string(30 << 10, 'u'))));
  const std::string response = raw.ReadUntilClose(std::chrono::seconds(3));
  EXPECT_EQ(StatusOf(response), 414) << response.substr(0, 200);
}

TEST(ServerLimitsTest, GarbageRequestLineIs400AndCloses) {
  auto server = StartServer({});
  ASSERT_NE(server, nullptr);
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.Send("THIS IS NOT HTTP\r\n\r\n"));
  const std::string response = raw.ReadUntilClose(std::chrono::seconds(3));
  EXPECT_TRUE(raw.closed());
  EXPECT_EQ(StatusOf(response), 400) << response;
  const nlohmann::json body = JsonBodyOf(response);
  EXPECT_EQ(body["code"], "INVALID_ARGUMENT") << response;
  EXPECT_TRUE(body["message"].get<std::string>().starts_with("malformed HTTP request: ")) << response;
}

TEST(ServerLimitsTest, WrongMethodIs405WithAllow) {
  auto server = StartServer({});
  ASSERT_NE(server, nullptr);
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.Send("DELETE /v1/items/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  const std::string response = raw.ReadResponse(std::chrono::seconds(2));
  EXPECT_EQ(StatusOf(response), 405) << response;
  EXPECT_NE(response.find("Allow: GET\r\n"), std::string::npos) << response;
  EXPECT_EQ(JsonBodyOf(response)["message"], "method DELETE is not allowed on /v1/items/x; allowed: GET");
  // The connection stays usable.
  ASSERT_TRUE(raw.Send("GET /v1/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  const std::string not_found = raw.ReadResponse(std::chrono::seconds(2));
  EXPECT_EQ(StatusOf(not_found), 404) << not_found;
  EXPECT_EQ(JsonBodyOf(not_found)["message"], "no route for GET /v1/nothing");
}

TEST(ServerLimitsTest, KeepAliveAndConnectionClose) {
  auto server = StartServer({});
  ASSERT_NE(server, nullptr);
  RawConnection raw(server->port());
  // Two pipelined requests on one connection, the second asking to close.
  ASSERT_TRUE(
      raw.Send("GET /v1/items/a%20b?x=1 HTTP/1.1\r\nHost: h\r\n\r\nGET /v1/items/c HTTP/1.1\r\nHost: h\r\nConnection: "
               "close\r\n\r\n"));
  const std::string both = raw.ReadUntilClose(std::chrono::seconds(3));
  EXPECT_TRUE(raw.closed());
  const size_t second = both.find("HTTP/1.1 200", 1);
  ASSERT_NE(second, std::string::npos) << both;
  EXPECT_EQ(JsonBodyOf(both.substr(0, second))["id"], "a b");
  EXPECT_NE(both.find("Connection: close", second), std::string::npos) << both;
  EXPECT_EQ(JsonBodyOf(both.substr(second))["id"], "c");
  EXPECT_EQ(server->stats().requests_served, 2);
}

TEST(ServerLimitsTest, Http10ClientGetsAnHttp11ReplyThenTheConnectionCloses) {
  auto server = StartServer({});
  ASSERT_NE(server, nullptr);
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.Send("GET /v1/items/old HTTP/1.0\r\nHost: h\r\n\r\n"));
  const std::string response = raw.ReadUntilClose(std::chrono::seconds(3));
  EXPECT_TRUE(raw.closed());
  EXPECT_TRUE(response.starts_with("HTTP/1.1 200 OK\r\n")) << response;
  EXPECT_EQ(JsonBodyOf(response)["id"], "old");

  RawConnection keep(server->port());
  ASSERT_TRUE(keep.Send("GET /v1/items/a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  const std::string first = keep.ReadResponse(std::chrono::seconds(2));
  EXPECT_NE(first.find("Connection: keep-alive\r\n"), std::string::npos) << first;
  ASSERT_TRUE(keep.Send("GET /v1/items/b HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(JsonBodyOf(keep.ReadUntilClose(std::chrono::seconds(3)))["id"], "b");
  EXPECT_TRUE(keep.closed());
}

TEST(ServerLimitsTest, ConnectionsBeyondMaxAreClosedAndCounted) {
  auto server = StartServer({.max_connections = 2});
  ASSERT_NE(server, nullptr);
  RawConnection a(server->port());
  RawConnection b(server->port());
  ASSERT_TRUE(a.Send("GET /v1/items/a HTTP/1.1\r\nHost: h\r\n\r\n"));
  ASSERT_TRUE(b.Send("GET /v1/items/b HTTP/1.1\r\nHost: h\r\n\r\n"));
  EXPECT_EQ(StatusOf(a.ReadResponse(std::chrono::seconds(2))), 200);
  EXPECT_EQ(StatusOf(b.ReadResponse(std::chrono::seconds(2))), 200);
  RawConnection c(server->port());
  EXPECT_EQ(c.ReadUntilClose(std::chrono::seconds(2)), "");
  EXPECT_TRUE(c.closed());
  EXPECT_EQ(server->stats().connections_refused, 1);
  EXPECT_EQ(server->stats().connections_open, 2);
}

TEST(ServerLimitsTest, SlowHandlerDoesNotDelayAnotherConnection) {
  auto s = Server::Create({});
  ASSERT_TRUE(s.ok());
  auto& server = *s;
  server->Route("GET", "/v1/slow", [](const Request&) -> absl::StatusOr<Reply> {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    return Reply::Text("slow");
  });
  server->Route("GET", "/v1/fast", [](const Request&) -> absl::StatusOr<Reply> { return Reply::Text("fast"); });
  ASSERT_TRUE(server->Start().ok());
  const MonoTime start = RealClock().Monotonic();
  auto slow = std::async(std::launch::async, [&] {
    auto c = Client::Create({.base_url = server->url()});
    return (*c)->GetText("/v1/slow");
  });
  std::this_thread::sleep_for(milliseconds(200));
  auto c = Client::Create({.base_url = server->url()});
  ASSERT_TRUE(c.ok());
  const MonoTime asked = RealClock().Monotonic();
  auto fast = (*c)->GetText("/v1/fast");
  EXPECT_LT(Ms(Since(asked)), 500);
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_EQ(*fast, "fast");
  auto slow_text = slow.get();
  ASSERT_TRUE(slow_text.ok()) << slow_text.status();
  EXPECT_EQ(*slow_text, "slow");
  EXPECT_GE(Ms(Since(start)), 2000);
}

TEST(ServerLimitsTest, StreamDeliversChunksAndNoticesAClientThatLeft) {
  auto s = Server::Create({});
  ASSERT_TRUE(s.ok());
  auto& server = *s;
  std::promise<int> written_before_false;
  server->Route("GET", "/v1/follow", [&](const Request&) -> absl::StatusOr<Reply> {
    Reply reply = Reply::Text("");
    reply.stream = [&](const ChunkWriter& write) {
      for (int i = 0;; ++i) {
        if (!write(fmt::format("line {}\n", i))) {
          written_before_false.set_value(i);
          return;
        }
        std::this_thread::sleep_for(milliseconds(20));
      }
    };
    return reply;
  });
  ASSERT_TRUE(server->Start().ok());
  RawConnection raw(server->port());
  ASSERT_TRUE(raw.Send("GET /v1/follow HTTP/1.1\r\nHost: h\r\n\r\n"));
  std::string seen;
  const MonoTime deadline = RealClock().Monotonic() + std::chrono::seconds(2);
  while (seen.find("line 2\n") == std::string::npos && raw.ReadSome(seen, deadline)) {
  }
  EXPECT_TRUE(seen.starts_with("HTTP/1.1 200 OK\r\n")) << seen;
  EXPECT_NE(seen.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << seen;
  EXPECT_NE(seen.find("7\r\nline 0\n\r\n7\r\nline 1\n\r\n7\r\nline 2\n\r\n"), std::string::npos) << seen;
  raw.Close();
  const MonoTime closed = RealClock().Monotonic();
  auto future = written_before_false.get_future();
  ASSERT_EQ(future.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  EXPECT_GE(future.get(), 3);
  EXPECT_LT(Ms(Since(closed)), 1000);
}

TEST(ServerLimitsTest, StopRightAfterStartAndWithIdleConnectionsIsPrompt) {
  auto server = StartServer({});
  ASSERT_NE(server, nullptr);
  RawConnection idle(server->port());
  ASSERT_TRUE(idle.Send("GET /v1/items/a HTTP/1.1\r\nHost: h\r\n\r\n"));
  EXPECT_EQ(StatusOf(idle.ReadResponse(std::chrono::seconds(2))), 200);
  const MonoTime start = RealClock().Monotonic();
  server->Stop();
  EXPECT_LT(Ms(Since(start)), 500);
  EXPECT_EQ(idle.ReadUntilClose(std::chrono::seconds(1)), "");
  EXPECT_TRUE(idle.closed());
  EXPECT_EQ(server->stats().connections_open, 0);
  EXPECT_FALSE(RawConnection(server->port()).connected());
  server->Stop();  // idempotent
}

TEST(ServerLimitsTest, BusyWorkersAnswer503AndAThrowingHandler500) {
  std::vector<std::tuple<std::string, std::string, int>> observed;
  std::mutex mu;
  auto s = Server::Create({.observer =
                               [&](const std::string& method, const std::string& route, int status, Duration elapsed) {
                                 std::lock_guard<std::mutex> lock(mu);
                                 if (elapsed > Duration::zero()) observed.emplace_back(method, route, status);
                               },
                           .name = "agents",
                           .max_workers = 1,
                           .max_queued_requests = 0});
  ASSERT_TRUE(s.ok());
  auto& server = *s;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  server->Route("GET", "/v1/block", [&](const Request&) -> absl::StatusOr<Reply> {
    released.wait();
    return Reply::Text("done");
  });
  server->Route("GET", "/v1/throw", [](const Request&) -> absl::StatusOr<Reply> { throw std::runtime_error("a bug"); });
  ASSERT_TRUE(server->Start().ok());
  auto blocked = std::async(std::launch::async, [&] {
    auto c = Client::Create({.base_url = server->url()});
    return (*c)->GetText("/v1/block");
  });
  ASSERT_TRUE(Eventually([&] { return server->stats().connections_open == 1; }));
  std::this_thread::sleep_for(milliseconds(50));  // the request reaches the one worker
  auto c = Client::Create({.base_url = server->url()});
  ASSERT_TRUE(c.ok());
  const absl::Status busy = (*c)->GetText("/v1/throw").status();
  EXPECT_EQ(busy.code(), absl::StatusCode::kUnavailable) << busy;
  EXPECT_EQ(busy.message(),
            "server agents is busy: 1 handlers are running and 0 requests wait; retry after a short backoff");
  EXPECT_EQ(server->stats().busy_rejections, 1);
  release.set_value();
  auto text = blocked.get();
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "done");
  // The client can have the reply before the worker is back in the pool: wait until the reply was
  // written (the observer), then for the worker to go idle.
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return std::find(observed.begin(), observed.end(),
                     std::make_tuple(std::string("GET"), std::string("/v1/block"), 200)) != observed.end();
  }));
  std::this_thread::sleep_for(milliseconds(50));

  EXPECT_EQ((*c)->GetText("/v1/throw").status(), absl::InternalError("internal error"));
  // The observer runs once a reply is written, which may be just after the client has it.
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return observed.size() == 3;
  }));
  std::lock_guard<std::mutex> lock(mu);
  std::sort(observed.begin(), observed.end());
  EXPECT_EQ(observed, (std::vector<std::tuple<std::string, std::string, int>>{
                          {"GET", "/v1/block", 200}, {"GET", "/v1/throw", 500}, {"GET", "/v1/throw", 503}}));
}

TEST(UrlEncodeTest, KeepsUnreservedAndEncodesTheRest) {
  EXPECT_EQ(UrlEncode("j-00000001_a.b~"), "j-00000001_a.b~");
  EXPECT_EQ(UrlEncode("up{job=\"x\"} == 1"), "up%7Bjob%3D%22x%22%7D%20%3D%3D%201");
}

TEST(Client, UnreachableServerIsUnavailable) {
  auto s = Server::Create({});
  ASSERT_TRUE((*s)->Start().ok());
  const std::string url = (*s)->url();
  (*s)->Stop();
  auto c = Client::Create({.base_url = url, .connect_timeout = std::chrono::milliseconds(200)});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->Get("/v1/jobs").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Client::Create({.base_url = "localhost"}).status().code(), absl::StatusCode::kInvalidArgument);
}

// A server of an active/standby control plane for the failover tests. It answers POST and GET /v1/things
// and POST /v1/stream as a leader ({"ok": true}; the stream "a", "b"), counting the requests, or, as a
// standby, each with what a standby answers: 307 to its leader, or 503 while it knows none.
struct Peer {
  std::atomic<int> requests{0};
  std::mutex mu;
  std::optional<std::string> standby_of;  // guarded by mu; as StartPeer's
  std::unique_ptr<Server> server;
  std::string url() const { return server->url(); }
  void BecomeStandbyOf(const std::string& leader) {
    std::lock_guard<std::mutex> lock(mu);
    standby_of = leader;
  }
};

// `standby_of`: nullopt for a leader; a leader's base URL, or "" for a standby that knows none. `delay`:
// how long a leader's handler sleeps before it answers.
std::unique_ptr<Peer> StartPeer(std::optional<std::string> standby_of, Duration delay = Duration::zero()) {
  auto peer = std::make_unique<Peer>();
  peer->standby_of = std::move(standby_of);
  auto s = Server::Create({});
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return nullptr;
  peer->server = std::move(*s);
  Peer* p = peer.get();
  auto handler = [p, delay](const Request& r) -> absl::StatusOr<Reply> {
    ++p->requests;
    std::optional<std::string> leader;
    {
      std::lock_guard<std::mutex> lock(p->mu);
      leader = p->standby_of;
    }
    if (leader.has_value()) {
      if (leader->empty()) {
        Reply reply = Reply::Json(ErrorBody(absl::UnavailableError("a standby; no leader is known")), 503);
        reply.headers = {{"Gpugeek-Standby", "1"}, {"Retry-After", "1"}};
        return reply;
      }
      Reply reply =
          Reply::Json(ErrorBody(absl::UnavailableError(fmt::format("a standby; the leader is {}", *leader))), 307);
      reply.headers = {{"Gpugeek-Standby", "1"}, {"Location", *leader + r.path}, {"Gpugeek-Leader", *leader}};
      return reply;
    }
    std::this_thread::sleep_for(delay);
    if (r.path == "/v1/stream") {
      Reply reply;
      reply.content_type = "text/plain";
      reply.stream = [](const ChunkWriter& write) {
        if (write("a")) write("b");
      };
      return reply;
    }
    return Reply::Json({{"ok", true}});
  };
  peer->server->Route("POST", "/v1/things", handler);
  peer->server->Route("GET", "/v1/things", handler);
  peer->server->Route("POST", "/v1/stream", handler);
  const absl::Status started = peer->server->Start();
  EXPECT_TRUE(started.ok()) << started;
  return peer;
}

// A URL nothing listens on: a server's, stopped.
std::string ClosedUrl() {
  auto s = Server::Create({});
  EXPECT_TRUE((*s)->Start().ok());
  const std::string url = (*s)->url();
  (*s)->Stop();
  return url;
}

bool Contains(const absl::Status& s, const std::string& part) {
  return std::string(s.message()).find(part) != std::string::npos;
}

TEST(ClientFailoverTest, ClosedThenStandbyRedirectsToTheLeaderAndStaysThere) {
  const std::string a = ClosedUrl();
  auto c = StartPeer(std::nullopt);
  auto b = StartPeer(c->url());
  auto client = Client::Create(
      {.base_url = fmt::format("{},{},{}", a, b->url(), c->url()), .connect_timeout = std::chrono::milliseconds(500)});
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->current_base_url(), a);
  auto reply = (*client)->Post("/v1/things", {{"x", 1}});
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ((*reply)["ok"], true);
  EXPECT_EQ(c->requests.load(), 1);
  EXPECT_EQ(b->requests.load(), 1);
  EXPECT_EQ((*client)->current_base_url(), c->url());
  // Sticky: the next call goes straight to the leader.
  ASSERT_TRUE((*client)->Get("/v1/things").ok());
  EXPECT_EQ(c->requests.load(), 2);
  EXPECT_EQ(b->requests.load(), 1);
}

TEST(ClientFailoverTest, ARedirectToAnUnlistedServerIsNotFollowed) {
  auto d = StartPeer(std::nullopt);  // not in the list: must see no request (nor the bearer token)
  auto b = StartPeer(d->url());
  auto c = StartPeer(std::nullopt);
  auto client = Client::Create({.base_url = b->url() + "," + c->url(), .bearer_token = "secret"});
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Post("/v1/things", {{"x", 1}}).ok());
  EXPECT_EQ(d->requests.load(), 0);
  EXPECT_EQ(b->requests.load(), 1);
  EXPECT_EQ(c->requests.load(), 1);
  EXPECT_EQ((*client)->current_base_url(), c->url());
}

TEST(ClientFailoverTest, StandbysNamingEachOtherDoNotStarveTheRestOfTheList) {
  auto a = StartPeer(std::nullopt);
  auto b = StartPeer(a->url());
  a->BecomeStandbyOf(b->url());  // a stale view: each names the other
  auto c = StartPeer(std::nullopt);
  auto client = Client::Create(
      {.base_url = fmt::format("{},{},{}", a->url(), b->url(), c->url()), .failover_timeout = std::chrono::seconds(5)});
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Post("/v1/things", {{"x", 1}}).ok());
  EXPECT_EQ(a->requests.load(), 1);
  EXPECT_EQ(b->requests.load(), 1);
  EXPECT_EQ(c->requests.load(), 1);
  EXPECT_EQ((*client)->current_base_url(), c->url());
}

TEST(ClientFailoverTest, StandbysThatKnowNoLeaderAreUnavailableAfterTheFailoverTimeout) {
  auto b1 = StartPeer("");
  auto b2 = StartPeer("");
  auto client = Client::Create({.base_url = b1->url() + "," + b2->url(),
                                .failover_backoff = std::chrono::milliseconds(100),
                                .failover_timeout = std::chrono::milliseconds(600)});
  ASSERT_TRUE(client.ok()) << client.status();
  const MonoTime start = RealClock().Monotonic();
  const absl::Status st = (*client)->Post("/v1/things", {{"x", 1}}).status();
  const Duration elapsed = Since(start);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_GE(Ms(elapsed), 600);
  EXPECT_LT(Ms(elapsed), 5000);
  EXPECT_TRUE(Contains(st, b1->url())) << st;
  EXPECT_TRUE(Contains(st, b2->url())) << st;
  EXPECT_TRUE(Contains(st, "knows no leader")) << st;
  EXPECT_GT(b1->requests.load(), 1);  // it went round, with a pause between rounds
  EXPECT_LT(b1->requests.load(), 20);
}

TEST(ClientFailoverTest, OneUrlThatIsAStandbyIsUnavailableAtOnceNamingTheLeader) {
  auto leader = StartPeer(std::nullopt);
  auto standby = StartPeer(leader->url());
  auto client = Client::Create({.base_url = standby->url()});
  ASSERT_TRUE(client.ok()) << client.status();
  const MonoTime start = RealClock().Monotonic();
  const absl::Status st = (*client)->Post("/v1/things", {{"x", 1}}).status();
  EXPECT_LT(Ms(Since(start)), 1000);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_TRUE(Contains(st, standby->url() + " is a standby server")) << st;
  EXPECT_TRUE(Contains(st, "the leader is at " + leader->url())) << st;
  EXPECT_EQ(leader->requests.load(), 0);
  EXPECT_EQ(standby->requests.load(), 1);

  auto electing = StartPeer("");
  auto one = Client::Create({.base_url = electing->url()});
  ASSERT_TRUE(one.ok());
  const absl::Status no_leader = (*one)->Get("/v1/things").status();
  EXPECT_EQ(no_leader.code(), absl::StatusCode::kUnavailable) << no_leader;
  EXPECT_TRUE(Contains(no_leader, "knows no leader")) << no_leader;
  EXPECT_EQ(electing->requests.load(), 1);
}

TEST(ClientFailoverTest, AReadTimeoutAfterTheRequestWasSentDoesNotFailOver) {
  auto slow = StartPeer(std::nullopt, std::chrono::milliseconds(1500));
  auto other = StartPeer(std::nullopt);
  auto client =
      Client::Create({.base_url = slow->url() + "," + other->url(), .read_timeout = std::chrono::milliseconds(300)});
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Status st = (*client)->Post("/v1/things", {{"x", 1}}).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_TRUE(Contains(st, slow->url())) << st;
  EXPECT_EQ(other->requests.load(), 0);  // the POST may have run on `slow`: never sent twice
  EXPECT_EQ(slow->requests.load(), 1);
  // ... but the next call starts at the next server: a frozen one must not hold every later call.
  EXPECT_EQ((*client)->current_base_url(), other->url());
}

TEST(ClientFailoverTest, AGetWithoutAnAnswerGoesOnToTheNextServer) {
  auto slow = StartPeer(std::nullopt, std::chrono::milliseconds(1500));
  auto other = StartPeer(std::nullopt);
  auto client =
      Client::Create({.base_url = slow->url() + "," + other->url(), .read_timeout = std::chrono::milliseconds(300)});
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->Get("/v1/things").ok());  // a GET is safe to repeat
  EXPECT_EQ(slow->requests.load(), 1);
  EXPECT_EQ(other->requests.load(), 1);
  EXPECT_EQ((*client)->current_base_url(), other->url());
}

TEST(ClientFailoverTest, StreamsFailOverBeforeTheHeadAndNeverShowAStandbysHead) {
  auto leader = StartPeer(std::nullopt);
  auto standby = StartPeer(leader->url());
  auto client = Client::Create({.base_url = standby->url() + "," + leader->url()});
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<int> heads;
  std::string got;
  const absl::Status st = (*client)->PostStream(
      "/v1/stream", {{"x", 1}}, [&](int status) { heads.push_back(status); },
      [&](const std::string& chunk) {
        got += chunk;
        return true;
      });
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(heads, std::vector<int>{200});
  EXPECT_EQ(got, "ab");
  EXPECT_EQ(standby->requests.load(), 1);
  EXPECT_EQ(leader->requests.load(), 1);
}

TEST(ClientFailoverTest, CancelEndsTheWaitBetweenRounds) {
  auto b1 = StartPeer("");
  auto b2 = StartPeer("");
  auto client = Client::Create({.base_url = b1->url() + "," + b2->url(),
                                .failover_backoff = std::chrono::seconds(5),
                                .failover_timeout = std::chrono::seconds(30)});
  ASSERT_TRUE(client.ok()) << client.status();
  const MonoTime start = RealClock().Monotonic();
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    (*client)->Cancel();
  });
  const absl::Status st = (*client)->Get("/v1/things").status();
  canceller.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_LT(Ms(Since(start)), 3000);
  // A Cancel while no call runs has no effect on the next call.
  (*client)->Cancel();
  auto leader = StartPeer(std::nullopt);
  auto later = Client::Create({.base_url = leader->url()});
  ASSERT_TRUE(later.ok());
  (*later)->Cancel();
  EXPECT_TRUE((*later)->Get("/v1/things").ok());
}

TEST(ClientFailoverTest, EveryItemOfTheListIsValidated) {
  for (const std::string bad : {"http://a:1,,http://b:2", "http://a:1,ftp://b", "http://a:1,", ","}) {
    EXPECT_EQ(Client::Create({.base_url = bad}).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  const absl::Status st = Client::Create({.base_url = "http://a:1,ftp://b"}).status();
  EXPECT_TRUE(Contains(st, "'ftp://b'")) << st;
  EXPECT_EQ(Client::Create({.base_url = "http://a:1,https://b:2"}).status().code(),
            absl::StatusCode::kInvalidArgument);  // https without a CA
  auto ok = Client::Create({.base_url = "http://127.0.0.1:1, http://127.0.0.1:2"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->current_base_url(), "http://127.0.0.1:1");
}

}  // namespace
}  // namespace gpugeek::http
