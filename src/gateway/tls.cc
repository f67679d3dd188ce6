#include "gateway/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <fmt/format.h>

namespace gpugeek::gateway {

namespace {

// The server's ALPN preference (RFC 7301 3.1 wire format: length-prefixed names), in order.
constexpr unsigned char kAlpnPreference[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1', 2, 'h', '2'};

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(e, text, sizeof text);
  return text;
}

// ALPN (RFC 7301 3.2): the server's choice among the client's protocols: "http/1.1" when offered, else "h2". The
// HTTP/2 side relays streams to replicas as HTTP/2 (gRPC servers), while REST and WebSocket replicas speak HTTP/1.1:
// a client that can speak both (curl, browsers) is kept on HTTP/1.1, and one that offers only h2 (gRPC) gets it. A
// client that offers neither gets no ALPN answer (the handshake goes on; the bytes that follow tell the protocol).
int SelectAlpn(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen,
               void*) {
  unsigned char* chosen = nullptr;
  if (SSL_select_next_proto(&chosen, outlen, kAlpnPreference, sizeof kAlpnPreference, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

absl::StatusOr<SSL_CTX*> MakeContext(const std::string& cert_file, const std::string& key_file) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return absl::InternalError("cannot create a TLS context: " + OpenSslError());
  auto fail = [ctx](std::string message) {
    SSL_CTX_free(ctx);
    ERR_clear_error();
    return absl::InvalidArgumentError(std::move(message));
  };
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) != 1) return fail("cannot restrict TLS to version 1.3");
  // Partial writes with a buffer that may move between retries (buffer.h's Buffer compacts); no record buffers
  // held by idle keep-alive connections.
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_file.c_str()) != 1) {
    return fail(
        fmt::format("TLS certificate {}: not a readable PEM certificate chain ({})", cert_file, OpenSslError()));
  }
  const bool key_read = SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) == 1;
  const bool mismatch = !key_read && ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
  if (!key_read && !mismatch) {
    return fail(fmt::format("TLS key {}: not a readable unencrypted PEM private key ({})", key_file, OpenSslError()));
  }
  if (mismatch || SSL_CTX_check_private_key(ctx) != 1) {
    return fail(
        fmt::format("TLS key {} does not belong to certificate {}; give the pair together", key_file, cert_file));
  }
  SSL_CTX_set_alpn_select_cb(ctx, SelectAlpn, nullptr);
  return ctx;
}

}  // namespace

void SslFree::operator()(ssl_st* s) const { SSL_free(s); }

bool HandshakeDone(const TlsSession& session) { return session && SSL_is_init_finished(session.get()) == 1; }

TlsServerContext::TlsServerContext(std::string cert_file, std::string key_file, ssl_ctx_st* ctx)
    : cert_file_(std::move(cert_file)), key_file_(std::move(key_file)), ctx_(ctx) {}

TlsServerContext::~TlsServerContext() {
  MutexLock lock(&mu_);
  SSL_CTX_free(ctx_);
}

absl::StatusOr<std::unique_ptr<TlsServerContext>> TlsServerContext::Load(const std::string& cert_file,
                                                                         const std::string& key_file) {
  if (cert_file.empty() || key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate chain and its key");
  }
  auto ctx = MakeContext(cert_file, key_file);
  if (!ctx.ok()) return ctx.status();
  return std::unique_ptr<TlsServerContext>(new TlsServerContext(cert_file, key_file, *ctx));
}

absl::Status TlsServerContext::Reload() {
  auto fresh = MakeContext(cert_file_, key_file_);
  if (!fresh.ok()) return fresh.status();
  MutexLock lock(&mu_);
  SSL_CTX_free(ctx_);  // sessions hold their own reference to the context they were made from
  ctx_ = *fresh;
  return absl::OkStatus();
}

TlsSession TlsServerContext::NewSession(int fd) const {
  SSL* ssl = nullptr;
  {
    MutexLock lock(&mu_);
    ssl = SSL_new(ctx_);
  }
  if (ssl == nullptr) {
    ERR_clear_error();
    return nullptr;
  }
  TlsSession session(ssl);
  if (SSL_set_fd(ssl, fd) != 1) {
    ERR_clear_error();
    return nullptr;
  }
  SSL_set_accept_state(ssl);
  return session;
}

}  // namespace gpugeek::gateway
