#include "http/byte_stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "common/status_macros.h"

namespace gpugeek::http {

SpliceBytes Splice(ByteStream& a, ByteStream& b) {
  SpliceBytes moved;
  auto copy = [&a, &b](ByteStream& from, ByteStream& to, uint64_t& count) {
    std::string piece;
    while (from.Read(piece) && to.Write(piece)) count += piece.size();
    a.Close();
    b.Close();
  };
  std::thread back([&] { copy(b, a, moved.b_to_a); });
  copy(a, b, moved.a_to_b);
  back.join();
  return moved;
}

TcpByteStream::TcpByteStream(int fd, Duration write_timeout) : fd_(fd) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(write_timeout).count();
  timeval tv{.tv_sec = static_cast<time_t>(us / 1'000'000), .tv_usec = static_cast<suseconds_t>(us % 1'000'000)};
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  setsockopt(fd_, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

TcpByteStream::~TcpByteStream() { ::close(fd_); }

bool TcpByteStream::Read(std::string& out, size_t max) {
  out.resize(std::max<size_t>(1, max));
  while (true) {
    const ssize_t n = ::recv(fd_, out.data(), out.size(), 0);
    if (n > 0) {
      out.resize(static_cast<size_t>(n));
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    out.clear();
    return false;
  }
}

bool TcpByteStream::Write(std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // EAGAIN: SO_SNDTIMEO passed without progress
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// shutdown wakes a recv or send blocked on the socket in another thread; the descriptor stays open until
// destruction, so it cannot be reused under a thread still using it.
void TcpByteStream::Close() { ::shutdown(fd_, SHUT_RDWR); }

absl::StatusOr<std::pair<sockaddr_storage, socklen_t>> SocketAddress(const std::string& host, int port) {
  sockaddr_storage addr{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    return std::pair{addr, static_cast<socklen_t>(sizeof(sockaddr_in))};
  }
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    return std::pair{addr, static_cast<socklen_t>(sizeof(sockaddr_in6))};
  }
  return absl::InvalidArgumentError(fmt::format("host: '{}' is not a numeric IPv4 or IPv6 address", host));
}

absl::StatusOr<std::unique_ptr<TcpByteStream>> ConnectTcp(const std::string& host, int port, Duration timeout) {
  if (port < 1 || port > 65535) return absl::InvalidArgumentError(fmt::format("port: must be 1..65535, got {}", port));
  ASSIGN_OR_RETURN(auto address, SocketAddress(host, port));
  auto& [addr, len] = address;
  const std::string where =
      addr.ss_family == AF_INET6 ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::UnavailableError(fmt::format("connect {}: socket: {}", where, std::strerror(errno)));
  auto fail = [&](const std::string& why) {
    ::close(fd);
    return absl::UnavailableError(fmt::format("connect {}: {}", where, why));
  };
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    if (errno != EINPROGRESS) return fail(std::strerror(errno));
    pollfd p{.fd = fd, .events = POLLOUT, .revents = 0};
    const int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count());
    int r = 0;
    do {
      r = ::poll(&p, 1, ms);
    } while (r < 0 && errno == EINTR);
    if (r == 0) return fail(fmt::format("timed out after {} ms", ms));
    int err = 0;
    socklen_t err_len = sizeof(err);
    if (r < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0) return fail(std::strerror(errno));
    if (err != 0) return fail(std::strerror(err));
  }
  // Blocking from here: Read waits in recv, Write in send (bounded by SO_SNDTIMEO).
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return std::make_unique<TcpByteStream>(fd);
}

}  // namespace gpugeek::http
