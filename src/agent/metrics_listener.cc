#include "agent/metrics_listener.h"

#include <cstdlib>

#include <fmt/format.h>

#include "agent/exec_route.h"
#include "agent/port_route.h"
#include "common/status_macros.h"
#include "http/server.h"

namespace gpugeek::agent {
namespace {

bool IsWildcard(const std::string& host) { return host.empty() || host == "0.0.0.0" || host == "::"; }

std::string HostPort(const std::string& host, int port) {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

}  // namespace

bool MetricsListenDisabled(const std::string& listen) { return listen.empty() || listen == "off"; }

absl::StatusOr<ListenAddress> ParseMetricsListen(const std::string& listen) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(fmt::format(
        "metrics address '{}' must be HOST:PORT with PORT 0..65535 (e.g. 0.0.0.0:9471; port 0 = any free port; "
        "\"off\" turns metrics off)",
        listen));
  };
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return bad();
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port_text = listen.substr(colon + 1);
  if (port_text.empty() || port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos) {
    return bad();
  }
  const int port = std::atoi(port_text.c_str());
  if (port > 65535) return bad();
  return ListenAddress{.host = host.empty() ? "0.0.0.0" : host, .port = port};
}

std::string AnnouncedMetricsAddress(const std::string& bound_host, int port, const std::string& advertise_host) {
  return HostPort(IsWildcard(bound_host) && !advertise_host.empty() ? advertise_host : bound_host, port);
}

absl::StatusOr<std::unique_ptr<MetricsListener>> MetricsListener::Start(const std::string& listen,
                                                                        const metrics::Registry* registry,
                                                                        const std::string& advertise_host,
                                                                        const http::TlsOptions& tls,
                                                                        Agent* exec_agent) {
  if (registry == nullptr) return absl::InvalidArgumentError("MetricsListener needs a registry");
  ASSIGN_OR_RETURN(ListenAddress bound, ParseMetricsListen(listen));
  // Scrapes are rare and cheap: a few threads are plenty.
  ASSIGN_OR_RETURN(std::unique_ptr<http::Server> server,
                   http::Server::Create({.host = bound.host, .port = bound.port, .threads = 2, .tls = tls}));
  server->Route("GET", "/metrics", [registry](const http::Request&) -> absl::StatusOr<http::Reply> {
    return http::Reply::Text(registry->Render(), metrics::kContentType);
  });
  if (exec_agent != nullptr) {
    RegisterExecRoute(*server, *exec_agent);
    RegisterPortRoutes(*server, *exec_agent);
  }
  RETURN_IF_ERROR(server->Start());
  bound.port = server->port();
  std::string address = AnnouncedMetricsAddress(bound.host, bound.port, advertise_host);
  return std::unique_ptr<MetricsListener>(
      new MetricsListener(std::move(server), std::move(bound), std::move(address), tls.enabled()));
}

MetricsListener::MetricsListener(std::unique_ptr<http::Server> server, ListenAddress bound, std::string address,
                                 bool tls)
    : server_(std::move(server)), bound_(std::move(bound)), address_(std::move(address)), tls_(tls) {}

MetricsListener::~MetricsListener() { Stop(); }

int MetricsListener::port() const { return bound_.port; }

std::string MetricsListener::url() const {
  const std::string host = bound_.host == "::" ? "::1" : IsWildcard(bound_.host) ? "127.0.0.1" : bound_.host;
  return fmt::format("{}://{}/metrics", tls_ ? "https" : "http", HostPort(host, bound_.port));
}

absl::Status MetricsListener::ReloadCertificates() { return server_->ReloadCertificates(); }

void MetricsListener::Stop() {
  if (server_ != nullptr) server_->Stop();
}

}  // namespace gpugeek::agent
