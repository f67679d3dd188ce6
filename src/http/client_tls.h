#pragma once
// The TLS set-up every gpugeek client shares (Client, OpenUpgrade): TLS 1.3 only, the CA of the options
// as the only trust (no system store), the client certificate and key when given. Peer and host-name
// verification are switched on by the caller, which knows its TLS stack.

#include <openssl/ssl.h>

#include "absl/status/status.h"
#include "http/client.h"

namespace gpugeek::http {

// Configures `ctx` from options.ca_file / ca_pem and client_cert_file / client_key_file. Errors as
// Client::Create's for the same options (InvalidArgument, NotFound, PermissionDenied naming the file).
absl::Status ConfigureClientTls(SSL_CTX* ctx, const ClientOptions& options);

}  // namespace gpugeek::http
