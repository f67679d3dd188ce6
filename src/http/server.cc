#include "http/server.h"

#include "common/json_parse.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <optional>
#include <regex>
#include <thread>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <spdlog/spdlog.h>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "absl/strings/ascii.h"
#include "common/file.h"
#include "common/status_macros.h"
#include "http/status_http.h"

namespace gpugeek::http {

std::string Request::param(const std::string& name) const {
  auto it = path_params.find(name);
  return it == path_params.end() ? std::string() : it->second;
}

std::string Request::query_value(const std::string& name, const std::string& fallback) const {
  auto it = query.find(name);
  return it == query.end() ? fallback : it->second;
}

absl::StatusOr<nlohmann::json> Request::JsonBody() const {
  // The server already bounded the body's size (ServerOptions::max_body_bytes); depth, numbers out of
  // range and invalid UTF-8 are refused here, before anything walks the tree (common/json_parse.h).
  auto parsed = ParseJsonBounded(body, JsonLimits{.max_bytes = body.size(), .max_depth = 64});
  if (!parsed.ok()) return absl::InvalidArgumentError("request body: " + std::string(parsed.status().message()));
  return parsed;
}

Reply Reply::Json(const nlohmann::json& j, int status) {
  Reply r;
  r.status = status;
  r.body = DumpJson(j);
  return r;
}

Reply Reply::UpgradeRequired(std::string protocol) {
  Reply r;
  r.upgrade_protocol = std::move(protocol);
  r.upgrade = [](ByteStream&) {};  // never runs: the request did not ask to switch
  return r;
}

namespace {

// True when the comma-separated value of header `name` (lower case) holds `token`, case-insensitively.
bool HeaderHasToken(const Request& request, const std::string& name, std::string_view token) {
  auto it = request.headers.find(name);
  if (it == request.headers.end()) return false;
  std::string_view rest = it->second;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.size() == token.size() && std::equal(item.begin(), item.end(), token.begin(), [](char x, char y) {
          return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
        })) {
      return true;
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

bool AsksToUpgrade(const Request& r, std::string_view protocol) {
  return HeaderHasToken(r, "connection", "upgrade") && HeaderHasToken(r, "upgrade", protocol);
}

Reply Reply::Text(std::string text, std::string content_type) {
  Reply r;
  r.body = std::move(text);
  r.content_type = std::move(content_type);
  return r;
}

namespace internal {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;
using StringResponse = bhttp::response<bhttp::string_body>;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using TlsContext = std::shared_ptr<net::ssl::context>;

// Limits on the request head. 8 KiB of target is what common proxies accept (nginx's
// large_client_header_buffers default); 16 KiB of header fields leaves room for big tokens and cookies.
constexpr size_t kMaxTargetBytes = 8 << 10;
constexpr size_t kMaxHeaderBlockBytes = 16 << 10;
// Beast's parser limits the whole head; the request line's method and version fit in the slack.
constexpr size_t kHeadLimitBytes = kMaxTargetBytes + kMaxHeaderBlockBytes + 1024;
// An error reply on a connection about to be closed is best effort: it gets this long.
constexpr auto kErrorWriteTimeout = std::chrono::seconds(1);
// After the last reply on a connection the server half-closes and reads (and drops) what the client still
// sends for this long, at most kLingerBytes: closing with unread data would reset the connection and the
// client could lose the reply (RFC 9112 section 9.6).
constexpr auto kLingerTime = std::chrono::seconds(1);
constexpr size_t kLingerBytes = 1 << 20;
// A failed accept (e.g. out of file descriptors) is retried after this long instead of spinning.
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);
// A TLS connection between requests waits for its next record with a read of up to this many bytes (a
// socket-level wait cannot see what OpenSSL has already buffered). Most agent requests fit.
constexpr size_t kTlsFirstReadBytes = 2048;
// Certificates and keys are a few KiB; a path to something large is a mistake.
constexpr uint64_t kMaxPemBytes = 1 << 20;

int64_t Millis(Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); }

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// %XX escapes decoded; '+' read as a space in query strings (application/x-www-form-urlencoded). A '%'
// not followed by two hex digits is kept as is.
std::string PercentDecode(std::string_view s, bool plus_as_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = HexDigit(s[i + 1]);
      const int lo = HexDigit(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += plus_as_space && s[i] == '+' ? ' ' : s[i];
  }
  return out;
}

void ParseQuery(std::string_view q, std::multimap<std::string, std::string>& out) {
  while (!q.empty()) {
    const size_t amp = q.find('&');
    const std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) {
      out.emplace(PercentDecode(pair, true), "");
    } else {
      out.emplace(PercentDecode(pair.substr(0, eq), true), PercentDecode(pair.substr(eq + 1), true));
    }
  }
}

// A TLS 1.3-only server context from the files of `tls`. Reads the files itself so a missing one is
// NotFound naming it, and the certificate and key come from one read each (no race with a renewal that
// replaces them between two opens).
absl::StatusOr<TlsContext> MakeTlsContext(const TlsOptions& tls) {
  ASSIGN_OR_RETURN(const std::string cert_pem,
                   ReadFileBounded(tls.cert_file, kMaxPemBytes, "TLS certificate " + tls.cert_file));
  ASSIGN_OR_RETURN(const std::string key_pem, ReadFileBounded(tls.key_file, kMaxPemBytes, "TLS key " + tls.key_file));
  std::string client_ca_pem;
  if (!tls.client_ca_file.empty()) {
    ASSIGN_OR_RETURN(client_ca_pem,
                     ReadFileBounded(tls.client_ca_file, kMaxPemBytes, "TLS client CA " + tls.client_ca_file));
  }
  TlsContext ctx;
  try {
    ctx = std::make_shared<net::ssl::context>(net::ssl::context::tls_server);
  } catch (const boost::system::system_error& e) {
    return absl::InternalError(fmt::format("cannot create a TLS context: {}", e.what()));
  }
  SSL_CTX* native = ctx->native_handle();
  // TLS 1.3 only: no RSA key exchange, no CBC suites, no renegotiation to get wrong.
  if (SSL_CTX_set_min_proto_version(native, TLS1_3_VERSION) != 1) {
    return absl::InternalError("cannot restrict the TLS context to TLS 1.3");
  }
  // Idle keep-alive connections (1,000+ agents) then hold no OpenSSL record buffers.
  SSL_CTX_set_mode(native, SSL_MODE_RELEASE_BUFFERS);
  error_code ec;
  ctx->use_certificate_chain(net::buffer(cert_pem), ec);
  if (ec) {
    return absl::InvalidArgumentError(
        fmt::format("TLS certificate {} is not a PEM certificate chain: {}", tls.cert_file, ec.message()));
  }
  ctx->use_private_key(net::buffer(key_pem), net::ssl::context::pem, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        fmt::format("TLS key {} is not an unencrypted PEM private key: {}", tls.key_file, ec.message()));
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(fmt::format("TLS key {} does not belong to certificate {}; replace both together",
                                                  tls.key_file, tls.cert_file));
  }
  if (!client_ca_pem.empty()) {
    ctx->add_certificate_authority(net::buffer(client_ca_pem), ec);
    if (ec) {
      return absl::InvalidArgumentError(
          fmt::format("TLS client CA {} is not a PEM certificate: {}", tls.client_ca_file, ec.message()));
    }
    ctx->set_verify_mode(net::ssl::verify_peer | (tls.require_client_cert ? net::ssl::verify_fail_if_no_peer_cert : 0),
                         ec);
    if (ec) return absl::InternalError(fmt::format("cannot set TLS client verification: {}", ec.message()));
  }
  ERR_clear_error();
  return ctx;
}

// The subject CN of the peer's certificate when the handshake verified one; "" otherwise.
std::string VerifiedPeerCommonName(SSL* ssl) {
  const X509* peer = SSL_get0_peer_certificate(ssl);
  if (peer == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return "";
  const X509_NAME* name = X509_get_subject_name(peer);
  const int index = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (index < 0) return "";
  unsigned char* utf8 = nullptr;
  const int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, index)));
  if (n < 0) {
    ERR_clear_error();
    return "";
  }
  std::string cn(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
  OPENSSL_free(utf8);
  return cn;
}

}  // namespace

struct CompiledRoute {
  std::string method;
  std::string pattern;
  std::regex regex;
  std::vector<std::string> names;  // of the "{name}" segments, in order
  Handler handler;
};

// Threads for handlers: grows on demand up to `max_threads` and a thread exits after `idle` without work,
// so a burst of slow handlers gets threads while a quiet server holds none. At most `max_queue` tasks wait
// for a thread.
class WorkerPool {
 public:
  WorkerPool(size_t max_threads, size_t max_queue, Duration idle)
      : max_threads_(max_threads), max_queue_(max_queue), idle_(idle) {}
  ~WorkerPool() { Shutdown(); }

  // Queues `task`; false (and `task` dropped) when the queue is full or the pool shut down.
  bool Submit(std::function<void()> task) {
    std::vector<std::thread> reaped;
    bool accepted = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reaped = ReapLocked();
      // Tasks an idle or yet-to-start thread will take do not count as waiting.
      const size_t takers = idle_count_ + (max_threads_ - threads_.size());
      if (!stopping_ && queue_.size() < takers + max_queue_) {
        queue_.push_back(std::move(task));
        accepted = true;
        // Workers already woken for earlier tasks still count as idle until they run; a new thread
        // only when the queue outgrows them.
        if (queue_.size() > idle_count_ && threads_.size() < max_threads_) {
          try {
            threads_.emplace_back([this] { Loop(); });
          } catch (const std::system_error& e) {
            spdlog::warn("http: cannot start a worker thread ({} running): {}", threads_.size(), e.what());
          }
        }
        if (threads_.empty()) {
          queue_.pop_back();
          accepted = false;
        }
      }
    }
    cv_.notify_one();
    for (std::thread& t : reaped) t.join();
    return accepted;
  }

  // Runs what is queued, then joins every thread. Idempotent.
  void Shutdown() {
    std::vector<std::thread> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      all = std::move(threads_);
      threads_.clear();
      exited_.clear();
    }
    cv_.notify_all();
    for (std::thread& t : all) t.join();
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!queue_.empty()) {
        std::function<void()> task = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        task();
        task = nullptr;  // drops what the task holds (a connection) outside the lock
        lock.lock();
        continue;
      }
      if (stopping_) return;
      ++idle_count_;
      const bool woken = cv_.wait_for(lock, idle_, [this] { return stopping_ || !queue_.empty(); });
      --idle_count_;
      if (!woken) {
        exited_.push_back(std::this_thread::get_id());
        return;
      }
    }
  }

  // Threads that left Loop after an idle spell, to join outside the lock.
  std::vector<std::thread> ReapLocked() {
    std::vector<std::thread> reaped;
    for (const std::thread::id id : exited_) {
      auto it = std::find_if(threads_.begin(), threads_.end(), [id](const std::thread& t) { return t.get_id() == id; });
      if (it != threads_.end()) {
        reaped.push_back(std::move(*it));
        threads_.erase(it);
      }
    }
    exited_.clear();
    return reaped;
  }

  const size_t max_threads_;
  const size_t max_queue_;
  const Duration idle_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  std::vector<std::thread> threads_;         // guarded by mu_
  std::vector<std::thread::id> exited_;      // guarded by mu_: threads that returned from Loop
  size_t idle_count_ = 0;                    // guarded by mu_: threads waiting for work
  bool stopping_ = false;                    // guarded by mu_
};

class Connection;

// Everything behind a Server: the routes, the io_context and its threads, the acceptor, the worker pool
// and the open connections. Connections point back here and die before it (see the member order).
class ServerCore {
 public:
  explicit ServerCore(const ServerOptions& opts)
      : options(opts),
        pool(static_cast<size_t>(opts.max_workers), static_cast<size_t>(opts.max_queued_requests),
             opts.worker_idle_timeout),
        ioc(opts.threads),
        acceptor(net::make_strand(ioc)),
        accept_timer(acceptor.get_executor()) {}
  ~ServerCore() { Stop(); }

  absl::Status Start(int* port);
  void Stop();  // Server::Stop's contract
  // Open connections by id, so Stop can close the idle ones.
  void Register(uint64_t id, std::weak_ptr<Connection> c);
  void Unregister(uint64_t id);
  // The TLS context for a new connection; null on plain HTTP.
  TlsContext CurrentTlsContext() {
    if (!options.tls.enabled()) return nullptr;
    std::lock_guard<std::mutex> lock(tls_mu_);
    return tls_ctx_;
  }
  void SetTlsContext(TlsContext ctx) {
    std::lock_guard<std::mutex> lock(tls_mu_);
    tls_ctx_ = std::move(ctx);
  }

  // Constant after Start.
  const ServerOptions options;
  std::vector<CompiledRoute> routes;

  // Counters, read by Server::stats().
  std::atomic<int64_t> connections_open{0};
  std::atomic<int64_t> connections_refused{0};
  std::atomic<int64_t> requests_served{0};
  std::atomic<int64_t> timeouts{0};
  std::atomic<int64_t> busy_rejections{0};
  std::atomic<int64_t> tls_handshake_failures{0};
  std::atomic<uint64_t> next_connection_id{1};
  std::atomic<bool> stopping{false};
  std::atomic<bool> io_stopped{false};  // the I/O threads were joined (Stop): nothing posted runs any more

 private:
  void Accept();
  void OnAccept(error_code ec, tcp::socket socket);
  void RunIo();

  std::mutex conns_mu_;
  std::condition_variable conns_cv_;                               // signalled when a connection goes
  std::unordered_map<uint64_t, std::weak_ptr<Connection>> conns_;  // guarded by conns_mu_
  std::mutex tls_mu_;
  TlsContext tls_ctx_;  // guarded by tls_mu_; each connection holds the one it was accepted with

 public:
  // After everything a connection touches: ioc's destructor destroys queued handlers and with them the
  // last references to connections, whose destructors unregister above.
  WorkerPool pool;
  net::io_context ioc;

 private:
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work_;
  tcp::acceptor acceptor;  // on its own strand, with accept_timer
  net::steady_timer accept_timer;
  std::vector<std::thread> io_threads_;
  bool started_ = false;  // Start and Stop are called from the owner's thread only
  bool stopped_ = false;
};

// A routed request, for the observer.
struct Observed {
  const CompiledRoute* route = nullptr;
  std::string method;
  MonoTime start;  // the request was complete

  // Tells the observer (if any) once the reply (for a stream, its head) is ready to be written. Before the
  // write: whoever has the reply can count on the observation, and a long stream is not a long request.
  void Tell(const ServerOptions& options, int status) const {
    if (options.observer) options.observer(method, route->pattern, status, RealClock().Monotonic() - start);
  }
};

// One accepted socket. Every member is used on the socket's strand only, except where noted; a worker
// thread running this connection's handler reaches the socket only by posting onto the strand.
//
// Life of a request: WaitForRequest (idle_timeout, no buffer held) -> ReadHead (header_timeout) ->
// ReadBody (body_timeout) -> Dispatch to the worker pool -> WriteReply (write_timeout) -> next request,
// or LingerClose. Read deadlines use read_timer_, which cancels the read, so a timed-out head can still
// be answered 408; write deadlines use the tcp_stream's own, which closes the socket.
//
// With TLS the connection first runs the handshake (Handshake, under the first head's header_timeout)
// and every read and write goes through the TLS stream; WithStream picks the stream, so both paths run
// the same Beast code and the plain one is what it was without TLS.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // `tls`: the context to handshake with, or null for plain HTTP; held for the connection's life.
  Connection(ServerCore& server, tcp::socket socket, TlsContext tls)
      : server_(server),
        id_(server.next_connection_id++),
        executor_(socket.get_executor()),
        tls_ctx_(std::move(tls)),
        read_timer_(executor_) {
    error_code ec;
    const tcp::endpoint peer = socket.remote_endpoint(ec);
    if (!ec) {
      remote_address_ = peer.address().is_v6() ? fmt::format("[{}]:{}", peer.address().to_string(), peer.port())
                                               : fmt::format("{}:{}", peer.address().to_string(), peer.port());
    }
    if (tls_ctx_) {
      tls_stream_.emplace(std::move(socket), *tls_ctx_);
    } else {
      plain_stream_.emplace(std::move(socket));
    }
    ++server_.connections_open;
  }

  ~Connection() {
    server_.Unregister(id_);
    --server_.connections_open;
  }

  void Start() {
    server_.Register(id_, weak_from_this());
    net::dispatch(executor_, [self = shared_from_this()] {
      // The first request's head deadline runs from accept: a connection that sends nothing is cut too.
      // With TLS it covers the handshake as well.
      self->ArmReadDeadline(self->server_.options.header_timeout);
      if (self->tls_stream_) {
        self->Handshake();
      } else {
        self->ReadHead();
      }
    });
  }

  // Called by Server::Stop from another thread: closes the connection unless a request is in flight.
  void OnServerStop() {
    net::post(executor_, [self = shared_from_this()] {
      if (self->phase_ == Phase::kIdle || self->phase_ == Phase::kHead || self->phase_ == Phase::kHandshake ||
          self->tunnel_) {
        self->Close();
      }
    });
  }

  // After the io threads are joined: closes the socket whatever it was doing.
  void ForceClose() { Close(); }

 private:
  enum class Phase { kHandshake, kIdle, kHead, kBody, kHandling, kWriting, kClosing, kClosed };

  const ServerOptions& options() const { return server_.options; }

  // The TCP layer, for deadlines and socket calls.
  beast::tcp_stream& tcp() { return tls_stream_ ? tls_stream_->next_layer() : *plain_stream_; }

  // Calls `f` with the stream requests are read from and replies written to.
  template <class F>
  void WithStream(F&& f) {
    if (tls_stream_) {
      f(*tls_stream_);
    } else {
      f(*plain_stream_);
    }
  }

  void Handshake() {
    phase_ = Phase::kHandshake;
    tls_stream_->async_handshake(net::ssl::stream_base::server,
                                 [self = shared_from_this()](error_code ec) { self->OnHandshake(ec); });
  }

  void OnHandshake(error_code ec) {
    if (phase_ == Phase::kClosed) return;
    if (ec) {
      if (ec == net::error::operation_aborted && read_timed_out_) {
        ++server_.timeouts;
        spdlog::debug("{}: TLS handshake not done within {} ms (header_timeout); closing the connection",
                      options().name, Millis(options().header_timeout));
      } else {
        ++server_.tls_handshake_failures;
        spdlog::debug("{}: TLS handshake failed: {}", options().name, ec.message());
      }
      Close();
      return;
    }
    peer_common_name_ = VerifiedPeerCommonName(tls_stream_->native_handle());
    ReadHead();
  }

  void ArmReadDeadline(Duration d) {
    tcp().expires_never();
    const uint64_t generation = ++deadline_generation_;
    read_timed_out_ = false;
    read_timer_.expires_after(d);
    read_timer_.async_wait([self = shared_from_this(), generation](error_code ec) {
      if (ec || generation != self->deadline_generation_) return;
      self->read_timed_out_ = true;
      error_code ignored;
      self->tcp().socket().cancel(ignored);
    });
  }

  void DisarmReadDeadline() {
    ++deadline_generation_;
    read_timer_.cancel();
  }

  // Between requests: waits for the first byte without holding a buffer, so an idle connection costs a
  // socket and this object only.
  void WaitForRequest() {
    if (server_.stopping) {
      Close();
      return;
    }
    if (buffer_.size() > 0) {  // a pipelined request is already here
      ArmReadDeadline(options().header_timeout);
      ReadHead();
      return;
    }
    phase_ = Phase::kIdle;
    buffer_.shrink_to_fit();
    ArmReadDeadline(options().idle_timeout);
    if (tls_stream_) {
      // OpenSSL may hold the next request's bytes already, so the socket may never become readable:
      // wait by reading the first bytes through TLS instead.
      tls_stream_->async_read_some(buffer_.prepare(kTlsFirstReadBytes),
                                   [self = shared_from_this()](error_code ec, size_t n) {
                                     if (ec) {
                                       self->Close();
                                       return;
                                     }
                                     self->buffer_.commit(n);
                                     self->ArmReadDeadline(self->options().header_timeout);
                                     self->ReadHead();
                                   });
      return;
    }
    tcp().socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](error_code ec) {
      if (ec) {  // idle_timeout passed, the server is stopping, or the socket failed
        self->Close();
        return;
      }
      self->ArmReadDeadline(self->options().header_timeout);
      self->ReadHead();
    });
  }

  void ReadHead() {
    phase_ = Phase::kHead;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(kHeadLimitBytes));
    parser_->body_limit(static_cast<uint64_t>(options().max_body_bytes));
    WithStream([this](auto& stream) {
      bhttp::async_read_header(stream, buffer_, *parser_,
                               [self = shared_from_this()](error_code ec, size_t bytes) { self->OnHead(ec, bytes); });
    });
  }

  void OnHead(error_code ec, size_t head_bytes) {
    if (ec) {
      OnReadError(ec);
      return;
    }
    const auto& req = parser_->get();
    http10_ = req.version() < 11;
    keep_alive_ = req.keep_alive();
    if (req.target().size() > kMaxTargetBytes) {
      WriteError(414, absl::InvalidArgumentError(TargetTooLong(req.target().size())),
                 {{"limit_bytes", kMaxTargetBytes}, {"target_bytes", req.target().size()}});
      return;
    }
    const size_t request_line = req.method_string().size() + req.target().size() + 12;  // "M T HTTP/1.1\r\n"
    if (head_bytes > request_line + kMaxHeaderBlockBytes) {
      WriteError(431, absl::InvalidArgumentError(HeadersTooLarge(head_bytes - request_line)),
                 {{"limit_bytes", kMaxHeaderBlockBytes}, {"header_bytes", head_bytes - request_line}});
      return;
    }
    if (const auto length = parser_->content_length(); length && *length > options().max_body_bytes) {
      WriteBodyTooLarge(*length);
      return;
    }
    if (parser_->is_done()) {
      Dispatch();
      return;
    }
    phase_ = Phase::kBody;
    ArmReadDeadline(options().body_timeout);
    if (beast::iequals(req[bhttp::field::expect], "100-continue")) {
      // The client waits for this before sending the body (curl does for bodies over 1 KiB).
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      WithStream([this](auto& stream) {
        net::async_write(stream, net::buffer(kContinue.data(), kContinue.size()),
                         [self = shared_from_this()](error_code write_ec, size_t) {
                           if (write_ec) {
                             self->OnReadError(write_ec);
                             return;
                           }
                           self->ReadBody();
                         });
      });
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    WithStream([this](auto& stream) {
      bhttp::async_read(stream, buffer_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
        if (ec) {
          self->OnReadError(ec);
          return;
        }
        self->Dispatch();
      });
    });
  }

  // A read of a head or body failed: answer what can be answered, then close.
  void OnReadError(error_code ec) {
    if (phase_ == Phase::kClosed || phase_ == Phase::kClosing) return;
    if (ec == net::error::operation_aborted && read_timed_out_) {
      ++server_.timeouts;
      const bool head = phase_ == Phase::kHead;
      if (head && buffer_.size() == 0) {  // connected but never sent a byte
        Close();
        return;
      }
      const Duration limit = head ? options().header_timeout : options().body_timeout;
      spdlog::debug("{}: request {} not received within {} ms; closing the connection", options().name,
                    head ? "head" : "body", Millis(limit));
      WriteError(408,
                 absl::DeadlineExceededError(
                     fmt::format("the request {} did not arrive within {} ms ({}); send the whole request at once",
                                 head ? "head" : "body", Millis(limit), head ? "header_timeout" : "body_timeout")),
                 {{"timeout_ms", Millis(limit)}});
      return;
    }
    if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
      // The head never completed. The parser consumes the request line once it is whole (and then
      // knows the target): without one, the request line itself was too long.
      const size_t seen = buffer_.size();
      if (parser_->get().target().empty()) {
        WriteError(414, absl::InvalidArgumentError(TargetTooLong(seen)), {{"limit_bytes", kMaxTargetBytes}});
      } else {
        WriteError(431, absl::InvalidArgumentError(HeadersTooLarge(seen)), {{"limit_bytes", kMaxHeaderBlockBytes}});
      }
      return;
    }
    if (ec == bhttp::error::body_limit) {
      // With a Content-Length the parser refuses at the end of the head; a chunked body as it passes the limit.
      // Either way the head does not count as done, and the parser's content_length() asserts that it is
      // (a debug build of Boost aborts): the field the parser stored is read instead.
      const auto field = parser_->get()[bhttp::field::content_length];
      uint64_t length = 0;
      const char* end = field.data() + field.size();
      const auto [parsed_to, error] = std::from_chars(field.data(), end, length);
      const bool known = !field.empty() && error == std::errc() && parsed_to == end;
      WriteBodyTooLarge(known ? std::optional<uint64_t>(length) : std::nullopt);
      return;
    }
    if (ec.category() == bhttp::make_error_code(bhttp::error::bad_method).category() &&
        ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
      WriteError(400, absl::InvalidArgumentError(fmt::format("malformed HTTP request: {}", ec.message())),
                 {{"parse_error", ec.message()}});
      return;
    }
    Close();  // the client went away, or the server is stopping
  }

  static std::string TargetTooLong(size_t bytes) {
    return fmt::format(
        "request target (path and query) is {}{} bytes; the limit is {} bytes: send long inputs in a "
        "POST body instead",
        bytes >= kHeadLimitBytes ? "over " : "", bytes, kMaxTargetBytes);
  }

  static std::string HeadersTooLarge(size_t bytes) {
    return fmt::format("request header fields are {}{} bytes; the limit is {} bytes: send fewer or shorter headers",
                       bytes >= kHeadLimitBytes ? "over " : "", bytes, kMaxHeaderBlockBytes);
  }

  void WriteBodyTooLarge(std::optional<uint64_t> length) {
    nlohmann::json details = {{"limit_bytes", options().max_body_bytes}};
    std::string size = "larger than the limit";
    if (length) {
      details["content_length"] = *length;
      size = fmt::format("{} bytes", *length);
    }
    WriteError(
        413,
        absl::InvalidArgumentError(fmt::format("request body is {}; the limit is {} bytes (max_body_bytes): send "
                                               "less per request",
                                               size, options().max_body_bytes)),
        details);
  }

  static std::shared_ptr<StringResponse> MakeResponse(int status, std::string body, const std::string& content_type,
                                                      bool keep_alive) {
    auto res = std::make_shared<StringResponse>();
    res->result(static_cast<unsigned>(status));
    res->version(11);  // a server answers with its own version (RFC 9110 section 6.2), also to HTTP/1.0
    res->set(bhttp::field::content_type, content_type);
    res->body() = std::move(body);
    res->keep_alive(keep_alive);
    res->prepare_payload();
    return res;
  }

  // An error the server answers itself, then closes the connection.
  void WriteError(int status, const absl::Status& error, const nlohmann::json& details) {
    keep_alive_ = false;
    WriteReply(MakeResponse(status, DumpJson(ErrorBody(error, details)), "application/json", false),
               kErrorWriteTimeout);
  }

  // The request is complete: route it and hand it to a worker.
  void Dispatch() {
    DisarmReadDeadline();
    phase_ = Phase::kHandling;
    bhttp::request<bhttp::string_body> req = parser_->release();
    parser_.reset();
    const MonoTime start = RealClock().Monotonic();
    const std::string method(req.method_string());
    const std::string_view target(req.target().data(), req.target().size());
    const size_t question = target.find('?');
    const std::string path = PercentDecode(target.substr(0, question), false);

    const CompiledRoute* route = nullptr;
    std::smatch match;
    std::vector<std::string> allowed;
    for (const CompiledRoute& r : server_.routes) {
      if (!std::regex_match(path, match, r.regex)) continue;
      if (r.method == method || r.method == "*") {
        route = &r;
        break;
      }
      if (std::find(allowed.begin(), allowed.end(), r.method) == allowed.end()) allowed.push_back(r.method);
    }
    if (route == nullptr) {
      std::shared_ptr<StringResponse> res;
      if (allowed.empty()) {
        res =
            MakeResponse(404, DumpJson(ErrorBody(absl::NotFoundError(fmt::format("no route for {} {}", method, path)))),
                         "application/json", keep_alive_);
      } else {
        std::string allow;
        for (const std::string& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
        res = MakeResponse(405,
                           DumpJson(ErrorBody(absl::UnimplementedError(fmt::format(
                                                  "method {} is not allowed on {}; allowed: {}", method, path, allow)),
                                              {{"allowed", allowed}})),
                           "application/json", keep_alive_);
        res->set(bhttp::field::allow, allow);
      }
      WriteReply(std::move(res), options().write_timeout);
      return;
    }

    auto request = std::make_shared<Request>();
    request->method = method;
    request->path = path;
    request->target = std::string(target);
    for (size_t i = 0; i < route->names.size() && i + 1 < match.size(); ++i) {
      request->path_params[route->names[i]] = match[i + 1].str();
    }
    if (question != std::string_view::npos) ParseQuery(target.substr(question + 1), request->query);
    for (const auto& field : req) {
      request->headers[absl::AsciiStrToLower(std::string(field.name_string()))] = std::string(field.value());
    }
    request->body = std::move(req.body());
    request->peer_common_name = peer_common_name_;
    request->remote_address = remote_address_;
    Observed observed{route, method, start};
    const bool queued =
        server_.pool.Submit([self = shared_from_this(), request, observed] { self->RunHandler(*request, observed); });
    if (!queued) {
      ++server_.busy_rejections;
      observed.Tell(options(), 503);
      spdlog::warn("{}: every worker is busy and {} requests wait; answering {} {} with 503", options().name,
                   options().max_queued_requests, method, path);
      WriteReply(MakeResponse(503,
                              DumpJson(ErrorBody(absl::UnavailableError(fmt::format(
                                  "server {} is busy: {} handlers are running and {} requests wait; retry after a "
                                  "short backoff",
                                  options().name, options().max_workers, options().max_queued_requests)))),
                              "application/json", keep_alive_),
                 options().write_timeout);
    }
  }

  // On a worker thread.
  void RunHandler(const Request& request, const Observed& observed) {
    const CompiledRoute& route = *observed.route;
    absl::StatusOr<Reply> reply = absl::InternalError("handler did not run");
    try {
      reply = route.handler(request);
    } catch (const std::exception& e) {
      spdlog::error("{}: handler for {} {} threw: {}", options().name, route.method, route.pattern, e.what());
      reply = absl::InternalError("internal error");
    } catch (...) {
      spdlog::error("{}: handler for {} {} threw a non-std exception", options().name, route.method, route.pattern);
      reply = absl::InternalError("internal error");
    }
    std::shared_ptr<StringResponse> res;
    if (!reply.ok()) {
      res = MakeResponse(HttpStatusFor(reply.status()), DumpJson(ErrorBody(reply.status())), "application/json",
                         keep_alive_);
    } else if (reply->upgrade) {
      Upgrade(*reply, request, observed);
      return;
    } else if (reply->stream) {
      Stream(*reply, observed);
      return;
    } else {
      res = MakeResponse(reply->status, std::move(reply->body), reply->content_type, keep_alive_);
      for (const auto& [name, value] : reply->headers) res->set(name, value);
    }
    // HEAD: the head GET would send (its Content-Length included), no body (RFC 9110 section 9.3.2).
    if (request.method == "HEAD") res->body().clear();
    observed.Tell(options(), res->result_int());
    net::post(executor_, [self = shared_from_this(), res = std::move(res)] {
      self->WriteReply(res, self->options().write_timeout);
    });
  }

  // Writes `res`, then reads the next request or closes.
  void WriteReply(std::shared_ptr<StringResponse> res, Duration timeout) {
    if (phase_ == Phase::kClosed) return;
    DisarmReadDeadline();
    phase_ = Phase::kWriting;
    if (server_.stopping) res->keep_alive(false);
    // HTTP/1.0 closes unless both sides say otherwise.
    if (http10_ && res->keep_alive()) res->set(bhttp::field::connection, "keep-alive");
    tcp().expires_after(timeout);
    WithStream([this, &res](auto& stream) {
      bhttp::async_write(stream, *res, [self = shared_from_this(), res](error_code ec, size_t) {
        self->tcp().expires_never();
        ++self->server_.requests_served;
        if (ec) {
          if (ec == beast::error::timeout) ++self->server_.timeouts;
          self->Close();
          return;
        }
        if (!res->keep_alive()) {
          self->LingerClose();
          return;
        }
        self->WaitForRequest();
      });
    });
  }

  // On a worker thread: runs `start` (which begins one async write with the completion handler it is
  // given) on the strand under write_timeout and waits for it. False when the write failed or timed out,
  // the connection is closed, or the server is stopping.
  bool WriteAndWait(std::function<void(std::function<void(error_code, size_t)>)> start) {
    struct Wait {
      std::mutex mu;
      std::condition_variable cv;
      bool done = false;
      bool ok = false;
    };
    if (server_.stopping) return false;
    auto wait = std::make_shared<Wait>();
    auto finish = [wait](bool ok) {
      {
        std::lock_guard<std::mutex> lock(wait->mu);
        wait->done = true;
        wait->ok = ok;
      }
      wait->cv.notify_all();
    };
    net::post(executor_, [self = shared_from_this(), start = std::move(start), finish] {
      if (self->phase_ == Phase::kClosed) {
        finish(false);
        return;
      }
      self->phase_ = Phase::kWriting;
      self->tcp().expires_after(self->options().write_timeout);
      start([self, finish](error_code ec, size_t) {
        self->tcp().expires_never();
        if (ec == beast::error::timeout) ++self->server_.timeouts;
        finish(!ec);
      });
    });
    std::unique_lock<std::mutex> lock(wait->mu);
    // The stream's own deadline ends the write; the margin covers a stopped io_context.
    wait->cv.wait_for(lock, options().write_timeout + std::chrono::seconds(2), [&] { return wait->done; });
    return wait->done && wait->ok;
  }

  // On a worker thread: a chunked reply from reply.stream. An HTTP/1.0 client knows no chunks: it gets the
  // bytes as they come and the end of the body is the end of the connection.
  void Stream(Reply& reply, const Observed& observed) {
    const bool chunked = !http10_;
    auto head = std::make_shared<bhttp::response<bhttp::empty_body>>();
    head->result(static_cast<unsigned>(reply.status));
    head->version(11);
    head->set(bhttp::field::content_type, reply.content_type);
    for (const auto& [name, value] : reply.headers) head->set(name, value);
    head->chunked(chunked);
    head->keep_alive(chunked && keep_alive_ && !server_.stopping);
    const bool keep_alive = head->keep_alive();
    observed.Tell(options(), reply.status);
    auto serializer = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*head);
    bool ok = WriteAndWait([self = shared_from_this(), head, serializer](auto done) {
      self->WithStream([&](auto& stream) {
        bhttp::async_write_header(stream, *serializer,
                                  [head, serializer, done = std::move(done)](error_code ec, size_t n) { done(ec, n); });
      });
    });
    const ChunkWriter writer = [this, &ok, chunked](const std::string& chunk) {
      if (!ok) return false;
      if (chunk.empty()) return true;  // an empty chunk would end the body
      auto data = std::make_shared<std::string>(chunk);
      ok = WriteAndWait([self = shared_from_this(), data, chunked](auto done) {
        const net::const_buffer bytes(data->data(), data->size());
        auto keep = [data, done = std::move(done)](error_code ec, size_t n) { done(ec, n); };
        self->WithStream([&](auto& stream) {
          if (chunked) {
            net::async_write(stream, bhttp::make_chunk(bytes), std::move(keep));
          } else {
            net::async_write(stream, bytes, std::move(keep));
          }
        });
      });
      return ok;
    };
    if (ok) {
      try {
        reply.stream(writer);
      } catch (const std::exception& e) {
        spdlog::error("{}: stream for {} {} threw: {}", options().name, observed.method, observed.route->pattern,
                      e.what());
        ok = false;  // the client sees the body end without its last chunk
      }
    }
    if (ok && chunked) {
      ok = WriteAndWait([self = shared_from_this()](auto done) {
        self->WithStream([&](auto& stream) { net::async_write(stream, bhttp::make_chunk_last(), std::move(done)); });
      });
    }
    ++server_.requests_served;
    net::post(executor_, [self = shared_from_this(), ok, keep_alive] {
      if (self->phase_ == Phase::kClosed) return;
      if (ok && keep_alive) {
        self->WaitForRequest();
      } else if (ok) {
        self->LingerClose();
      } else {
        self->Close();
      }
    });
  }

  // The upgraded connection handed to Reply::upgrade: each Read and Write runs on the strand and is
  // waited for by the worker (or relay) thread calling it.
  class UpgradedStream : public ByteStream {
   public:
    explicit UpgradedStream(std::shared_ptr<Connection> c) : c_(std::move(c)) {}

    bool Read(std::string& out, size_t max) override {
      struct Wait {
        std::mutex mu;
        std::condition_variable cv;
        bool done = false;
        bool ok = false;
        std::string data;
      };
      auto wait = std::make_shared<Wait>();
      auto finish = [wait](bool ok, std::string data) {
        {
          std::lock_guard<std::mutex> lock(wait->mu);
          wait->done = true;
          wait->ok = ok;
          wait->data = std::move(data);
        }
        wait->cv.notify_all();
      };
      max = std::max<size_t>(1, max);
      net::post(c_->executor_, [c = c_, finish, max] {
        if (c->phase_ == Phase::kClosed) {
          finish(false, {});
          return;
        }
        if (c->buffer_.size() > 0) {  // sent right after the request head
          std::string early = beast::buffers_to_string(c->buffer_.data());
          if (early.size() > max) early.resize(max);
          c->buffer_.consume(early.size());
          finish(true, std::move(early));
          return;
        }
        auto piece = std::make_shared<std::string>(max, '\0');
        c->tcp().expires_never();  // no read deadline (a pending write keeps its own)
        c->WithStream([&](auto& stream) {
          stream.async_read_some(net::buffer(piece->data(), piece->size()),
                                 [c, finish, piece](error_code ec, size_t n) {
                                   if (ec || n == 0) {
                                     finish(false, {});
                                     return;
                                   }
                                   piece->resize(n);
                                   finish(true, std::move(*piece));
                                 });
        });
      });
      std::unique_lock<std::mutex> lock(wait->mu);
      // Once Server::Stop stopped the I/O threads the posted read never completes: give up then.
      while (!wait->cv.wait_for(lock, std::chrono::milliseconds(500), [&] { return wait->done; })) {
        if (c_->server_.io_stopped) return false;
      }
      out = std::move(wait->data);
      return wait->ok;
    }

    bool Write(std::string_view data) override {
      if (data.empty()) return true;
      auto bytes = std::make_shared<std::string>(data);
      return c_->WriteAndWait([c = c_, bytes](auto done) {
        c->WithStream([&](auto& stream) {
          net::async_write(stream, net::buffer(bytes->data(), bytes->size()),
                           [bytes, done = std::move(done)](error_code ec, size_t n) { done(ec, n); });
        });
      });
    }

    void Close() override {
      net::post(c_->executor_, [c = c_] { c->Close(); });
    }

   private:
    std::shared_ptr<Connection> c_;
  };

  // On a worker thread: answers 101 and hands the connection to reply.upgrade, or 426 when the request did
  // not ask to switch to reply.upgrade_protocol.
  void Upgrade(Reply& reply, const Request& request, const Observed& observed) {
    const std::string& protocol = reply.upgrade_protocol;
    if (http10_ || !HeaderHasToken(request, "connection", "upgrade") || !HeaderHasToken(request, "upgrade", protocol)) {
      auto res = MakeResponse(426,
                              DumpJson(ErrorBody(absl::FailedPreconditionError(fmt::format(
                                  "{} {} switches protocols: send an HTTP/1.1 request with 'Connection: Upgrade' "
                                  "and 'Upgrade: {}'",
                                  request.method, request.path, protocol)))),
                              "application/json", keep_alive_);
      res->set(bhttp::field::upgrade, protocol);
      observed.Tell(options(), 426);
      net::post(executor_, [self = shared_from_this(), res = std::move(res)] {
        self->WriteReply(res, self->options().write_timeout);
      });
      return;
    }
    auto head = std::make_shared<bhttp::response<bhttp::empty_body>>();
    head->result(bhttp::status::switching_protocols);
    head->version(11);
    head->set(bhttp::field::connection, "Upgrade");
    head->set(bhttp::field::upgrade, protocol);
    observed.Tell(options(), 101);
    auto serializer = std::make_shared<bhttp::response_serializer<bhttp::empty_body>>(*head);
    const bool ok = WriteAndWait([self = shared_from_this(), head, serializer](auto done) {
      self->WithStream([&](auto& stream) {
        bhttp::async_write_header(stream, *serializer,
                                  [head, serializer, done = std::move(done)](error_code ec, size_t n) { done(ec, n); });
      });
    });
    ++server_.requests_served;
    if (ok) {
      // From here Server::Stop closes the connection (OnServerStop); one stopping already is closed now.
      // TCP keep-alive finds a peer that vanished without closing (the tunnel has no idle deadline).
      net::post(executor_, [self = shared_from_this()] {
        error_code ignored;
        self->tcp().socket().set_option(net::socket_base::keep_alive(true), ignored);
        self->tunnel_ = true;
        if (self->server_.stopping) self->Close();
      });
      UpgradedStream stream(shared_from_this());
      try {
        reply.upgrade(stream);
      } catch (const std::exception& e) {
        spdlog::error("{}: upgrade for {} {} threw: {}", options().name, observed.method, observed.route->pattern,
                      e.what());
      }
    }
    net::post(executor_, [self = shared_from_this()] { self->Close(); });
  }

  // Half-closes, then drains what the client still sends (at most kLingerBytes for kLingerTime) and closes.
  // With TLS: sends close_notify and waits up to kLingerTime for the client's, dropping the connection on
  // anything else (data after close_notify is a protocol error in TLS).
  void LingerClose() {
    if (phase_ == Phase::kClosed || phase_ == Phase::kClosing) return;
    phase_ = Phase::kClosing;
    if (tls_stream_) {
      DisarmReadDeadline();
      tcp().expires_after(kLingerTime);
      tls_stream_->async_shutdown([self = shared_from_this()](error_code) { self->Close(); });
      return;
    }
    error_code ignored;
    tcp().socket().shutdown(tcp::socket::shutdown_send, ignored);
    ArmReadDeadline(kLingerTime);
    buffer_.clear();
    Drain();
  }

  void Drain() {
    plain_stream_->async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
      self->lingered_ += n;
      if (ec || self->lingered_ > kLingerBytes) {
        self->Close();
        return;
      }
      self->Drain();
    });
  }

  void Close() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    DisarmReadDeadline();
    error_code ignored;
    tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
    tcp().close();
  }

  ServerCore& server_;
  const uint64_t id_;
  const net::any_io_executor executor_;            // the connection's strand; worker threads post onto it
  const TlsContext tls_ctx_;                       // null on plain HTTP; outlives tls_stream_ (declared before it)
  std::optional<beast::tcp_stream> plain_stream_;  // exactly one of these two is set
  std::optional<TlsStream> tls_stream_;
  std::string peer_common_name_;  // of a verified client certificate; set before the first request
  std::string remote_address_;    // "IP:port" of the peer, from accept
  net::steady_timer read_timer_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Phase phase_ = Phase::kHead;
  uint64_t deadline_generation_ = 0;
  bool read_timed_out_ = false;
  size_t lingered_ = 0;
  // Of the request being handled; set on the strand before the worker pool receives it (its mutex orders
  // the writes before the worker's reads), not changed while the handler runs.
  bool http10_ = false;
  bool keep_alive_ = true;
  bool tunnel_ = false;  // the connection was upgraded (Reply::upgrade); on the strand
};

void ServerCore::Register(uint64_t id, std::weak_ptr<Connection> c) {
  std::lock_guard<std::mutex> lock(conns_mu_);
  conns_[id] = std::move(c);
}

void ServerCore::Unregister(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    conns_.erase(id);
  }
  conns_cv_.notify_all();
}

absl::Status ServerCore::Start(int* port) {
  if (started_) return absl::FailedPreconditionError("http server: Start called twice");
  const auto in_use = [&](const std::string& why) {
    return absl::UnavailableError(fmt::format(
        "http server {}: cannot listen on {}:{}: the port is in use, or the address is not this host's ({}); "
        "choose another with --listen HOST:PORT",
        options.name, options.host, options.port, why));
  };
  error_code ec;
  tcp::endpoint endpoint;
  const net::ip::address address = net::ip::make_address(options.host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, static_cast<uint16_t>(options.port));
  } else {
    tcp::resolver resolver(ioc);
    const auto results = resolver.resolve(options.host, std::to_string(options.port), ec);
    if (ec || results.empty()) return in_use(fmt::format("cannot resolve {}: {}", options.host, ec.message()));
    endpoint = results.begin()->endpoint();
  }
  acceptor.open(endpoint.protocol(), ec);
  if (ec) return in_use(ec.message());
  // SO_REUSEADDR only: a restarted server may bind while old connections sit in TIME_WAIT. SO_REUSEPORT
  // would let a second server bind a port already in use and take part of its traffic (the agents).
  acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    acceptor.close(ec);
    return in_use(ec.message());
  }
  *port = acceptor.local_endpoint(ec).port();
  started_ = true;
  work_.emplace(net::make_work_guard(ioc));
  Accept();
  for (int i = 0; i < options.threads; ++i) io_threads_.emplace_back([this] { RunIo(); });
  spdlog::debug("{}: listening on {}:{} ({} io threads, up to {} workers)", options.name, options.host, *port,
                options.threads, options.max_workers);
  return absl::OkStatus();
}

void ServerCore::RunIo() {
  for (;;) {
    try {
      ioc.run();
      return;
    } catch (const std::exception& e) {
      // Our handlers do not throw; an allocation failure deep in Asio might.
      spdlog::error("{}: io thread caught: {}", options.name, e.what());
    }
  }
}

void ServerCore::Accept() {
  acceptor.async_accept(net::make_strand(ioc),
                        [this](error_code ec, tcp::socket socket) { OnAccept(ec, std::move(socket)); });
}

void ServerCore::OnAccept(error_code ec, tcp::socket socket) {
  if (stopping) return;
  if (ec) {
    if (ec == net::error::operation_aborted) return;
    spdlog::warn("{}: accept failed ({}); retrying in {} ms", options.name, ec.message(), kAcceptRetry.count());
    accept_timer.expires_after(kAcceptRetry);
    accept_timer.async_wait([this](error_code wait_ec) {
      if (!wait_ec && !stopping) Accept();
    });
    return;
  }
  if (connections_open.load() >= options.max_connections) {
    const int64_t refused = ++connections_refused;
    // Logged at powers of two: a flood is visible without a line per connection.
    if ((refused & (refused - 1)) == 0) {
      spdlog::warn("{}: {} connections open (max_connections); closed {} new connections so far", options.name,
                   connections_open.load(), refused);
    }
    error_code ignored;
    socket.close(ignored);
    Accept();
    return;
  }
  error_code ignored;
  // Headers and body may go out in separate writes: without TCP_NODELAY, Nagle + delayed ACK add ~40 ms.
  socket.set_option(tcp::no_delay(true), ignored);
  try {
    std::make_shared<Connection>(*this, std::move(socket), CurrentTlsContext())->Start();
  } catch (const std::exception& e) {
    // Only a TLS stream's construction can throw (SSL_new out of memory); the socket closes with it. The
    // accept loop must go on either way.
    spdlog::warn("{}: cannot set up a connection: {}", options.name, e.what());
  }
  Accept();
}

void ServerCore::Stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  stopping = true;
  std::promise<void> closed;
  net::post(acceptor.get_executor(), [this, &closed] {
    error_code ignored;
    acceptor.close(ignored);
    accept_timer.cancel();
    closed.set_value();
  });
  closed.get_future().wait();  // the io threads run it; from here the port refuses connections
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (const auto& [id, weak] : conns_) {
      if (auto c = weak.lock()) open.push_back(std::move(c));
    }
  }
  for (const auto& c : open) c->OnServerStop();
  open.clear();
  {
    // Requests in flight finish: their connections close after the reply.
    std::unique_lock<std::mutex> lock(conns_mu_);
    conns_cv_.wait_for(lock, options.body_timeout + options.write_timeout, [this] { return conns_.empty(); });
  }
  work_.reset();
  ioc.stop();
  for (std::thread& t : io_threads_) t.join();
  io_stopped = true;  // upgraded streams waiting for a read give up (UpgradedStream::Read)
  io_threads_.clear();
  // Handlers still running finish here; their replies go nowhere (the io_context has stopped).
  pool.Shutdown();
  {
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (const auto& [id, weak] : conns_) {
      if (auto c = weak.lock()) open.push_back(std::move(c));
    }
  }
  for (const auto& c : open) c->ForceClose();  // no io thread runs: safe from here
}

}  // namespace internal

Server::Server(const ServerOptions& options)
    : options_(options), core_(std::make_unique<internal::ServerCore>(options)) {}

Server::~Server() { Stop(); }

absl::StatusOr<std::unique_ptr<Server>> Server::Create(const ServerOptions& options) {
  if (options.threads < 1) return absl::InvalidArgumentError("http server: threads must be >= 1");
  if (options.max_workers < 1) return absl::InvalidArgumentError("http server: max_workers must be >= 1");
  if (options.max_queued_requests < 0) {
    return absl::InvalidArgumentError("http server: max_queued_requests must be >= 0");
  }
  if (options.max_connections < 1) return absl::InvalidArgumentError("http server: max_connections must be >= 1");
  const std::pair<const char*, Duration> timeouts[] = {{"header_timeout", options.header_timeout},
                                                       {"body_timeout", options.body_timeout},
                                                       {"idle_timeout", options.idle_timeout},
                                                       {"write_timeout", options.write_timeout},
                                                       {"worker_idle_timeout", options.worker_idle_timeout}};
  for (const auto& [name, d] : timeouts) {
    if (d <= Duration::zero()) return absl::InvalidArgumentError(fmt::format("http server: {} must be > 0", name));
  }
  if (options.tls.enabled() && options.tls.key_file.empty()) {
    return absl::InvalidArgumentError("http server: tls.cert_file needs tls.key_file");
  }
  if (options.tls.require_client_cert && options.tls.client_ca_file.empty()) {
    return absl::InvalidArgumentError("http server: tls.require_client_cert needs tls.client_ca_file");
  }
  if (!options.tls.enabled() && (!options.tls.key_file.empty() || !options.tls.client_ca_file.empty())) {
    return absl::InvalidArgumentError("http server: tls.key_file and tls.client_ca_file need tls.cert_file");
  }
  auto server = std::unique_ptr<Server>(new Server(options));
  if (options.tls.enabled()) {
    auto ctx = internal::MakeTlsContext(options.tls);
    if (!ctx.ok()) {
      return absl::Status(ctx.status().code(),
                          fmt::format("http server {}: {}", options.name, std::string(ctx.status().message())));
    }
    server->core_->SetTlsContext(*std::move(ctx));
  }
  return server;
}

absl::Status Server::ReloadCertificates() {
  if (!options_.tls.enabled()) {
    return absl::FailedPreconditionError(fmt::format("http server {}: no TLS certificate to reload", options_.name));
  }
  auto ctx = internal::MakeTlsContext(options_.tls);
  if (!ctx.ok()) {
    return absl::Status(ctx.status().code(), fmt::format("http server {}: {} (still serving the previous certificate)",
                                                         options_.name, std::string(ctx.status().message())));
  }
  core_->SetTlsContext(*std::move(ctx));
  spdlog::debug("{}: TLS certificate loaded from {}", options_.name, options_.tls.cert_file);
  return absl::OkStatus();
}

void Server::Route(const std::string& method, const std::string& pattern, Handler handler) {
  // "{name}" segments become capture groups; the names are remembered in order.
  internal::CompiledRoute route{.method = method, .pattern = pattern, .handler = std::move(handler)};
  std::string regex;
  for (size_t i = 0; i < pattern.size();) {
    if (pattern[i] == '{') {
      const size_t close = pattern.find('}', i);
      std::string name = pattern.substr(i + 1, close - i - 1);
      const bool rest = name.ends_with("...");
      if (rest) name.resize(name.size() - 3);
      route.names.push_back(std::move(name));
      regex += rest ? "(.*)" : "([^/]+)";
      i = close == std::string::npos ? pattern.size() : close + 1;
    } else {
      const char c = pattern[i++];
      if (std::string_view(".+*?^$()[]{}|\\").find(c) != std::string_view::npos) regex += '\\';
      regex += c;
    }
  }
  route.regex = std::regex(regex);
  core_->routes.push_back(std::move(route));
}

absl::Status Server::Start() { return core_->Start(&port_); }

std::string Server::url() const {
  return fmt::format("{}://{}:{}", options_.tls.enabled() ? "https" : "http", options_.host, port_);
}

void Server::Stop() { core_->Stop(); }

Server::Stats Server::stats() const {
  return Stats{.connections_open = core_->connections_open.load(),
               .connections_refused = core_->connections_refused.load(),
               .requests_served = core_->requests_served.load(),
               .timeouts = core_->timeouts.load(),
               .busy_rejections = core_->busy_rejections.load(),
               .tls_handshake_failures = core_->tls_handshake_failures.load()};
}

}  // namespace gpugeek::http
