#include "gateway/endpoint_sync.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/json_reader.h"
#include "common/absl_fmt.h"

namespace gpugeek::gateway {

namespace {

#define SYNC_ASSIGN(lhs, expr)        \
  do {                                \
    auto _r = (expr);                 \
    if (!_r.ok()) return _r.status(); \
    lhs = *std::move(_r);             \
  } while (0)

absl::StatusOr<ReplicaEndpoint> ReplicaFromJson(const api::JsonReader& r) {
  if (auto s = r.CheckObject({"id", "address", "capacity_milli"}); !s.ok()) return s;
  ReplicaEndpoint e;
  SYNC_ASSIGN(e.id, r.String("id"));
  std::string address;
  SYNC_ASSIGN(address, r.String("address"));
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("replica ", e.id, ": address \"", address, "\" is not host:port"));
  }
  e.host = address.substr(0, colon);
  e.port = static_cast<uint16_t>(port);
  SYNC_ASSIGN(e.capacity_milli, r.Int("capacity_milli", 1000, 1, int64_t{1} << 40));
  return e;
}

absl::StatusOr<ServiceRoute> RouteFromJson(const api::JsonReader& r) {
  if (auto s = r.CheckObject({"service", "hosts", "path_prefix", "sticky", "retries", "activator", "auth", "versions"});
      !s.ok()) {
    return s;
  }
  ServiceRoute route;
  SYNC_ASSIGN(route.service, r.String("service"));
  SYNC_ASSIGN(route.path_prefix, r.String("path_prefix", "/"));
  if (r.Has("hosts")) {
    const nlohmann::json& hosts = r.json()["hosts"];
    if (!hosts.is_array()) return absl::InvalidArgumentError("hosts: must be a list of host names");
    for (const auto& h : hosts) {
      if (!h.is_string()) return absl::InvalidArgumentError("hosts: must be a list of host names");
      route.hosts.push_back(h.get<std::string>());
    }
  }
  if (r.Has("sticky")) {
    api::JsonReader sticky(r.json()["sticky"], "sticky");
    if (auto s = sticky.CheckObject({"header", "cookie"}); !s.ok()) return s;
    route.sticky.kind = sticky.Has("header") ? StickyKind::kHeader : StickyKind::kCookie;
    SYNC_ASSIGN(route.sticky.name, sticky.String(sticky.Has("header") ? "header" : "cookie"));
  }
  if (r.Has("auth")) {
    api::JsonReader auth(r.json()["auth"], "auth");
    if (auto s = auth.CheckObject({"tenant"}); !s.ok()) return s;
    SYNC_ASSIGN(route.auth_tenant, auth.String("tenant"));
    if (route.auth_tenant.empty()) return absl::InvalidArgumentError("auth.tenant: must name a tenant");
  }
  int64_t retries = 0;
  SYNC_ASSIGN(retries, r.Int("retries", 2, 0, 5));
  route.retries = static_cast<int>(retries);
  if (r.Has("activator")) {
    api::JsonReader a(r.json()["activator"], "activator");
    if (auto s = a.CheckObject({"queue", "timeout_ms"}); !s.ok()) return s;
    int64_t queue = 0, timeout_ms = 0;
    SYNC_ASSIGN(queue, a.Int("queue", 10000, 0, 1'000'000));
    SYNC_ASSIGN(timeout_ms, a.Int("timeout_ms", 60000, 1000, 3'600'000));
    route.activator_queue = static_cast<size_t>(queue);
    route.activator_timeout = std::chrono::milliseconds(timeout_ms);
  }
  std::vector<api::JsonReader> versions;
  SYNC_ASSIGN(versions, r.Objects("versions"));
  for (const api::JsonReader& v : versions) {
    if (auto s = v.CheckObject({"name", "weight", "replicas"}); !s.ok()) return s;
    VersionEndpoints ve;
    SYNC_ASSIGN(ve.name, v.String("name"));
    int64_t weight = 0;
    SYNC_ASSIGN(weight, v.Int("weight", std::nullopt, 0, 100));
    ve.weight_percent = static_cast<int>(weight);
    std::vector<api::JsonReader> replicas;
    SYNC_ASSIGN(replicas, v.Objects("replicas"));
    for (const api::JsonReader& rep : replicas) {
      ReplicaEndpoint e;
      SYNC_ASSIGN(e, ReplicaFromJson(rep));
      ve.replicas.push_back(std::move(e));
    }
    route.versions.push_back(std::move(ve));
  }
  return route;
}

}  // namespace

absl::StatusOr<RouteTable> RouteTableFromJson(const nlohmann::json& j) {
  api::JsonReader root(j, "endpoints");
  if (auto s = root.CheckObject({"routes"}); !s.ok()) return s;
  std::vector<api::JsonReader> routes;
  SYNC_ASSIGN(routes, root.Objects("routes"));
  RouteTable table;
  for (const api::JsonReader& r : routes) {
    ServiceRoute route;
    SYNC_ASSIGN(route, RouteFromJson(r));
    table.routes.push_back(std::move(route));
  }
  if (auto s = ValidateRouteTable(table); !s.ok()) return s;
  return table;
}

absl::StatusOr<std::unique_ptr<EndpointSync>> EndpointSync::Start(EndpointSyncOptions options, Gateway* gateway) {
  // The load report's instance is GATEWAY_ID/NONCE, at most 100 printable characters without spaces.
  if (options.gateway_id.empty() || options.gateway_id.size() > 64 ||
      !std::all_of(options.gateway_id.begin(), options.gateway_id.end(), [](char c) { return c > ' ' && c < 0x7f; })) {
    return absl::InvalidArgumentError("gateway_id: 1-64 printable characters without spaces, e.g. HOST:PORT");
  }
  auto client = http::Client::Create(options.client);
  if (!client.ok()) return client.status();
  std::unique_ptr<EndpointSync> sync(new EndpointSync(std::move(options), gateway, *std::move(client)));
  sync->thread_ = std::thread([s = sync.get()] { s->Run(); });
  return sync;
}

EndpointSync::EndpointSync(EndpointSyncOptions options, Gateway* gateway, std::unique_ptr<http::Client> client)
    : options_(std::move(options)), gateway_(gateway), client_(std::move(client)) {}

EndpointSync::~EndpointSync() { Stop(); }

void EndpointSync::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EndpointSync::Run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    Poll();
    lock.lock();
    cv_.wait_for(lock, options_.period, [this] { return stop_; });
  }
}

void EndpointSync::Poll() {
  auto reply = client_->Get("/v1/endpoints");
  absl::StatusOr<RouteTable> table =
      reply.ok() ? RouteTableFromJson(*reply) : absl::StatusOr<RouteTable>(reply.status());
  if (!table.ok()) {
    if (failures_.fetch_add(1) % 30 == 0) {
      spdlog::warn("gateway: endpoints not read ({}); serving the last ones", table.status().message());
    }
  } else if (!have_last_ || !(*table == last_)) {
    if (auto s = gateway_->SetRoutes(*table); s.ok()) {
      last_ = *std::move(table);
      have_last_ = true;
      applied_.fetch_add(1);
    } else {
      failures_.fetch_add(1);
      spdlog::warn("gateway: endpoints refused: {}", s.message());
    }
  }
  nlohmann::json services = nlohmann::json::object();
  for (const auto& [name, load] : gateway_->Load()) {
    services[name] = {{"in_flight", load.in_flight},
                      {"queued", load.queued},
                      {"versions", load.by_version},
                      {"tokens", load.tokens_by_version}};
  }
  if (!services.empty()) {
    auto posted = client_->Post("/v1/services/load", {{"gateway", options_.gateway_id},
                                                      {"instance", options_.gateway_id + "/" + gateway_->instance()},
                                                      {"services", services}});
    if (!posted.ok()) failures_.fetch_add(1);
  }
}

}  // namespace gpugeek::gateway
