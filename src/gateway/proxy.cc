#include "gateway/proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/absl_view.h"
#include "gateway/h2_proxy.h"

namespace gpugeek::gateway::detail {

namespace {

constexpr size_t kReadChunk = 64 * 1024;
// A lingering close (Proxy::StartLinger) discards at most this long and this much of what a client still sends.
constexpr Duration kLingerTime = std::chrono::seconds(1);
constexpr size_t kLingerBytes = 4 * 1024 * 1024;

// A 401's challenge (RFC 6750 3).
constexpr std::string_view kWwwAuthenticate = "WWW-Authenticate: Bearer realm=\"gpugeek\"\r\n";

MonoTime Now() { return MonoTime(std::chrono::steady_clock::now().time_since_epoch()); }

std::string_view StatusText(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Error";
  }
}

std::optional<std::string_view> CookieValue(const MessageHead& h, std::string_view name) {
  for (const HeaderField& f : h.headers) {
    if (!absl::EqualsIgnoreCase(f.name, "cookie")) continue;
    for (absl::string_view part : absl::StrSplit(f.value, ';')) {
      part = absl::StripAsciiWhitespace(part);
      if (part.size() > name.size() && part[name.size()] == '=' && std::string_view(part.data(), name.size()) == name) {
        return std::string_view(part.data() + name.size() + 1, part.size() - name.size() - 1);
      }
    }
  }
  return std::nullopt;
}

// RFC 9112 3.2.2: a request target in absolute-form ("http://host:port/path?q", as sent to proxies) names its host
// itself: `*authority` gets "host:port" (which replaces Host) and `*origin_form` "/path?q" ("/" for an empty path),
// the target a replica gets. False when `target` is in another form; `*error` is set when it is in absolute-form
// but cannot be served (a scheme other than http or https, no host, userinfo).
bool SplitAbsoluteForm(std::string_view target, std::string* authority, std::string* origin_form,
                       std::string_view* error) {
  if (target.empty() || target.front() == '/' || target == "*") return false;
  const size_t colon = target.find("://");
  if (colon == std::string_view::npos || colon == 0) return false;
  const std::string_view scheme = target.substr(0, colon);
  for (char ch : scheme) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(ch)) && ch != '+' && ch != '-' && ch != '.') return false;
  }
  if (!absl::EqualsIgnoreCase(AbslView(scheme), "http") && !absl::EqualsIgnoreCase(AbslView(scheme), "https")) {
    *error = "an absolute-form request target must be an http or https URI";
    return true;
  }
  const std::string_view rest = target.substr(colon + 3);
  const size_t end = std::min(rest.find_first_of("/?#"), rest.size());
  const std::string_view host = rest.substr(0, end);
  if (host.empty()) {
    *error = "an absolute-form request target must name a host";
    return true;
  }
  if (host.find('@') != std::string_view::npos) {
    *error = "an absolute-form request target must not carry userinfo";
    return true;
  }
  std::string_view path = rest.substr(end);
  if (const size_t hash = path.find('#'); hash != std::string_view::npos) path = path.substr(0, hash);
  authority->assign(host.data(), host.size());
  origin_form->clear();
  if (path.empty() || path.front() != '/') origin_form->push_back('/');
  origin_form->append(path.data(), path.size());
  return true;
}

}  // namespace

void ClientConn::OnEvents(uint32_t events) {
  if (dead) return;
  proxy->Touch();
  last_activity = proxy->now();
  if (HungUp(events)) hung_up = true;
  if (lingering) {
    proxy->LingerRead(this);  // nothing left to write; every event is bytes to discard or the end
    return;
  }
  // Over TLS a read may wait for the socket to take handshake bytes and a write for the peer's: every event tries
  // both (an attempt that cannot go on costs one failed system call).
  if ((events & EPOLLOUT) || (tls && !out.empty())) proxy->ClientFlush(this);
  if (dead || lingering) return;  // (the flush may have started the lingering close, which read what was there)
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) || tls) {
    proxy->ClientRead(this);
    if (!dead) proxy->ClientProcess(this);
  }
}

void UpstreamConn::OnEvents(uint32_t events) {
  if (dead) return;
  proxy->Touch();
  proxy->UpstreamEvents(this, events);
}

Proxy::Proxy(GatewayOptions options, Reactor* reactor, TokenCheck* token_check)
    : options_(std::move(options)), reactor_(reactor), token_check_(token_check), seed_(options_.seed) {
  request_limits_ = FramingLimits{.max_head_bytes = options_.max_head, .max_body_bytes = options_.max_request_body};
  response_limits_ = FramingLimits{.max_head_bytes = options_.max_head, .max_body_bytes = std::nullopt};
  now_ = Now();
  h2_ = std::make_unique<H2Proxy>(this);
  if (metrics::Registry* r = options_.registry) {
    requests_ = &r->AddCounter("gpugeek_gateway_requests_total",
                               "Requests the gateway answered, by service, version and status class (2xx, 5xx, ...).",
                               {"service", "version", "code"});
    duration_ = &r->AddHistogram("gpugeek_gateway_request_duration_seconds",
                                 "From a request's head received to its answer's last byte handed to the client.",
                                 {"service", "version"}, metrics::ExponentialBuckets(0.0005, 2, 17));
    tokens_ = &r->AddCounter("gpugeek_gateway_tokens_total",
                             "Tokens the replicas reported generating (Gpugeek-Tokens answer field).",
                             {"service", "version"});
    retries_ =
        &r->AddCounter("gpugeek_gateway_retries_total",
                       "Idempotent requests sent again to another replica after a failed connection.", {"service"});
    r->AddCollector([this](metrics::Writer& w) {
      const auto load = Load();
      w.Family("gpugeek_gateway_requests_in_flight", "Requests sent to replicas and not answered yet.",
               metrics::Type::kGauge);
      for (const auto& [service, l] : load) w.Sample({{"service", service}}, static_cast<double>(l.in_flight));
      w.Family("gpugeek_gateway_activator_queued", "Requests waiting for a ready replica (the activator).",
               metrics::Type::kGauge);
      for (const auto& [service, l] : load) w.Sample({{"service", service}}, static_cast<double>(l.queued));
    });
  }
}

Proxy::~Proxy() { CloseAll(); }

void Proxy::Touch() { now_ = Now(); }

absl::Status Proxy::Listen() {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  const int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(options_.port);
  if (inet_pton(AF_INET, options_.listen_host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("listen address \"", options_.listen_host, "\" is not a numeric IPv4 address"));
  }
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return absl::UnavailableError(
        absl::StrCat("bind ", options_.listen_host, ":", options_.port, ": ", std::strerror(errno)));
  }
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (listen(listen_fd_, options_.backlog) != 0) {
    return absl::UnavailableError(absl::StrCat("listen: ", std::strerror(errno)));
  }
  socklen_t len = sizeof addr;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  return reactor_->WatchListener(listen_fd_, this);
}

void Proxy::OnEvents(uint32_t) {
  Touch();
  for (;;) {
    sockaddr_in peer{};
    socklen_t len = sizeof peer;
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
        // Out of descriptors: the listener would fire again at once. Take the client with the spare descriptor
        // and close it, so the backlog drains instead of the loop spinning.
        close(spare_fd_);
        const int refused = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (refused >= 0) close(refused);
        spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
        continue;
      }
      return;  // EAGAIN
    }
    if (clients_.size() >= options_.max_client_connections) {
      close(fd);
      continue;
    }
    SetNoDelay(fd);
    auto c = std::make_unique<ClientConn>(request_limits_);
    c->proxy = this;
    c->fd = fd;
    c->last_activity = now_;
    c->accepted_at = now_;
    if (options_.tls) {
      c->tls = options_.tls->NewSession(fd);
      if (!c->tls) {
        close(fd);
        continue;
      }
    }
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof ip);
    c->peer_ip = ip;
    if (!reactor_->Watch(fd, c.get()).ok()) {
      close(fd);
      continue;
    }
    clients_.push_back(std::move(c));
  }
}

// ---------------------------------------------------------------------------------------------- routes

void Proxy::StageRoutes(RouteTable routes) {
  std::lock_guard lock(staged_mu_);
  staged_ = std::make_unique<RouteTable>(std::move(routes));
}

std::map<std::string, ServiceLoad> Proxy::Load() const {
  std::lock_guard lock(staged_mu_);
  std::map<std::string, ServiceLoad> out;
  for (const auto& [name, s] : stats_) {
    ServiceLoad& l = out[name];
    l.in_flight = s->in_flight.load();
    l.queued = s->queued.load();
    l.requests = s->requests.load();
    std::lock_guard version_lock(s->mu);
    l.by_version = s->by_version;
    l.tokens_by_version = s->tokens_by_version;
  }
  return out;
}

void Proxy::ApplyRoutes() {
  std::unique_ptr<RouteTable> staged;
  {
    std::lock_guard lock(staged_mu_);
    staged.swap(staged_);
  }
  if (!staged) return;
  std::map<std::string, std::shared_ptr<Service>> next;
  for (const ServiceRoute& route : staged->routes) {
    std::shared_ptr<Service> s;
    if (auto it = services_.find(route.service); it != services_.end()) {
      s = it->second;
    } else {
      s = std::make_shared<Service>(seed_++, options_.outlier);
      std::lock_guard lock(staged_mu_);
      auto& stats = stats_[route.service];
      if (!stats) stats = std::make_shared<ServiceStats>();
      s->stats = stats;
      if (retries_) s->retries = &retries_->With({route.service});
    }
    s->route = route;
    s->balancer.Update(route.versions, route.sticky);
    s->version_metrics.assign(route.versions.size(), {});
    if (requests_) {
      for (size_t v = 0; v < route.versions.size(); ++v) {
        VersionMetrics& m = s->version_metrics[v];
        const std::string& version = route.versions[v].name;
        static constexpr const char* kClasses[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
        for (int k = 0; k < 6; ++k) m.by_class[k] = &requests_->With({route.service, version, kClasses[k]});
        m.duration = &duration_->With({route.service, version});
        m.tokens = &tokens_->With({route.service, version});
      }
    }
    next[route.service] = s;
  }
  for (auto& [name, s] : services_) {
    if (next.count(name)) continue;
    s->retired = true;
    while (!s->activator.empty()) {
      auto x = std::move(s->activator.front());
      s->activator.pop_front();
      s->stats->queued.fetch_sub(1);
      FailExchange(std::move(x), 404, "the service was removed from the gateway");
    }
  }
  services_ = std::move(next);
  table_ = std::move(*staged);
  // Replicas no longer listed: their idle connections close now, busy ones when their exchanges end.
  std::set<std::string> live;
  for (const ServiceRoute& r : table_.routes) {
    for (const VersionEndpoints& v : r.versions) {
      for (const ReplicaEndpoint& e : v.replicas) live.insert(e.id);
    }
  }
  std::vector<UpstreamConn*> gone;
  for (auto& [id, conns] : pools_) {
    if (!live.count(id)) gone.insert(gone.end(), conns.begin(), conns.end());
  }
  for (UpstreamConn* u : gone) {
    if (u->Idle()) {
      CloseUpstream(u);
    } else {
      u->closing = true;
    }
  }
  DrainActivators();
}

// ---------------------------------------------------------------------------------------------- clients

void Proxy::ClientRead(ClientConn* c) {
  const size_t limit = options_.max_head + 256 * 1024;
  const ReadResult r = ReadInto(c->fd, c->tls.get(), c->in, limit, c->hung_up);
  c->read_blocked = r == ReadResult::kMore;
  if (r == ReadResult::kClosed) {
    c->peer_closed = true;
    // A client gone while its request waits or is at a replica: nobody wants the answer, and an LLM's generation is
    // worth stopping (nginx's proxy_ignore_client_abort off); a request in the activator gives its place up.
    if (c->active && !c->tunnel) CloseClient(c);
  }
}

void Proxy::ClientProcess(ClientConn* c) {
  const size_t in_limit = options_.max_head + 256 * 1024;
  while (!c->dead) {
    if (c->tunnel) {
      UpstreamConn* u = c->tunnel;
      if (!c->in.empty() && u->out.size() <= options_.write_high_water) {  // else UpstreamFlush resumes it
        u->out.Append(c->in.view());
        c->in.Clear();
        MarkDirty(u);
      }
      if (c->peer_closed && c->in.empty()) {
        CloseClient(c);  // closes the tunnel's upstream too
        return;
      }
      if (c->read_blocked && c->in.empty()) {
        ClientRead(c);
        continue;
      }
      return;
    }
    // Answers the gateway writes itself count against the output limit too: a client that sends requests and
    // reads nothing stops being read (ClientFlush resumes it).
    if (c->out.size() > options_.write_high_water) return;
    if (c->active == nullptr) {
      if (c->close_after) return;
      if (c->in.empty()) {
        if (c->peer_closed) {
          c->close_after = true;
          MarkDirty(c);
        }
        break;
      }
      if (c->head_began == MonoTime{}) {  // the first byte of a head: its deadline starts here
        c->head_began = now_;
        c->head_started = false;
        c->framer.Reset();
      }
      if (!c->head_started) {
        // HTTP/2 with prior knowledge (gRPC): "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" (RFC 9113 3.4).
        static constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        const std::string_view seen = c->in.view().substr(0, kPreface.size());
        if (kPreface.substr(0, seen.size()) == seen) {
          if (seen.size() < kPreface.size()) break;  // wait for the rest of it (under header_timeout)
          HandOffH2(c);
          return;
        }
      }
      auto n = c->framer.ParseHead(c->in.view());
      if (!n.ok()) {
        c->keep_alive = false;
        const int status = absl::IsResourceExhausted(n.status()) ? 431 : absl::IsOutOfRange(n.status()) ? 413 : 400;
        Respond(c, status, StatusText(status), std::string(n.status().message()));
        c->in.Clear();
        c->head_began = MonoTime{};
        return;
      }
      if (*n > 0) c->head_started = true;
      c->in.Consume(*n);
      if (!c->framer.head_done()) {
        if (c->peer_closed) {
          c->close_after = true;
          MarkDirty(c);
        }
        break;
      }
      c->head_began = MonoTime{};
      StartExchange(c);
      continue;
    }
    if (c->reading_body) {
      ForwardBody(c);
      if (c->reading_body) break;
      continue;
    }
    break;
  }
  if (!c->dead && c->read_blocked && c->in.size() < in_limit) {
    ClientRead(c);
    if (!c->dead && !c->in.empty()) resume_.push_back(c), ScheduleFlush();
  }
}

void Proxy::StartExchange(ClientConn* c) {
  const MessageHead& h = c->framer.head();
  c->keep_alive = h.keep_alive;
  c->http10 = h.version < 11;
  const std::string* host_field = h.Find("host");
  std::string_view host = host_field ? std::string_view(*host_field) : std::string_view();
  std::string_view target = h.target;
  // Absolute-form (RFC 9112 3.2.2): the target's host replaces Host, for the route and for the replica, which gets
  // the origin-form.
  std::string absolute_host, origin_form;
  std::string_view target_error;
  const bool absolute = SplitAbsoluteForm(h.target, &absolute_host, &origin_form, &target_error);
  if (absolute && target_error.empty()) {
    host = absolute_host;
    target = origin_form;
  }
  const int route = MatchRoute(table_, host, target);
  const bool has_body = h.chunked || (h.content_length && *h.content_length > 0);
  int hosts = 0, codings = 0;
  for (const HeaderField& f : h.headers) {
    hosts += absl::EqualsIgnoreCase(f.name, "host") ? 1 : 0;
    codings += absl::EqualsIgnoreCase(f.name, "transfer-encoding") ? 1 : 0;
  }
  // RFC 9112 3.2 (one Host) and 6.3 (a transfer coding ending in chunked, in one field, and not in HTTP/1.0): any
  // other request has a reading the replica could make differently from the gateway's.
  std::string_view refusal;
  if (hosts > 1) refusal = "a request carries one Host field";
  if (codings > 1) refusal = "Transfer-Encoding must be one field";
  if (codings > 0 && !h.chunked) refusal = "Transfer-Encoding must end in chunked";
  if (codings > 0 && h.version < 11) refusal = "Transfer-Encoding needs HTTP/1.1";
  if (!target_error.empty()) refusal = target_error;
  if (!refusal.empty()) {
    c->keep_alive = false;
    Respond(c, 400, StatusText(400), refusal);
    c->in.Clear();
    return;
  }
  if (route < 0) {
    if (has_body) c->keep_alive = false;
    Respond(c, 404, "Not Found", absl::StrCat("no service is routed at ", AbslView(host), AbslView(target)));
    return;
  }
  const std::shared_ptr<Service>& service = services_[table_.routes[route].service];
  const bool auth = !service->route.auth_tenant.empty();
  std::string_view bearer;
  if (auth) {
    const std::string* field = h.Find("authorization");
    bearer = field ? BearerToken(*field) : std::string_view();
    if (bearer.empty() || token_check_ == nullptr) {
      if (has_body) c->keep_alive = false;
      if (bearer.empty()) {
        Respond(c, 401, StatusText(401),
                absl::StrCat("service ", service->route.service,
                             " needs a gpugeek API token: Authorization: Bearer ggk_... (gpugeek token create)"),
                false, kWwwAuthenticate);
      } else {
        Respond(c, 503, StatusText(503), "this gateway cannot verify tokens", true);
      }
      return;
    }
  }
  auto x = std::make_unique<Exchange>();
  x->client = c;
  x->service = service;
  x->method = h.method;
  x->head_request = h.method == "HEAD";
  x->upgrade = h.upgrade;
  x->has_body = has_body;
  // Pipelined: idempotent requests without a body, and not HEAD (a replica answering HEAD with a body would shift
  // every answer behind it).
  x->pipelinable = IsIdempotent(h.method) && h.method != "HEAD" && !has_body && !h.upgrade && service->route.pipelining;
  x->retryable = IsIdempotent(h.method) && !h.upgrade;
  x->request_complete = !has_body;
  x->began = now_;
  // Version: sticky by header or cookie when the request has one.
  const StickyPolicy& sticky = service->route.sticky;
  std::optional<std::string_view> sticky_value;
  if (sticky.kind == StickyKind::kHeader) {
    if (const std::string* v = h.Find(sticky.name)) sticky_value = *v;
  } else if (sticky.kind == StickyKind::kCookie) {
    sticky_value = CookieValue(h, sticky.name);
  }
  const auto choice = service->balancer.PickVersion(sticky_value);
  if (!choice) {
    if (has_body) c->keep_alive = false;
    Respond(c, 503, StatusText(503), absl::StrCat("service ", service->route.service, " has no version taking traffic"),
            true);
    return;
  }
  x->version = choice->version;
  x->version_name = service->balancer.versions()[choice->version].name;
  if (choice->set_cookie) x->set_cookie = x->version_name;
  // The head as the replica gets it: hop-by-hop fields dropped (RFC 9110 7.6.1), X-Forwarded-For extended.
  std::string& out = x->request;
  out.reserve(target.size() + 64 + h.headers.size() * 48);
  absl::StrAppend(&out, h.method, " ", AbslView(target), " HTTP/1.1\r\n");
  // A proxy that gets an absolute-form target sends the Host it names, not the one received (RFC 9112 3.2.2).
  if (absolute) absl::StrAppend(&out, "Host: ", AbslView(host), "\r\n");
  // Fields the client named in Connection are hop-by-hop too (RFC 9110 7.6.1).
  std::vector<std::string> connection_named;
  for (const HeaderField& f : h.headers) {
    if (!absl::EqualsIgnoreCase(f.name, "connection")) continue;
    for (absl::string_view token : absl::StrSplit(f.value, ',')) {
      token = absl::StripAsciiWhitespace(token);
      if (!token.empty()) connection_named.emplace_back(token);
    }
  }
  std::string xff;
  for (const HeaderField& f : h.headers) {
    if (IsHopByHop(f.name) && !(h.upgrade && absl::EqualsIgnoreCase(f.name, "upgrade"))) continue;
    if (absl::EqualsIgnoreCase(f.name, "x-forwarded-for")) {
      absl::StrAppend(&xff, f.value, ", ");  // every one, in order
      continue;
    }
    if (!(h.upgrade && absl::EqualsIgnoreCase(f.name, "upgrade")) &&
        std::any_of(connection_named.begin(), connection_named.end(),
                    [&](const std::string& n) { return absl::EqualsIgnoreCase(n, f.name); })) {
      continue;
    }
    // The framing the replica sees is the one the gateway parsed, written once (RFC 9112 6.3: no room for a
    // second reading of the same bytes).
    if (absl::EqualsIgnoreCase(f.name, "content-length") || absl::EqualsIgnoreCase(f.name, "transfer-encoding")) {
      continue;
    }
    if (absolute && absl::EqualsIgnoreCase(f.name, "host")) continue;
    // The caller's token stays here; who it is comes from the gateway alone (Authorize).
    if ((auth && absl::EqualsIgnoreCase(f.name, "authorization")) ||
        absl::EqualsIgnoreCase(f.name, AbslView(kCallerUserHeader)) ||
        absl::EqualsIgnoreCase(f.name, AbslView(kCallerTenantHeader))) {
      continue;
    }
    absl::StrAppend(&out, f.name, ": ", f.value, "\r\n");
  }
  if (h.chunked) {
    absl::StrAppend(&out, "Transfer-Encoding: ", *h.Find("transfer-encoding"), "\r\n");  // codings kept, chunked last
  } else if (h.content_length) {
    absl::StrAppend(&out, "Content-Length: ", *h.content_length, "\r\n");
  }
  absl::StrAppend(&out, "X-Forwarded-For: ", xff, c->peer_ip, "\r\n");
  if (h.upgrade) out.append("Connection: Upgrade\r\n");
  out.append("\r\n");
  c->active = x.get();
  c->reading_body = has_body;
  if (auth) {
    x->token = std::string(bearer);
    AuthStep step = Authorize(*x);
    if (step.kind == AuthStep::kRefuse) {
      FailExchange(std::move(x), step.status, step.why);
      return;
    }
    if (step.kind == AuthStep::kWait) {
      x->awaiting_auth = true;
      x->sent_at = now_;
      auth_wait_.push_back(std::move(x));
      return;
    }
  }
  Dispatch(std::move(x));
}

Proxy::AuthStep Proxy::Authorize(Exchange& x) {
  TokenVerdict v = token_check_->Check(x.token, now_);
  switch (v.state) {
    case TokenVerdict::kPending:
      return {.kind = AuthStep::kWait};
    case TokenVerdict::kInvalid:
      return {.kind = AuthStep::kRefuse, .status = 401, .why = std::move(v.reason)};
    case TokenVerdict::kUnverifiable:
      return {.kind = AuthStep::kRefuse, .status = 503, .why = std::move(v.reason)};
    case TokenVerdict::kValid:
      break;
  }
  // Another tenant's service reads as absent, as in the API.
  if (!MayCall(v.caller, x.service->route.auth_tenant)) {
    return {.kind = AuthStep::kRefuse, .status = 404, .why = "no service is routed here for this token"};
  }
  x.request.insert(x.request.size() - 2,
                   absl::StrCat("Gpugeek-User: ", v.caller.user, "\r\nGpugeek-Tenant: ", v.caller.tenant, "\r\n"));
  x.token.clear();
  x.awaiting_auth = false;
  return {.kind = AuthStep::kGo};
}

void Proxy::ResumeAuthWaits() {
  if (auth_wait_.empty()) return;
  // Taken out whole: answering one may close clients whose exchanges wait here (Abandon then finds them gone).
  std::deque<std::unique_ptr<Exchange>> waiting;
  waiting.swap(auth_wait_);
  for (auto& x : waiting) {
    if (x->client == nullptr) continue;  // the client went away
    AuthStep step = Authorize(*x);
    if (step.kind == AuthStep::kWait) {
      if (now_ - x->sent_at <= kTokenCheckWait) {
        auth_wait_.push_back(std::move(x));
      } else {
        FailExchange(std::move(x), 503, "the caller's token could not be verified in time");
      }
    } else if (step.kind == AuthStep::kRefuse) {
      FailExchange(std::move(x), step.status, step.why);
    } else {
      ClientConn* c = x->client;
      Dispatch(std::move(x));
      if (c && !c->dead && c->reading_body) resume_.push_back(c), ScheduleFlush();
    }
  }
}

void Proxy::ForwardBody(ClientConn* c) {
  Exchange* x = c->active;
  UpstreamConn* u = x->upstream;
  if (u == nullptr) return;  // waiting in the activator: the body waits in the client's buffer
  if (u->out.size() > options_.write_high_water) return;  // resumed by UpstreamFlush
  auto n = c->framer.ParseBody(c->in.view());
  if (!n.ok()) {
    const int status = absl::IsOutOfRange(n.status()) ? 413 : 400;
    c->active = nullptr;
    x->client = nullptr;
    c->keep_alive = false;
    c->reading_body = false;
    Respond(c, status, StatusText(status), std::string(n.status().message()));
    c->in.Clear();
    FailUpstream(u, Outcome::kClientError, 502, "the client's request body was malformed");
    return;
  }
  if (*n > 0) {
    const std::string_view body = c->in.view().substr(0, *n);
    u->out.Append(body);
    if (x->retryable) {
      if (x->request.size() + body.size() <= options_.retry_buffer) {
        x->request.append(body.data(), body.size());
      } else {
        x->retryable = false;
        x->request.clear();
        x->request.shrink_to_fit();
      }
    }
    x->body_sent += *n;
    c->in.Consume(*n);
    MarkDirty(u);
  }
  if (c->framer.done()) {
    c->reading_body = false;
    x->request_complete = true;
  }
}

void Proxy::ClientFlush(ClientConn* c) {
  if (c->dead || c->lingering) return;
  const size_t before = c->out.size();
  if (!WriteFrom(c->fd, c->tls.get(), c->out)) {
    CloseClient(c);
    return;
  }
  if (c->out.empty() || c->out.size() < before) c->write_stalled_since = MonoTime{};
  if (!c->out.empty() && c->write_stalled_since == MonoTime{}) c->write_stalled_since = now_;
  if (c->out.empty() && c->close_after) {
    if (c->linger) {
      StartLinger(c);
    } else {
      CloseClient(c);
    }
    return;
  }
  if (c->out.size() <= options_.write_high_water / 2) {
    if (c->active == nullptr && !c->in.empty() && !c->close_after) resume_.push_back(c), ScheduleFlush();
    UpstreamConn* u = c->tunnel ? c->tunnel : (c->active ? c->active->upstream : nullptr);
    if (u && u->read_blocked && !u->dead) {
      u->read_blocked = false;
      UpstreamRead(u);
      UpstreamProcess(u);
    }
  }
}

void Proxy::Respond(ClientConn* c, int status, std::string_view reason, std::string_view body, bool retry_after,
                    std::string_view extra) {
  const bool close = !c->keep_alive || c->reading_body || c->peer_closed;
  absl::StrAppend(&c->out.bytes, "HTTP/1.1 ", status, " ", absl::string_view(reason.data(), reason.size()),
                  "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ", body.size() + 1, "\r\n",
                  retry_after ? "Retry-After: 1\r\n" : "", AbslView(extra),
                  close       ? "Connection: close\r\n"
                  : c->http10 ? "Connection: keep-alive\r\n"
                              : "",
                  "\r\n");
  c->out.Append(body);
  c->out.Append("\n");
  if (close) {
    c->close_after = true;
    c->linger = true;  // what the client sent after the part answered may still come: not a reason to reset
  }
  c->reading_body = false;
  MarkDirty(c);
}

void Proxy::HandOffH2(ClientConn* c) {
  reactor_->Unwatch(c->fd);
  const int fd = c->fd;
  c->fd = -1;
  c->dead = true;
  garbage_ = true;
  std::string initial(c->in.view());
  c->in.Clear();
  h2_->Adopt(fd, std::move(c->tls), std::move(initial), c->peer_ip);
}

void Proxy::CloseClient(ClientConn* c) {
  if (c->dead) return;
  c->dead = true;
  reactor_->Unwatch(c->fd);
  if (c->tls && !c->lingering) ShutdownWrites(c->fd, c->tls.get());  // close_notify: the answer ends here
  close(c->fd);
  garbage_ = true;
  if (c->tunnel) {
    UpstreamConn* u = c->tunnel;
    c->tunnel = nullptr;
    u->tunnel = nullptr;
    CloseUpstream(u);  // what it had not taken yet goes too: a replica that never reads holds nothing
  }
  if (Exchange* x = c->active) {
    c->active = nullptr;
    Abandon(x);
  }
  ScheduleFlush();
}

void Proxy::StartLinger(ClientConn* c) {
  if (c->dead) return;
  if (c->active || c->tunnel || c->peer_closed) {  // nothing more can come, or an exchange is still tied to it
    CloseClient(c);
    return;
  }
  ShutdownWrites(c->fd, c->tls.get());  // the client sees the answer end now
  c->lingering = true;
  c->linger_until = now_ + kLingerTime;
  c->linger_budget = kLingerBytes;
  c->in.Clear();
  c->read_blocked = false;
  c->head_began = MonoTime{};
  LingerRead(c);  // edge-triggered: bytes already waiting bring no new event
}

void Proxy::LingerRead(ClientConn* c) {
  while (!c->dead) {
    const ReadResult r = ReadInto(c->fd, c->in, kReadChunk, c->hung_up);
    const size_t got = c->in.size();
    c->in.Clear();
    if (r == ReadResult::kClosed || got >= c->linger_budget) {
      CloseClient(c);
      return;
    }
    c->linger_budget -= got;
    if (r == ReadResult::kDrained) return;
  }
}

void Proxy::Abandon(Exchange* x) {
  x->client = nullptr;
  if (x->awaiting_auth) {
    auto it = std::find_if(auth_wait_.begin(), auth_wait_.end(), [x](const auto& q) { return q.get() == x; });
    if (it != auth_wait_.end()) auth_wait_.erase(it);  // frees `x`
    return;
  }
  UpstreamConn* u = x->upstream;
  if (u == nullptr) {
    // Waiting in the activator: its place goes, so the queue's bound and the autoscaler count live clients only.
    const std::shared_ptr<Service> service = x->service;  // outlives `x`, which the erase below frees
    auto& queue = service->activator;
    auto it = std::find_if(queue.begin(), queue.end(), [x](const auto& q) { return q.get() == x; });
    if (it != queue.end()) {
      queue.erase(it);  // frees `x`
      service->stats->queued.fetch_sub(1, std::memory_order_relaxed);
    }
    return;
  }
  // A request cut short, or an upgrade not yet answered, leaves its upstream connection unusable; a request alone on
  // its connection is cancelled by closing it (the replica stops working for nobody).
  if (!x->request_complete || x->upgrade || (u->fifo.size() == 1 && u->fifo.front().get() == x)) {
    FailUpstream(u, Outcome::kClientError, 502, "the client went away");
    return;
  }
  // The upstream may have stopped reading for this client's full output: the answer is now read and dropped (in
  // the flush, not here: `x` may end there).
  if (u->read_blocked && !u->dead) {
    u->read_blocked = false;
    resume_upstreams_.push_back(u);
    ScheduleFlush();
  }
}

// ---------------------------------------------------------------------------------------------- dispatch

void Proxy::Dispatch(std::unique_ptr<Exchange> x) {
  Service& s = *x->service;
  if (s.retired) {
    FailExchange(std::move(x), 404, "the service was removed from the gateway");
    return;
  }
  // Versions may have moved since the exchange chose one: find it again by name.
  x->version = s.balancer.VersionIndex(x->version_name);
  if (x->version < 0) {
    const auto choice = s.balancer.PickVersion(std::nullopt);
    if (!choice) {
      FailExchange(std::move(x), 503, "the service has no version taking traffic");
      return;
    }
    x->version = choice->version;
    x->version_name = s.balancer.versions()[choice->version].name;
  }
  ReplicaState* r = s.balancer.PickReplica(x->version, now_, x->tried);
  if (r == nullptr) {
    if (x->attempts > 0) {
      FailExchange(std::move(x), 502, "every replica tried failed");
      return;
    }
    if (s.activator.size() >= s.route.activator_queue) {
      FailExchange(std::move(x), 503,
                   absl::StrCat("no replica of ", s.route.service, " is ready and ", s.activator.size(),
                                " requests wait already"));
      return;
    }
    x->sent_at = now_;
    s.stats->queued.fetch_add(1, std::memory_order_relaxed);
    s.activator.push_back(std::move(x));
    return;
  }
  bool local = false;
  UpstreamConn* u = AcquireUpstream(r, *x, s, &local);
  if (u == nullptr) {
    if (local) {
      FailExchange(std::move(x), 503, "the gateway is out of file descriptors");
      return;
    }
    s.balancer.Begin(r);
    s.balancer.Finish(r, Outcome::kConnectFailure, now_);
    x->tried.push_back(r);
    ++x->attempts;
    // Refused at once: nothing of the request left, so any method may go to another replica.
    if (x->attempts <= s.route.retries) {
      Dispatch(std::move(x));
    } else {
      FailExchange(std::move(x), 502, "cannot connect to a replica");
    }
    return;
  }
  s.balancer.Begin(r);
  if (x->attempts > 0 && s.retries) s.retries->Inc();
  ++x->attempts;
  x->tried.push_back(r);
  x->replica = r;
  x->upstream = u;
  x->sent_at = now_;
  if (!x->pipelinable) ++u->not_pipelinable;
  s.stats->in_flight.fetch_add(1, std::memory_order_relaxed);
  if (u->fifo.empty()) u->framer.Reset(x->head_request);
  u->out.Append(x->request);
  if (!x->retryable) {
    // Kept only for a retry.
    x->request.clear();
  }
  u->fifo.push_back(std::move(x));
  MarkDirty(u);
}

UpstreamConn* Proxy::AcquireUpstream(ReplicaState* r, const Exchange& x, const Service& s, bool* local) {
  auto& pool = pools_[r->endpoint.id];
  if (!x.upgrade) {
    for (auto it = pool.rbegin(); it != pool.rend(); ++it) {
      if ((*it)->Idle() && (*it)->endpoint == r->endpoint) return *it;
    }
    if (x.pipelinable && s.route.pipelining && options_.pipeline_depth > 1 && !r->closes_connections) {
      UpstreamConn* best = nullptr;
      for (UpstreamConn* u : pool) {
        if (u->dead || u->closing || u->tunnel || u->not_pipelinable > 0 || !(u->endpoint == r->endpoint)) continue;
        if (u->fifo.size() >= static_cast<size_t>(options_.pipeline_depth)) continue;
        if (!u->fifo.empty() && now_ - u->fifo.front()->sent_at > options_.pipeline_stall) continue;
        if (!best || u->fifo.size() < best->fifo.size()) best = u;
      }
      if (best) return best;
    }
  }
  return Connect(*r, local);
}

UpstreamConn* Proxy::Connect(const ReplicaState& r, bool* local) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *local = true;  // out of descriptors here: not the replica's fault
    return nullptr;
  }
  SetNoDelay(fd);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(r.endpoint.port);
  if (inet_pton(AF_INET, r.endpoint.host.c_str(), &addr.sin_addr) != 1 ||
      (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS)) {
    close(fd);
    return nullptr;
  }
  auto u = std::make_unique<UpstreamConn>(response_limits_);
  u->proxy = this;
  u->fd = fd;
  u->replica_id = r.endpoint.id;
  u->endpoint = r.endpoint;
  u->connect_began = now_;
  if (!reactor_->Watch(fd, u.get()).ok()) {
    close(fd);
    return nullptr;
  }
  UpstreamConn* raw = u.get();
  upstreams_.push_back(std::move(u));
  pools_[r.endpoint.id].push_back(raw);
  return raw;
}

void Proxy::FailExchange(std::unique_ptr<Exchange> x, int status, std::string_view why) {
  x->status = status;
  Record(*x);
  ClientConn* c = x->client;
  if (c == nullptr || c->dead) return;
  c->active = nullptr;
  if (x->response_started) {
    c->close_after = true;  // the answer was cut short: only closing tells the client
    if (c->reading_body) c->linger = true;
    MarkDirty(c);
    return;
  }
  Respond(c, status, StatusText(status), why, status == 503, status == 401 ? kWwwAuthenticate : std::string_view());
  if (!c->close_after) resume_.push_back(c), ScheduleFlush();
}

void Proxy::DrainActivators() {
  for (auto& [name, s] : services_) {
    while (!s->activator.empty()) {
      Exchange* front = s->activator.front().get();
      if (front->client == nullptr) {  // the client gave up
        s->activator.pop_front();
        s->stats->queued.fetch_sub(1, std::memory_order_relaxed);
        continue;
      }
      const int v = s->balancer.VersionIndex(front->version_name);
      const bool ready = v >= 0 ? !s->balancer.replicas(v).empty() : !s->balancer.versions().empty();
      if (!ready) break;
      auto x = std::move(s->activator.front());
      s->activator.pop_front();
      s->stats->queued.fetch_sub(1, std::memory_order_relaxed);
      ClientConn* c = x->client;
      Dispatch(std::move(x));
      if (c && !c->dead && c->reading_body) resume_.push_back(c), ScheduleFlush();
    }
  }
}

// ---------------------------------------------------------------------------------------------- upstreams

void Proxy::UpstreamEvents(UpstreamConn* u, uint32_t events) {
  if (u->connecting) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(u->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0 || (events & (EPOLLERR | EPOLLHUP))) {
      FailUpstream(
          u, Outcome::kConnectFailure, 502,
          absl::StrCat("cannot connect to replica ", u->replica_id, ": ", std::strerror(err ? err : ECONNREFUSED)));
      return;
    }
    u->connecting = false;
  }
  if (HungUp(events)) u->hung_up = true;
  if (events & EPOLLOUT) UpstreamFlush(u);
  if (u->dead) return;
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    UpstreamRead(u);
    UpstreamProcess(u);
  }
}

void Proxy::UpstreamRead(UpstreamConn* u) {
  if (u->read_blocked || u->dead) return;
  const size_t before = u->in.size();
  const ReadResult r = ReadInto(u->fd, u->in, options_.write_high_water, u->hung_up);
  if (u->in.size() > before) u->last_progress = now_;
  u->more_to_read = r == ReadResult::kMore;
  if (r == ReadResult::kClosed) u->peer_closed = true;
}

std::string Proxy::ResponseHead(const Exchange& x, const MessageHead& h, bool close, bool http10) {
  std::string out;
  out.reserve(128 + h.headers.size() * 48);
  absl::StrAppend(&out, "HTTP/1.1 ", h.status, " ", h.reason, "\r\n");
  // A body's framing is written as parsed; an answer to HEAD and a 304 keep their Content-Length (the length of
  // what a GET would get), and bodiless statuses none.
  const bool keep_length = x.head_request || h.status == 304;
  for (const HeaderField& f : h.headers) {
    if (IsHopByHop(f.name) && !(h.status == 101 && absl::EqualsIgnoreCase(f.name, "upgrade"))) continue;
    if (absl::EqualsIgnoreCase(f.name, "transfer-encoding")) continue;
    if (absl::EqualsIgnoreCase(f.name, "content-length") && !keep_length) continue;
    absl::StrAppend(&out, f.name, ": ", f.value, "\r\n");
  }
  if (!keep_length && h.status >= 200 && h.status != 204) {
    if (h.chunked && http10) {
      // HTTP/1.0 has no chunked coding (RFC 9112 7): the payload goes decoded, and the close ends it.
    } else if (h.chunked) {
      absl::StrAppend(&out, "Transfer-Encoding: ", *h.Find("transfer-encoding"), "\r\n");
    } else if (h.content_length) {
      absl::StrAppend(&out, "Content-Length: ", *h.content_length, "\r\n");
    }
  }
  if (!x.set_cookie.empty() && h.status >= 200) {
    absl::StrAppend(&out, "Set-Cookie: ", x.service->route.sticky.name, "=", x.set_cookie,
                    "; Path=/; HttpOnly; SameSite=Lax\r\n");
  }
  if (h.status == 101) {
    out.append("Connection: Upgrade\r\n");
  } else if (close) {
    out.append("Connection: close\r\n");
  } else if (http10) {
    out.append("Connection: keep-alive\r\n");  // an HTTP/1.0 client keeps the connection only when told
  }
  out.append("\r\n");
  return out;
}

void Proxy::UpstreamProcess(UpstreamConn* u) {
  if (u->dead) return;
  if (u->tunnel) {
    ClientConn* c = u->tunnel;
    if (!u->in.empty()) {
      c->out.Append(u->in.view());
      u->in.Clear();
      MarkDirty(c);
      if (c->out.size() > options_.write_high_water) u->read_blocked = true;
    }
    if (u->peer_closed) {
      c->close_after = true;
      c->tunnel = nullptr;
      MarkDirty(c);
      u->tunnel = nullptr;
      CloseUpstream(u);
      return;
    }
    if (u->more_to_read && !u->read_blocked) resume_upstreams_.push_back(u), ScheduleFlush();
    return;
  }
  while (!u->fifo.empty() && !u->dead) {
    Exchange* x = u->fifo.front().get();
    ClientConn* c = x->client;
    if (c && c->out.size() > options_.write_high_water) {
      u->read_blocked = true;
      Unpipeline(u);  // those behind a client that does not read go elsewhere
      return;
    }
    if (!u->framer.head_done()) {
      if (u->in.empty()) break;
      auto n = u->framer.ParseHead(u->in.view());
      if (!n.ok()) {
        FailUpstream(u, Outcome::kServerError, 502,
                     absl::StrCat("replica ", u->replica_id, " answered badly: ", n.status().message()));
        return;
      }
      u->in.Consume(*n);
      if (!u->framer.head_done()) break;
      const MessageHead& h = u->framer.head();
      int codings = 0;
      for (const HeaderField& f : h.headers) codings += absl::EqualsIgnoreCase(f.name, "transfer-encoding") ? 1 : 0;
      if (codings > 1 || (h.status == 101 && !x->upgrade)) {
        FailUpstream(u, Outcome::kServerError, 502,
                     absl::StrCat("replica ", u->replica_id,
                                  codings > 1 ? " framed its answer twice" : " switched protocols unasked"));
        return;
      }
      x->status = h.status;
      const bool interim = h.status >= 100 && h.status < 200 && h.status != 101;
      const bool hold = c && !interim && h.status != 101 && x->retryable && x->request_complete &&
                        x->attempts <= x->service->route.retries && h.content_length.has_value() &&
                        *h.content_length <= options_.retry_buffer;
      if (c && !(interim && c->http10)) {  // no 1xx for an HTTP/1.0 client (RFC 9110 15.2)
        // An answer before the whole request body: the rest of the body is dropped and the connection closes after
        // (its bytes must never be read as requests). An HTTP/1.0 client keeps its connection only when the
        // answer's length is known (RFC 9112 9.3): a chunked one goes decoded and ends with the connection.
        const bool length_known = u->framer.done() || h.content_length.has_value();
        const bool close = !interim && (h.body_until_eof || !c->keep_alive || c->peer_closed || !x->request_complete ||
                                        (c->http10 && !length_known));
        if (hold) {
          x->held = ResponseHead(*x, h, close, c->http10);
        } else {
          c->out.Append(ResponseHead(*x, h, close, c->http10));
          MarkDirty(c);
        }
        if (close) c->keep_alive = false;
      }
      x->response_started = !hold;
      if (!interim && (!h.keep_alive || h.version < 11) && x->replica) x->replica->closes_connections = true;
      if (h.status == 101 && c) {
        StartTunnel(u, c);
        return;
      }
      if (interim) {
        u->framer.Reset(x->head_request);
        continue;
      }
      if (!hold) CountTokens(*x, h);
    }
    // For an HTTP/1.0 client a chunked body goes decoded, straight into its output.
    const bool dechunk = c && c->http10 && u->framer.head().chunked;
    auto n = u->framer.ParseBody(u->in.view(), dechunk ? &c->out.bytes : nullptr);
    if (!n.ok()) {
      FailUpstream(u, Outcome::kServerError, 502, "the replica's answer body was malformed");
      return;
    }
    if (*n > 0) {
      if (!x->held.empty()) {
        x->held.append(u->in.view().substr(0, *n));
      } else if (c) {
        if (!dechunk) c->out.Append(u->in.view().substr(0, *n));
        MarkDirty(c);
      }
      u->in.Consume(*n);
    }
    if (!u->framer.done()) {
      if (u->peer_closed && u->framer.head().body_until_eof && u->in.empty()) {
        (void)u->framer.Eof();
      } else {
        break;
      }
    }
    if (!x->held.empty()) {  // the whole answer came: now it goes out (the exchange ends just below)
      x->response_started = true;
      CountTokens(*x, u->framer.head());
      if (c) {
        c->out.Append(x->held);
        MarkDirty(c);
      }
    }
    // A request with a body on a method whose body servers may ignore (GET, HEAD, DELETE, OPTIONS, TRACE): such a
    // server reads that body as a request of its own and answers it, so the connection is not used again.
    const bool body_ignorable = x->has_body && IsIdempotent(x->method) && x->method != "PUT";
    FinishExchange(u, u->framer.head().keep_alive && !u->framer.head().body_until_eof && !body_ignorable);
  }
  if (u->dead) return;
  if (u->fifo.empty() && !u->in.empty()) {
    // Bytes no request asked for (an extra answer, a body longer than its length): the connection cannot be trusted
    // with another client's request.
    CloseUpstream(u);
    return;
  }
  if (u->peer_closed) {
    if (u->fifo.empty()) {
      CloseUpstream(u);
    } else {
      FailUpstream(u, Outcome::kConnectFailure, 502,
                   absl::StrCat("replica ", u->replica_id, " closed the connection before answering"));
    }
    return;
  }
  if (u->more_to_read && !u->read_blocked) resume_upstreams_.push_back(u), ScheduleFlush();
}

void Proxy::CountTokens(const Exchange& x, const MessageHead& h) {
  const std::string* tokens = h.Find("gpugeek-tokens");
  uint64_t t = 0;
  if (tokens == nullptr || !absl::SimpleAtoi(*tokens, &t)) return;
  if (VersionMetrics* m = MetricsFor(x); m && m->tokens) m->tokens->Inc(static_cast<double>(t));
  if (!x.version_name.empty()) {
    std::lock_guard lock(x.service->stats->mu);
    x.service->stats->tokens_by_version[x.version_name] += t;
  }
}

void Proxy::Unpipeline(UpstreamConn* u) {
  if (u->fifo.size() < 2) return;
  // Only pipelined (idempotent, bodiless) requests stand behind the head; none of their answers came yet.
  std::vector<std::unique_ptr<Exchange>> behind;
  while (u->fifo.size() > 1) {
    behind.push_back(std::move(u->fifo.back()));
    u->fifo.pop_back();
  }
  u->closing = true;  // its order is broken: it ends with its head's answer
  for (auto it = behind.rbegin(); it != behind.rend(); ++it) {
    std::unique_ptr<Exchange> x = std::move(*it);
    if (!x->pipelinable) --u->not_pipelinable;
    x->service->balancer.Finish(x->replica, Outcome::kClientError, now_);
    x->service->stats->in_flight.fetch_sub(1, std::memory_order_relaxed);
    x->upstream = nullptr;
    x->replica = nullptr;
    --x->attempts;  // not an attempt: it was never answered
    x->tried.pop_back();
    if (x->client == nullptr) continue;
    Dispatch(std::move(x));
  }
}

void Proxy::FinishExchange(UpstreamConn* u, bool keep_upstream) {
  std::unique_ptr<Exchange> x = std::move(u->fifo.front());
  u->fifo.pop_front();
  if (!x->pipelinable) --u->not_pipelinable;
  const Outcome outcome = x->status >= 500   ? Outcome::kServerError
                          : x->status >= 400 ? Outcome::kClientError
                                             : Outcome::kSuccess;
  x->service->balancer.Finish(x->replica, outcome, now_);
  x->service->stats->in_flight.fetch_sub(1, std::memory_order_relaxed);
  Record(*x);
  const bool until_eof = u->framer.head().body_until_eof;
  if (!x->request_complete) keep_upstream = false;  // answered before its body ended: that body never goes on
  if (!u->fifo.empty()) u->framer.Reset(u->fifo.front()->head_request);
  if (ClientConn* c = x->client) {
    c->active = nullptr;
    if (until_eof || !c->keep_alive || !x->request_complete) c->close_after = true;
    if (!x->request_complete) {
      // The rest of its body is dropped, never read as requests; the connection closes once the answer is out.
      c->reading_body = false;
      c->keep_alive = false;
      c->linger = true;
      c->in.Clear();
    }
    MarkDirty(c);
    if (!c->close_after && !c->in.empty()) resume_.push_back(c), ScheduleFlush();
  }
  if (!keep_upstream) {
    u->closing = true;
    if (u->fifo.empty()) {
      CloseUpstream(u);
    } else {
      // The replica closes after this answer: the requests behind it were never taken, and every one of them is
      // idempotent (only those share a connection), so they go again (RFC 9112 9.3.2).
      FailUpstream(u, Outcome::kClientError, 502, "the replica closed a shared connection", /*replica_closed=*/true);
    }
    return;
  }
  if (u->fifo.empty()) ReleaseUpstream(u);
}

void Proxy::StartTunnel(UpstreamConn* u, ClientConn* c) {
  std::unique_ptr<Exchange> x = std::move(u->fifo.front());
  u->fifo.pop_front();
  if (!x->pipelinable) --u->not_pipelinable;
  x->service->balancer.Finish(x->replica, Outcome::kSuccess, now_);
  x->service->stats->in_flight.fetch_sub(1, std::memory_order_relaxed);
  Record(*x);
  c->active = nullptr;
  c->reading_body = false;
  c->tunnel = u;
  u->tunnel = c;
  // Bytes each side sent after the upgrade go straight through.
  if (!u->in.empty()) {
    c->out.Append(u->in.view());
    u->in.Clear();
  }
  if (!c->in.empty()) {
    u->out.Append(c->in.view());
    c->in.Clear();
    MarkDirty(u);
  }
  // The connection left the pool: it belongs to the tunnel now.
  auto& pool = pools_[u->replica_id];
  std::erase(pool, u);
  MarkDirty(c);
}

void Proxy::ReleaseUpstream(UpstreamConn* u) {
  u->idle_since = now_;
  if (u->closing) {
    CloseUpstream(u);
    return;
  }
  auto& pool = pools_[u->replica_id];
  int idle = 0;
  for (UpstreamConn* p : pool) idle += p->Idle() ? 1 : 0;
  if (idle > options_.max_idle_upstream) CloseUpstream(u);
}

void Proxy::UpstreamFlush(UpstreamConn* u) {
  if (u->dead || u->connecting) return;
  if (!WriteFrom(u->fd, u->out)) {
    FailUpstream(u, Outcome::kConnectFailure, 502, absl::StrCat("replica ", u->replica_id, " reset the connection"));
    return;
  }
  if (u->out.empty() && u->closing && u->fifo.empty() && u->tunnel == nullptr) {
    CloseUpstream(u);
    return;
  }
  if (u->out.size() <= options_.write_high_water / 2) {
    ClientConn* c = u->tunnel;
    if (c == nullptr && !u->fifo.empty()) c = u->fifo.back()->client;
    if (c && !c->dead && (c->reading_body || c->read_blocked || c->tunnel)) resume_.push_back(c), ScheduleFlush();
  }
}

void Proxy::CloseUpstream(UpstreamConn* u) {
  if (u->dead) return;
  u->dead = true;
  reactor_->Unwatch(u->fd);
  close(u->fd);
  garbage_ = true;
  if (auto it = pools_.find(u->replica_id); it != pools_.end()) {
    std::erase(it->second, u);
    if (it->second.empty()) pools_.erase(it);
  }
  if (ClientConn* c = u->tunnel) {
    u->tunnel = nullptr;
    c->tunnel = nullptr;
    c->close_after = true;
    MarkDirty(c);
  }
  ScheduleFlush();
}

void Proxy::FailUpstream(UpstreamConn* u, Outcome outcome, int status, std::string_view why, bool replica_closed) {
  if (u->dead) return;
  std::deque<std::unique_ptr<Exchange>> fifo;
  fifo.swap(u->fifo);
  u->not_pipelinable = 0;
  CloseUpstream(u);
  bool first = true;
  const std::string reason(why);
  for (auto& x : fifo) {
    // The failure is the replica's once (the exchange at the head); those behind it were not its fault.
    x->service->balancer.Finish(x->replica, first && !replica_closed ? outcome : Outcome::kClientError, now_);
    first = false;
    x->service->stats->in_flight.fetch_sub(1, std::memory_order_relaxed);
    x->upstream = nullptr;
    x->replica = nullptr;
    x->held.clear();  // an answer cut short is dropped whole; the client saw none of it
    if (x->client == nullptr) continue;
    if (replica_closed && !x->response_started) {
      --x->attempts;  // never taken by the replica: not an attempt, and the replica may serve it again
      x->tried.pop_back();
      Dispatch(std::move(x));
      continue;
    }
    if (!x->response_started && x->retryable && x->attempts <= x->service->route.retries) {
      Dispatch(std::move(x));
      continue;
    }
    FailExchange(std::move(x), status, reason);
  }
}

// ---------------------------------------------------------------------------------------------- batching

void Proxy::MarkDirty(ClientConn* c) {
  if (c->dirty || c->dead) return;
  c->dirty = true;
  dirty_clients_.push_back(c);
  ScheduleFlush();
}

void Proxy::MarkDirty(UpstreamConn* u) {
  if (u->dirty || u->dead) return;
  u->dirty = true;
  dirty_upstreams_.push_back(u);
  ScheduleFlush();
}

void Proxy::ScheduleFlush() {
  if (flush_scheduled_) return;
  flush_scheduled_ = true;
  reactor_->AfterBatch([this] {
    flush_scheduled_ = false;
    FlushAll();
  });
}

void Proxy::FlushAll() {
  // Clients that can go on first (they may write to upstreams), then every upstream (one write each for all the
  // requests of this batch), then every client.
  std::vector<ClientConn*> resume;
  resume.swap(resume_);
  for (ClientConn* c : resume) {
    if (c->dead) continue;
    ClientProcess(c);
  }
  std::vector<UpstreamConn*> resume_ups;
  resume_ups.swap(resume_upstreams_);
  for (UpstreamConn* u : resume_ups) {
    if (u->dead) continue;
    UpstreamRead(u);
    UpstreamProcess(u);
  }
  std::vector<UpstreamConn*> ups;
  ups.swap(dirty_upstreams_);
  for (UpstreamConn* u : ups) {
    u->dirty = false;
    UpstreamFlush(u);
  }
  std::vector<ClientConn*> clients;
  clients.swap(dirty_clients_);
  for (ClientConn* c : clients) {
    c->dirty = false;
    ClientFlush(c);
  }
  if (resume_.empty() && resume_upstreams_.empty() && dirty_upstreams_.empty() && dirty_clients_.empty()) Collect();
}

void Proxy::Collect() {
  if (!garbage_) return;
  garbage_ = false;
  std::erase_if(clients_, [](const auto& c) { return c->dead; });
  std::erase_if(upstreams_, [](const auto& u) { return u->dead; });
}

// ---------------------------------------------------------------------------------------------- time

void Proxy::Tick() {
  Touch();
  ApplyRoutes();
  ResumeAuthWaits();
  for (auto& cp : clients_) {
    ClientConn* c = cp.get();
    if (c->dead) continue;
    if (c->lingering) {
      if (now_ >= c->linger_until) CloseClient(c);
      continue;
    }
    if (c->write_stalled_since != MonoTime{} && now_ - c->write_stalled_since > options_.write_timeout) {
      CloseClient(c);  // it takes nothing of what it asked for: its connection and what it holds go
      continue;
    }
    if (c->tunnel) {
      if (now_ - c->last_activity > options_.tunnel_idle_timeout) CloseClient(c);
      continue;
    }
    if (c->tls && !HandshakeDone(c->tls) && now_ - c->accepted_at > options_.header_timeout) {
      CloseClient(c);  // a TLS handshake is part of the first request's head: the same deadline
      continue;
    }
    if (c->active == nullptr && c->head_began != MonoTime{} && now_ - c->head_began > options_.header_timeout) {
      c->keep_alive = false;
      Respond(c, 408, StatusText(408), "the request head did not arrive in time");
      c->in.Clear();
      c->head_began = MonoTime{};
      continue;
    }
    if (c->active != nullptr && c->reading_body && c->active->upstream != nullptr &&
        now_ - std::max(c->last_activity, c->active->sent_at) > options_.body_timeout) {
      // (While it waits in the activator its body waits unread in the socket: no deadline for the client then.)
      // A body that stopped coming holds a replica's connection: both go.
      Exchange* x = c->active;
      if (x->response_started) {
        CloseClient(c);
        continue;
      }
      c->active = nullptr;
      c->keep_alive = false;
      Respond(c, 408, StatusText(408), "the request body stopped arriving");
      c->in.Clear();
      Abandon(x);
      continue;
    }
    if (c->active == nullptr && c->head_began == MonoTime{} && c->in.empty() && c->out.empty() &&
        now_ - c->last_activity > options_.idle_timeout) {
      CloseClient(c);
    }
  }
  for (auto& up : std::vector<UpstreamConn*>([&] {
         std::vector<UpstreamConn*> v;
         for (auto& u : upstreams_) v.push_back(u.get());
         return v;
       }())) {
    UpstreamConn* u = up;
    if (u->dead || u->tunnel) continue;
    if (u->connecting && now_ - u->connect_began > options_.connect_timeout) {
      FailUpstream(u, Outcome::kConnectFailure, 502, absl::StrCat("no connection to replica ", u->replica_id));
      continue;
    }
    if (!u->fifo.empty() && !u->framer.head_done() && now_ - u->fifo.front()->sent_at > options_.upstream_timeout) {
      u->fifo.front()->retryable = false;  // one long wait is enough
      FailUpstream(u, Outcome::kServerError, 504,
                   absl::StrCat("replica ", u->replica_id, " did not answer within the upstream timeout"));
      continue;
    }
    if (!u->fifo.empty() && u->framer.head_done() && !u->read_blocked &&
        now_ - u->last_progress > options_.upstream_timeout) {
      u->fifo.front()->retryable = false;  // a held answer that stalled: 504, not another long wait
      FailUpstream(u, Outcome::kServerError, 504,
                   absl::StrCat("replica ", u->replica_id, "'s answer stopped arriving"));
      continue;
    }
    if ((u->Idle() && now_ - u->idle_since > options_.upstream_idle_timeout) || (u->closing && u->fifo.empty())) {
      CloseUpstream(u);
    }
  }
  for (auto& [name, s] : services_) {
    while (!s->activator.empty() && (s->activator.front()->client == nullptr ||
                                     now_ - s->activator.front()->sent_at > s->route.activator_timeout)) {
      auto x = std::move(s->activator.front());
      s->activator.pop_front();
      s->stats->queued.fetch_sub(1, std::memory_order_relaxed);
      FailExchange(std::move(x), 503,
                   absl::StrCat("no replica of ", name, " became ready within the activator's timeout"));
    }
  }
  DrainActivators();
  h2_->Tick();
  ScheduleFlush();
}

void Proxy::CloseAll() {
  if (h2_) h2_->CloseAll();
  for (auto& c : clients_) {
    if (!c->dead) {
      c->dead = true;
      reactor_->Unwatch(c->fd);
      close(c->fd);
    }
  }
  for (auto& u : upstreams_) {
    if (!u->dead) {
      u->dead = true;
      reactor_->Unwatch(u->fd);
      close(u->fd);
    }
  }
  auth_wait_.clear();
  clients_.clear();
  upstreams_.clear();
  pools_.clear();
  if (listen_fd_ >= 0) {
    reactor_->Unwatch(listen_fd_);
    close(listen_fd_);
    listen_fd_ = -1;
  }
}

// ---------------------------------------------------------------------------------------------- metrics

VersionMetrics* Proxy::MetricsFor(const Exchange& x) {
  Service& s = *x.service;
  if (x.version < 0 || static_cast<size_t>(x.version) >= s.version_metrics.size()) return nullptr;
  if (s.balancer.versions()[x.version].name != x.version_name) return nullptr;
  return &s.version_metrics[x.version];
}

void Proxy::Record(Exchange& x) {
  x.service->stats->requests.fetch_add(1, std::memory_order_relaxed);
  if (!x.version_name.empty()) {
    std::lock_guard lock(x.service->stats->mu);
    ++x.service->stats->by_version[x.version_name];
  }
  VersionMetrics* m = MetricsFor(x);
  if (m == nullptr || m->by_class[0] == nullptr) return;
  const int k = x.status >= 100 && x.status < 600 ? x.status / 100 : 0;
  m->by_class[k]->Inc();
  m->duration->Observe(std::chrono::duration<double>(now_ - x.began).count());
}

}  // namespace gpugeek::gateway::detail
