#include "http/upgrade_client.h"

#include <openssl/ssl.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "absl/strings/ascii.h"
#include "common/status_macros.h"
#include "http/client_tls.h"
#include "http/status_http.h"

namespace gpugeek::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

constexpr size_t kMaxErrorBodyBytes = 1 << 20;

struct Url {
  std::string text;  // as given
  bool tls = false;
  std::string host;
  std::string port;
};

absl::StatusOr<Url> ParseUrl(const std::string& u) {
  Url url{.text = u};
  std::string rest;
  if (u.starts_with("http://")) {
    rest = u.substr(7);
  } else if (u.starts_with("https://")) {
    url.tls = true;
    rest = u.substr(8);
  }
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  if (rest.empty() || colon == std::string::npos || colon + 1 == rest.size() || rest.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        fmt::format("server URL '{}' must look like http://HOST:PORT (e.g. http://127.0.0.1:8470)", u));
  }
  url.host = rest.substr(0, colon);
  url.port = rest.substr(colon + 1);
  if (url.host.size() > 2 && url.host.front() == '[' && url.host.back() == ']') {
    url.host = url.host.substr(1, url.host.size() - 2);
  }
  return url;
}

// An upgraded connection. Every socket operation runs on io_ (one thread of its own); Read and Write post
// theirs there and wait for them.
class UpgradedClient : public ByteStream {
 public:
  UpgradedClient() = default;
  ~UpgradedClient() override {
    Close();
    work_.reset();
    if (thread_.joinable()) thread_.join();
  }

  // Connects, shakes hands and asks to switch protocols, all within the options' deadlines, on the
  // calling thread; on success starts the I/O thread.
  absl::Status Open(const ClientOptions& options, const Url& url, const std::string& method, const std::string& target,
                    const std::string& protocol) {
    write_timeout_ = options.read_timeout;
    const std::string where = url.text;
    auto unavailable = [&](const std::string& what, const error_code& ec) {
      return absl::UnavailableError(
          fmt::format("cannot reach gpugeek server at {} ({}): {}", where, what, ec.message()));
    };
    error_code ec;
    tcp::resolver resolver(io_);
    const auto endpoints = resolver.resolve(url.host, url.port, ec);
    if (ec) return unavailable("resolve", ec);
    if (url.tls) {
      ctx_.emplace(net::ssl::context::tls_client);
      RETURN_IF_ERROR(ConfigureClientTls(ctx_->native_handle(), options));
      tls_.emplace(io_, *ctx_);
      tls_->set_verify_mode(net::ssl::verify_peer);
      tls_->set_verify_callback(net::ssl::host_name_verification(url.host));
      error_code not_ip;
      net::ip::make_address(url.host, not_ip);
      if (not_ip) SSL_set_tlsext_host_name(tls_->native_handle(), url.host.c_str());
    } else {
      plain_.emplace(io_);
    }
    tcp_stream().expires_after(options.connect_timeout);
    tcp_stream().async_connect(endpoints, [&](error_code e, const tcp::endpoint&) { ec = e; });
    RunOnce();
    if (ec) return unavailable("connect", ec);
    tcp_stream().socket().set_option(tcp::no_delay(true), ec);
    tcp_stream().socket().set_option(net::socket_base::keep_alive(true), ec);
    if (tls_) {
      tcp_stream().expires_after(options.connect_timeout);
      tls_->async_handshake(net::ssl::stream_base::client, [&](error_code e) { ec = e; });
      RunOnce();
      if (ec) return unavailable("TLS handshake", ec);
    }
    bhttp::request<bhttp::empty_body> req{bhttp::string_to_verb(method), target, 11};
    req.set(bhttp::field::host, fmt::format("{}:{}", url.host, url.port));
    req.set(bhttp::field::connection, "Upgrade");
    req.set(bhttp::field::upgrade, protocol);
    req.set(bhttp::field::user_agent, "gpugeek");
    req.content_length(0);
    if (!options.bearer_token.empty()) req.set(bhttp::field::authorization, "Bearer " + options.bearer_token);
    tcp_stream().expires_after(options.read_timeout);
    WithStream([&](auto& s) { bhttp::async_write(s, req, [&](error_code e, size_t) { ec = e; }); });
    RunOnce();
    if (ec) return unavailable(fmt::format("{} {}", method, target), ec);
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(kMaxErrorBodyBytes);
    tcp_stream().expires_after(options.read_timeout);
    WithStream([&](auto& s) { bhttp::async_read_header(s, buffer_, parser, [&](error_code e, size_t) { ec = e; }); });
    RunOnce();
    if (ec) return unavailable(fmt::format("{} {}", method, target), ec);
    const auto& head = parser.get();
    if (head.result() != bhttp::status::switching_protocols) {
      WithStream([&](auto& s) { bhttp::async_read(s, buffer_, parser, [&](error_code e, size_t) { ec = e; }); });
      RunOnce();
      if (ec) return unavailable(fmt::format("{} {}", method, target), ec);
      absl::Status st = StatusFromHttp(parser.get().result_int(), parser.get().body());
      return st.ok() ? absl::InternalError(fmt::format("{} {}: answered {} instead of switching protocols", method,
                                                       target, parser.get().result_int()))
                     : st;
    }
    if (!beast::iequals(std::string(head[bhttp::field::upgrade]), protocol)) {
      return absl::UnavailableError(fmt::format("{} {}: the server switched to '{}', not '{}'", method, target,
                                                std::string(head[bhttp::field::upgrade]), protocol));
    }
    tcp_stream().expires_never();
    work_.emplace(io_.get_executor());
    io_.restart();
    thread_ = std::thread([this] { io_.run(); });
    return absl::OkStatus();
  }

  bool Read(std::string& out, size_t max) override {
    max = std::max<size_t>(1, max);
    return Wait([this, max, &out](const std::function<void(bool)>& finish) {
      if (closed_) return finish(false);
      if (buffer_.size() > 0) {  // read past the 101 head
        out = beast::buffers_to_string(buffer_.data());
        if (out.size() > max) out.resize(max);
        buffer_.consume(out.size());
        return finish(true);
      }
      out.resize(max);
      tcp_stream().expires_never();
      WithStream([&](auto& s) {
        s.async_read_some(net::buffer(out.data(), out.size()), [&out, finish](error_code ec, size_t n) {
          out.resize(ec ? 0 : n);
          finish(!ec && n > 0);
        });
      });
    });
  }

  bool Write(std::string_view data) override {
    if (data.empty()) return true;
    return Wait([this, data](const std::function<void(bool)>& finish) {
      if (closed_) return finish(false);
      tcp_stream().expires_after(write_timeout_);
      WithStream([&](auto& s) {
        net::async_write(s, net::buffer(data.data(), data.size()), [finish](error_code ec, size_t) { finish(!ec); });
      });
    });
  }

  void Close() override {
    net::post(io_, [this] {
      if (closed_) return;
      closed_ = true;
      error_code ignored;
      tcp_stream().socket().shutdown(tcp::socket::shutdown_both, ignored);
      tcp_stream().close();
    });
    if (!thread_.joinable()) {  // not open yet: nothing runs the posted close otherwise
      io_.restart();
      io_.poll();
    }
  }

 private:
  beast::tcp_stream& tcp_stream() { return tls_ ? tls_->next_layer() : *plain_; }

  template <class F>
  void WithStream(F&& f) {
    if (tls_) {
      f(*tls_);
    } else {
      f(*plain_);
    }
  }

  // Runs the one operation just started to its completion (its deadline ends it at the latest).
  void RunOnce() {
    io_.restart();
    io_.run();
  }

  // Posts `start` to the I/O thread and waits for the `finish` it calls.
  bool Wait(std::function<void(const std::function<void(bool)>&)> start) {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    bool ok = false;
    std::function<void(bool)> finish = [&](bool result) {
      std::lock_guard<std::mutex> lock(mu);
      ok = result;
      done = true;
      cv.notify_all();
    };
    net::post(io_, [&] { start(finish); });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    return ok;
  }

  net::io_context io_;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  std::thread thread_;
  std::optional<net::ssl::context> ctx_;
  std::optional<beast::tcp_stream> plain_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> tls_;
  beast::flat_buffer buffer_;
  Duration write_timeout_ = std::chrono::seconds(30);
  bool closed_ = false;  // on the I/O thread
};

}  // namespace

absl::StatusOr<std::unique_ptr<ByteStream>> OpenUpgrade(const ClientOptions& options, const std::string& method,
                                                        const std::string& target, const std::string& protocol) {
  // A list of servers (client.h's failover): the first; an upgrade does not fail over.
  const std::string first(absl::StripAsciiWhitespace(options.base_url.substr(0, options.base_url.find(','))));
  ASSIGN_OR_RETURN(Url url, ParseUrl(first));
  if (url.tls && options.ca_file.empty() && options.ca_pem.empty()) {
    return absl::InvalidArgumentError(
        fmt::format("server URL '{}' is https: give the CA to verify the server with (ca_file)", first));
  }
  if (options.client_cert_file.empty() != options.client_key_file.empty()) {
    return absl::InvalidArgumentError("a client certificate needs both client_cert_file and client_key_file");
  }
  auto stream = std::make_unique<UpgradedClient>();
  RETURN_IF_ERROR(stream->Open(options, url, method, target, protocol));
  return stream;
}

}  // namespace gpugeek::http
