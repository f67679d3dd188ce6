#pragma once
// Server: a small JSON-over-HTTP/1.1 server (Boost.Beast underneath) with a router, path parameters,
// the one Status -> HTTP mapping (status_http.h), streamed responses, deadlines and limits.
//
//   auto server = Server::Create({.host = "127.0.0.1", .port = 0, .name = "api"});
//   (*server)->Route("GET", "/v1/jobs/{id}", [&](const Request& r) -> absl::StatusOr<Reply> {
//     return Reply::Json(store.Get(r.param("id")));
//   });
//   RETURN_IF_ERROR((*server)->Start());   // listens; port() tells the bound port
//
// The problem it solves: a control plane holds 1,000+ keep-alive agent connections and must survive
// hostile clients (slow headers, huge headers or bodies) on a 2-core machine. So connections cost no
// thread while idle: `threads` I/O threads run every accept, read and write asynchronously, and each
// read or write has a whole-operation deadline. Handlers run on a separate worker pool that grows on
// demand up to `max_workers` and shrinks when idle, so a slow handler (an fsync, a 30 s long-poll)
// never delays another connection's I/O.
//
// Handlers return a Reply (status 200 unless set) or an error Status, which becomes the JSON error
// body with its HTTP status. A handler that throws is a bug; the server answers 500 and logs it.
// Errors the server itself answers are JSON error bodies too (ErrorBody): 400 malformed request,
// 404 no route, 405 the path exists but not for this method, 408 request head or body too slow,
// 413 body over `max_body_bytes`, 414 request target over 8 KiB, 431 header block over 16 KiB,
// 503 every worker busy and the queue full. Each of these except 404/405/503 closes the connection.
// Thread-safety: Route before Start; handlers run concurrently on the worker pool; stats() and
// ReloadCertificates() from any thread.
//
// TLS (ServerOptions::tls, tls.h): TLS 1.3 only, on the same I/O threads and deadlines. The handshake
// runs under header_timeout from accept (together with the first request head), so a client that
// connects and never sends a ClientHello is cut like one that never sends a request. A failed handshake
// (an old protocol version, no or a bad client certificate, not TLS at all) closes the connection
// without an HTTP answer and counts in stats().tls_handshake_failures. ReloadCertificates() swaps the
// certificate for connections accepted afterwards. A TLS connection costs about 40 KiB more memory
// than a plain one (the record buffers); the plain path is unchanged.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "http/byte_stream.h"
#include "http/tls.h"

namespace gpugeek::http {

struct Request {
  std::string method;
  std::string path;                                // percent-decoded, without the query
  std::string target;                              // the request target as sent (path and query, encoded)
  std::map<std::string, std::string> path_params;  // from "{name}" segments of the route
  std::multimap<std::string, std::string> query;   // percent-decoded, '+' read as a space
  std::map<std::string, std::string> headers;      // lower-case names
  std::string body;
  // Subject CN of the client's certificate when TLS verified one (ServerOptions::tls.client_ca_file);
  // "" on plain HTTP, without a client certificate, or when the certificate has no CN.
  std::string peer_common_name;
  // The peer's address as "IP:port" ("[IPv6]:port"), set by the server for every request; "" only if the
  // socket could not tell (it was already closed).
  std::string remote_address;

  // Path parameter by name; "" when absent.
  std::string param(const std::string& name) const;
  // First query value by name, or `fallback`.
  std::string query_value(const std::string& name, const std::string& fallback = "") const;
  // The body parsed as JSON; InvalidArgument naming the parse position when it is not JSON.
  absl::StatusOr<nlohmann::json> JsonBody() const;
};

// Writes one chunk of a streamed response and waits until it is handed to the kernel. Returns false
// once the client has gone away, the write took longer than ServerOptions::write_timeout, or the
// server is stopping; the stream function should then return. An empty chunk writes nothing.
using ChunkWriter = std::function<bool(const std::string& chunk)>;

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // More response headers (name, value), e.g. {"Location", url} on a redirect; not Content-Type or
  // Content-Length, which the server sets.
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, the body is streamed with chunked transfer encoding: the function is called once on
  // the worker thread that ran the handler and writes chunks until it returns (e.g. `logs --follow`).
  std::function<void(const ChunkWriter&)> stream;
  // When set, the reply switches protocols (HTTP Upgrade, RFC 9110 section 7.8): the request must carry
  // `Connection: Upgrade` and `Upgrade: <upgrade_protocol>` (else the server answers 426 Upgrade Required
  // naming the protocol, and `upgrade` never runs); the server writes `101 Switching Protocols` and calls
  // `upgrade` once, on the worker thread that ran the handler, with the raw connection as a ByteStream
  // (bytes the client sent after its request head come first). The ByteStream has no read deadline, and
  // ServerOptions::write_timeout per write; Server::Stop closes it. The connection closes when `upgrade`
  // returns. `status`, `content_type` and `body` are not used.
  std::string upgrade_protocol;
  std::function<void(ByteStream&)> upgrade;

  static Reply Json(const nlohmann::json& j, int status = 200);
  static Reply Text(std::string text, std::string content_type = "text/plain; charset=utf-8");
  // What a handler returns for a request that did not ask to switch to `protocol` (AsksToUpgrade false),
  // before it does any work: the server answers 426 naming the protocol.
  static Reply UpgradeRequired(std::string protocol);
};

// Whether `r` asks to switch to `protocol`: HTTP/1.1 with `Connection: Upgrade` and `Upgrade: <protocol>`
// (tokens compared case-insensitively). An upgrade handler checks it first, so a plain request costs
// nothing but its 426.
bool AsksToUpgrade(const Request& r, std::string_view protocol);

using Handler = std::function<absl::StatusOr<Reply>(const Request&)>;

// Observes each request to a route (for metrics and access logs): method, route pattern, status, and
// the monotonic time from the complete request to its reply being ready to write (for a streamed reply,
// its head: a long `logs --follow` is not a slow request). Called before the reply is written, from an
// I/O or worker thread; must be thread-safe. Requests that match no route (404, 405) or fail before
// routing (400, 408, 413, 414, 431) are not observed.
using RequestObserver =
    std::function<void(const std::string& method, const std::string& route, int status, Duration elapsed)>;

struct ServerOptions {
  std::string host = "127.0.0.1";    // an IP address or a name that resolves to one
  int port = 0;                      // 0 = any free port; port() says which
  int threads = 2;                   // I/O threads (accept, read, write); handlers run on the worker pool
  size_t max_body_bytes = 16 << 20;  // larger bodies are answered 413
  RequestObserver observer;          // optional
  std::string name = "http";         // names this server in log lines, e.g. "api" or "agents"
  int max_workers = 256;             // handler threads at most; the pool grows on demand up to this
  int max_queued_requests = 1024;    // requests waiting for a worker at most; beyond, 503
  Duration worker_idle_timeout = std::chrono::seconds(10);  // an idle worker thread exits after this
  Duration header_timeout = std::chrono::seconds(10);       // whole request head, from its first byte (or accept)
  Duration body_timeout = std::chrono::seconds(30);         // whole request body, after the head
  Duration idle_timeout = std::chrono::seconds(60);         // keep-alive wait for the next request's first byte
  Duration write_timeout = std::chrono::seconds(30);        // each reply write (each chunk of a stream)
  int max_connections = 10000;  // open connections at most; beyond, new ones are closed at once
  TlsOptions tls;               // default: plain HTTP; see tls.h
};

namespace internal {
class ServerCore;
}

class Server {
 public:
  // Counters since Start. Monotonic except connections_open.
  struct Stats {
    int64_t connections_open = 0;
    int64_t connections_refused = 0;     // closed at accept because max_connections were open
    int64_t requests_served = 0;         // replies written, including error replies
    int64_t timeouts = 0;                // requests cut by header_timeout, body_timeout or write_timeout
    int64_t busy_rejections = 0;         // 503s because every worker was busy and the queue full
    int64_t tls_handshake_failures = 0;  // TLS handshakes refused or broken off (not timeouts)
  };

  // InvalidArgument when an option is out of range (threads, max_workers, max_connections < 1; a
  // timeout <= 0) or TLS options are inconsistent (a cert_file without key_file, require_client_cert
  // without client_ca_file). With TLS, also loads the files: NotFound / PermissionDenied naming a file
  // that cannot be read, InvalidArgument naming one that does not parse or a key that does not match
  // the certificate. Does not bind yet.
  static absl::StatusOr<std::unique_ptr<Server>> Create(const ServerOptions& options);
  ~Server();  // stops and joins

  // Registers a handler. `pattern` is a path with "{name}" segments, e.g. "/v1/jobs/{id}/logs"; a
  // segment matches one or more characters other than '/', and a "{name...}" segment any rest of the path
  // ("/{path...}" matches every path). `method` "*" matches every method. Routes are tried in
  // registration order.
  void Route(const std::string& method, const std::string& pattern, Handler handler);

  // Binds (SO_REUSEADDR only, so a port in use by another server is refused) and starts serving on
  // the I/O threads. Unavailable if the address cannot be bound; FailedPrecondition if started twice.
  absl::Status Start();
  // The bound port (after Start).
  int port() const { return port_; }
  // "http://host:port", or "https://host:port" with TLS.
  std::string url() const;
  // Reads tls.cert_file, tls.key_file and tls.client_ca_file again (e.g. on SIGHUP after a renewal) into
  // a new TLS context for connections accepted from now on; open connections keep the one they started
  // with. On an error (as Create's) the previous certificate stays in use and the error is returned.
  // FailedPrecondition when the server has no TLS. Thread-safe; callable before or after Start.
  absl::Status ReloadCertificates();
  // Stops accepting, closes idle connections, lets requests in flight finish (streams see their
  // ChunkWriter return false), then joins every thread. Waits at most body_timeout + write_timeout
  // for connections, plus however long running handlers take to return. Idempotent.
  void Stop();

  Stats stats() const;

 private:
  explicit Server(const ServerOptions& options);

  ServerOptions options_;
  std::unique_ptr<internal::ServerCore> core_;  // the I/O threads, worker pool and connections
  int port_ = 0;
};

}  // namespace gpugeek::http
