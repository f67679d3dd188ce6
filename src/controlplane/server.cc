#include "controlplane/server.h"

#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/strings/strip.h"
#include "common/file.h"
#include "common/status_macros.h"
#include "controlplane/api_routes.h"
#include "controlplane/metrics.h"

namespace gpugeek::controlplane {
namespace {

// A job spec is at most 1 MiB and a model config 4 MiB (api/job_spec.h, workload/model_config.h);
// a submission carries both, JSON-escaped.
constexpr size_t kMaxApiBodyBytes = size_t{12} << 20;
// A heartbeat carries at most 4 MiB of log bytes (base64) plus telemetry and reports.
constexpr size_t kMaxAgentBodyBytes = size_t{8} << 20;
// The shortest time between two controller passes.
constexpr auto kMinPassGap = std::chrono::milliseconds(10);

}  // namespace

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
  cp.lease = options.lease;
  cp.fence_grace = options.fence_grace;
  cp.fence_margin = options.fence_margin;
  cp.log_retention = options.log_retention;
  cp.event_retention = options.event_retention;
  cp.fair_share_half_life = options.fair_share_half_life;
  cp.metrics = s->metrics_;
  ASSIGN_OR_RETURN(s->control_plane_, ControlPlane::Create(cp));
  ASSIGN_OR_RETURN(s->accounts_, Accounts::Open(*s->store_, RealClock()));
  ASSIGN_OR_RETURN(std::optional<std::string> bootstrap, s->accounts_->Bootstrap());
  if (bootstrap) {
    // First start: the operator's admin token, readable by the server's user only. The CLI of `gpugeek
    // up` and `gpugeek login --token-file` read it from here.
    RETURN_IF_ERROR(WriteFilePrivate(s->admin_token_file(), *bootstrap + "\n"));
    spdlog::info("first start: created tenant 'default' and user 'admin'; admin token written to {}",
                 s->admin_token_file());
  }
  auto observer = [m = s->control_plane_->metrics()](const std::string& method, const std::string& route, int status,
                                                     Duration elapsed) {
    m->HttpRequest(method, route, status, elapsed);
  };
  http::ServerOptions api;
  api.name = "api";
  api.host = options.host;
  api.port = options.port;
  api.max_body_bytes = kMaxApiBodyBytes;
  api.observer = observer;
  ASSIGN_OR_RETURN(s->http_, http::Server::Create(api));
  RegisterApiRoutes(*s->http_, *s->control_plane_, *s->accounts_, RealClock());
  http::ServerOptions agents;
  agents.name = "agents";
  agents.host = options.host;
  agents.port = options.agent_port;
  agents.max_body_bytes = kMaxAgentBodyBytes;
  agents.observer = observer;
  // Agents heartbeat every second over keep-alive connections; one that stays silent past its lease
  // is handled by the lease, not the socket.
  agents.idle_timeout = std::chrono::seconds(30);
  agents.header_timeout = std::chrono::seconds(5);
  ASSIGN_OR_RETURN(s->agents_http_, http::Server::Create(agents));
  RegisterAgentRoutes(*s->agents_http_, *s->control_plane_);
  RETURN_IF_ERROR(s->agents_http_->Start());
  RETURN_IF_ERROR(s->http_->Start());
  s->loop_ = std::thread([p = s.get()] { p->Loop(); });
  spdlog::info("gpugeek server listening on {} (agents on {}; data in {})", s->url(), s->agent_url(), options.data_dir);
  return s;
}

ControlPlaneServer::~ControlPlaneServer() { Stop(); }

std::string ControlPlaneServer::admin_token() const {
  absl::StatusOr<std::string> text = ReadFileBounded(admin_token_file(), 4096, "admin token");
  if (!text.ok()) return "";
  return std::string(absl::StripAsciiWhitespace(text->substr(0, text->find('\n'))));
}

void ControlPlaneServer::Stop() {
  if (control_plane_) control_plane_->BeginShutdown();
  // The controllers stop first: while the HTTP server drains its connections (up to its timeouts) no
  // heartbeat may be served, and a reconcile pass would take the silence for dead nodes and requeue
  // their running jobs. A restarted server gives every node a fresh node_timeout.
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  if (loop_.joinable()) loop_.join();
  if (http_) http_->Stop();
  if (agents_http_) agents_http_->Stop();
}

void ControlPlaneServer::Loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    const auto start = std::chrono::steady_clock::now();
    control_plane_->Reconcile();
    // The next pass comes after reconcile_interval, or sooner when reports or submissions arrive,
    // but not within kMinPassGap of this one's start, so a stream of heartbeats is handled in batches.
    std::this_thread::sleep_until(start + kMinPassGap);
    control_plane_->WaitForWork(options_.reconcile_interval - kMinPassGap);
  }
}

}  // namespace gpugeek::controlplane
