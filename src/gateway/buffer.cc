#include "gateway/buffer.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace gpugeek::gateway::detail {

namespace {
constexpr size_t kReadChunk = 64 * 1024;
}  // namespace

void Buffer::Consume(size_t n) {
  offset += n;
  if (offset >= bytes.size()) {
    bytes.clear();
    offset = 0;
  } else if (offset > 64 * 1024 && offset * 2 > bytes.size()) {
    bytes.erase(0, offset);
    offset = 0;
  }
}

void SetNoDelay(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

long ReadSome(int fd, ssl_st* tls, char* out, size_t cap) {
  if (tls != nullptr) {
    const int n = SSL_read(tls, out, static_cast<int>(std::min<size_t>(cap, 1 << 30)));
    if (n > 0) return n;
    const int e = SSL_get_error(tls, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return -1;
    ERR_clear_error();  // a closed peer, a failed handshake, a bad record: the connection ends
    return 0;
  }
  for (;;) {
    const ssize_t n = recv(fd, out, cap, 0);
    if (n >= 0) return n;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? -1 : 0;
  }
}

ReadResult ReadInto(int fd, ssl_st* tls, Buffer& b, size_t limit, bool hung_up) {
  static thread_local char chunk[kReadChunk];
  while (b.size() < limit) {
    const long n = ReadSome(fd, tls, chunk, sizeof chunk);
    if (n < 0) return ReadResult::kDrained;
    if (n == 0) return ReadResult::kClosed;
    b.Append(std::string_view(chunk, static_cast<size_t>(n)));
    if (tls == nullptr && !hung_up && static_cast<size_t>(n) < sizeof chunk) return ReadResult::kDrained;
  }
  return ReadResult::kMore;
}

bool HungUp(uint32_t events) { return (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0; }

bool WriteFrom(int fd, ssl_st* tls, Buffer& b) {
  while (!b.empty()) {
    const std::string_view v = b.view();
    if (tls != nullptr) {
      const int n = SSL_write(tls, v.data(), static_cast<int>(std::min<size_t>(v.size(), 1 << 30)));
      if (n > 0) {
        b.Consume(static_cast<size_t>(n));
        continue;
      }
      const int e = SSL_get_error(tls, n);
      if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) return true;
      ERR_clear_error();
      return false;
    }
    const ssize_t n = send(fd, v.data(), v.size(), MSG_NOSIGNAL);
    if (n > 0) {
      b.Consume(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  return true;
}

void ShutdownWrites(int fd, ssl_st* tls) {
  if (tls != nullptr && SSL_is_init_finished(tls)) {
    SSL_shutdown(tls);  // queues and tries to send close_notify; the peer's is not awaited
    ERR_clear_error();
  }
  shutdown(fd, SHUT_WR);
}

}  // namespace gpugeek::gateway::detail
