// The gateway end to end on loopback: real replicas (http::Server, Boost.Beast) behind it, requests over real
// sockets, answers framed by the same parser the gateway uses.
#include "gateway/gateway.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "http/client.h"
#include "http/server.h"
#include "pki/pki.h"

namespace gpugeek::gateway {
namespace {

using namespace std::chrono_literals;

// A replica: answers every path with its name, echoes what it was sent in headers, streams on /stream and
// /chunked (kChunkedBody, in pieces), echoes bytes after an upgrade on /ws.
const std::string kChunkedBody = "alpha\n" + std::string(3000, 'b') + "\n" + "gamma";

class Replica {
 public:
  explicit Replica(std::string name) : name_(std::move(name)) {
    http::ServerOptions o;
    o.name = name_;
    server_ = *http::Server::Create(o);
    server_->Route("GET", "/stream", [](const http::Request&) -> absl::StatusOr<http::Reply> {
      http::Reply r;
      r.content_type = "text/plain";
      r.stream = [](const http::ChunkWriter& write) {
        write("first\n");
        std::this_thread::sleep_for(400ms);
        write("second\n");
      };
      return r;
    });
    server_->Route("GET", "/chunked", [](const http::Request&) -> absl::StatusOr<http::Reply> {
      http::Reply r;
      r.content_type = "text/plain";
      r.stream = [](const http::ChunkWriter& write) {
        write("alpha\n");
        std::this_thread::sleep_for(20ms);  // the pieces reach the gateway in separate reads
        write(std::string(3000, 'b') + "\n");
        std::this_thread::sleep_for(20ms);
        write("gamma");
      };
      return r;
    });
    server_->Route("GET", "/ws", [](const http::Request& req) -> absl::StatusOr<http::Reply> {
      if (!http::AsksToUpgrade(req, "echo")) return http::Reply::UpgradeRequired("echo");
      http::Reply r;
      r.upgrade_protocol = "echo";
      r.upgrade = [](http::ByteStream& s) {
        std::string buf;
        while (s.Read(buf)) {
          if (!s.Write(buf)) return;
        }
      };
      return r;
    });
    server_->Route("GET", "/big", [](const http::Request&) -> absl::StatusOr<http::Reply> {
      return http::Reply::Text(std::string(8 << 20, 'b'));
    });
    server_->Route("*", "/{rest...}", [this](const http::Request& req) -> absl::StatusOr<http::Reply> {
      ++served_;
      if (fail_.load()) return absl::UnavailableError("replica failing");
      std::string xff;
      if (auto it = req.headers.find("x-forwarded-for"); it != req.headers.end()) xff = it->second;
      http::Reply r = http::Reply::Text(name_);
      r.headers.push_back({"X-Seen-Forwarded-For", xff});
      r.headers.push_back({"X-Seen-Body", std::to_string(req.body.size())});
      r.headers.push_back({"X-Seen-Keep-Alive", req.headers.count("keep-alive") ? "yes" : "no"});
      r.headers.push_back({"X-Seen-Target", req.target});
      r.headers.push_back({"X-Seen-Host", req.headers.count("host") ? req.headers.at("host") : ""});
      return r;
    });
    EXPECT_TRUE(server_->Start().ok());
  }
  ReplicaEndpoint Endpoint(int64_t capacity = 1000) const {
    return ReplicaEndpoint{
        .id = name_, .host = "127.0.0.1", .port = static_cast<uint16_t>(server_->port()), .capacity_milli = capacity};
  }
  void Stop() { server_->Stop(); }
  int served() const { return served_.load(); }
  void SetFailing(bool f) { fail_ = f; }

 private:
  std::string name_;
  std::unique_ptr<http::Server> server_;
  std::atomic<int> served_{0};
  std::atomic<bool> fail_{false};
};

// A client connection: writes raw bytes, reads whole answers.
class Conn {
 public:
  explicit Conn(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{.tv_sec = 10, .tv_usec = 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Conn() { close(fd_); }
  void Send(std::string_view s) {
    ASSERT_EQ(send(fd_, s.data(), s.size(), MSG_NOSIGNAL), static_cast<ssize_t>(s.size()));
  }
  struct Answer {
    int status = 0;
    std::map<std::string, std::string> headers;  // lower-case names
    std::string body;                            // payload (chunked decoded)
    bool closed = false;
  };
  // Reads one whole answer; status 0 when the connection ended first.
  Answer Read(bool head_request = false) {
    Answer a;
    ResponseFramer f;
    f.Reset(head_request);
    for (;;) {
      if (!f.head_done() && !buf_.empty()) {
        auto n = f.ParseHead(buf_);
        if (!n.ok()) return a;
        buf_.erase(0, *n);
        if (f.head_done()) {
          a.status = f.head().status;
          for (const auto& h : f.head().headers) {
            std::string k = h.name;
            for (char& ch : k) ch = static_cast<char>(std::tolower(ch));
            a.headers[k] = h.value;
          }
          if (a.status == 101) return a;
        }
      }
      if (f.head_done() && !buf_.empty()) {
        const uint64_t before = f.body_bytes();
        auto n = f.ParseBody(buf_);
        if (!n.ok()) return a;
        // Payload: for these tests bodies are small and either plain or chunked; decode by re-reading.
        raw_body_ += buf_.substr(0, *n);
        buf_.erase(0, *n);
        (void)before;
      }
      if (f.head_done() && f.done()) break;
      char chunk[65536];
      const ssize_t r = recv(fd_, chunk, sizeof chunk, 0);
      if (r <= 0) {
        a.closed = true;
        if (f.head_done() && f.Eof().ok()) break;
        return a;
      }
      buf_.append(chunk, static_cast<size_t>(r));
    }
    a.body = f.head().chunked ? Dechunk(raw_body_) : raw_body_;
    raw_body_.clear();
    return a;
  }
  // Reads whatever arrives within `wait`.
  std::string ReadSome(std::chrono::milliseconds wait) {
    timeval tv{.tv_sec = 0, .tv_usec = static_cast<suseconds_t>(wait.count() * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string out = buf_;
    buf_.clear();
    char chunk[65536];
    const auto until = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < until) {
      const ssize_t r = recv(fd_, chunk, sizeof chunk, 0);
      if (r <= 0) break;
      out.append(chunk, static_cast<size_t>(r));
    }
    timeval back{.tv_sec = 10, .tv_usec = 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &back, sizeof back);
    return out;
  }
  // Reads until the connection ends: every byte received, as received.
  std::string ReadToEnd() {
    std::string out = buf_;
    buf_.clear();
    char chunk[65536];
    for (;;) {
      const ssize_t r = recv(fd_, chunk, sizeof chunk, 0);
      if (r <= 0) return out;
      out.append(chunk, static_cast<size_t>(r));
    }
  }
  // Drains what was sent; true when the connection then ends with a FIN, false on a reset or when it stays open.
  bool CleanEof() {
    char chunk[65536];
    for (;;) {
      const ssize_t r = recv(fd_, chunk, sizeof chunk, 0);
      if (r == 0) return true;
      if (r < 0) return false;
    }
  }
  // Drains what was sent; true when the connection then ends (EOF or reset), false when it stays open.
  bool PeerClosed() {
    char chunk[65536];
    for (;;) {
      const ssize_t r = recv(fd_, chunk, sizeof chunk, 0);
      if (r == 0) return true;
      if (r < 0) return errno == ECONNRESET;
    }
  }

 private:
  static std::string Dechunk(const std::string& raw) {
    std::string out;
    size_t i = 0;
    while (i < raw.size()) {
      const size_t eol = raw.find("\r\n", i);
      const size_t size = std::stoul(raw.substr(i, eol - i), nullptr, 16);
      if (size == 0) break;
      out += raw.substr(eol + 2, size);
      i = eol + 2 + size + 2;
    }
    return out;
  }
  int fd_ = -1;
  std::string buf_, raw_body_;
};

std::string Get(std::string_view target, std::string_view extra = "") {
  return std::string("GET ") + std::string(target) + " HTTP/1.1\r\nHost: svc\r\n" + std::string(extra) + "\r\n";
}

RouteTable Table(std::vector<VersionEndpoints> versions, StickyPolicy sticky = {}) {
  RouteTable t;
  t.routes.push_back(ServiceRoute{.service = "svc", .versions = std::move(versions), .sticky = std::move(sticky)});
  return t;
}

std::unique_ptr<Gateway> StartGateway(RouteTable t, metrics::Registry* registry = nullptr,
                                      GatewayOptions o = GatewayOptions{}) {
  o.registry = registry;
  auto gw = Gateway::Start(o, std::move(t));
  EXPECT_TRUE(gw.ok()) << gw.status();
  return *std::move(gw);
}

TEST(Gateway, SplitsTenThousandRequestsByWeightAndCountsThem) {
  Replica v1("v1"), v2("v2");
  metrics::Registry registry;
  auto gw = StartGateway(Table({{.name = "v1", .weight_percent = 90, .replicas = {v1.Endpoint()}},
                                {.name = "v2", .weight_percent = 10, .replicas = {v2.Endpoint()}}}),
                         &registry);
  Conn c(gw->port());
  std::map<std::string, int> by_version;
  for (int i = 0; i < 10000; ++i) {
    c.Send(Get("/predict", "Keep-Alive: timeout=5\r\n"));
    Conn::Answer a = c.Read();
    ASSERT_EQ(a.status, 200) << i;
    ++by_version[a.body];
    if (i == 0) {
      EXPECT_EQ(a.headers["x-seen-forwarded-for"], "127.0.0.1");
      EXPECT_EQ(a.headers["x-seen-keep-alive"], "no") << "hop-by-hop fields are not forwarded";
    }
  }
  // Smooth weighted round robin: exactly the weight over every 100 requests.
  EXPECT_EQ(by_version["v1"], 9000);
  EXPECT_EQ(by_version["v2"], 1000);
  const std::string text = registry.Render();
  EXPECT_NE(text.find("gpugeek_gateway_requests_total{service=\"svc\",version=\"v1\",code=\"2xx\"} 9000"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("gpugeek_gateway_requests_total{service=\"svc\",version=\"v2\",code=\"2xx\"} 1000"),
            std::string::npos);
  EXPECT_EQ(gw->Load()["svc"].requests, 10000u);
}

TEST(Gateway, StickyHeaderHoldsForEveryClientAndRollbackMovesAllWithinOneTick) {
  Replica v1("v1"), v2("v2");
  const auto versions = [&](int w2) {
    return std::vector<VersionEndpoints>{{.name = "v1", .weight_percent = 100 - w2, .replicas = {v1.Endpoint()}},
                                         {.name = "v2", .weight_percent = w2, .replicas = {v2.Endpoint()}}};
  };
  const StickyPolicy sticky{.kind = StickyKind::kHeader, .name = "X-User"};
  auto gw = StartGateway(Table(versions(50), sticky));
  Conn c(gw->port());
  int moved = 0, on_v2 = 0;
  for (int u = 0; u < 200; ++u) {
    std::string first;
    for (int k = 0; k < 5; ++k) {
      c.Send(Get("/", "X-User: user-" + std::to_string(u) + "\r\n"));
      const std::string v = c.Read().body;
      if (k == 0) first = v;
      moved += v != first ? 1 : 0;
    }
    on_v2 += first == "v2" ? 1 : 0;
  }
  EXPECT_EQ(moved, 0) << "every sticky client kept its version";
  EXPECT_GT(on_v2, 70);
  EXPECT_LT(on_v2, 130);
  ASSERT_TRUE(gw->SetRoutes(Table(versions(0), sticky)).ok());
  std::this_thread::sleep_for(150ms);  // the loop applies routes at its next tick (100 ms) or at once when woken
  for (int u = 0; u < 200; ++u) {
    c.Send(Get("/", "X-User: user-" + std::to_string(u) + "\r\n"));
    ASSERT_EQ(c.Read().body, "v1") << "rollback: user-" << u;
  }
}

TEST(Gateway, CookieStickinessSetsAndFollowsTheCookie) {
  Replica v1("v1"), v2("v2");
  auto gw = StartGateway(Table({{.name = "v1", .weight_percent = 50, .replicas = {v1.Endpoint()}},
                                {.name = "v2", .weight_percent = 50, .replicas = {v2.Endpoint()}}},
                               {.kind = StickyKind::kCookie, .name = "gv"}));
  Conn c(gw->port());
  c.Send(Get("/"));
  Conn::Answer a = c.Read();
  const std::string version = a.body;
  EXPECT_EQ(a.headers["set-cookie"], "gv=" + version + "; Path=/; HttpOnly; SameSite=Lax");
  for (int i = 0; i < 50; ++i) {
    c.Send(Get("/", "Cookie: a=b; gv=" + version + "\r\n"));
    a = c.Read();
    ASSERT_EQ(a.body, version);
    ASSERT_EQ(a.headers.count("set-cookie"), 0u);
  }
}

TEST(Gateway, PipelinedClientRequestsAnsweredInOrderAndBodiesForwarded) {
  Replica v1("v1");
  auto gw = StartGateway(Table({{.name = "v1", .weight_percent = 100, .replicas = {v1.Endpoint()}}}));
  Conn c(gw->port());
  c.Send(Get("/a") + "POST /b HTTP/1.1\r\nHost: svc\r\nContent-Length: 5\r\n\r\nhello" +
         "POST /c HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n" +
         Get("/d"));
  EXPECT_EQ(c.Read().headers["x-seen-body"], "0");
  EXPECT_EQ(c.Read().headers["x-seen-body"], "5");
  EXPECT_EQ(c.Read().headers["x-seen-body"], "7");
  EXPECT_EQ(c.Read().status, 200);
  EXPECT_EQ(v1.served(), 4);
}

TEST(Gateway, StreamsAnswersAsTheyComeAndTunnelsUpgrades) {
  Replica v1("v1");
  auto gw = StartGateway(Table({{.name = "v1", .weight_percent = 100, .replicas = {v1.Endpoint()}}}));
  Conn c(gw->port());
  c.Send(Get("/stream"));
  const auto t0 = std::chrono::steady_clock::now();
  const std::string early = c.ReadSome(250ms);
  EXPECT_NE(early.find("first"), std::string::npos) << "the first chunk passes before the replica finishes";
  EXPECT_EQ(early.find("second"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 350ms);
  Conn ws(gw->port());
  ws.Send(Get("/ws", "Connection: Upgrade\r\nUpgrade: echo\r\n"));
  Conn::Answer up = ws.Read();
  ASSERT_EQ(up.status, 101);
  EXPECT_EQ(up.headers["upgrade"], "echo");
  ws.Send("ping-1");
  std::string echoed;
  for (int i = 0; i < 20 && echoed.size() < 6; ++i) echoed += ws.ReadSome(100ms);
  EXPECT_EQ(echoed, "ping-1");
}

TEST(Gateway, ActivatorHoldsRequestsUntilAReplicaIsReadyThenTimesOutWith503) {
  Replica v1("v1");
  RouteTable empty = Table({{.name = "v1", .weight_percent = 100, .replicas = {}}});
  empty.routes[0].activator_timeout = 1s;
  auto gw = StartGateway(empty);
  Conn c(gw->port());
  const auto t0 = std::chrono::steady_clock::now();
  c.Send(Get("/first"));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(gw->Load()["svc"].queued, 1);
  RouteTable ready = Table({{.name = "v1", .weight_percent = 100, .replicas = {v1.Endpoint()}}});
  ASSERT_TRUE(gw->SetRoutes(ready).ok());
  Conn::Answer a = c.Read();
  EXPECT_EQ(a.status, 200) << "the first request after zero succeeds";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 300ms);
  // Back to zero: a request waits the activator's timeout, then 503 with Retry-After.
  ASSERT_TRUE(gw->SetRoutes(empty).ok());
  std::this_thread::sleep_for(150ms);
  const auto t1 = std::chrono::steady_clock::now();
  c.Send(Get("/late"));
  Conn::Answer late = c.Read();
  EXPECT_EQ(late.status, 503);
  EXPECT_EQ(late.headers["retry-after"], "1");
  EXPECT_GE(std::chrono::steady_clock::now() - t1, 900ms);
}

TEST(Gateway, QueuedClientsThatLeaveGiveTheirPlaceUp) {
  RouteTable t = Table({{.name = "v1", .weight_percent = 100, .replicas = {}}});
  t.routes[0].activator_queue = 5;
  auto gw = StartGateway(t);
  Conn first(gw->port());
  first.Send(Get("/first"));
  for (int i = 0; i < 20; ++i) {
    Conn leaving(gw->port());
    leaving.Send(Get("/x"));
    std::this_thread::sleep_for(5ms);
  }  // each closes here
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(gw->Load()["svc"].queued, 1) << "only the client still there waits";
  Conn second(gw->port());
  second.Send(Get("/second"));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(gw->Load()["svc"].queued, 2) << "not refused: the queue holds live clients only";
  Replica v1("v1");
  ASSERT_TRUE(gw->SetRoutes(Table({{.name = "v1", .weight_percent = 100, .replicas = {v1.Endpoint()}}})).ok());
  EXPECT_EQ(first.Read().status, 200);
  EXPECT_EQ(second.Read().status, 200);
  EXPECT_EQ(v1.served(), 2);
}

TEST(Gateway, ReplicaKilledMidLoadLosesNoIdempotentRequest) {
  Replica a("a"), b("b");
  auto gw = StartGateway(Table({{.name = "v1", .weight_percent = 100, .replicas = {a.Endpoint(), b.Endpoint()}}}));
  std::atomic<int> ok{0}, failed{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int t = 0; t < 4; ++t) {
    clients.emplace_back([&] {
      Conn c(gw->port());
      while (!stop.load()) {
        c.Send(Get("/work"));
        Conn::Answer r = c.Read();
        (r.status == 200 ? ok : failed)++;
        if (r.status != 200) return;
      }
    });
  }
  std::this_thread::sleep_for(300ms);
  a.Stop();  // mid-load: its connections close under the gateway
  std::this_thread::sleep_for(500ms);
  stop = true;
  for (auto& t : clients) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(ok.load(), 100);
  EXPECT_GT(b.served(), 0);
}

// A replica that dies mid-answer: reads a request, sends a head promising 10 bytes and 4 of them, then closes.
class HalfAnsweringReplica {
 public:
  HalfAnsweringReplica() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd_, 64), 0);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        std::string got;
        char buf[4096];
        while (got.find("\r\n\r\n") == std::string::npos) {
          const ssize_t r = recv(c, buf, sizeof buf, 0);
          if (r <= 0) break;
          got.append(buf, static_cast<size_t>(r));
        }
        ++answered_;
        const std::string half = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf";
        (void)send(c, half.data(), half.size(), MSG_NOSIGNAL);
        close(c);
      }
    });
  }
  ~HalfAnsweringReplica() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  ReplicaEndpoint Endpoint() const { return ReplicaEndpoint{.id = "half", .host = "127.0.0.1", .port = port_}; }
  int answered() const { return answered_.load(); }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<int> answered_{0};
};

TEST(Gateway, AReplicaThatDiesMidAnswerIsRetriedAndTheClientSeesNoneOfIt) {
  HalfAnsweringReplica half;
  {
    // Alone: every try is cut short, so the client gets a clean 502 on a connection that stays usable, never the
    // 200 head and 4 bytes of an answer it cannot finish.
    auto gw = StartGateway(Table({{.name = "v1", .weight_percent = 100, .replicas = {half.Endpoint()}}}));
    Conn c(gw->port());
    for (int i = 0; i < 2; ++i) {
      c.Send(Get("/x"));
      const Conn::Answer r = c.Read();
      EXPECT_EQ(r.status, 502) << i;
      EXPECT_FALSE(r.closed) << i;
    }
  }
  const int alone = half.answered();
  EXPECT_GE(alone, 2);
  Replica live("live");
  auto gw =
      StartGateway(Table({{.name = "v1", .weight_percent = 100, .replicas = {half.Endpoint(), live.Endpoint()}}}));
  Conn c(gw->port());
  for (int i = 0; i < 40; ++i) {
    c.Send(Get("/x"));
    const Conn::Answer r = c.Read();
    ASSERT_EQ(r.status, 200) << i;
    ASSERT_EQ(r.body, "live") << i;
  }
  EXPECT_GT(half.answered(), alone);  // it was tried, and its half answers went nowhere
  EXPECT_EQ(live.served(), 40);
}

TEST(Gateway, RetriesGetOnAnotherReplicaButNeverAPost) {
  Replica live("live");
  // A replica that refuses connections: a port bound and closed.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  const ReplicaEndpoint dead{.id = "dead", .host = "127.0.0.1", .port = ntohs(addr.sin_port)};
  metrics::Registry registry;
  auto gw =
      StartGateway(Table({{.name = "v1", .weight_percent = 100, .replicas = {live.Endpoint(), dead}}}), &registry);
  Conn c(gw->port());
  for (int i = 0; i < 50; ++i) {
    c.Send(Get("/x"));
    ASSERT_EQ(c.Read().status, 200) << i;
  }
  EXPECT_EQ(live.served(), 50);
  // The dead replica failed its connections: retried each time, then ejected after 5 (no more retries needed).
  const std::string text = registry.Render();
  EXPECT_NE(text.find("gpugeek_gateway_retries_total{service=\"svc\"} 5"), std::string::npos) << text;
}

TEST(Gateway, AClientThatNeverReadsIsCutAndHoldsNobodyElse) {
  Replica v1("v1");
  GatewayOptions o;
  o.write_timeout = 300ms;
  auto gw = StartGateway(Table({{.name = "v1", .weight_percent = 100, .replicas = {v1.Endpoint()}}}), nullptr, o);
  Conn stuck(gw->port());
  stuck.Send(Get("/big"));  // 8 MiB it never reads
  std::this_thread::sleep_for(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  Conn other(gw->port());
  for (int i = 0; i < 20; ++i) {
    other.Send(Get("/small"));
    ASSERT_EQ(other.Read().body, "v1") << i;
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(stuck.PeerClosed()) << "cut after write_timeout with its answer unread";
}

TEST(Gateway, HostileClientsGetClearErrors) {
  Replica v1("v1");
  GatewayOptions o;
  o.header_timeout = 300ms;
  o.max_head = 4096;
  o.max_request_body = 1000;
  auto gw = StartGateway(Table({{.name = "v1", .weight_percent = 100, .replicas = {v1.Endpoint()}}}), nullptr, o);
  {
    Conn c(gw->port());
    c.Send("GET / HTTP/1.1\r\nHost: svc\r\nContent-Length: nope\r\n\r\n");
    Conn::Answer a = c.Read();
    EXPECT_EQ(a.status, 400);
    EXPECT_EQ(a.headers["connection"], "close");
  }
  {
    Conn c(gw->port());
    c.Send("GET / HTTP/1.1\r\nHost: svc\r\nX: " + std::string(5000, 'a') + "\r\n\r\n");
    EXPECT_EQ(c.Read().status, 431);
  }
  {
    Conn c(gw->port());
    c.Send("POST / HTTP/1.1\r\nHost: svc\r\nContent-Length: 5000\r\n\r\n");
    EXPECT_EQ(c.Read().status, 413);
  }
  {
    Conn c(gw->port());  // slowloris: half a head, then nothing
    c.Send("GET / HTTP/1.1\r\nHost: s");
    const auto t0 = std::chrono::steady_clock::now();
    Conn::Answer a = c.Read();
    EXPECT_EQ(a.status, 408);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
  }
  {
    RouteTable t = Table({{.name = "v1", .weight_percent = 100, .replicas = {v1.Endpoint()}}});
    t.routes[0].path_prefix = "/only";
    ASSERT_TRUE(gw->SetRoutes(t).ok());
    std::this_thread::sleep_for(150ms);
    Conn c(gw->port());
    c.Send(Get("/elsewhere"));
    Conn::Answer a = c.Read();
    EXPECT_EQ(a.status, 404);
    EXPECT_EQ(a.body, "no service is routed at svc/elsewhere\n");
  }
  {
    Conn c(gw->port());  // smuggling: both framings, or a coding that does not end in chunked
    c.Send("POST /only HTTP/1.1\r\nHost: svc\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n");
    EXPECT_EQ(c.Read().status, 400);
  }
  {
    Conn c(gw->port());
    c.Send("POST /only HTTP/1.1\r\nHost: svc\r\nTransfer-Encoding: gzip\r\n\r\nGET /only HTTP/1.1\r\n\r\n");
    Conn::Answer a = c.Read();
    EXPECT_EQ(a.status, 400);
    EXPECT_EQ(a.body, "Transfer-Encoding must end in chunked\n");
  }
  EXPECT_EQ(v1.served(), 0) << "nothing hostile reached the replica";
  RouteTable bad = Table({{.name = "v1", .weight_percent = 90, .replicas = {v1.Endpoint()}}});
  EXPECT_FALSE(gw->SetRoutes(bad).ok());
}

TEST(Gateway, Http10ClientsGetChunkedAnswersUnchunkedAndKeepAliveOnlyWithALength) {
  Replica v1("v1");
  auto gw = StartGateway(Table({{.name = "v1", .weight_percent = 100, .replicas = {v1.Endpoint()}}}));
  const auto lower = [](std::string s) {
    for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return s;
  };
  {
    Conn c(gw->port());  // as ApacheBench asks: the replica answers chunked, the client gets the payload as is
    c.Send("GET /chunked HTTP/1.0\r\nHost: svc\r\n\r\n");
    const std::string raw = c.ReadToEnd();
    const size_t end = raw.find("\r\n\r\n");
    ASSERT_NE(end, std::string::npos) << raw;
    const std::string head = raw.substr(0, end + 4);
    EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
    EXPECT_EQ(lower(head).find("transfer-encoding"), std::string::npos) << head;
    EXPECT_EQ(lower(head).find("content-length"), std::string::npos) << head;
    EXPECT_NE(head.find("\r\nConnection: close\r\n"), std::string::npos) << head;
    EXPECT_EQ(raw.substr(end + 4), kChunkedBody) << "byte-exact, no chunk framing, ended by the close";
  }
  {
    Conn c(gw->port());  // keep-alive asked, but a chunked answer has no length: un-chunked, then closed
    c.Send("GET /chunked HTTP/1.0\r\nHost: svc\r\nConnection: keep-alive\r\n\r\n");
    Conn::Answer a = c.Read();
    EXPECT_EQ(a.status, 200);
    EXPECT_EQ(a.headers.count("transfer-encoding"), 0u);
    EXPECT_EQ(a.headers["connection"], "close");
    EXPECT_EQ(a.body, kChunkedBody);
    EXPECT_TRUE(a.closed);
  }
  {
    Conn c(gw->port());  // keep-alive asked and a length: the connection stays, and the answer says so
    for (int i = 0; i < 3; ++i) {
      c.Send("GET /x HTTP/1.0\r\nHost: svc\r\nConnection: keep-alive\r\n\r\n");
      Conn::Answer a = c.Read();
      ASSERT_EQ(a.status, 200) << i;
      EXPECT_EQ(a.body, "v1");
      EXPECT_EQ(a.headers["content-length"], "2");
      EXPECT_EQ(a.headers["connection"], "keep-alive");
      EXPECT_FALSE(a.closed);
    }
  }
  {
    Conn c(gw->port());  // HTTP/1.0 without keep-alive: the length kept, then closed
    c.Send("GET /x HTTP/1.0\r\nHost: svc\r\n\r\n");
    Conn::Answer a = c.Read();
    EXPECT_EQ(a.status, 200);
    EXPECT_EQ(a.headers["content-length"], "2");
    EXPECT_EQ(a.headers["connection"], "close");
    EXPECT_TRUE(c.PeerClosed());
  }
  {
    Conn c(gw->port());  // HTTP/1.1 still gets the chunked answer as the replica framed it
    c.Send(Get("/chunked"));
    Conn::Answer a = c.Read();
    EXPECT_EQ(a.headers["transfer-encoding"], "chunked");
    EXPECT_EQ(a.body, kChunkedBody);
    EXPECT_FALSE(a.closed);
  }
  EXPECT_EQ(v1.served(), 4);  // the catch-all route's requests (/x); /chunked has its own handler
}

TEST(Gateway, AHeadFarOverTheLimitGets431ThenACleanClose) {
  Replica v1("v1");
  auto gw = StartGateway(Table({{.name = "v1", .weight_percent = 100, .replicas = {v1.Endpoint()}}}));
  Conn c(gw->port());
  // One 1 MiB header line (the limit is 64 KiB): the gateway answers after reading a part of it; the rest still
  // arrives after the answer, and must not turn the close into a reset that destroys the answer.
  c.Send("GET / HTTP/1.1\r\nHost: svc\r\nX-Big: " + std::string(1 << 20, 'a') + "\r\n\r\n");
  Conn::Answer a = c.Read();
  EXPECT_EQ(a.status, 431);
  EXPECT_EQ(a.headers["connection"], "close");
  EXPECT_EQ(a.body, "the message head is larger than the gateway's limit\n");
  c.Send(std::string(64 * 1024, 'z'));  // still taken (and dropped) while the gateway lingers
  EXPECT_TRUE(c.CleanEof()) << "the answer ends with a FIN, not a reset";
  EXPECT_EQ(v1.served(), 0);
}

TEST(Gateway, AbsoluteFormTargetsRouteByTheirHostAndGoUpstreamInOriginForm) {
  Replica a("a"), b("b");
  RouteTable t;
  t.routes.push_back(ServiceRoute{.service = "sa",
                                  .hosts = {"a.local"},
                                  .versions = {{.name = "v1", .weight_percent = 100, .replicas = {a.Endpoint()}}}});
  t.routes.push_back(ServiceRoute{.service = "sb",
                                  .hosts = {"b.local"},
                                  .path_prefix = "/p",
                                  .versions = {{.name = "v1", .weight_percent = 100, .replicas = {b.Endpoint()}}}});
  auto gw = StartGateway(t);
  Conn c(gw->port());
  // RFC 9112 3.2.2: the target's host wins over Host, and the replica gets the origin-form and that host.
  c.Send("GET http://b.local:8080/p/q?x=1&y=2 HTTP/1.1\r\nHost: a.local\r\n\r\n");
  Conn::Answer r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "b");
  EXPECT_EQ(r.headers["x-seen-target"], "/p/q?x=1&y=2");
  EXPECT_EQ(r.headers["x-seen-host"], "b.local:8080");
  c.Send("GET HTTP://A.local?z=3 HTTP/1.1\r\nHost: b.local\r\n\r\n");  // scheme and host case-insensitive, no path
  r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "a");
  EXPECT_EQ(r.headers["x-seen-target"], "/?z=3");
  EXPECT_EQ(r.headers["x-seen-host"], "A.local");
  c.Send("GET http://b.local/p HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");  // no Host field at all
  r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "b");
  EXPECT_EQ(r.headers["x-seen-target"], "/p");
  EXPECT_EQ(r.headers["x-seen-host"], "b.local");
  c.Send("GET http://c.local/p HTTP/1.1\r\nHost: b.local\r\n\r\n");
  r = c.Read();
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "no service is routed at c.local/p\n");
  c.Send("GET ftp://a.local/x HTTP/1.1\r\nHost: a.local\r\n\r\n");
  r = c.Read();
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, "an absolute-form request target must be an http or https URI\n");
  EXPECT_EQ(a.served(), 1);
  EXPECT_EQ(b.served(), 2);
}

}  // namespace
}  // namespace gpugeek::gateway

namespace gpugeek::gateway {
namespace {

// TLS termination in process (the sanitizer lanes run it; tls_test.py checks curl, openssl s_client and gRPC): a
// local CA, the gateway's certificate, http::Client's TLS 1.3 verifying it; many clients at once, an 8 MiB answer
// byte for byte, a plain-text client refused while the others go on.
TEST(GatewayTls, ServesHttpsToVerifyingClientsAndNothingToPlainText) {
  const std::string dir = ::testing::TempDir() + "gateway_tls_" + std::to_string(getpid());
  auto pki = pki::EnsureLocalPki({.dir = dir, .add_hostname = false});
  ASSERT_TRUE(pki.ok()) << pki.status();
  Replica v1("v1");
  GatewayOptions o;
  auto tls = TlsServerContext::Load(pki->server_cert_file, pki->server_key_file);
  ASSERT_TRUE(tls.ok()) << tls.status();
  o.tls = *std::move(tls);
  auto gw = StartGateway(Table({{.name = "v1", .weight_percent = 100, .replicas = {v1.Endpoint()}}}), nullptr, o);
  const http::ClientOptions co{.base_url = "https://127.0.0.1:" + std::to_string(gw->port()),
                               .ca_file = pki->ca_cert_file};
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    clients.emplace_back([&] {
      auto c = http::Client::Create(co);
      if (!c.ok()) return;
      for (int i = 0; i < 25; ++i) ok += (*c)->GetText("/x").value_or("") == "v1" ? 1 : 0;
    });
  }
  {
    Conn plain(gw->port());  // plain text on the TLS port: no HTTP answer, and the others are not held up
    plain.Send(Get("/x"));
    EXPECT_EQ(plain.Read().status, 0);
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(ok.load(), 200);
  auto c = http::Client::Create(co);
  ASSERT_TRUE(c.ok()) << c.status();
  auto big = (*c)->GetText("/big");
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(*big, std::string(8 << 20, 'b'));
  // A certificate that does not belong to its key is refused naming both files.
  auto mismatched = TlsServerContext::Load(pki->server_cert_file, pki->ca_key_file);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_EQ(std::string(mismatched.status().message()),
            absl::StrCat("TLS key ", pki->ca_key_file, " does not belong to certificate ", pki->server_cert_file,
                         "; give the pair together"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpugeek::gateway
