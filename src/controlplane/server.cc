#include "controlplane/server.h"

#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/status_macros.h"
#include "controlplane/api_routes.h"
#include "controlplane/metrics.h"

namespace gpugeek::controlplane {

absl::StatusOr<std::unique_ptr<ControlPlaneServer>> ControlPlaneServer::Start(const ServerOptions& options) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("server: --data-dir is required");
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir, ec);
  if (ec) return absl::UnavailableError(fmt::format("server: cannot create {}: {}", options.data_dir, ec.message()));
  auto s = std::unique_ptr<ControlPlaneServer>(new ControlPlaneServer());
  s->options_ = options;
  if (options.metrics == nullptr) s->own_metrics_ = std::make_unique<metrics::Registry>();
  s->metrics_ = options.metrics != nullptr ? options.metrics : s->own_metrics_.get();
  ASSIGN_OR_RETURN(
      s->store_, store::SqliteStore::Open({.path = (std::filesystem::path(options.data_dir) / "gpugeek.db").string()}));
  ControlPlaneOptions cp;
  cp.store = s->store_.get();
  cp.data_dir = options.data_dir;
  cp.policy = options.policy;
  cp.heartbeat_interval = options.heartbeat_interval;
  cp.node_timeout = options.node_timeout;
  cp.metrics = s->metrics_;
  ASSIGN_OR_RETURN(s->control_plane_, ControlPlane::Create(cp));
  http::ServerOptions ho;
  ho.host = options.host;
  ho.port = options.port;
  ho.observer = [m = s->control_plane_->metrics()](const std::string& method, const std::string& route, int status,
                                                   Duration elapsed) {
    m->HttpRequest(method, route, status, elapsed);
  };
  ASSIGN_OR_RETURN(s->http_, http::Server::Create(ho));
  RegisterApiRoutes(*s->http_, *s->control_plane_, RealClock());
  RETURN_IF_ERROR(s->http_->Start());
  s->loop_ = std::thread([p = s.get()] { p->Loop(); });
  spdlog::info("gpugeek server listening on {} (data in {})", s->url(), options.data_dir);
  return s;
}

ControlPlaneServer::~ControlPlaneServer() { Stop(); }

void ControlPlaneServer::Stop() {
  if (control_plane_) control_plane_->BeginShutdown();
  // The controllers stop first: while the HTTP server drains its connections (up to its timeouts) no
  // heartbeat may be served, and a reconcile pass would take the silence for dead nodes and requeue
  // their running jobs. A restarted server gives every node a fresh node_timeout.
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (loop_.joinable()) loop_.join();
  if (http_) http_->Stop();
}

void ControlPlaneServer::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    control_plane_->Reconcile();
    lock.lock();
    wake_.wait_for(lock, options_.reconcile_interval, [this] { return stopping_; });
  }
}

}  // namespace gpugeek::controlplane
