#include "gateway/http1.h"

#include <limits>

#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpugeek::gateway {

namespace beast_http = boost::beast::http;
using boost::beast::error_code;

const std::string* MessageHead::Find(std::string_view name) const {
  for (const HeaderField& f : headers) {
    if (absl::EqualsIgnoreCase(f.name, absl::string_view(name.data(), name.size()))) return &f.value;
  }
  return nullptr;
}

bool IsHopByHop(std::string_view name) {
  static constexpr std::string_view kNames[] = {"connection", "keep-alive",         "proxy-connection",    "te",
                                                "trailer",    "proxy-authenticate", "proxy-authorization", "upgrade"};
  for (std::string_view n : kNames) {
    if (absl::EqualsIgnoreCase(absl::string_view(n.data(), n.size()), absl::string_view(name.data(), name.size()))) {
      return true;
    }
  }
  return false;
}

bool IsIdempotent(std::string_view method) {
  return method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "TRACE" || method == "PUT" ||
         method == "DELETE";
}

template <bool kRequest>
class MessageFramer<kRequest>::Parser : public beast_http::basic_parser<kRequest> {
 public:
  Parser(MessageHead* head, uint64_t* body_bytes) : head_(head), body_bytes_(body_bytes) {}
  void set_payload(std::string* payload) { payload_ = payload; }

 private:
  void on_request_impl(beast_http::verb, boost::beast::string_view method, boost::beast::string_view target,
                       int version, error_code&) override {
    head_->method.assign(method.data(), method.size());
    head_->target.assign(target.data(), target.size());
    head_->version = version;
  }
  void on_response_impl(int code, boost::beast::string_view reason, int version, error_code&) override {
    head_->status = code;
    head_->reason.assign(reason.data(), reason.size());
    head_->version = version;
  }
  void on_field_impl(beast_http::field, boost::beast::string_view name, boost::beast::string_view value,
                     error_code&) override {
    head_->headers.push_back({std::string(name.data(), name.size()), std::string(value.data(), value.size())});
  }
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>&, error_code&) override {}
  size_t on_body_impl(boost::beast::string_view body, error_code&) override {
    *body_bytes_ += body.size();
    if (payload_) payload_->append(body.data(), body.size());
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, boost::beast::string_view, error_code&) override {}
  size_t on_chunk_body_impl(std::uint64_t, boost::beast::string_view body, error_code&) override {
    *body_bytes_ += body.size();
    if (payload_) payload_->append(body.data(), body.size());
    return body.size();
  }
  void on_finish_impl(error_code&) override {}

  MessageHead* head_;
  uint64_t* body_bytes_;
  std::string* payload_ = nullptr;  // set for one ParseBody call
};

namespace {

absl::Status FramingError(const error_code& ec, bool in_head) {
  if (ec == beast_http::error::header_limit) {
    return absl::ResourceExhaustedError("the message head is larger than the gateway's limit");
  }
  if (ec == beast_http::error::body_limit) {
    return absl::OutOfRangeError("the message body is larger than the gateway's limit");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("malformed HTTP/1.1 message ", in_head ? "head" : "body", ": ", ec.message()));
}

}  // namespace

template <bool kRequest>
MessageFramer<kRequest>::MessageFramer(const FramingLimits& limits) : limits_(limits) {
  Reset();
}

template <bool kRequest>
MessageFramer<kRequest>::~MessageFramer() = default;

template <bool kRequest>
void MessageFramer<kRequest>::Reset(bool head_request) {
  head_ = MessageHead{};
  body_bytes_ = 0;
  parser_ = std::make_unique<Parser>(&head_, &body_bytes_);
  parser_->header_limit(limits_.max_head_bytes);
  // No limit is the largest one: Beast 1.74 compares a length against an empty limit as "above" it
  // (basic_parser.ipp, `len_ > body_limit_` with boost::none).
  parser_->body_limit(limits_.max_body_bytes.value_or(std::numeric_limits<uint64_t>::max()));
  if constexpr (!kRequest) parser_->skip(head_request);
}

template <bool kRequest>
absl::StatusOr<size_t> MessageFramer<kRequest>::ParseHead(std::string_view in) {
  if (parser_->is_header_done()) return absl::FailedPreconditionError("the head is already parsed");
  error_code ec;
  parser_->eager(false);
  size_t used = parser_->put(boost::asio::const_buffer(in.data(), in.size()), ec);
  if (ec == beast_http::error::need_more) return used;  // the start line may be consumed already
  if (ec) return FramingError(ec, true);
  if (!parser_->is_header_done()) return used;
  head_.keep_alive = parser_->keep_alive();
  head_.chunked = parser_->chunked();
  if (auto cl = parser_->content_length()) head_.content_length = *cl;
  if constexpr (kRequest) {
    head_.upgrade = parser_->upgrade();
  } else {
    head_.upgrade = head_.status == 101;
    head_.body_until_eof = !parser_->is_done() && parser_->need_eof() && !head_.chunked && !head_.content_length;
  }
  return used;
}

template <bool kRequest>
absl::StatusOr<size_t> MessageFramer<kRequest>::ParseBody(std::string_view in, std::string* payload) {
  if (!parser_->is_header_done()) return absl::FailedPreconditionError("the head is not parsed yet");
  if (parser_->is_done() || in.empty()) return size_t{0};
  error_code ec;
  parser_->eager(true);
  parser_->set_payload(payload);
  size_t used = parser_->put(boost::asio::const_buffer(in.data(), in.size()), ec);
  parser_->set_payload(nullptr);
  if (ec == beast_http::error::need_more) return used;
  if (ec) return FramingError(ec, false);
  return used;
}

template <bool kRequest>
absl::Status MessageFramer<kRequest>::Eof() {
  if (parser_->is_done()) return absl::OkStatus();
  error_code ec;
  parser_->put_eof(ec);
  if (ec) return FramingError(ec, !parser_->is_header_done());
  return absl::OkStatus();
}

template <bool kRequest>
bool MessageFramer<kRequest>::head_done() const {
  return parser_->is_header_done();
}

template <bool kRequest>
bool MessageFramer<kRequest>::done() const {
  return parser_->is_done();
}

template class MessageFramer<true>;
template class MessageFramer<false>;

}  // namespace gpugeek::gateway
