#pragma once
// MetricsListener: serves `GET /metrics` of a metrics::Registry (Prometheus text format 0.0.4,
// metrics::kContentType) on its own HOST:PORT, for `gpugeek agent --metrics-listen` and
// `gpugeek up --agent-metrics-listen`. The Agent itself never opens a socket for metrics: it only
// updates its instruments in the registry (AgentOptions::metrics), so it stays testable without one.
//
//   metrics::Registry registry;
//   auto agent = Agent::Create({..., .metrics = &registry});          // adds the families first
//   auto listener = MetricsListener::Start("0.0.0.0:9471", &registry, "10.0.0.7");
//   (*agent)->SetMetricsAddress((*listener)->address());             // "10.0.0.7:9471", announced
//
// Thread-safety: the registry must have all its families before Start (Registry's rule: Add* before
// concurrent use); scrapes run on the listener's threads.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "http/tls.h"
#include "metrics/registry.h"

namespace gpugeek::http {
class Server;
}

namespace gpugeek::agent {

class Agent;

// Whether a --metrics-listen value turns the endpoint off: "" or "off".
bool MetricsListenDisabled(const std::string& listen);

struct ListenAddress {
  std::string host;  // without brackets; "0.0.0.0" for all interfaces
  int port = 0;      // 0: any free port
};
// Parses "HOST:PORT" ("127.0.0.1:9471", "[::1]:0", "0.0.0.0:9471"). An empty host (":9471") means all
// interfaces, as Prometheus exporters read it. InvalidArgument naming the form.
absl::StatusOr<ListenAddress> ParseMetricsListen(const std::string& listen);

// The "host:port" Prometheus should scrape: `advertise_host` (the agent's --address) when the
// listener is bound to every interface (0.0.0.0, ::), else the bound host; IPv6 hosts in brackets.
std::string AnnouncedMetricsAddress(const std::string& bound_host, int port, const std::string& advertise_host);

class MetricsListener {
 public:
  // Binds `listen` and serves GET /metrics from `registry` (borrowed; must outlive the listener).
  // With `tls.cert_file` set, serves HTTPS (TLS 1.3 only; http/tls.h), and with tls.client_ca_file only
  // scrapers presenting a certificate from that CA when require_client_cert. InvalidArgument for a
  // malformed address or TLS options (as http::Server::Create, naming the file), NotFound for a TLS file
  // that is missing, Unavailable when the address cannot be bound.
  // With `exec_agent` (borrowed; must outlive the listener) it is the node's API listener: it also serves
  // `POST /v1/exec` for the control plane (exec_route.h), authenticated by the agent's exec token.
  static absl::StatusOr<std::unique_ptr<MetricsListener>> Start(const std::string& listen,
                                                                const metrics::Registry* registry,
                                                                const std::string& advertise_host,
                                                                const http::TlsOptions& tls = {},
                                                                Agent* exec_agent = nullptr);
  ~MetricsListener();  // stops

  int port() const;
  // "http://host:port/metrics", or https:// with TLS (the bound host; 127.0.0.1 for a wildcard bind),
  // for logs.
  std::string url() const;
  // Re-reads the TLS certificate and key for new scrapes (http::Server::ReloadCertificates): on an
  // error the previous certificate stays in use. FailedPrecondition without TLS. Thread-safe.
  absl::Status ReloadCertificates();
  // What the agent announces at registration (AnnouncedMetricsAddress).
  const std::string& address() const { return address_; }
  // Whether it serves HTTPS (what the agent announces as Registration::metrics_tls).
  bool tls() const { return tls_; }
  // Stops serving; idempotent.
  void Stop();

 private:
  MetricsListener(std::unique_ptr<http::Server> server, ListenAddress bound, std::string address, bool tls);

  std::unique_ptr<http::Server> server_;
  ListenAddress bound_;
  std::string address_;
  bool tls_ = false;
};

}  // namespace gpugeek::agent
