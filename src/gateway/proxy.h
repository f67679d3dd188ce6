#pragma once
// The gateway's connections and exchanges (internal to gateway/): a client connection reads requests and writes
// answers; an upstream connection carries exchanges to one replica and frames their answers back, in order; the
// Proxy owns both, the services' balancers and activator queues, and flushes every written connection once per
// event batch. Everything here runs on the reactor's thread.

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "gateway/balancer.h"
#include "gateway/buffer.h"
#include "gateway/gateway.h"
#include "gateway/http1.h"
#include "gateway/reactor.h"
#include "gateway/route_table.h"
#include "metrics/registry.h"

namespace gpugeek::gateway::detail {

class Proxy;
class H2Proxy;
struct ClientConn;
struct UpstreamConn;

// Counters shared with other threads (Gateway::Load).
struct ServiceStats {
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> queued{0};
  std::atomic<uint64_t> requests{0};
  std::mutex mu;                                      // guards the maps (uncontended: the loop, and Load())
  std::map<std::string, uint64_t> by_version;         // requests answered per version
  std::map<std::string, uint64_t> tokens_by_version;  // tokens the replicas reported (Gpugeek-Tokens)
};

struct VersionMetrics {
  metrics::Counter* by_class[6] = {};  // 1xx..5xx by index 1..5; [0] other
  metrics::Histogram* duration = nullptr;
  metrics::Counter* tokens = nullptr;
};

struct Exchange;

struct Service {
  ServiceRoute route;
  Balancer balancer;
  std::deque<std::unique_ptr<Exchange>> activator;  // waiting for a ready replica, oldest first
  std::shared_ptr<ServiceStats> stats;
  std::vector<VersionMetrics> version_metrics;  // by version index
  metrics::Counter* retries = nullptr;
  bool retired = false;  // no longer in the route table; kept while exchanges refer to it
  explicit Service(uint64_t seed, const OutlierPolicy& policy) : balancer(seed, policy) {}
};

// One request and its answer.
struct Exchange {
  ClientConn* client = nullptr;  // null once the client went away (the answer is then read and dropped)
  std::shared_ptr<Service> service;
  int version = -1;
  ReplicaState* replica = nullptr;
  UpstreamConn* upstream = nullptr;
  std::string method;
  bool head_request = false;
  bool upgrade = false;
  bool has_body = false;
  bool pipelinable = false;       // idempotent, no body, not an upgrade
  bool request_complete = false;  // every request byte is in the upstream's output
  bool retryable = false;         // idempotent and every request byte is kept in `request`
  std::string request;            // the head as sent upstream, and the body while it fits retry_buffer
  uint64_t body_sent = 0;
  int attempts = 0;
  std::vector<const ReplicaState*> tried;
  bool response_started = false;  // bytes of the answer went to the client
  // A retryable answer of known length that fits retry_buffer is kept here whole, head and body, and goes to the
  // client only once its last byte came: a replica that dies mid-answer is then retried like one that never
  // answered (nginx retries only before the head; proxy_next_upstream). Empty for every other answer.
  std::string held;
  int status = 0;
  std::string version_name;
  std::string set_cookie;  // a version to pin with the sticky cookie
  MonoTime began{};        // the request head parsed
  MonoTime sent_at{};      // dispatched to the current upstream
  // The route asks for tokens (ServiceRoute::auth_tenant) and this one is being verified (Proxy::auth_wait_).
  bool awaiting_auth = false;
  std::string token;  // the caller's bearer token until it is verified
};

struct ClientConn final : IoHandler {
  Proxy* proxy = nullptr;
  int fd = -1;
  TlsSession tls;  // with GatewayOptions::tls: reads and writes go through it
  MonoTime accepted_at{};
  Buffer in, out;
  RequestFramer framer;
  Exchange* active = nullptr;  // the request being answered (one at a time; pipelined ones wait in `in`)
  bool reading_body = false;   // the active request's body still comes in
  bool keep_alive = true;      // the active request allows another after it
  bool close_after = false;    // close once `out` is written
  bool peer_closed = false;
  bool hung_up = false;       // an event said the peer shut its side: reads go on to its end (ReadInto)
  bool read_blocked = false;  // `in` is full: read again once it is consumed
  bool dirty = false;
  bool dead = false;
  bool http10 = false;  // the active (or last) request was HTTP/1.0: no chunked answers, keep-alive said explicitly
  // The gateway stopped reading a request it answered (an error, or an answer before the body ended): once the
  // answer is out the connection closes lingering (Proxy::StartLinger), so the unread bytes don't reset it.
  bool linger = false;
  bool lingering = false;  // writes shut down; reads discarded until EOF, linger_until or linger_budget
  MonoTime linger_until{};
  size_t linger_budget = 0;        // bytes still to discard
  std::string peer_ip;             // for X-Forwarded-For
  UpstreamConn* tunnel = nullptr;  // upgraded: bytes go straight to this upstream connection
  MonoTime head_began{};           // first byte of a head not yet parsed
  bool head_started = false;       // the framer took bytes of that head (so it is not an HTTP/2 preface)
  MonoTime last_activity{};
  MonoTime write_stalled_since{};  // `out` pending and the socket full since then
  explicit ClientConn(const FramingLimits& limits) : framer(limits) {}
  void OnEvents(uint32_t events) override;
};

struct UpstreamConn final : IoHandler {
  Proxy* proxy = nullptr;
  int fd = -1;
  std::string replica_id;
  ReplicaEndpoint endpoint;
  Buffer in, out;
  ResponseFramer framer;
  std::deque<std::unique_ptr<Exchange>> fifo;  // sent, answers expected in this order
  int not_pipelinable = 0;                     // exchanges in `fifo` that may not have others behind them
  bool connecting = true;
  bool dirty = false;
  bool dead = false;
  bool read_blocked = false;  // a client's output is full: resume when it drains
  bool peer_closed = false;
  bool hung_up = false;          // an event said the replica shut its side: reads go on to its end (ReadInto)
  bool closing = false;          // the replica said Connection: close: no new exchanges
  ClientConn* tunnel = nullptr;  // upgraded
  MonoTime connect_began{};
  MonoTime idle_since{};
  explicit UpstreamConn(const FramingLimits& limits) : framer(limits) {}
  void OnEvents(uint32_t events) override;
  bool more_to_read = false;  // a read stopped at the buffer limit with bytes left in the socket
  MonoTime last_progress{};   // the last byte read
  // Free for another request: nothing in flight and no stray byte left (a replica that sent more than its answers
  // said is never trusted with another client's request).
  bool Idle() const { return fifo.empty() && in.empty() && !dead && !closing && tunnel == nullptr; }
};

class Proxy final : public IoHandler {
 public:
  // `token_check` (may be null: no route asks for tokens) is borrowed.
  Proxy(GatewayOptions options, Reactor* reactor, TokenCheck* token_check);
  ~Proxy() override;

  absl::Status Listen();
  uint16_t port() const { return port_; }
  void OnEvents(uint32_t events) override;  // the listener

  // Routes (any thread): stored, applied by Tick().
  void StageRoutes(RouteTable routes);
  std::map<std::string, ServiceLoad> Load() const;
  void Tick();
  void CloseAll();

  // Client side.
  void ClientRead(ClientConn* c);
  void ClientProcess(ClientConn* c);
  void ClientFlush(ClientConn* c);
  void CloseClient(ClientConn* c);
  // Lingering close (RFC 9112 9.6; nginx's lingering_close): the answer is out; shuts writes down and discards what
  // the client still sends, for at most kLingerTime and kLingerBytes, before closing. Closing a socket with unread
  // bytes sends a reset, which may destroy the answer before the client reads it.
  void StartLinger(ClientConn* c);
  void LingerRead(ClientConn* c);
  // `extra`: more header fields, each ending in CRLF.
  void Respond(ClientConn* c, int status, std::string_view reason, std::string_view body, bool retry_after = false,
               std::string_view extra = {});

  // Upstream side.
  void UpstreamEvents(UpstreamConn* u, uint32_t events);
  void UpstreamProcess(UpstreamConn* u);
  void UpstreamFlush(UpstreamConn* u);
  // The connection failed (`outcome`): its exchanges are retried or answered with `status`.
  // `replica_closed`: the replica ended the connection after an answer (Connection: close, HTTP/1.0); the requests
  // behind it were never taken, so they go again without counting as an attempt on that replica.
  void FailUpstream(UpstreamConn* u, Outcome outcome, int status, std::string_view why, bool replica_closed = false);

  void MarkDirty(ClientConn* c);
  void MarkDirty(UpstreamConn* u);

  // For the HTTP/2 side (h2_proxy.h): what it routes by and where it registers its sockets.
  const RouteTable& table() const { return table_; }
  Service* FindService(const std::string& name) {
    auto it = services_.find(name);
    return it == services_.end() ? nullptr : it->second.get();
  }
  std::shared_ptr<Service> ServiceRef(const std::string& name) {
    auto it = services_.find(name);
    return it == services_.end() ? nullptr : it->second;
  }
  Reactor* reactor() const { return reactor_; }
  TokenCheck* token_check() const { return token_check_; }
  const GatewayOptions& options() const { return options_; }
  void Record(Exchange& x);
  VersionMetrics* MetricsFor(const Exchange& x);
  MonoTime now() const { return now_; }
  void Touch();  // now_ = the monotonic clock

 private:
  void ApplyRoutes();
  void StartExchange(ClientConn* c);
  // Sends `x` to a replica of its version, or queues it in the activator, or answers 503.
  void Dispatch(std::unique_ptr<Exchange> x);
  UpstreamConn* AcquireUpstream(ReplicaState* r, const Exchange& x, const Service& s, bool* local);
  // nullptr with `*local` true when this process is out of descriptors (not the replica's fault).
  UpstreamConn* Connect(const ReplicaState& r, bool* local);
  void CountTokens(const Exchange& x, const MessageHead& h);  // the answer's gpugeek-tokens into the metrics
  // Exchanges queued behind the head of a connection whose head is stalled: sent again on other connections.
  void Unpipeline(UpstreamConn* u);
  void FinishExchange(UpstreamConn* u, bool keep_upstream);
  void ForwardBody(ClientConn* c);
  void StartTunnel(UpstreamConn* u, ClientConn* c);
  void ReleaseUpstream(UpstreamConn* u);
  void CloseUpstream(UpstreamConn* u);
  void Abandon(Exchange* x);
  void FailExchange(std::unique_ptr<Exchange> x, int status, std::string_view why);
  void DrainActivators();
  // Exchanges whose caller's token is being verified: on to Dispatch once it is, else answered (401, 404, 503).
  void ResumeAuthWaits();
  struct AuthStep {
    enum Kind { kGo, kWait, kRefuse } kind = kGo;
    int status = 0;  // kRefuse: 401, 404 or 503
    std::string why;
  };
  // What `x`'s caller may do now; with kGo the head `x` sends names the caller.
  AuthStep Authorize(Exchange& x);
  void FlushAll();
  void ScheduleFlush();
  void UpstreamRead(UpstreamConn* u);
  // `http10`: the client speaks HTTP/1.0: a chunked body goes un-chunked (no length, then close), and a connection
  // kept alive says so.
  std::string ResponseHead(const Exchange& x, const MessageHead& h, bool close, bool http10);
  std::vector<ClientConn*> resume_;              // clients whose buffered requests can go on
  std::vector<UpstreamConn*> resume_upstreams_;  // upstreams to read again (their client went away)
  void Collect();
  // A client connection that opened with the HTTP/2 preface (h2c with prior knowledge, as gRPC clients do): its
  // socket and the bytes read so far go to the HTTP/2 side.
  void HandOffH2(ClientConn* c);
  std::unique_ptr<H2Proxy> h2_;

  GatewayOptions options_;
  Reactor* reactor_;
  TokenCheck* token_check_;
  std::deque<std::unique_ptr<Exchange>> auth_wait_;
  int listen_fd_ = -1;
  int spare_fd_ = -1;  // closed to accept-and-close a client when out of descriptors (EMFILE)
  uint16_t port_ = 0;
  FramingLimits request_limits_, response_limits_;
  MonoTime now_{};

  std::map<std::string, std::shared_ptr<Service>> services_;
  RouteTable table_;                                         // as applied
  std::map<std::string, std::vector<UpstreamConn*>> pools_;  // by replica id
  std::vector<std::unique_ptr<ClientConn>> clients_;
  std::vector<std::unique_ptr<UpstreamConn>> upstreams_;
  std::vector<ClientConn*> dirty_clients_;
  std::vector<UpstreamConn*> dirty_upstreams_;
  bool flush_scheduled_ = false;
  bool garbage_ = false;
  uint64_t seed_;

  mutable std::mutex staged_mu_;
  std::unique_ptr<RouteTable> staged_;
  std::map<std::string, std::shared_ptr<ServiceStats>> stats_;  // guarded by staged_mu_

  // Metrics families (null without a registry).
  metrics::Family<metrics::Counter>* requests_ = nullptr;
  metrics::Family<metrics::Histogram>* duration_ = nullptr;
  metrics::Family<metrics::Counter>* tokens_ = nullptr;
  metrics::Family<metrics::Counter>* retries_ = nullptr;
};

}  // namespace gpugeek::gateway::detail
