#pragma once
// H2Proxy: the gateway's HTTP/2 side, for gRPC (unary and streaming) and any h2c client with prior knowledge.
// A client connection whose first bytes are the HTTP/2 connection preface (RFC 9113 3.4) is handed here by the
// Proxy; each of its streams is routed like an HTTP/1.1 request (the :authority and :path pseudo-headers), split
// between versions and balanced between replicas by the same Balancer, and forwarded as a stream on an HTTP/2
// connection to the replica (h2c), frames relayed as they come (trailers included, so grpc-status passes through).
// Protocol work is nghttp2's (Debian's libnghttp2); runs on the Proxy's reactor thread.
//
// Streams and connections:
//   - A client connection takes at most 100 concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS; nghttp2 refuses
//     more) and request heads up to GatewayOptions::max_head bytes (advertised as SETTINGS_MAX_HEADER_LIST_SIZE;
//     above it the stream is answered 431). It is closed with GOAWAY after idle_timeout without a stream, and at
//     once after a protocol error (nghttp2 sends GOAWAY PROTOCOL_ERROR).
//   - Each replica (by id) has one upstream HTTP/2 connection that all streams to it share (a new one once it
//     closed or sent GOAWAY); it is closed after upstream_idle_timeout without a stream, or when connect_timeout
//     passes before it connects.
//   - Request and answer headers pass unchanged but for the hop-by-hop ones (Connection, Keep-Alive,
//     Proxy-Connection, Transfer-Encoding, Upgrade, HTTP2-Settings, TE other than "trailers"); X-Forwarded-For
//     gets the client's address. Stickiness by header works as over HTTP/1.1; cookie stickiness is not applied.
//
// Answers the gateway gives itself (gRPC requests, content-type application/grpc*, get them "trailers-only":
// one HEADERS frame with grpc-status and grpc-message; other requests get a text/plain body):
//   404 + grpc-status 12 (UNIMPLEMENTED)       no route for :authority and :path
//   431 + grpc-status 8 (RESOURCE_EXHAUSTED)   request head above max_head
//   401 + grpc-status 16 (UNAUTHENTICATED)     a route with `auth` and no valid `authorization: Bearer` token
//   503 + grpc-status 14 (UNAVAILABLE)         no version taking traffic; no replica ready within the route's
//                                              activator timeout (the stream waits meanwhile, counted in the
//                                              service's queue as HTTP/1.1 requests are, so gRPC traffic scales a
//                                              service from zero), or the queue is full; a token not verifiable
//   502 + grpc-status 14 (UNAVAILABLE)         no replica could be connected to
//   504 + grpc-status 4 (DEADLINE_EXCEEDED)    no answer head within upstream_timeout
// When the replica cannot have run a stream (its request never left the gateway, the replica refused it with
// REFUSED_STREAM, or it was above a GOAWAY's last stream id), it goes once more to another replica of its version if
// the route allows retries and the request body so far fits retry_buffer; a gRPC call is a POST and may not be
// idempotent, so a stream the replica may have run is never sent twice. Otherwise the client's stream is reset:
// REFUSED_STREAM when the request never left the gateway (or the replica refused it), INTERNAL_ERROR otherwise (the
// answer was cut short, or the request may have been processed). A client resetting a stream cancels the replica's
// (RST_STREAM CANCEL).
//
// Flow control: nghttp2 sends WINDOW_UPDATE on its own as DATA arrives; the gateway bounds what it holds instead.
// A connection is no longer read while the bytes it delivered that wait to be relayed exceed write_high_water,
// and nghttp2 stops producing frames for a peer whose unsent output exceeds write_high_water (the send callback
// would block). Since reading stops per connection, one stalled stream delays the others of its connection.
//
// Metrics are those of the HTTP/1.1 side (Proxy::Record: requests by status class, duration, tokens, retries;
// the service's in-flight count), a stream counting as one request.

#include <memory>
#include <string>

#include "gateway/tls.h"

namespace gpugeek::gateway::detail {

class Proxy;

class H2Proxy {
 public:
  explicit H2Proxy(Proxy* proxy);
  ~H2Proxy();
  H2Proxy(const H2Proxy&) = delete;
  H2Proxy& operator=(const H2Proxy&) = delete;

  // Takes over `fd` (non-blocking, no longer watched by the reactor), its TLS session `tls` (null on the plain
  // listener) and `initial`, the bytes read from it so far (they begin with the preface); `peer_ip` is the client's
  // address for X-Forwarded-For. The connection is closed at once when max_client_connections HTTP/2 connections are
  // open already, or when `initial` is not HTTP/2.
  void Adopt(int fd, TlsSession tls, std::string initial, std::string peer_ip);
  // Deadlines (the Proxy's tick): idle client and replica connections, connect and answer timeouts.
  void Tick();
  // Closes every HTTP/2 connection at once (no GOAWAY); streams in flight are dropped.
  void CloseAll();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpugeek::gateway::detail
