#pragma once
// Client: JSON-over-HTTP calls to a gpugeek server (cpp-httplib underneath).
//
// Every call returns the decoded JSON body on 2xx, and otherwise the server's error as a Status
// (status_http.h's inverse mapping), or Unavailable when the server cannot be reached.
//
// https:// base URLs speak TLS 1.3 only and verify the server against the CA of ClientOptions (ca_file
// or ca_pem; the system's trust store is not used), including that the certificate names the URL's host
// (a DNS or IP subjectAltName). A failed verification is Unavailable naming the reason. Mutual TLS:
// client_cert_file + client_key_file are presented when the server asks.
// Thread-safety: a Client may be used from one thread at a time; make one per thread.

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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
  std::string base_url;  // "http://127.0.0.1:8470" or "https://127.0.0.1:8470"
  Duration connect_timeout = std::chrono::seconds(3);
  Duration read_timeout = std::chrono::seconds(30);
  // https:// only (ignored for http://). The CA certificates (PEM) the server's certificate must chain
  // to: a file (e.g. pki's ca.crt) or the same text; one of the two is required for https://.
  std::string ca_file;
  std::string ca_pem;
  // https:// only: this client's certificate chain and unencrypted key (PEM files), for servers that
  // ask for one (http::TlsOptions::client_ca_file). Both or neither.
  std::string client_cert_file;
  std::string client_key_file;
  // Sent as "Authorization: Bearer <token>" on every call when not empty.
  std::string bearer_token;
  // More request headers sent on every call (e.g. slurmrestd's X-SLURM-USER-NAME / X-SLURM-USER-TOKEN).
  std::vector<std::pair<std::string, std::string>> headers;
};

class Client {
 public:
  // InvalidArgument for a malformed base URL (must be http://host:port or https://host:port), an
  // https:// URL without ca_file or ca_pem, a CA, certificate or key that does not parse, a key that
  // does not match its certificate, or only one of client_cert_file / client_key_file; NotFound /
  // PermissionDenied naming a file that cannot be read. Connects lazily, on the first call.
  static absl::StatusOr<std::unique_ptr<Client>> Create(const ClientOptions& options);
  ~Client();

  absl::StatusOr<nlohmann::json> Get(const std::string& path);
  // GET or DELETE whatever the answer's status: the status and body, for servers whose error bodies are
  // not gpugeek's (e.g. slurmrestd's "errors" list). Unavailable when the server cannot be reached.
  struct Reply {
    int status = 0;
    std::string body;
  };
  absl::StatusOr<Reply> Send(const std::string& method, const std::string& path);
  // The body as text (e.g. GET /metrics); a non-2xx status becomes the Status of status_http.h.
  absl::StatusOr<std::string> GetText(const std::string& path);
  absl::StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body);
  absl::StatusOr<nlohmann::json> Put(const std::string& path, const nlohmann::json& body);
  absl::StatusOr<nlohmann::json> Delete(const std::string& path);
  // PUT with a raw body (e.g. a piece of an archive, "application/octet-stream").
  absl::StatusOr<nlohmann::json> PutBytes(const std::string& path, const std::string& body,
                                          const std::string& content_type);
  // HEAD: OK on 2xx, else the status's mapping (NotFound for 404; a HEAD reply has no body to say more).
  absl::Status Head(const std::string& path);
  // Streams a GET response chunk by chunk until the server ends it or `on_chunk` returns false.
  absl::Status GetStream(const std::string& path, const std::function<bool(const std::string&)>& on_chunk);
  // POSTs `body` as JSON and streams the response: `on_head` (optional) gets the status once the head
  // arrived, then `on_chunk` each piece of a 2xx body until the server ends it or it returns false (OK
  // then). A non-2xx answer is its Status (status_http.h) after the body; Unavailable when the server
  // cannot be reached or a 2xx stream breaks off (a read over ClientOptions::read_timeout included).
  // Ends a call in progress on another thread at once (its socket is shut down: it returns Unavailable,
  // or a stream ends); no effect when none is. The only method callable while another thread uses the
  // client.
  void Cancel();
  absl::Status PostStream(const std::string& path, const nlohmann::json& body,
                          const std::function<void(int status)>& on_head,
                          const std::function<bool(const std::string&)>& on_chunk);

 private:
  explicit Client(const ClientOptions& options);
  absl::StatusOr<nlohmann::json> Decode(const std::string& what, int status, const std::string& body);
  absl::Status ConfigureTls();
  absl::Status Unreachable(const std::string& what, int error) const;

  ClientOptions options_;
  std::unique_ptr<httplib::Client> client_;
};

}  // namespace gpugeek::http
