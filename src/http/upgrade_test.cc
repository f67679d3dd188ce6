// HTTP Upgrade end to end: Reply::upgrade on the server, OpenUpgrade on the client, TCP byte streams and
// Splice, as port forwarding chains them (client -> server -> TCP service).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "http/byte_stream.h"
#include "http/client.h"
#include "http/server.h"
#include "http/upgrade_client.h"

namespace gpugeek::http {
namespace {

constexpr char kProtocol[] = "gpugeek-test";

// A TCP echo service on 127.0.0.1: each connection gets back what it sends, until it closes.
class EchoService {
 public:
  EchoService() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(fd_, 16);
    socklen_t len = sizeof(addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        std::thread([c] {
          TcpByteStream s(c);
          std::string piece;
          while (s.Read(piece) && s.Write(piece)) {
          }
        }).detach();
      }
    });
  }
  ~EchoService() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

class UpgradeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = Server::Create({.host = "127.0.0.1", .port = 0, .name = "upgrade-test"});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    // Forwards the upgraded connection to the TCP port in the query, as the node's agent does.
    server_->Route("POST", "/forward", [this](const Request& r) -> absl::StatusOr<Reply> {
      if (r.query_value("port").empty()) return absl::InvalidArgumentError("port: required");
      const int port = std::stoi(r.query_value("port"));
      if (port == 1) return absl::PermissionDeniedError("port 1 is not yours");
      Reply reply;
      reply.upgrade_protocol = kProtocol;
      reply.upgrade = [this, port](ByteStream& client) {
        auto service = ConnectTcp("127.0.0.1", port, std::chrono::seconds(2));
        if (!service.ok()) return;
        spliced_ = Splice(client, **service);
        ++tunnels_ended_;
      };
      return reply;
    });
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_->Stop(); }

  absl::StatusOr<std::unique_ptr<ByteStream>> Open(const std::string& target) {
    return OpenUpgrade({.base_url = server_->url()}, "POST", target, kProtocol);
  }

  std::unique_ptr<Server> server_;
  std::atomic<int> tunnels_ended_{0};
  SpliceBytes spliced_;
};

// Reads until `n` bytes came or the stream ended.
std::string ReadN(ByteStream& s, size_t n) {
  std::string all;
  std::string piece;
  while (all.size() < n && s.Read(piece)) all += piece;
  return all;
}

TEST_F(UpgradeTest, BytesGoBothWaysByteExactThroughTheServerToATcpService) {
  EchoService echo;
  auto tunnel = Open(fmt::format("/forward?port={}", echo.port()));
  ASSERT_TRUE(tunnel.ok()) << tunnel.status();
  ASSERT_TRUE((*tunnel)->Write("hello"));
  EXPECT_EQ(ReadN(**tunnel, 5), "hello");

  // 3 MiB of random bytes, written on one thread while read on another (the echo holds little).
  std::string payload(3 << 20, '\0');
  std::mt19937 rng(7);
  for (char& c : payload) c = static_cast<char>(rng());
  std::thread writer([&] { EXPECT_TRUE((*tunnel)->Write(payload)); });
  const std::string back = ReadN(**tunnel, payload.size());
  writer.join();
  EXPECT_TRUE(back == payload) << "got " << back.size() << " bytes back of " << payload.size();

  // Closing our end ends the server's splice, which closes the service's connection.
  (*tunnel)->Close();
  for (int i = 0; i < 200 && tunnels_ended_ == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(tunnels_ended_, 1);
  EXPECT_EQ(spliced_.a_to_b, 5u + payload.size());
  EXPECT_EQ(spliced_.b_to_a, 5u + payload.size());
}

TEST_F(UpgradeTest, StoppingTheServerEndsTheClientsStream) {
  EchoService echo;
  auto tunnel = Open(fmt::format("/forward?port={}", echo.port()));
  ASSERT_TRUE(tunnel.ok()) << tunnel.status();
  ASSERT_TRUE((*tunnel)->Write("x"));
  EXPECT_EQ(ReadN(**tunnel, 1), "x");
  server_->Stop();  // closes upgraded connections too
  std::string piece;
  EXPECT_FALSE((*tunnel)->Read(piece));
}

TEST_F(UpgradeTest, AnErrorBeforeTheSwitchIsTheClientsStatus) {
  auto denied = Open("/forward?port=1");
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.status().message(), "port 1 is not yours");
  auto missing = Open("/nowhere");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  // A closed port: the server's connect fails inside the upgrade, so the client's stream just ends.
  auto refused = ConnectTcp("127.0.0.1", 1, std::chrono::seconds(1));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(refused.status().message(), "connect 127.0.0.1:1: Connection refused");
  EXPECT_EQ(ConnectTcp("localhost", 80, std::chrono::seconds(1)).status().code(), absl::StatusCode::kInvalidArgument);
  // Nothing listens at all.
  auto unreachable = OpenUpgrade({.base_url = "http://127.0.0.1:1"}, "POST", "/forward", kProtocol);
  EXPECT_EQ(unreachable.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(UpgradeTest, ARequestThatDoesNotAskToSwitchGets426NamingTheProtocol) {
  EchoService echo;
  auto client = Client::Create({.base_url = server_->url()});
  ASSERT_TRUE(client.ok());
  auto plain = (*client)->Post(fmt::format("/forward?port={}", echo.port()), nlohmann::json::object());
  ASSERT_FALSE(plain.ok());
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(plain.status().message(),
            "POST /forward switches protocols: send an HTTP/1.1 request with 'Connection: Upgrade' and 'Upgrade: "
            "gpugeek-test'");
  // Another protocol than the route's is refused the same way.
  auto other =
      OpenUpgrade({.base_url = server_->url()}, "POST", fmt::format("/forward?port={}", echo.port()), "websocket");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(tunnels_ended_, 0);
}

}  // namespace
}  // namespace gpugeek::http
