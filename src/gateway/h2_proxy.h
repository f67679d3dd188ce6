#pragma once
// H2Proxy: the gateway's HTTP/2 side, for gRPC (unary and streaming) and any h2c client with prior knowledge.
// A client connection whose first bytes are the HTTP/2 connection preface (RFC 9113 3.4) is handed here by the
// Proxy; each of its streams is routed like an HTTP/1.1 request (the :authority and :path pseudo-headers), split
// between versions and balanced between replicas by the same Balancer, and forwarded as a stream on an HTTP/2
// connection to the replica (h2c), frames relayed as they come (trailers included, so grpc-status passes through).
// Protocol work is nghttp2's (Debian's libnghttp2); runs on the Proxy's reactor thread.

#include <memory>
#include <string>

namespace gpugeek::gateway::detail {

class Proxy;

class H2Proxy {
 public:
  explicit H2Proxy(Proxy* proxy);
  ~H2Proxy();
  H2Proxy(const H2Proxy&) = delete;
  H2Proxy& operator=(const H2Proxy&) = delete;

  // Takes over `fd` (non-blocking, no longer watched by the reactor) and `initial`, the bytes read from it so far
  // (they begin with the preface).
  void Adopt(int fd, std::string initial, std::string peer_ip);
  // Deadlines (the Proxy's tick).
  void Tick();
  // Closes every HTTP/2 connection.
  void CloseAll();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpugeek::gateway::detail
