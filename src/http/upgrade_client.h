#pragma once
// OpenUpgrade: the client half of an HTTP Upgrade (RFC 9110 section 7.8), the way `gpugeek port-forward`
// reaches a member's port through the control plane and the control plane reaches the node's agent.
//
//   ASSIGN_OR_RETURN(auto stream, OpenUpgrade(options, "POST", "/v1/jobs/j-1/ports/8000/forward?rank=0",
//                                             "gpugeek-tcp"));
//   Splice(*stream, *local_connection);
//
// The request carries `Connection: Upgrade`, `Upgrade: <protocol>`, `Content-Length: 0` and, when set,
// the bearer token of `options`. TLS and its verification are Client's (client.h): TLS 1.3, the CA of the
// options only, the certificate must name the URL's host. It does not fail over: of a list of base URLs
// (client.h) it uses the first, so a caller with a Client passes that Client's current_base_url().

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "http/byte_stream.h"
#include "http/client.h"

namespace gpugeek::http {

// A `101 Switching Protocols` answer naming `protocol` returns the connection as a ByteStream (writes
// bounded by options.read_timeout, reads without deadline). Any other answer is its Status (status_http.h,
// the server's own message), read within options.read_timeout; Unavailable when the server cannot be
// reached within options.connect_timeout, the TLS verification fails, or the answer does not come within
// options.read_timeout; InvalidArgument for options Client::Create would refuse.
absl::StatusOr<std::unique_ptr<ByteStream>> OpenUpgrade(const ClientOptions& options, const std::string& method,
                                                        const std::string& target, const std::string& protocol);

}  // namespace gpugeek::http
