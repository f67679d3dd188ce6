#pragma once
// StandbyListeners: what a standby server of an active/standby control plane (`gpugeek server --ha`,
// docs/postgres.md "Active/standby") serves on the ports it will serve the API and the agents on once it
// leads: nothing runs, nothing is stored, every request is sent to the leader.
//
//   GET /healthz, GET /v1/healthz  503 {"status": "standby", "leader": URL or ""}: alive, not serving (a load
//                                  balancer's check picks the leader, whose /v1/healthz answers 200).
//   any other request              307 Temporary Redirect, Location = the leader's URL on the same listener
//                                  (API or agents) with the request's own target (path and query as sent),
//                                  when a live leader is
//                                  known; else 503 with Retry-After: 1 (an election is under way).
// Both answers carry `Gpugeek-Standby: 1` (and the 307 `Gpugeek-Leader: URL`), which http::Client reads
// to fail over to the leader among the URLs it was given (it never follows a Location elsewhere, as its
// requests carry tokens); curl -L follows the 307 with the method and body (RFC 9110 section 15.4.8).
// Bodies are gpugeek's JSON error bodies. Thread-safe: SetLeader from any thread while serving.

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "http/server.h"

namespace gpugeek::controlplane {

struct StandbyOptions {
  std::string host = "127.0.0.1";
  int api_port = 0;      // 0 = any free port; api_port() says which
  int agent_port = 0;    // 0 = any free port
  http::TlsOptions tls;  // as the leader's listeners: a client's TLS handshake must succeed to read the answer
};

class StandbyListeners {
 public:
  // Binds both ports and serves. Unavailable when a port is taken; TLS file errors as http::Server::Create.
  static absl::StatusOr<std::unique_ptr<StandbyListeners>> Start(const StandbyOptions& options);
  ~StandbyListeners();  // Stop

  // The live leader's base URLs ("" = none known: answer 503).
  void SetLeader(const std::string& api_url, const std::string& agent_url);
  int api_port() const { return api_->port(); }
  int agent_port() const { return agent_->port(); }
  // Closes both listeners (the ports are free when it returns). Idempotent.
  void Stop();

 private:
  StandbyListeners() = default;
  absl::StatusOr<http::Reply> Answer(const http::Request& r, bool agents) const;

  mutable std::mutex mu_;
  std::string leader_api_url_;    // guarded by mu_
  std::string leader_agent_url_;  // guarded by mu_
  std::unique_ptr<http::Server> api_;
  std::unique_ptr<http::Server> agent_;
};

}  // namespace gpugeek::controlplane
