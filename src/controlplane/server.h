#pragma once
// ControlPlaneServer: `gpugeek server` in one object. It opens the store (SQLite under data_dir),
// rebuilds the control plane from it, serves the REST API, and runs the controllers' loop.
//
// Two listeners, so user traffic can never starve liveness: the API (`port`) for users, the CLI and
// Prometheus, and the agents' listener (`agent_port`) for registrations and heartbeats only. Each has
// its own I/O threads, worker pool, connection limit and deadlines (http/server.h).
//
// Metrics: GET /metrics on the same port serves the server half of docs/metrics.md (controlplane/
// metrics.h) from a metrics::Registry the server owns, or the caller's (ServerOptions::metrics).
//
// Accounts: every API call but health and the API document needs a token (access.h). On the first
// start (no user in the store) the server creates tenant "default", user "admin" and an admin token,
// written to admin_token_file().
//
// Graceful shutdown (Stop): stop accepting requests, finish those in flight, stop the loop; every
// acknowledged change is already in the store.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "controlplane/accounts.h"
#include "controlplane/control_plane.h"
#include "http/server.h"
#include "metrics/registry.h"
#include "store/sqlite_store.h"

namespace gpugeek::controlplane {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8470;        // the API; 0 = any free port
  int agent_port = 8472;  // the agents' listener; 0 = any free port
  std::string data_dir;   // required: gpugeek.db and logs/
  std::string policy = "FGDFit";
  Duration heartbeat_interval = std::chrono::seconds(1);
  // The fencing timeline (control_plane.h): suspect after `lease`, down after lease + fence_grace +
  // fence_margin.
  Duration lease = std::chrono::seconds(3);
  Duration fence_grace = std::chrono::seconds(2);
  Duration fence_margin = std::chrono::seconds(1);
  Duration reconcile_interval = std::chrono::milliseconds(100);
  // Retention of ended jobs' logs and events (ControlPlaneOptions).
  Duration log_retention = ControlPlaneOptions().log_retention;
  Duration event_retention = ControlPlaneOptions().event_retention;
  // Half-life of the tenants' usage behind fair share (ControlPlaneOptions); 0 = no decay.
  Duration fair_share_half_life = ControlPlaneOptions().fair_share_half_life;
  // Borrowed registry for GET /metrics, e.g. one an in-process agent (`gpugeek up`) also writes to;
  // it must outlive the server. nullptr: the server owns one (metrics()). The server adds its
  // families, gpugeek_build_info included, in Start: whoever shares the registry must not add that
  // family again, and must add its own before Start (Registry::Add* is not safe against a scrape).
  // After a failed Start the registry holds collectors over a destroyed control plane: drop it too.
  metrics::Registry* metrics = nullptr;
};

class ControlPlaneServer {
 public:
  // Opens the store and binds the port. Unavailable when the port is taken or the store cannot be
  // opened.
  static absl::StatusOr<std::unique_ptr<ControlPlaneServer>> Start(const ServerOptions& options);
  ~ControlPlaneServer();
  void Stop();

  std::string url() const { return http_->url(); }
  int port() const { return http_->port(); }
  // Where agents register and heartbeat.
  std::string agent_url() const { return agents_http_->url(); }
  int agent_port() const { return agents_http_->port(); }
  ControlPlane& control_plane() { return *control_plane_; }
  Accounts& accounts() { return *accounts_; }
  // <data_dir>/admin.token: the admin token made on the first start (mode 0600).
  std::string admin_token_file() const { return options_.data_dir + "/admin.token"; }
  // The token in admin_token_file(); "" when it cannot be read (an operator removed it).
  std::string admin_token() const;
  // What GET /metrics renders.
  metrics::Registry& metrics() { return *metrics_; }

 private:
  ControlPlaneServer() = default;
  void Loop();

  ServerOptions options_;
  // Declared first, destroyed last: the control plane's collectors and instruments live in it.
  std::unique_ptr<metrics::Registry> own_metrics_;
  metrics::Registry* metrics_ = nullptr;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<ControlPlane> control_plane_;
  std::unique_ptr<Accounts> accounts_;
  std::unique_ptr<http::Server> http_;         // users
  std::unique_ptr<http::Server> agents_http_;  // agents
  std::thread loop_;
  std::mutex mu_;
  bool stopping_ = false;  // guarded by mu_
};

}  // namespace gpugeek::controlplane
