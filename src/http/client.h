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
//
// Failover (an active/standby control plane): ClientOptions::base_url may list several servers,
// "http://10.0.0.1:8470,http://10.0.0.2:8470". A call goes to the current one (at first the first) and
// moves on only where that is safe for any method, POST included, because the request was not acted on:
//   - the connection could not be made (refused, connect timeout, TLS handshake or verification failed:
//     nothing was sent). A read timeout or a reset after the request was sent is Unavailable at once, as
//     with one URL (the server may have run it), but the next call starts at the next server; a GET or
//     HEAD, safe to repeat, goes on to the next server at once.
//   - the answer carries `Gpugeek-Standby: 1` (a standby did nothing). A 307 whose Location names one of
//     the listed servers (scheme://host:port, host case-insensitive) moves to that one; any other answer
//     to the next in the list. A request, and so the bearer token, only ever goes to a listed server.
// After each full round without a leader's answer the call sleeps failover_backoff; it gives up when
// failover_timeout has passed since it began (steady clock) and every listed server was tried, with
// Unavailable naming the servers tried and the last reason. The server that answered stays current for
// later calls. With one URL there is no waiting: a standby's answer is Unavailable at once, naming the
// leader when the standby knows it. Streamed calls fail over only before a response head arrives (a
// standby's head is never shown to on_head).
//
// Thread-safety: a Client may be used from one thread at a time; make one per thread. Cancel() and
// current_base_url() may be called from any thread.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "common/clock.h"

namespace httplib {
class Client;
class Result;
}  // namespace httplib

namespace gpugeek::http {

// The headers of a standby server of an active/standby control plane (controlplane/standby.h): on every
// answer "Gpugeek-Standby: 1" (it did nothing with the request), and the leader's base URL when it knows it.
inline constexpr char kStandbyHeader[] = "Gpugeek-Standby";
inline constexpr char kLeaderHeader[] = "Gpugeek-Leader";

// Percent-encodes a path segment or query value (RFC 3986: all but unreserved characters).
std::string UrlEncode(const std::string& s);

struct ClientOptions {
  // "http://127.0.0.1:8470" or "https://127.0.0.1:8470", or a comma-separated list of such URLs (the
  // servers of one control plane, tried as the header comment says; blanks around an item are ignored).
  std::string base_url;
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
  // With several base URLs: the sleep after each round of them that found no leader, and how long a
  // call looks for one before it is Unavailable. Unused with one URL.
  Duration failover_backoff = std::chrono::milliseconds(250);
  Duration failover_timeout = std::chrono::seconds(15);
};

class Client {
 public:
  // InvalidArgument for a malformed base URL (each item of the list must be http://host:port or
  // https://host:port; an empty item is refused), an https:// URL without ca_file or ca_pem, a CA, certificate or key
  // that does not parse, a key that does not match its certificate, or only one of client_cert_file / client_key_file;
  // NotFound / PermissionDenied naming a file that cannot be read. Connects lazily, on the first call.
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
  // Ends a call in progress on another thread at once (its socket is shut down, or its wait between
  // failover rounds cut: it returns Unavailable, or a stream ends); no effect when none is, nor on later
  // calls. Callable from any thread while another uses the client.
  void Cancel();
  absl::Status PostStream(const std::string& path, const nlohmann::json& body,
                          const std::function<void(int status)>& on_head,
                          const std::function<bool(const std::string&)>& on_chunk);

  // The base URL calls go to now: the one that answered last (the first before any answer). Callable
  // from any thread.
  std::string current_base_url() const;

 private:
  struct Answer;  // client.cc: an exchange's httplib::Result and which URL gave it

  explicit Client(const ClientOptions& options);
  absl::StatusOr<nlohmann::json> Decode(const std::string& what, int status, const std::string& body);
  absl::Status ConfigureTls(httplib::Client& client);
  absl::Status Unreachable(size_t url, const std::string& what, int error) const;
  // Runs `exchange` on the current URL's client, failing over as the header comment says. The Answer of
  // the server that answered (or of the failure that does not fail over); Unavailable when no leader
  // answered, or the call was cancelled between attempts.
  // `safe_to_repeat` (GET, HEAD): a request sent without an answer (a read timeout, a reset) is tried on
  // the next server too; otherwise it is returned, and the next call starts at the next server.
  absl::StatusOr<Answer> Exchange(const std::string& what,
                                  const std::function<httplib::Result(httplib::Client&)>& exchange,
                                  bool safe_to_repeat = false);

  // Constant after Create.
  ClientOptions options_;
  std::vector<std::string> urls_;                          // the base URLs, in the order given
  std::vector<std::string> origins_;                       // each as "scheme://host:port", lower case
  std::vector<std::unique_ptr<httplib::Client>> clients_;  // one per URL; used by the calling thread (and stop())

  std::atomic<size_t> current_{0};         // index into urls_ of the URL calls go to
  std::atomic<int> active_{-1};            // index of the client an exchange runs on now; -1 between
  std::atomic<uint64_t> cancel_epoch_{0};  // bumped by Cancel(); a call ends when it moves
  std::mutex mu_;                          // only for cv_
  std::condition_variable cv_;             // the backoff's sleep, woken by Cancel()
};

}  // namespace gpugeek::http
