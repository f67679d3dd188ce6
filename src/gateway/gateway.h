#pragma once
// Gateway: the serving data plane. An HTTP/1.1 reverse proxy in front of a service's replicas: it routes each
// request by host and path prefix (route_table.h), splits it between versions by weight with optional stickiness
// and picks a replica by power of two choices (balancer.h), keeps upstream connections alive and lets idempotent
// requests without a body share them (HTTP/1.1 pipelining, at most `pipeline_depth` deep and never behind a request
// older than `pipeline_stall`), retries idempotent requests on another replica when a connection fails before any
// answer, ejects failing replicas, passes WebSocket (any `Upgrade`) through as a tunnel once the replica answers
// 101, and holds requests while a service has no ready replica (the activator: a bounded queue, a timeout, then
// 503 with Retry-After). Responses stream: a body leaves as it arrives, with backpressure both ways.
//
// Errors the gateway answers itself (plain text naming the cause): 400 malformed request, 401 no valid token for a
// route with `auth` (with WWW-Authenticate: Bearer), 404 no route (or a token of another tenant), 408 head
// not received within header_timeout, 413 body above max_request_body, 431 head above max_head, 502 replica
// failed, 503 no replica ready within the activator's timeout or queue full, or a token that could not be verified
// (Retry-After), 504 no answer within upstream_timeout. A verified caller is named to the replica in Gpugeek-User and
// Gpugeek-Tenant (any a client sends itself are dropped), and its Authorization field is not passed on.
//
// Threads: one event loop (reactor.h) owns every connection; SetRoutes(), Load() and Stop() may be called from any
// thread. Metrics (docs/metrics.md "Gateway") go to the registry given, labelled by service and version.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "gateway/balancer.h"
#include "gateway/http1.h"
#include "gateway/route_table.h"
#include "gateway/tls.h"
#include "gateway/token_check.h"
#include "metrics/registry.h"

namespace gpugeek::gateway {

struct GatewayOptions {
  std::string listen_host = "127.0.0.1";  // numeric IPv4
  uint16_t port = 0;                      // 0: any free port (port() says which)
  int backlog = 4096;
  Duration header_timeout = std::chrono::seconds(10);  // a request's head, from its first byte
  Duration idle_timeout = std::chrono::seconds(60);    // a keep-alive client connection with no request
  Duration connect_timeout = std::chrono::seconds(2);
  Duration upstream_timeout = std::chrono::seconds(300);  // to the first byte of the answer (LLM generation)
  Duration tunnel_idle_timeout = std::chrono::hours(1);   // WebSocket / upgraded connections
  Duration upstream_idle_timeout = std::chrono::seconds(30);
  Duration write_timeout = std::chrono::seconds(30);  // a client that takes nothing of its answer for this long
  Duration body_timeout = std::chrono::seconds(30);   // between two pieces of a request body
  uint32_t max_head = 64 * 1024;                      // bytes, request and response heads
  uint64_t max_request_body = 64ULL * 1024 * 1024;    // bytes
  size_t max_client_connections = 10000;
  int pipeline_depth = 16;  // requests in flight on one upstream connection; 1 turns pipelining off
  Duration pipeline_stall = std::chrono::milliseconds(10);
  int max_idle_upstream = 64;             // kept per replica
  size_t write_high_water = 1024 * 1024;  // bytes queued for a peer before the other side stops being read
  size_t retry_buffer = 64 * 1024;        // request bytes kept for a retry; larger requests are not retried
  OutlierPolicy outlier;
  // TLS termination (tls.h): clients speak TLS 1.3 (ALPN h2 or http/1.1) to the gateway; null: plain HTTP. Shared so
  // the owner can Reload() a renewed certificate. A handshake not done within header_timeout closes the connection.
  // With TLS the process ignores SIGPIPE (OpenSSL writes to sockets with write(2)).
  std::shared_ptr<TlsServerContext> tls;
  // Routes with `auth` (route_table.h) need it: where callers' tokens are verified (token_check.h). Unset: such
  // routes are refused by Start and SetRoutes.
  std::optional<TokenCheckOptions> token_check;
  uint64_t seed = 1;
  metrics::Registry* registry = nullptr;  // may be null
};

// A service's load as the autoscaler reads it: requests in flight at replicas and waiting in the activator.
struct ServiceLoad {
  int64_t in_flight = 0;
  int64_t queued = 0;
  uint64_t requests = 0;                              // answered since start (any status)
  std::map<std::string, uint64_t> by_version;         // of those, per version they were split to
  std::map<std::string, uint64_t> tokens_by_version;  // tokens the replicas reported (Gpugeek-Tokens header)
};

class Gateway {
 public:
  // Binds, validates `routes` and starts the loop thread. InvalidArgument for a bad table or option, Unavailable
  // when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Gateway>> Start(GatewayOptions options, RouteTable routes);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  uint16_t port() const;
  // Replaces the route table (validated first; InvalidArgument leaves the old one); applied within one loop tick.
  // Requests waiting in a service's activator go out as soon as it has a ready replica.
  absl::Status SetRoutes(RouteTable routes);
  std::map<std::string, ServiceLoad> Load() const;
  // 16 hex digits drawn at Start: Load()'s counters count from this instance's start, so a report names the
  // instance (a restarted gateway counts anew under another).
  const std::string& instance() const;
  // Closes the listener and every connection; idempotent.
  void Stop();

  struct Impl;

 private:
  explicit Gateway(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gpugeek::gateway
