#pragma once
// Server: a small JSON-over-HTTP server (cpp-httplib underneath) with a router, path parameters,
// the one Status -> HTTP mapping (status_http.h) and streamed responses.
//
//   auto server = Server::Create({.host = "127.0.0.1", .port = 0});
//   (*server)->Route("GET", "/v1/jobs/{id}", [&](const Request& r) -> absl::StatusOr<Reply> {
//     return Reply::Json(store.Get(r.param("id")));
//   });
//   RETURN_IF_ERROR((*server)->Start());   // listens; port() tells the bound port
//
// Handlers return a Reply (status 200 unless set) or an error Status, which becomes the JSON error
// body with its HTTP status. A handler that throws is a bug; the server answers 500 and logs it.
// Thread-safety: Route before Start; handlers run concurrently on the server's thread pool.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace httplib {
class Server;
}

namespace gpugeek::http {

struct Request {
  std::string method;
  std::string path;
  std::map<std::string, std::string> path_params;  // from "{name}" segments of the route
  std::multimap<std::string, std::string> query;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;

  // Path parameter by name; "" when absent.
  std::string param(const std::string& name) const;
  // First query value by name, or `fallback`.
  std::string query_value(const std::string& name, const std::string& fallback = "") const;
  // The body parsed as JSON; InvalidArgument naming the parse position when it is not JSON.
  absl::StatusOr<nlohmann::json> JsonBody() const;
};

// Writes chunks of a streamed response. Write returns false once the client has gone away.
using ChunkWriter = std::function<bool(const std::string& chunk)>;

struct Reply {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // When set, the body is streamed: the function is called once on the server thread and writes
  // chunks until it returns (e.g. `logs --follow`).
  std::function<void(const ChunkWriter&)> stream;

  static Reply Json(const nlohmann::json& j, int status = 200);
  static Reply Text(std::string text, std::string content_type = "text/plain; charset=utf-8");
};

using Handler = std::function<absl::StatusOr<Reply>(const Request&)>;

// Observes each finished request (for metrics and access logs): method, route pattern, status, time.
using RequestObserver =
    std::function<void(const std::string& method, const std::string& route, int status, Duration elapsed)>;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 = any free port; port() says which
  int threads = 16;
  size_t max_body_bytes = 16 << 20;
  RequestObserver observer;  // optional
};

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Create(const ServerOptions& options);
  ~Server();  // stops and joins

  // Registers a handler. `pattern` is a path with "{name}" segments, e.g. "/v1/jobs/{id}/logs".
  void Route(const std::string& method, const std::string& pattern, Handler handler);

  // Binds and starts serving on a background thread. Unavailable if the address cannot be bound.
  absl::Status Start();
  // The bound port (after Start).
  int port() const { return port_; }
  // "http://host:port".
  std::string url() const;
  // Stops accepting, finishes requests in flight, joins. Idempotent.
  void Stop();

 private:
  explicit Server(const ServerOptions& options);

  ServerOptions options_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace gpugeek::http
