#pragma once
// TlsOptions: the TLS settings of one listener (http::Server, the agent's metrics listener).
//
// Every gpugeek listener speaks TLS 1.3 only when `cert_file` is set: TLS 1.2 and older are refused at
// the handshake. The files are PEM; pki::EnsureLocalPki makes a matching set (server.crt, server.key,
// ca.crt). Mutual TLS: with `client_ca_file`, clients may present a certificate signed by that CA (the
// handshake fails for one that does not verify); with `require_client_cert` too, a client without one is
// refused. A verified client certificate's subject CN reaches handlers as Request::peer_common_name.

#include <string>

namespace gpugeek::http {

struct TlsOptions {
  std::string cert_file;             // server certificate chain, leaf first; "" = plain HTTP (no TLS)
  std::string key_file;              // the leaf's private key, unencrypted; required with cert_file
  std::string client_ca_file;        // CA certificates that sign client certificates; "" = no client certs
  bool require_client_cert = false;  // refuse clients without a verified certificate; needs client_ca_file

  bool enabled() const { return !cert_file.empty(); }
};

}  // namespace gpugeek::http
