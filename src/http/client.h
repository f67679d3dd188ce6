#pragma once
// Client: JSON-over-HTTP calls to a gpugeek server (cpp-httplib underneath).
//
// Every call returns the decoded JSON body on 2xx, and otherwise the server's error as a Status
// (status_http.h's inverse mapping), or Unavailable when the server cannot be reached.
// Thread-safety: a Client may be used from one thread at a time; make one per thread.

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace httplib {
class Client;
}

namespace gpugeek::http {

// Percent-encodes a path segment or query value (RFC 3986: all but unreserved characters).
std::string UrlEncode(const std::string& s);

struct ClientOptions {
  std::string base_url;  // "http://127.0.0.1:8470"
  Duration connect_timeout = std::chrono::seconds(3);
  Duration read_timeout = std::chrono::seconds(30);
};

class Client {
 public:
  // InvalidArgument for a malformed base URL (must be http://host:port or https://host:port).
  static absl::StatusOr<std::unique_ptr<Client>> Create(const ClientOptions& options);
  ~Client();

  absl::StatusOr<nlohmann::json> Get(const std::string& path);
  // The body as text (e.g. GET /metrics); a non-2xx status becomes the Status of status_http.h.
  absl::StatusOr<std::string> GetText(const std::string& path);
  absl::StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body);
  absl::StatusOr<nlohmann::json> Delete(const std::string& path);
  // Streams a GET response chunk by chunk until the server ends it or `on_chunk` returns false.
  absl::Status GetStream(const std::string& path, const std::function<bool(const std::string&)>& on_chunk);

 private:
  explicit Client(const ClientOptions& options);
  absl::StatusOr<nlohmann::json> Decode(const std::string& what, int status, const std::string& body);

  ClientOptions options_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace gpugeek::http
