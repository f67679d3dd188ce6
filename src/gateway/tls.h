#pragma once
// TLS termination for the gateway's clients: a server context (certificate chain and key from PEM files, TLS 1.3
// only as on every gpugeek listener, ALPN "h2" and "http/1.1") and the per-connection sessions the proxy reads and
// writes through (buffer.h's ReadInto / WriteFrom with a session). Replicas are reached in plain text: they listen
// on the node's loopback or the cluster network, and the gateway is the edge.
//
// ALPN (RFC 7301): a client offering "http/1.1" gets it (curl, browsers: REST and WebSocket replicas speak HTTP/1.1);
// one offering only "h2" gets h2 (gRPC clients). Either way the protocol is told by the first bytes after the
// handshake, as on the plain listener (the HTTP/2 preface), so a client without ALPN works too.
//
// Thread-safety: NewSession() and Reload() may be called from any thread; a session belongs to its connection's
// thread. Reload() affects connections accepted afterwards; those open keep their session.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/mutex.h"

struct ssl_st;
struct ssl_ctx_st;

namespace gpugeek::gateway {

struct SslFree {
  void operator()(ssl_st* s) const;
};
using TlsSession = std::unique_ptr<ssl_st, SslFree>;

// Whether the session's handshake has completed.
bool HandshakeDone(const TlsSession& session);

class TlsServerContext {
 public:
  // Reads `cert_file` (PEM chain, leaf first) and `key_file` (unencrypted PEM key). InvalidArgument naming the
  // file when one is unreadable, not PEM, or the key does not belong to the certificate.
  static absl::StatusOr<std::unique_ptr<TlsServerContext>> Load(const std::string& cert_file,
                                                                const std::string& key_file);
  ~TlsServerContext();
  TlsServerContext(const TlsServerContext&) = delete;
  TlsServerContext& operator=(const TlsServerContext&) = delete;

  // Reads the files again (a renewed certificate); on error the previous context stays and the error is returned.
  absl::Status Reload();
  // A server-side session on connected, non-blocking `fd` (not owned); the handshake runs inside the first reads.
  // Null when OpenSSL cannot allocate one.
  TlsSession NewSession(int fd) const;

 private:
  TlsServerContext(std::string cert_file, std::string key_file, ssl_ctx_st* ctx);
  std::string cert_file_, key_file_;
  mutable Mutex mu_;
  ssl_ctx_st* ctx_ ABSL_GUARDED_BY(mu_);  // owned
};

}  // namespace gpugeek::gateway
