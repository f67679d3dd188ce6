#pragma once
// ByteStream: a connection carrying raw bytes both ways, the unit port forwarding relays. Three kinds:
// an upgraded server connection (Reply::upgrade, server.h), an upgraded client connection
// (upgrade_client.h) and a plain TCP connection (ConnectTcp / TcpByteStream below). Splice joins two.
//
// Thread-safety: one thread may Read while another Writes; Close may be called from any thread, at any
// time, any number of times.

#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace gpugeek::http {

inline constexpr size_t kByteStreamReadBytes = 64 << 10;

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Replaces `out` with the next 1..`max` bytes, waiting as long as it takes (there is no read deadline:
  // a forwarded connection may idle for hours). False at the end of the stream, on an error, or once
  // Close was called.
  virtual bool Read(std::string& out, size_t max = kByteStreamReadBytes) = 0;
  // Writes all of `data`. False when the peer is gone, the write took longer than the stream's write
  // deadline, or Close was called.
  virtual bool Write(std::string_view data) = 0;
  // Ends the stream both ways; a Read or Write in progress returns false.
  virtual void Close() = 0;
};

// Copies bytes from `a` to `b` and from `b` to `a` until either direction ends (end of stream, an error,
// a failed write), then closes both and returns once both directions stopped. Runs one direction on the
// calling thread and the other on a thread of its own. Returns the bytes copied a -> b and b -> a.
// A direction's end closes both sides at once: a TCP half-close is not carried through.
struct SpliceBytes {
  uint64_t a_to_b = 0;
  uint64_t b_to_a = 0;
};
SpliceBytes Splice(ByteStream& a, ByteStream& b);

// A connected TCP socket as a ByteStream. Owns `fd` (closed on destruction). Writes give up after
// `write_timeout` without progress (SO_SNDTIMEO).
class TcpByteStream : public ByteStream {
 public:
  explicit TcpByteStream(int fd, Duration write_timeout = std::chrono::seconds(30));
  ~TcpByteStream() override;
  TcpByteStream(const TcpByteStream&) = delete;
  TcpByteStream& operator=(const TcpByteStream&) = delete;

  bool Read(std::string& out, size_t max = kByteStreamReadBytes) override;
  bool Write(std::string_view data) override;
  void Close() override;

 private:
  const int fd_;
};

// `host` (a numeric IPv4 or IPv6 address) and `port` as a socket address and its length; InvalidArgument
// naming the host when it is not an address.
absl::StatusOr<std::pair<sockaddr_storage, socklen_t>> SocketAddress(const std::string& host, int port);

// Connects to `host` (a numeric IPv4 or IPv6 address) and `port` within `timeout`. Unavailable naming the
// address and the reason (refused, timed out) when it cannot; InvalidArgument for a host that is not an
// address or a port outside 1..65535.
absl::StatusOr<std::unique_ptr<TcpByteStream>> ConnectTcp(const std::string& host, int port, Duration timeout);

}  // namespace gpugeek::http
