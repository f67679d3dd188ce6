#include "gateway/buffer.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

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

ReadResult ReadInto(int fd, Buffer& b, size_t limit) {
  static thread_local char chunk[kReadChunk];
  while (b.size() < limit) {
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      b.Append(std::string_view(chunk, static_cast<size_t>(n)));
      if (static_cast<size_t>(n) < sizeof chunk) return ReadResult::kDrained;
      continue;
    }
    if (n == 0) return ReadResult::kClosed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ReadResult::kDrained;
    return ReadResult::kClosed;
  }
  return ReadResult::kMore;
}

bool WriteFrom(int fd, Buffer& b) {
  while (!b.empty()) {
    const std::string_view v = b.view();
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

}  // namespace gpugeek::gateway::detail
