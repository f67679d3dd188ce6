#pragma once
// Byte buffers and non-blocking socket reads and writes, shared by the HTTP/1.1 (proxy.h) and HTTP/2
// (h2_proxy.h) sides of the gateway.

#include <cstddef>
#include <string>
#include <string_view>

struct ssl_st;

namespace gpugeek::gateway::detail {

// Bytes waiting to be read or written: a string with a read offset, compacted when half consumed.
struct Buffer {
  std::string bytes;
  size_t offset = 0;
  std::string_view view() const { return std::string_view(bytes).substr(offset); }
  size_t size() const { return bytes.size() - offset; }
  bool empty() const { return size() == 0; }
  void Consume(size_t n);
  void Append(std::string_view s) { bytes.append(s.data(), s.size()); }
  void Clear() {
    bytes.clear();
    offset = 0;
  }
};

// Sets TCP_NODELAY on a connected socket (answers leave as they are written).
void SetNoDelay(int fd);

enum class ReadResult { kMore, kDrained, kClosed };

// Reads from non-blocking `fd` into `b` until the socket is drained (a short read or EAGAIN), `limit` bytes are
// buffered (kMore), or the peer closed or failed (kClosed). With `tls` (a session on `fd`, tls.h) the bytes are
// the decrypted ones and the handshake runs inside; a failed handshake or a forged record is kClosed.
// A short read counts as drained (edge-triggered epoll brings a new event for new bytes) unless `hung_up`: an
// event said the peer shut its side (EPOLLRDHUP), and that end, which brings no further event, is read now
// (nginx's pending_eof does the same).
ReadResult ReadInto(int fd, ssl_st* tls, Buffer& b, size_t limit, bool hung_up = false);
inline ReadResult ReadInto(int fd, Buffer& b, size_t limit, bool hung_up = false) {
  return ReadInto(fd, nullptr, b, limit, hung_up);
}

// Whether epoll `events` say the peer shut its side or the connection failed: its end waits to be read.
bool HungUp(uint32_t events);

// One read of at most `cap` bytes into `out`: the count (> 0), 0 when the peer closed or failed, -1 when nothing
// can be read now (EAGAIN; with `tls`, also a handshake waiting to write). With `tls` a read returns at most one
// record, so only -1 means drained.
long ReadSome(int fd, ssl_st* tls, char* out, size_t cap);

// Writes as much of `b` as non-blocking `fd` takes (consuming it); false when the peer is gone. With `tls` the bytes
// are encrypted first; a write that must wait for the peer's handshake bytes stays in `b`.
bool WriteFrom(int fd, ssl_st* tls, Buffer& b);
inline bool WriteFrom(int fd, Buffer& b) { return WriteFrom(fd, nullptr, b); }

// Sends TLS close_notify (RFC 8446 6.1) when `tls` is set, without waiting for the peer's: the sender's side of a
// clean end, so a client reading to the end of the connection knows nothing was cut off. Then shuts `fd` for writes.
void ShutdownWrites(int fd, ssl_st* tls);

}  // namespace gpugeek::gateway::detail
