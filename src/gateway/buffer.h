#pragma once
// Byte buffers and non-blocking socket reads and writes, shared by the HTTP/1.1 (proxy.h) and HTTP/2
// (h2_proxy.h) sides of the gateway.

#include <cstddef>
#include <string>
#include <string_view>

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
// buffered (kMore), or the peer closed or failed (kClosed).
ReadResult ReadInto(int fd, Buffer& b, size_t limit);

// Writes as much of `b` as non-blocking `fd` takes (consuming it); false when the peer is gone.
bool WriteFrom(int fd, Buffer& b);

}  // namespace gpugeek::gateway::detail
