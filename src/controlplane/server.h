#pragma once
// ControlPlaneServer: `gpugeek server` in one object. It opens the store (SQLite under data_dir),
// rebuilds the control plane from it, serves the REST API, and runs the controllers' loop.
//
// Graceful shutdown (Stop): stop accepting requests, finish those in flight, stop the loop; every
// acknowledged change is already in the store.

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "controlplane/control_plane.h"
#include "http/server.h"
#include "store/sqlite_store.h"

namespace gpugeek::controlplane {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8470;       // 0 = any free port
  std::string data_dir;  // required: gpugeek.db and logs/
  std::string policy = "FGDFit";
  Duration heartbeat_interval = std::chrono::seconds(1);
  Duration node_timeout = std::chrono::seconds(5);
  Duration reconcile_interval = std::chrono::milliseconds(100);
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
  ControlPlane& control_plane() { return *control_plane_; }

 private:
  ControlPlaneServer() = default;
  void Loop();

  ServerOptions options_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<ControlPlane> control_plane_;
  std::unique_ptr<http::Server> http_;
  std::thread loop_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
};

}  // namespace gpugeek::controlplane
