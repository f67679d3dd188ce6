#pragma once
// HTTP/1.1 message framing for the gateway's proxy: where a message's head ends, what it says, and where its body
// ends, without buffering the body. Parsing is Boost.Beast's (boost/beast/http/basic_parser.hpp, RFC 9112); this
// file only collects the head and counts the body's wire bytes, which the proxy forwards unchanged (chunk sizes and
// trailers included), so a streamed response (tokens, server-sent events) leaves the gateway as it arrives.
//
//   MessageFramer<true> f(limits);               // a request
//   auto n = f.ParseHead(bytes);                 // bytes used; f.head_done(): f.head() is valid
//   auto m = f.ParseBody(rest);                  // wire bytes of body used; f.done() once the message ends
//
// Errors are InvalidArgument (malformed: answer 400), ResourceExhausted (head larger than the limit: 431) or
// OutOfRange (body larger than the limit, declared or seen: 413), each naming what was wrong.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace gpugeek::gateway {

struct HeaderField {
  std::string name;  // as received (case kept)
  std::string value;
};

struct MessageHead {
  // Requests.
  std::string method;  // "GET"
  std::string target;  // "/v1/predict?x=1"
  // Responses.
  int status = 0;
  std::string reason;
  int version = 11;                  // 10 or 11
  std::vector<HeaderField> headers;  // every field, hop-by-hop ones included, in order
  bool keep_alive = true;            // the connection may carry another message after this one
  bool upgrade = false;              // `Connection: upgrade` with an `Upgrade` field (requests), or status 101
  bool chunked = false;
  std::optional<uint64_t> content_length;
  bool body_until_eof = false;  // responses without length: the body ends when the connection does

  // The first field named `name` (ASCII case-insensitive), or nullptr.
  const std::string* Find(std::string_view name) const;
};

struct FramingLimits {
  uint32_t max_head_bytes = 64 * 1024;     // request line / status line and every field
  std::optional<uint64_t> max_body_bytes;  // none: unbounded (responses); requests set one
};

// Whether `name` is a hop-by-hop field a proxy must not forward (RFC 9110 7.6.1): Connection, Keep-Alive,
// Proxy-Connection, Proxy-Authenticate, Proxy-Authorization, TE, Trailer, Upgrade; Transfer-Encoding is not one
// here, because the gateway forwards bodies in their own framing.
bool IsHopByHop(std::string_view name);

// Whether a request with this method may be sent twice (RFC 9110 9.2.2: GET, HEAD, OPTIONS, TRACE, PUT, DELETE).
bool IsIdempotent(std::string_view method);

template <bool kRequest>
class MessageFramer {
 public:
  explicit MessageFramer(const FramingLimits& limits = {});
  ~MessageFramer();
  MessageFramer(const MessageFramer&) = delete;
  MessageFramer& operator=(const MessageFramer&) = delete;

  // Starts a new message (the framer is reusable). `head_request`: a response to HEAD, whose body is empty
  // whatever its fields say.
  void Reset(bool head_request = false);
  // Bytes of `in` used for the head (the caller drops them and calls again with the rest and more until
  // head_done(); the start line may be used before the fields are whole). Once head_done() head() is valid; a
  // message with no body is done() at once.
  absl::StatusOr<size_t> ParseHead(std::string_view in);
  // Bytes of `in` (the head already parsed) that belong to the body, as they are on the wire. May be less than
  // `in` when the body ends inside it; 0 with !done() means it needs more bytes. `payload`, when given, gets the
  // body's payload appended as it is decoded (chunk sizes, extensions and trailers left out): what an HTTP/1.0 peer,
  // which cannot read chunked framing, is sent instead.
  absl::StatusOr<size_t> ParseBody(std::string_view in, std::string* payload = nullptr);
  // The peer closed: ends a body that runs until the end of the connection; InvalidArgument when the message was
  // cut short.
  absl::Status Eof();

  bool head_done() const;
  bool done() const;
  const MessageHead& head() const { return head_; }
  uint64_t body_bytes() const { return body_bytes_; }  // payload bytes seen (chunk framing not counted)

 private:
  class Parser;
  FramingLimits limits_;
  std::unique_ptr<Parser> parser_;
  MessageHead head_;
  uint64_t body_bytes_ = 0;
};

extern template class MessageFramer<true>;
extern template class MessageFramer<false>;
using RequestFramer = MessageFramer<true>;
using ResponseFramer = MessageFramer<false>;

}  // namespace gpugeek::gateway
