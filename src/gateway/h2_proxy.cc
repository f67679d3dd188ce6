#include "gateway/h2_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/absl_view.h"
#include "gateway/proxy.h"

namespace gpugeek::gateway::detail {

namespace {

constexpr size_t kReadChunk = 64 * 1024;
constexpr uint32_t kMaxConcurrentStreams = 100;
constexpr size_t kCompactAbove = 64 * 1024;                // a relayed buffer's consumed prefix is dropped above this
constexpr Duration kCloseGrace = std::chrono::seconds(2);  // a connection closing with GOAWAY, at most

// gRPC status codes (grpc/include/grpc/impl/codegen/status.h) the gateway answers with.
constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcResourceExhausted = 8;
constexpr int kGrpcUnimplemented = 12;
constexpr int kGrpcInternal = 13;
constexpr int kGrpcUnavailable = 14;
constexpr int kGrpcDataLoss = 15;
constexpr int kGrpcUnauthenticated = 16;

nghttp2_nv Nv(std::string_view name, std::string_view value) {
  static char empty[1] = {0};
  auto* n = reinterpret_cast<uint8_t*>(name.empty() ? empty : const_cast<char*>(name.data()));
  auto* v = reinterpret_cast<uint8_t*>(value.empty() ? empty : const_cast<char*>(value.data()));
  return nghttp2_nv{n, v, name.size(), value.size(), NGHTTP2_NV_FLAG_NONE};
}

// Connection-specific fields HTTP/2 forbids or a proxy must not pass on (RFC 9113 8.2.2, RFC 9110 7.6.1).
bool HopByHop(std::string_view name, std::string_view value) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" || name == "transfer-encoding" ||
         name == "upgrade" || name == "http2-settings" || (name == "te" && value != "trailers");
}

// grpc-message is percent-encoded (gRPC's PROTOCOL-HTTP2.md): bytes outside 0x20..0x7E and '%'.
std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    if (b < 0x20 || b > 0x7E || b == '%') {
      out.push_back('%');
      out.push_back(kHex[b >> 4]);
      out.push_back(kHex[b & 15]);
    } else {
      out.push_back(ch);
    }
  }
  return out;
}

struct Header {
  std::string name;  // lower case (HTTP/2)
  std::string value;
};

const std::string* FindHeader(const std::vector<Header>& headers, std::string_view name) {
  for (const Header& h : headers) {
    if (absl::EqualsIgnoreCase(AbslView(h.name), AbslView(name))) return &h.value;
  }
  return nullptr;
}

class Core;
struct H2ClientConn;
struct H2UpstreamConn;

// One client stream, and the stream that carries it to a replica.
struct Call {
  H2ClientConn* client = nullptr;
  int32_t sid = 0;  // the client's stream
  MonoTime began{};

  // The request.
  std::string method, scheme, authority, path;
  std::vector<Header> request;  // regular fields, in order
  size_t head_bytes = 0;        // as SETTINGS_MAX_HEADER_LIST_SIZE counts them (name + value + 32 each)
  bool head_too_large = false;
  bool grpc = false;
  std::string body;       // request bytes not yet given to the replica's stream (and, while kept, those given)
  size_t body_sent = 0;   // bytes of `body` given to the replica's stream
  bool body_kept = true;  // `body` still holds every request byte (a retry can send them again)
  bool request_ended = false;
  bool discard_request = false;  // the answer does not need the rest of the request: its bytes are dropped
  // Waiting (Core::parked_): for its caller's token to be verified (`token` set), or for a ready replica (the
  // activator, `queued`), since `parked_at`.
  bool parked = false;
  bool queued = false;
  std::string token;
  MonoTime parked_at{};

  // Where it goes.
  std::shared_ptr<Service> service;
  int version = -1;
  std::string version_name;
  ReplicaState* replica = nullptr;  // Begin()'d while `upstream` is set
  H2UpstreamConn* upstream = nullptr;
  int32_t upstream_sid = -1;
  bool upstream_deferred = false;  // the replica stream's data provider waits for request bytes
  bool headers_sent = false;       // the request's HEADERS went into the replica connection's output
  int attempts = 0;
  std::vector<const ReplicaState*> tried;
  MonoTime sent_at{};

  // The answer.
  std::vector<Header> head_tmp;  // the HEADERS frame being received from the replica
  int head_status = 0;
  size_t answer_head_bytes = 0;
  bool answered = false;  // the final answer head came from the replica
  int status = 0;         // the answer's status (the replica's, or the gateway's own)
  std::vector<Header> answer_head;
  std::string answer;  // DATA from the replica not yet given to the client's stream
  size_t answer_sent = 0;
  std::vector<Header> trailers;
  bool answer_ended = false;        // every byte of the answer is in `answer` (and `trailers`)
  bool response_submitted = false;  // HEADERS for the client were submitted
  bool client_deferred = false;     // the client stream's data provider waits for answer bytes
  bool end_sent = false;            // the client's stream is closed on our side (END_STREAM went out)

  size_t PendingRequest() const { return body.size() - body_sent; }
  size_t PendingAnswer() const { return answer.size() - answer_sent; }
};

struct H2Conn : IoHandler {
  Core* core = nullptr;
  int fd = -1;
  TlsSession tls;  // client side with GatewayOptions::tls
  nghttp2_session* session = nullptr;
  Buffer out;
  size_t buffered = 0;   // bytes this peer sent that wait in calls to be relayed
  bool paused = false;   // not read while `buffered` is above the high water
  bool hung_up = false;  // an event said the peer shut its side: reads go on to its end (buffer.h ReadInto)
  bool dirty = false;
  bool dead = false;
  bool closing = false;  // GOAWAY submitted: closes once written (or after kCloseGrace)
  MonoTime closing_since{};
  const bool client_side;
  explicit H2Conn(bool client) : client_side(client) {}
  ~H2Conn() override {
    if (session) nghttp2_session_del(session);
  }
};

struct H2ClientConn final : H2Conn {
  std::string peer_ip;
  std::map<int32_t, std::unique_ptr<Call>> calls;  // by client stream id
  MonoTime last_activity{};
  H2ClientConn() : H2Conn(true) {}
  void OnEvents(uint32_t events) override;
  Call* Find(int32_t sid) {
    auto it = calls.find(sid);
    return it == calls.end() ? nullptr : it->second.get();
  }
};

struct H2UpstreamConn final : H2Conn {
  std::string replica_id;
  ReplicaEndpoint endpoint;
  std::map<int32_t, Call*> calls;  // by upstream stream id; owned by their client connections
  bool connecting = true;
  bool established = false;
  bool retired = false;  // takes no new streams (GOAWAY, or replaced): closes once its streams end
  MonoTime connect_began{};
  MonoTime idle_since{};
  H2UpstreamConn() : H2Conn(false) {}
  void OnEvents(uint32_t events) override;
  Call* Find(int32_t sid) {
    auto it = calls.find(sid);
    return it == calls.end() ? nullptr : it->second;
  }
};

class Core {
 public:
  explicit Core(Proxy* proxy);
  ~Core();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  void Adopt(int fd, TlsSession tls, std::string initial, std::string peer_ip);
  void Tick();
  void CloseAll();

  void ClientEvents(H2ClientConn* c, uint32_t events);
  void UpstreamEvents(H2UpstreamConn* u, uint32_t events);

 private:
  enum class ReadEnd { kDrained, kPaused, kClosed, kError };

  MonoTime now() const { return proxy_->now(); }
  size_t high_water() const { return proxy_->options().write_high_water; }

  // I/O.
  ReadEnd Feed(H2Conn* k);
  void ReadClient(H2ClientConn* c);
  void ReadUpstream(H2UpstreamConn* u);
  void Flush(H2Conn* k);
  void MarkDirty(H2Conn* k);
  void MaybeResume(H2Conn* k);
  void ScheduleFlush();
  void FlushAll();
  void Collect();
  void ProtocolError(H2Conn* k);
  void CloseClient(H2ClientConn* c);
  void FailUpstream(H2UpstreamConn* u, Outcome outcome);
  void Retire(H2UpstreamConn* u);

  // Streams.
  void StartCall(Call* x);
  // After the route: the token (when the route asks for one), then a replica, or a wait for either (parked_).
  void Advance(Call* x);
  void Park(Call* x);
  void Unpark(Call* x);
  bool TryDispatch(Call* x);
  H2UpstreamConn* UpstreamFor(const ReplicaState& r);
  H2UpstreamConn* Connect(const ReplicaState& r);
  bool Submit(Call* x, H2UpstreamConn* u);
  void ResumeUpstream(Call* x);
  void ResumeClient(Call* x);
  void Discard(Call* x);
  void DetachUpstream(Call* x, Outcome outcome);
  void AnswerDone(Call* x);
  void FailOrRetry(Call* x, bool processed);
  void Local(Call* x, int status, int grpc_status, std::string_view message);
  void SubmitAnswer(Call* x);
  void EndCall(Call* x);
  void CountTokens(Call* x, const std::vector<Header>& headers);
  Exchange AsExchange(const Call& x) const;
  static Outcome OutcomeOf(const Call& x);

  // nghttp2 callbacks; user_data is the connection.
  static ssize_t OnSend(nghttp2_session*, const uint8_t* data, size_t length, int flags, void* user_data);
  static int OnClientBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int OnClientHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                            const uint8_t* value, size_t valuelen, uint8_t flags, void* user_data);
  static int OnClientFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int OnClientData(nghttp2_session*, uint8_t flags, int32_t sid, const uint8_t* data, size_t len,
                          void* user_data);
  static int OnClientStreamClose(nghttp2_session*, int32_t sid, uint32_t error_code, void* user_data);
  static int OnClientFrameSend(nghttp2_session* session, const nghttp2_frame* frame, void* user_data);
  static ssize_t ReadAnswer(nghttp2_session* session, int32_t sid, uint8_t* buf, size_t length, uint32_t* flags,
                            nghttp2_data_source*, void* user_data);
  static int OnUpstreamBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int OnUpstreamHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                              const uint8_t* value, size_t valuelen, uint8_t flags, void* user_data);
  static int OnUpstreamFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int OnUpstreamData(nghttp2_session*, uint8_t flags, int32_t sid, const uint8_t* data, size_t len,
                            void* user_data);
  static int OnUpstreamStreamClose(nghttp2_session*, int32_t sid, uint32_t error_code, void* user_data);
  static int OnUpstreamFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user_data);
  static int OnUpstreamFrameNotSend(nghttp2_session*, const nghttp2_frame* frame, int lib_error, void* user_data);
  static ssize_t ReadRequest(nghttp2_session*, int32_t sid, uint8_t* buf, size_t length, uint32_t* flags,
                             nghttp2_data_source*, void* user_data);

  Proxy* proxy_;
  nghttp2_session_callbacks* server_callbacks_ = nullptr;
  nghttp2_session_callbacks* client_callbacks_ = nullptr;
  nghttp2_option* options_ = nullptr;
  std::vector<std::unique_ptr<H2ClientConn>> clients_;
  std::vector<std::unique_ptr<H2UpstreamConn>> upstreams_;
  std::map<std::string, H2UpstreamConn*> by_replica_;  // the connection new streams to a replica take
  std::vector<H2Conn*> dirty_;
  std::vector<Call*> parked_;  // calls waiting for a token's verification or a ready replica, oldest first
  std::vector<H2Conn*> resume_;
  bool flush_scheduled_ = false;
  bool garbage_ = false;
};

void H2ClientConn::OnEvents(uint32_t events) { core->ClientEvents(this, events); }
void H2UpstreamConn::OnEvents(uint32_t events) { core->UpstreamEvents(this, events); }

Core::Core(Proxy* proxy) : proxy_(proxy) {
  nghttp2_session_callbacks* s = nullptr;
  nghttp2_session_callbacks_new(&s);
  nghttp2_session_callbacks_set_send_callback(s, OnSend);
  nghttp2_session_callbacks_set_on_begin_headers_callback(s, OnClientBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(s, OnClientHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(s, OnClientFrameRecv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(s, OnClientData);
  nghttp2_session_callbacks_set_on_stream_close_callback(s, OnClientStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(s, OnClientFrameSend);
  server_callbacks_ = s;
  nghttp2_session_callbacks* c = nullptr;
  nghttp2_session_callbacks_new(&c);
  nghttp2_session_callbacks_set_send_callback(c, OnSend);
  nghttp2_session_callbacks_set_on_begin_headers_callback(c, OnUpstreamBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(c, OnUpstreamHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(c, OnUpstreamFrameRecv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c, OnUpstreamData);
  nghttp2_session_callbacks_set_on_stream_close_callback(c, OnUpstreamStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(c, OnUpstreamFrameSend);
  nghttp2_session_callbacks_set_on_frame_not_send_callback(c, OnUpstreamFrameNotSend);
  client_callbacks_ = c;
  nghttp2_option_new(&options_);
  // Heads up to max_head arrive (they are checked as they come); what is sent is at most that plus the
  // X-Forwarded-For the gateway adds.
  nghttp2_option_set_max_send_header_block_length(options_,
                                                  std::max<size_t>(64 * 1024, 2 * proxy_->options().max_head));
}

Core::~Core() {
  CloseAll();
  nghttp2_session_callbacks_del(server_callbacks_);
  nghttp2_session_callbacks_del(client_callbacks_);
  nghttp2_option_del(options_);
}

// ---------------------------------------------------------------------------------------------- connections

void Core::Adopt(int fd, TlsSession tls, std::string initial, std::string peer_ip) {
  if (clients_.size() >= proxy_->options().max_client_connections) {
    close(fd);
    return;
  }
  auto c = std::make_unique<H2ClientConn>();
  c->core = this;
  c->fd = fd;
  c->tls = std::move(tls);
  c->peer_ip = std::move(peer_ip);
  c->last_activity = now();
  if (nghttp2_session_server_new2(&c->session, server_callbacks_, c.get(), options_) != 0) {
    close(fd);
    return;
  }
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, proxy_->options().max_head},
  };
  nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  if (!proxy_->reactor()->Watch(fd, c.get()).ok()) {
    close(fd);
    return;
  }
  H2ClientConn* raw = c.get();
  clients_.push_back(std::move(c));
  const ssize_t rv =
      nghttp2_session_mem_recv(raw->session, reinterpret_cast<const uint8_t*>(initial.data()), initial.size());
  if (rv < 0) {
    ProtocolError(raw);
    return;
  }
  // Bytes OpenSSL decrypted and holds already bring no socket event: read them now.
  if (raw->tls) ReadClient(raw);
  MarkDirty(raw);
}

Core::ReadEnd Core::Feed(H2Conn* k) {
  static thread_local char chunk[kReadChunk];
  while (!k->paused) {
    const long n = ReadSome(k->fd, k->tls.get(), chunk, sizeof chunk);
    if (n < 0) return ReadEnd::kDrained;
    if (n == 0) return ReadEnd::kClosed;
    if (nghttp2_session_mem_recv(k->session, reinterpret_cast<const uint8_t*>(chunk), static_cast<size_t>(n)) < 0) {
      return ReadEnd::kError;
    }
    if (!k->tls && !k->hung_up && static_cast<size_t>(n) < sizeof chunk) return ReadEnd::kDrained;
  }
  return ReadEnd::kPaused;
}

void Core::ClientEvents(H2ClientConn* c, uint32_t events) {
  if (c->dead) return;
  proxy_->Touch();
  c->last_activity = now();
  // Over TLS a read may wait for the socket to take handshake bytes and a write for the peer's: try both.
  if ((events & EPOLLOUT) || (c->tls && !c->out.empty())) Flush(c);
  if (c->dead) return;
  if (HungUp(events)) c->hung_up = true;
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) || c->tls) ReadClient(c);
}

void Core::ReadClient(H2ClientConn* c) {
  if (c->dead || c->closing) return;
  switch (Feed(c)) {
    case ReadEnd::kError:
      ProtocolError(c);
      return;
    case ReadEnd::kClosed:
      CloseClient(c);
      return;
    case ReadEnd::kDrained:
    case ReadEnd::kPaused:
      break;
  }
  MarkDirty(c);
}

void Core::UpstreamEvents(H2UpstreamConn* u, uint32_t events) {
  if (u->dead) return;
  proxy_->Touch();
  if (u->connecting) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (events & (EPOLLERR | EPOLLHUP))) {
      FailUpstream(u, Outcome::kConnectFailure);
      return;
    }
    u->connecting = false;
    u->established = true;
  }
  if (HungUp(events)) u->hung_up = true;
  if (events & EPOLLOUT) Flush(u);
  if (u->dead) return;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ReadUpstream(u);
}

void Core::ReadUpstream(H2UpstreamConn* u) {
  if (u->dead || u->connecting) return;
  switch (Feed(u)) {
    case ReadEnd::kError:
      FailUpstream(u, Outcome::kServerError);
      return;
    case ReadEnd::kClosed:
      FailUpstream(u, Outcome::kConnectFailure);
      return;
    case ReadEnd::kDrained:
    case ReadEnd::kPaused:
      break;
  }
  MarkDirty(u);
}

void Core::Flush(H2Conn* k) {
  if (k->dead) return;
  if (!k->client_side && static_cast<H2UpstreamConn*>(k)->connecting) return;
  bool broken = false;
  for (;;) {
    if (!k->out.empty()) {
      if (!WriteFrom(k->fd, k->tls.get(), k->out)) {
        broken = true;
        break;
      }
      if (!k->out.empty()) break;  // EPOLLOUT resumes
    }
    if (!nghttp2_session_want_write(k->session)) break;
    if (nghttp2_session_send(k->session) != 0) {
      broken = true;
      break;
    }
    if (k->out.empty()) break;  // nothing to send now (deferred, or the peer's window is closed)
  }
  const bool done = k->out.empty() && !nghttp2_session_want_write(k->session) &&
                    (k->closing || !nghttp2_session_want_read(k->session));
  if (!broken && !done) return;
  if (k->client_side) {
    CloseClient(static_cast<H2ClientConn*>(k));
  } else {
    FailUpstream(static_cast<H2UpstreamConn*>(k), broken ? Outcome::kConnectFailure : Outcome::kServerError);
  }
}

void Core::ProtocolError(H2Conn* k) {
  // nghttp2 has queued GOAWAY for most protocol errors already; this one covers the rest (a bad preface, a flood).
  nghttp2_session_terminate_session(k->session, NGHTTP2_PROTOCOL_ERROR);
  k->closing = true;
  k->closing_since = now();
  MarkDirty(k);
}

void Core::MarkDirty(H2Conn* k) {
  if (k->dirty || k->dead) return;
  k->dirty = true;
  dirty_.push_back(k);
  ScheduleFlush();
}

void Core::MaybeResume(H2Conn* k) {
  if (k->paused && !k->dead && k->buffered <= high_water() / 2) {
    resume_.push_back(k);
    ScheduleFlush();
  }
}

void Core::ScheduleFlush() {
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  proxy_->reactor()->AfterBatch([this] {
    flush_scheduled_ = false;
    FlushAll();
  });
}

void Core::FlushAll() {
  // Connections that may read again first (what they read makes more to write), then every written connection.
  for (int round = 0; round < 8 && (!resume_.empty() || !dirty_.empty()); ++round) {
    std::vector<H2Conn*> resume;
    resume.swap(resume_);
    for (H2Conn* k : resume) {
      if (k->dead || !k->paused || k->buffered > high_water() / 2) continue;
      k->paused = false;
      if (k->client_side) {
        ReadClient(static_cast<H2ClientConn*>(k));
      } else {
        ReadUpstream(static_cast<H2UpstreamConn*>(k));
      }
    }
    std::vector<H2Conn*> dirty;
    dirty.swap(dirty_);
    for (H2Conn* k : dirty) {
      k->dirty = false;
      Flush(k);
    }
  }
  if (!resume_.empty() || !dirty_.empty()) {
    ScheduleFlush();  // the rest after the next batch of events
    return;
  }
  Collect();
}

void Core::Collect() {
  if (!garbage_) return;
  garbage_ = false;
  std::erase_if(clients_, [](const auto& c) { return c->dead; });
  std::erase_if(upstreams_, [](const auto& u) { return u->dead; });
}

void Core::CloseClient(H2ClientConn* c) {
  if (c->dead) return;
  c->dead = true;
  proxy_->reactor()->Unwatch(c->fd);
  if (c->tls) ShutdownWrites(c->fd, c->tls.get());
  close(c->fd);
  garbage_ = true;
  std::map<int32_t, std::unique_ptr<Call>> calls;
  calls.swap(c->calls);
  for (auto& [sid, x] : calls) EndCall(x.get());
  ScheduleFlush();
}

void Core::Retire(H2UpstreamConn* u) {
  u->retired = true;
  if (auto it = by_replica_.find(u->replica_id); it != by_replica_.end() && it->second == u) by_replica_.erase(it);
}

void Core::FailUpstream(H2UpstreamConn* u, Outcome outcome) {
  if (u->dead) return;
  Retire(u);
  u->dead = true;
  proxy_->reactor()->Unwatch(u->fd);
  close(u->fd);
  garbage_ = true;
  std::map<int32_t, Call*> calls;
  calls.swap(u->calls);
  bool first = true;
  for (auto& [sid, x] : calls) {
    if (x->answer_ended) {  // the whole answer came: only the rest of the request is lost, and not needed
      DetachUpstream(x, OutcomeOf(*x));
      AnswerDone(x);
      continue;
    }
    // The failure is the replica's once; the other streams it carried were not each a failure of their own.
    DetachUpstream(x, first ? outcome : Outcome::kClientError);
    first = false;
    FailOrRetry(x, u->established && x->headers_sent);
  }
  ScheduleFlush();
}

H2UpstreamConn* Core::UpstreamFor(const ReplicaState& r) {
  if (auto it = by_replica_.find(r.endpoint.id); it != by_replica_.end()) {
    H2UpstreamConn* u = it->second;
    if (!u->dead && !u->retired && u->endpoint == r.endpoint) return u;
    Retire(u);  // the replica moved, or the connection winds down
  }
  return Connect(r);
}

H2UpstreamConn* Core::Connect(const ReplicaState& r) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  SetNoDelay(fd);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(r.endpoint.port);
  bool connected = false;
  if (inet_pton(AF_INET, r.endpoint.host.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return nullptr;
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    connected = true;
  } else if (errno != EINPROGRESS) {
    close(fd);
    return nullptr;
  }
  auto u = std::make_unique<H2UpstreamConn>();
  u->core = this;
  u->fd = fd;
  u->replica_id = r.endpoint.id;
  u->endpoint = r.endpoint;
  u->connect_began = now();
  u->idle_since = now();
  u->connecting = !connected;
  u->established = connected;
  if (nghttp2_session_client_new2(&u->session, client_callbacks_, u.get(), options_) != 0) {
    close(fd);
    return nullptr;
  }
  // h2c with prior knowledge: nghttp2 sends the client magic before this SETTINGS.
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, proxy_->options().max_head},
  };
  nghttp2_submit_settings(u->session, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  if (!proxy_->reactor()->Watch(fd, u.get()).ok()) {
    close(fd);
    return nullptr;
  }
  H2UpstreamConn* raw = u.get();
  upstreams_.push_back(std::move(u));
  by_replica_[r.endpoint.id] = raw;
  MarkDirty(raw);
  return raw;
}

// ---------------------------------------------------------------------------------------------- streams

void Core::StartCall(Call* x) {
  if (const std::string* ct = FindHeader(x->request, "content-type")) {
    x->grpc = absl::StartsWith(AbslView(*ct), "application/grpc");
  }
  if (x->head_too_large) {
    Local(x, 431, kGrpcResourceExhausted,
          absl::StrCat("the request head is above ", proxy_->options().max_head, " bytes"));
    return;
  }
  if (x->authority.empty()) {
    if (const std::string* host = FindHeader(x->request, "host")) x->authority = *host;
  }
  const RouteTable& table = proxy_->table();
  const int route = MatchRoute(table, x->authority, x->path);
  if (route >= 0) x->service = proxy_->ServiceRef(table.routes[route].service);
  if (x->service == nullptr) {
    Local(x, 404, kGrpcUnimplemented, absl::StrCat("no service is routed at ", x->authority, x->path));
    return;
  }
  Service& s = *x->service;
  // Who the caller is comes from the gateway alone (Advance), never from the client.
  std::erase_if(x->request,
                [](const Header& h) { return h.name == kCallerUserHeader || h.name == kCallerTenantHeader; });
  if (!s.route.auth_tenant.empty()) {
    const std::string* field = FindHeader(x->request, "authorization");
    x->token = field ? std::string(BearerToken(*field)) : std::string();
    if (x->token.empty()) {
      Local(x, 401, kGrpcUnauthenticated,
            absl::StrCat("service ", s.route.service, " needs a gpugeek API token: authorization: Bearer ggk_..."));
      return;
    }
    if (proxy_->token_check() == nullptr) {
      Local(x, 503, kGrpcUnavailable, "this gateway cannot verify tokens");
      return;
    }
  }
  std::optional<std::string_view> sticky_value;
  if (s.route.sticky.kind == StickyKind::kHeader) {
    if (const std::string* v = FindHeader(x->request, s.route.sticky.name)) sticky_value = *v;
  }
  const auto choice = s.balancer.PickVersion(sticky_value);
  if (!choice) {
    Local(x, 503, kGrpcUnavailable, absl::StrCat("service ", s.route.service, " has no version taking traffic"));
    return;
  }
  x->version = choice->version;
  x->version_name = s.balancer.versions()[choice->version].name;
  Advance(x);
}

void Core::Advance(Call* x) {
  Service& s = *x->service;
  if (!x->token.empty()) {
    TokenVerdict v = proxy_->token_check()->Check(x->token, now());
    if (v.state == TokenVerdict::kPending) {
      if (!x->parked) {
        Park(x);
      } else if (now() - x->parked_at > kTokenCheckWait) {
        Local(x, 503, kGrpcUnavailable, "the caller's token could not be verified in time");
      }
      return;
    }
    if (v.state != TokenVerdict::kValid) {
      const bool invalid = v.state == TokenVerdict::kInvalid;
      Local(x, invalid ? 401 : 503, invalid ? kGrpcUnauthenticated : kGrpcUnavailable, v.reason);
      return;
    }
    if (!MayCall(v.caller, s.route.auth_tenant)) {  // another tenant's service reads as absent, as in the API
      Local(x, 404, kGrpcUnimplemented, "no service is routed here for this token");
      return;
    }
    std::erase_if(x->request, [](const Header& h) { return h.name == "authorization"; });
    x->request.push_back(Header{std::string(kCallerUserHeader), v.caller.user});
    x->request.push_back(Header{std::string(kCallerTenantHeader), v.caller.tenant});
    x->token.clear();
    if (x->parked) Unpark(x);
  }
  if (s.retired) {
    Local(x, 404, kGrpcUnimplemented, absl::StrCat("service ", s.route.service, " was removed from the gateway"));
    return;
  }
  if (TryDispatch(x)) {
    if (x->parked) Unpark(x);
    return;
  }
  if (x->attempts > 0) {
    Local(x, 502, kGrpcUnavailable, absl::StrCat("cannot connect to a replica of ", s.route.service));
    return;
  }
  // The activator, as on the HTTP/1.1 side: the call waits for a ready replica, counted in the service's queue (the
  // autoscaler's signal to scale from zero), at most activator_timeout.
  if (!x->parked) {
    if (static_cast<size_t>(s.stats->queued.load(std::memory_order_relaxed)) >= s.route.activator_queue) {
      Local(x, 503, kGrpcUnavailable,
            absl::StrCat("no replica of ", s.route.service, " is ready and the queue is full"));
      return;
    }
    Park(x);
  }
  if (!x->queued) {
    x->queued = true;
    x->parked_at = now();
    s.stats->queued.fetch_add(1, std::memory_order_relaxed);
  } else if (now() - x->parked_at > s.route.activator_timeout) {
    Local(x, 503, kGrpcUnavailable,
          absl::StrCat("no replica of ", s.route.service, " became ready within the activator's timeout"));
  }
}

void Core::Park(Call* x) {
  x->parked = true;
  x->parked_at = now();
  parked_.push_back(x);
}

void Core::Unpark(Call* x) {
  if (!x->parked) return;
  x->parked = false;
  std::erase(parked_, x);
  if (x->queued) {
    x->queued = false;
    x->service->stats->queued.fetch_sub(1, std::memory_order_relaxed);
  }
}

bool Core::TryDispatch(Call* x) {
  Service& s = *x->service;
  if (s.retired) return false;
  // Versions may have moved since the stream chose one: find it again by name.
  x->version = s.balancer.VersionIndex(x->version_name);
  if (x->version < 0) {
    const auto choice = s.balancer.PickVersion(std::nullopt);
    if (!choice) return false;
    x->version = choice->version;
    x->version_name = s.balancer.versions()[choice->version].name;
  }
  for (;;) {
    ReplicaState* r = s.balancer.PickReplica(x->version, now(), x->tried);
    if (r == nullptr) return false;
    H2UpstreamConn* u = UpstreamFor(*r);
    if (u && !Submit(x, u)) {
      Retire(u);  // out of stream ids, say: a fresh connection takes it
      u = UpstreamFor(*r);
      if (u && !Submit(x, u)) {
        Retire(u);
        u = nullptr;
      }
    }
    if (u == nullptr) {
      s.balancer.Begin(r);
      s.balancer.Finish(r, Outcome::kConnectFailure, now());
      x->tried.push_back(r);
      ++x->attempts;
      if (x->attempts >= 2 || s.route.retries == 0) return false;
      continue;
    }
    s.balancer.Begin(r);
    if (x->attempts > 0 && s.retries) s.retries->Inc();
    ++x->attempts;
    x->tried.push_back(r);
    x->replica = r;
    s.stats->in_flight.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
}

bool Core::Submit(Call* x, H2UpstreamConn* u) {
  std::vector<nghttp2_nv> nv;
  nv.reserve(x->request.size() + 5);
  nv.push_back(Nv(":method", x->method));
  nv.push_back(Nv(":scheme", "http"));
  nv.push_back(Nv(":authority", x->authority));
  nv.push_back(Nv(":path", x->path));
  const std::string* xff = nullptr;
  for (const Header& h : x->request) {
    if (HopByHop(h.name, h.value)) continue;
    if (h.name == "x-forwarded-for") {
      xff = &h.value;
      continue;
    }
    nv.push_back(Nv(h.name, h.value));
  }
  const std::string forwarded = xff ? absl::StrCat(*xff, ", ", x->client->peer_ip) : x->client->peer_ip;
  nv.push_back(Nv("x-forwarded-for", forwarded));
  nghttp2_data_provider provider{};
  provider.read_callback = ReadRequest;
  const bool no_body = x->request_ended && x->body.empty();
  const int32_t sid =
      nghttp2_submit_request(u->session, nullptr, nv.data(), nv.size(), no_body ? nullptr : &provider, nullptr);
  if (sid < 0) return false;
  u->calls[sid] = x;
  x->upstream = u;
  x->upstream_sid = sid;
  x->upstream_deferred = false;
  x->headers_sent = false;
  x->sent_at = now();
  MarkDirty(u);
  return true;
}

void Core::ResumeUpstream(Call* x) {
  if (x->upstream == nullptr || !x->upstream_deferred) return;
  x->upstream_deferred = false;
  nghttp2_session_resume_data(x->upstream->session, x->upstream_sid);
  MarkDirty(x->upstream);
}

void Core::ResumeClient(Call* x) {
  if (!x->client_deferred) return;
  x->client_deferred = false;
  nghttp2_session_resume_data(x->client->session, x->sid);
  MarkDirty(x->client);
}

void Core::Discard(Call* x) {
  x->discard_request = true;
  H2ClientConn* c = x->client;
  c->buffered -= x->PendingRequest();
  x->body.clear();
  x->body.shrink_to_fit();
  x->body_sent = 0;
  x->body_kept = false;
  MaybeResume(c);
}

void Core::DetachUpstream(Call* x, Outcome outcome) {
  H2UpstreamConn* u = x->upstream;
  if (u == nullptr) return;
  u->calls.erase(x->upstream_sid);
  if (u->calls.empty()) u->idle_since = now();
  u->buffered -= x->PendingAnswer();
  MaybeResume(u);
  x->upstream = nullptr;
  x->upstream_sid = -1;
  x->upstream_deferred = false;
  Service& s = *x->service;
  s.balancer.Finish(x->replica, outcome, now());
  s.stats->in_flight.fetch_sub(1, std::memory_order_relaxed);
  x->replica = nullptr;
}

void Core::AnswerDone(Call* x) {
  if (x->request_ended) return;
  // The replica's stream closed with its whole answer while the client still sends: the rest of the request has
  // nowhere to go. Once the answer is out the client is told to stop (RST_STREAM NO_ERROR, RFC 9113 8.1).
  Discard(x);
  if (x->end_sent) {
    nghttp2_submit_rst_stream(x->client->session, NGHTTP2_FLAG_NONE, x->sid, NGHTTP2_NO_ERROR);
    MarkDirty(x->client);
  }
}

Outcome Core::OutcomeOf(const Call& x) {
  if (x.status >= 500) return Outcome::kServerError;
  if (x.status >= 400) return Outcome::kClientError;
  if (const std::string* g = FindHeader(x.trailers.empty() ? x.answer_head : x.trailers, "grpc-status")) {
    int code = 0;
    if (!absl::SimpleAtoi(*g, &code)) return Outcome::kServerError;
    if (code == kGrpcInternal || code == kGrpcUnavailable || code == kGrpcDataLoss) return Outcome::kServerError;
    if (code != 0) return Outcome::kClientError;  // the caller's problem, or the application's: not the replica's
  }
  return Outcome::kSuccess;
}

void Core::FailOrRetry(Call* x, bool processed) {
  H2ClientConn* c = x->client;
  // Once more, on another replica, only when the replica cannot have run it (never sent, refused, or under a
  // GOAWAY's last stream id): a gRPC call is a POST, and may not be idempotent. Every request byte must still be here.
  if (!processed && !x->answered && !x->response_submitted && x->body_kept && x->attempts < 2 &&
      x->service->route.retries > 0) {
    c->buffered += x->body_sent;
    x->body_sent = 0;
    if (c->buffered > high_water()) c->paused = true;
    if (TryDispatch(x)) return;
  }
  x->status = 502;
  const uint32_t code = processed || x->response_submitted ? NGHTTP2_INTERNAL_ERROR : NGHTTP2_REFUSED_STREAM;
  nghttp2_submit_rst_stream(c->session, NGHTTP2_FLAG_NONE, x->sid, code);
  Discard(x);
  MarkDirty(c);
}

void Core::Local(Call* x, int status, int grpc_status, std::string_view message) {
  Unpark(x);
  H2ClientConn* c = x->client;
  x->status = status;
  x->response_submitted = true;
  Discard(x);
  const std::string status_text = absl::StrCat(status);
  std::vector<nghttp2_nv> nv;
  nv.push_back(Nv(":status", status_text));
  if (x->grpc) {
    // Trailers-only (gRPC's PROTOCOL-HTTP2.md): grpc-status wins over the HTTP status at the client.
    const std::string code = absl::StrCat(grpc_status);
    const std::string text = PercentEncode(message);
    nv.push_back(Nv("content-type", "application/grpc"));
    nv.push_back(Nv("grpc-status", code));
    nv.push_back(Nv("grpc-message", text));
    nghttp2_submit_response(c->session, x->sid, nv.data(), nv.size(), nullptr);
  } else {
    x->answer = absl::StrCat(AbslView(message), "\n");
    x->answer_sent = 0;
    x->answer_ended = true;
    const std::string length = absl::StrCat(x->answer.size());
    nv.push_back(Nv("content-type", "text/plain; charset=utf-8"));
    nv.push_back(Nv("content-length", length));
    nghttp2_data_provider provider{};
    provider.read_callback = ReadAnswer;
    nghttp2_submit_response(c->session, x->sid, nv.data(), nv.size(), &provider);
  }
  MarkDirty(c);
}

void Core::SubmitAnswer(Call* x) {
  H2ClientConn* c = x->client;
  const std::string status_text = absl::StrCat(x->status);
  std::vector<nghttp2_nv> nv;
  nv.reserve(x->answer_head.size() + 1);
  nv.push_back(Nv(":status", status_text));
  for (const Header& h : x->answer_head) {
    if (!HopByHop(h.name, h.value)) nv.push_back(Nv(h.name, h.value));
  }
  nghttp2_data_provider provider{};
  provider.read_callback = ReadAnswer;
  const bool headers_only = x->answer_ended && x->PendingAnswer() == 0 && x->trailers.empty();
  x->response_submitted = true;
  nghttp2_submit_response(c->session, x->sid, nv.data(), nv.size(), headers_only ? nullptr : &provider);
  MarkDirty(c);
}

void Core::EndCall(Call* x) {
  Unpark(x);
  H2ClientConn* c = x->client;
  c->buffered -= x->PendingRequest();
  x->body_sent = x->body.size();
  if (H2UpstreamConn* u = x->upstream) {
    // The client is gone before the replica finished: cancel the replica's stream.
    if (!u->dead) {
      nghttp2_submit_rst_stream(u->session, NGHTTP2_FLAG_NONE, x->upstream_sid, NGHTTP2_CANCEL);
      MarkDirty(u);
    }
    DetachUpstream(x, Outcome::kClientError);
  }
  if (x->service) {
    Exchange e = AsExchange(*x);
    proxy_->Record(e);
  }
  MaybeResume(c);
}

Exchange Core::AsExchange(const Call& x) const {
  Exchange e;
  e.service = x.service;
  e.version = x.version;
  e.version_name = x.version_name;
  e.method = x.method;
  e.status = x.status;
  e.began = x.began;
  e.attempts = x.attempts;
  return e;
}

void Core::CountTokens(Call* x, const std::vector<Header>& headers) {
  const std::string* tokens = FindHeader(headers, "gpugeek-tokens");
  uint64_t t = 0;
  if (tokens == nullptr || !x->service || !absl::SimpleAtoi(*tokens, &t)) return;
  if (VersionMetrics* m = proxy_->MetricsFor(AsExchange(*x)); m && m->tokens) m->tokens->Inc(static_cast<double>(t));
}

// ---------------------------------------------------------------------------------------------- nghttp2: both

ssize_t Core::OnSend(nghttp2_session*, const uint8_t* data, size_t length, int, void* user_data) {
  auto* k = static_cast<H2Conn*>(user_data);
  // Above the high water nghttp2 keeps the frame (and makes no more) until the socket takes what is queued.
  if (k->out.size() >= k->core->high_water()) return NGHTTP2_ERR_WOULDBLOCK;
  k->out.Append(std::string_view(reinterpret_cast<const char*>(data), length));
  return static_cast<ssize_t>(length);
}

// ---------------------------------------------------------------------------------------------- nghttp2: clients

int Core::OnClientBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  auto* c = static_cast<H2ClientConn*>(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  auto x = std::make_unique<Call>();
  x->client = c;
  x->sid = frame->hd.stream_id;
  x->began = c->core->now();
  c->calls[x->sid] = std::move(x);
  return 0;
}

int Core::OnClientHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                         const uint8_t* value, size_t valuelen, uint8_t, void* user_data) {
  auto* c = static_cast<H2ClientConn*>(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;  // trailers
  Call* x = c->Find(frame->hd.stream_id);
  if (x == nullptr || x->head_too_large) return 0;
  x->head_bytes += namelen + valuelen + 32;
  if (x->head_bytes > c->core->proxy_->options().max_head) {
    x->head_too_large = true;
    x->request.clear();
    return 0;
  }
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (n.empty() || n[0] != ':') {
    x->request.push_back(Header{std::string(n), std::string(v)});
  } else if (n == ":method") {
    x->method = v;
  } else if (n == ":scheme") {
    x->scheme = v;
  } else if (n == ":authority") {
    x->authority = v;
  } else if (n == ":path") {
    x->path = v;
  }
  return 0;
}

int Core::OnClientFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  auto* c = static_cast<H2ClientConn*>(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  Call* x = c->Find(frame->hd.stream_id);
  if (x == nullptr) return 0;
  const bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (end) x->request_ended = true;
  if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
    c->core->StartCall(x);
  } else if (end) {
    c->core->ResumeUpstream(x);
  }
  return 0;
}

int Core::OnClientData(nghttp2_session*, uint8_t, int32_t sid, const uint8_t* data, size_t len, void* user_data) {
  auto* c = static_cast<H2ClientConn*>(user_data);
  Call* x = c->Find(sid);
  if (x == nullptr || x->discard_request) return 0;
  Core* core = c->core;
  x->body.append(reinterpret_cast<const char*>(data), len);
  c->buffered += len;
  if (x->body_kept && x->body.size() > core->proxy_->options().retry_buffer) x->body_kept = false;
  core->ResumeUpstream(x);
  if (c->buffered > core->high_water()) c->paused = true;
  return 0;
}

int Core::OnClientStreamClose(nghttp2_session*, int32_t sid, uint32_t, void* user_data) {
  auto* c = static_cast<H2ClientConn*>(user_data);
  auto it = c->calls.find(sid);
  if (it == c->calls.end()) return 0;
  std::unique_ptr<Call> x = std::move(it->second);
  c->calls.erase(it);
  c->core->EndCall(x.get());
  return 0;
}

int Core::OnClientFrameSend(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
  auto* c = static_cast<H2ClientConn*>(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
  Call* x = c->Find(frame->hd.stream_id);
  if (x == nullptr) return 0;
  x->end_sent = true;
  // The answer is whole while the client still sends and no replica stream takes the rest: tell it to stop
  // (RFC 9113 8.1). While the replica's stream is open the request goes on to it.
  if (x->request_ended || x->upstream != nullptr) return 0;
  c->core->Discard(x);
  nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, x->sid, NGHTTP2_NO_ERROR);
  return 0;
}

ssize_t Core::ReadAnswer(nghttp2_session* session, int32_t sid, uint8_t* buf, size_t length, uint32_t* flags,
                         nghttp2_data_source*, void* user_data) {
  auto* c = static_cast<H2ClientConn*>(user_data);
  Call* x = c->Find(sid);
  if (x == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  const size_t n = std::min(length, x->PendingAnswer());
  if (n > 0) {
    std::memcpy(buf, x->answer.data() + x->answer_sent, n);
    x->answer_sent += n;
    if (x->answer_sent == x->answer.size()) {
      x->answer.clear();
      x->answer_sent = 0;
    } else if (x->answer_sent > kCompactAbove && x->answer_sent * 2 > x->answer.size()) {
      x->answer.erase(0, x->answer_sent);
      x->answer_sent = 0;
    }
    if (H2UpstreamConn* u = x->upstream) {
      u->buffered -= n;
      c->core->MaybeResume(u);
    }
  }
  if (x->PendingAnswer() == 0 && x->answer_ended) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    if (!x->trailers.empty()) {
      *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
      std::vector<nghttp2_nv> nv;
      nv.reserve(x->trailers.size());
      for (const Header& h : x->trailers) {
        if (!HopByHop(h.name, h.value)) nv.push_back(Nv(h.name, h.value));
      }
      nghttp2_submit_trailer(session, sid, nv.data(), nv.size());
    }
    return static_cast<ssize_t>(n);
  }
  if (n == 0) {
    x->client_deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return static_cast<ssize_t>(n);
}

// ---------------------------------------------------------------------------------------------- nghttp2: replicas

int Core::OnUpstreamBeginHeaders(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  auto* u = static_cast<H2UpstreamConn*>(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  if (Call* x = u->Find(frame->hd.stream_id)) {
    x->head_tmp.clear();
    x->head_status = 0;
    x->answer_head_bytes = 0;
  }
  return 0;
}

int Core::OnUpstreamHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                           const uint8_t* value, size_t valuelen, uint8_t, void* user_data) {
  auto* u = static_cast<H2UpstreamConn*>(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  Call* x = u->Find(frame->hd.stream_id);
  if (x == nullptr) return 0;
  x->answer_head_bytes += namelen + valuelen + 32;
  if (x->answer_head_bytes > u->core->proxy_->options().max_head) {
    x->answered = true;                            // it did answer (too much): not retried
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets the replica's stream: the client's is reset too
  }
  const std::string_view n(reinterpret_cast<const char*>(name), namelen);
  const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
  if (n == ":status") {
    if (!absl::SimpleAtoi(AbslView(v), &x->head_status)) x->head_status = 502;
  } else if (n.empty() || n[0] != ':') {
    x->head_tmp.push_back(Header{std::string(n), std::string(v)});
  }
  return 0;
}

int Core::OnUpstreamFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  auto* u = static_cast<H2UpstreamConn*>(user_data);
  Core* core = u->core;
  if (frame->hd.type == NGHTTP2_GOAWAY) {
    core->Retire(u);  // streams above its last-stream-id close REFUSED_STREAM (and go elsewhere)
    return 0;
  }
  if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
  Call* x = u->Find(frame->hd.stream_id);
  if (x == nullptr) return 0;
  const bool end = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  if (frame->hd.type == NGHTTP2_HEADERS) {
    if (x->head_status != 0) {
      if (x->head_status < 200) {  // interim (100 Continue, 103): not relayed
        x->head_tmp.clear();
        return 0;
      }
      x->answered = true;
      x->status = x->head_status;
      x->answer_head = std::move(x->head_tmp);
      x->head_tmp.clear();
      if (end) x->answer_ended = true;
      core->CountTokens(x, x->answer_head);
      core->SubmitAnswer(x);
      return 0;
    }
    x->trailers = std::move(x->head_tmp);
    x->head_tmp.clear();
    core->CountTokens(x, x->trailers);
  }
  if (end) {
    x->answer_ended = true;
    core->ResumeClient(x);
  }
  return 0;
}

int Core::OnUpstreamData(nghttp2_session*, uint8_t, int32_t sid, const uint8_t* data, size_t len, void* user_data) {
  auto* u = static_cast<H2UpstreamConn*>(user_data);
  Call* x = u->Find(sid);
  if (x == nullptr) return 0;
  Core* core = u->core;
  x->answer.append(reinterpret_cast<const char*>(data), len);
  u->buffered += len;
  core->ResumeClient(x);
  if (u->buffered > core->high_water()) u->paused = true;
  return 0;
}

int Core::OnUpstreamStreamClose(nghttp2_session*, int32_t sid, uint32_t error_code, void* user_data) {
  auto* u = static_cast<H2UpstreamConn*>(user_data);
  Call* x = u->Find(sid);
  if (x == nullptr) return 0;
  Core* core = u->core;
  if (x->answer_ended) {
    core->DetachUpstream(x, OutcomeOf(*x));
    core->AnswerDone(x);
    return 0;
  }
  // Reset before the answer ended. REFUSED_STREAM (or a GOAWAY below it) says the replica did not process it.
  const bool refused = error_code == NGHTTP2_REFUSED_STREAM || !x->headers_sent;
  core->DetachUpstream(x, refused ? Outcome::kClientError : Outcome::kServerError);
  core->FailOrRetry(x, !refused);
  return 0;
}

int Core::OnUpstreamFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
  auto* u = static_cast<H2UpstreamConn*>(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  if (Call* x = u->Find(frame->hd.stream_id)) {
    x->headers_sent = true;
    x->sent_at = u->core->now();
  }
  return 0;
}

int Core::OnUpstreamFrameNotSend(nghttp2_session*, const nghttp2_frame* frame, int, void* user_data) {
  auto* u = static_cast<H2UpstreamConn*>(user_data);
  if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  Call* x = u->Find(frame->hd.stream_id);
  if (x == nullptr) return 0;
  // The request never left (the connection is going away): another connection or replica may take it.
  Core* core = u->core;
  core->Retire(u);
  core->DetachUpstream(x, Outcome::kClientError);
  core->FailOrRetry(x, false);
  return 0;
}

ssize_t Core::ReadRequest(nghttp2_session*, int32_t sid, uint8_t* buf, size_t length, uint32_t* flags,
                          nghttp2_data_source*, void* user_data) {
  auto* u = static_cast<H2UpstreamConn*>(user_data);
  Call* x = u->Find(sid);
  if (x == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  const size_t n = std::min(length, x->PendingRequest());
  if (n > 0) {
    std::memcpy(buf, x->body.data() + x->body_sent, n);
    x->body_sent += n;
    if (!x->body_kept) {
      if (x->body_sent == x->body.size()) {
        x->body.clear();
        x->body_sent = 0;
      } else if (x->body_sent > kCompactAbove && x->body_sent * 2 > x->body.size()) {
        x->body.erase(0, x->body_sent);
        x->body_sent = 0;
      }
    }
    x->client->buffered -= n;
    u->core->MaybeResume(x->client);
  }
  if (x->PendingRequest() == 0 && x->request_ended) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }
  if (n == 0) {
    x->upstream_deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return static_cast<ssize_t>(n);
}

// ---------------------------------------------------------------------------------------------- time

void Core::Tick() {
  const MonoTime t = now();
  const GatewayOptions& o = proxy_->options();
  // Waiting calls: a verified token, a ready replica, or a deadline passed (a copy: Advance unparks).
  const std::vector<Call*> parked = parked_;
  for (Call* x : parked) {
    if (x->parked) Advance(x);
  }
  for (size_t i = 0; i < clients_.size(); ++i) {
    H2ClientConn* c = clients_[i].get();
    if (c->dead) continue;
    if (c->closing) {
      if (t - c->closing_since > kCloseGrace) CloseClient(c);
      continue;
    }
    if (c->calls.empty() && c->out.empty() && t - c->last_activity > o.idle_timeout) {
      nghttp2_session_terminate_session(c->session, NGHTTP2_NO_ERROR);
      c->closing = true;
      c->closing_since = t;
      MarkDirty(c);
    }
  }
  for (size_t i = 0; i < upstreams_.size(); ++i) {
    H2UpstreamConn* u = upstreams_[i].get();
    if (u->dead) continue;
    if (u->connecting) {
      if (t - u->connect_began > o.connect_timeout) FailUpstream(u, Outcome::kConnectFailure);
      continue;
    }
    std::vector<Call*> late;
    for (const auto& [sid, x] : u->calls) {
      if (!x->answered && x->headers_sent && t - x->sent_at > o.upstream_timeout) late.push_back(x);
    }
    for (Call* x : late) {
      nghttp2_submit_rst_stream(u->session, NGHTTP2_FLAG_NONE, x->upstream_sid, NGHTTP2_CANCEL);
      DetachUpstream(x, Outcome::kServerError);
      Local(x, 504, kGrpcDeadlineExceeded,
            absl::StrCat("replica ", u->replica_id, " did not answer within the upstream timeout"));
    }
    if (!late.empty()) MarkDirty(u);
    if (u->calls.empty() && (u->retired || t - u->idle_since > o.upstream_idle_timeout)) {
      FailUpstream(u, Outcome::kSuccess);
    }
  }
  ScheduleFlush();
}

void Core::CloseAll() {
  for (auto& c : clients_) {
    if (c->dead) continue;
    c->dead = true;
    proxy_->reactor()->Unwatch(c->fd);
    close(c->fd);
  }
  for (auto& u : upstreams_) {
    if (u->dead) continue;
    u->dead = true;
    proxy_->reactor()->Unwatch(u->fd);
    close(u->fd);
  }
  parked_.clear();
  // Upstream connections point at calls the client connections own: they go first.
  by_replica_.clear();
  dirty_.clear();
  resume_.clear();
  upstreams_.clear();
  clients_.clear();
}

}  // namespace

struct H2Proxy::Impl {
  explicit Impl(Proxy* proxy) : core(proxy) {}
  Core core;
};

H2Proxy::H2Proxy(Proxy* proxy) : impl_(std::make_unique<Impl>(proxy)) {}
H2Proxy::~H2Proxy() = default;

void H2Proxy::Adopt(int fd, TlsSession tls, std::string initial, std::string peer_ip) {
  impl_->core.Adopt(fd, std::move(tls), std::move(initial), std::move(peer_ip));
}
void H2Proxy::Tick() { impl_->core.Tick(); }
void H2Proxy::CloseAll() { impl_->core.CloseAll(); }

}  // namespace gpugeek::gateway::detail
