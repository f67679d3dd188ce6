// `gpugeek gateway`: the serving gateway on its own (gateway/gateway.h; docs/gateway.md). Routes come either from a
// YAML file (gateway/route_table.h, read again on SIGHUP) or from a control plane's deployments (--server: GET
// /v1/endpoints each second, gateway/endpoint_sync.h, with an admin token); metrics are served on --metrics-listen.
// With --tls-cert and --tls-key clients speak TLS 1.3 to it (ALPN h2 and http/1.1); SIGHUP reads the pair again.
//
//   gpugeek gateway --routes routes.yaml --listen 127.0.0.1:8080 --metrics-listen 127.0.0.1:9480
//   gpugeek gateway --server https://cp:8470 --token-file admin.token --ca-file ca.crt --listen 0.0.0.0:8443
//     --tls-cert gateway.crt --tls-key gateway.key

#include <csignal>
#include <iostream>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "agent/metrics_listener.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "common/absl_fmt.h"
#include "gateway/endpoint_sync.h"
#include "gateway/gateway.h"

namespace gpugeek::cli {

namespace {

gateway::RouteTable LoadRoutes(const std::string& cmd, const std::string& path) {
  const std::string text = ReadFileOrFail(cmd, path, "--routes");
  auto table = gateway::ParseRouteTable(text);
  if (!table.ok()) Fail(cmd, fmt::format("{}: {}", path, table.status().message()), kExitUsage);
  return *std::move(table);
}

}  // namespace

void RegisterGatewayCommand(CLI::App& app) {
  auto* sub = app.add_subcommand("gateway",
                                 "Run the serving gateway: HTTP/1.1 reverse proxy with version splits, "
                                 "power-of-two-choices balancing, retries, WebSocket and an activator");
  struct Options {
    std::string routes;
    std::string listen = "127.0.0.1:8080";
    std::string metrics_listen = "127.0.0.1:9480";
    int pipeline_depth = 16;
    std::string server, token_file, ca_file, token_server;
    std::string tls_cert, tls_key;
  };
  auto o = std::make_shared<Options>();
  auto* routes_option =
      sub->add_option("--routes", o->routes, "Route table (YAML: docs/gateway.md); read again on SIGHUP");
  auto* server = sub->add_option("--server", o->server,
                                 "Control plane URL(s): routes from its deployments (GET /v1/endpoints each second)");
  routes_option->excludes(server);
  sub->add_option("--token-file", o->token_file, "With --server: a file holding an admin token")->needs(server);
  auto* token_server = sub->add_option("--token-server", o->token_server,
                                       "With --routes: the control plane that verifies callers' tokens for routes "
                                       "with auth (with --server, that one)");
  token_server->excludes(server);
  sub->add_option("--ca-file", o->ca_file,
                  "With --server or --token-server over https: the CA its certificate chains to");
  sub->add_option("--listen", o->listen, "HOST:PORT to serve on (numeric IPv4; port 0: any free port)")
      ->capture_default_str();
  sub->add_option("--metrics-listen", o->metrics_listen, "HOST:PORT for GET /metrics, or off")->capture_default_str();
  auto* tls_cert = sub->add_option("--tls-cert", o->tls_cert,
                                   "TLS: the gateway's certificate chain (PEM, leaf first); read again on SIGHUP");
  auto* tls_key = sub->add_option("--tls-key", o->tls_key, "TLS: the certificate's private key (unencrypted PEM)");
  tls_cert->needs(tls_key);
  tls_key->needs(tls_cert);
  sub->add_option("--pipeline-depth", o->pipeline_depth,
                  "Idempotent requests in flight on one upstream connection (1: no pipelining)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sub->callback([o] {
    const std::string cmd = "gateway";
    if (o->routes.empty() == o->server.empty()) Fail(cmd, "give --routes FILE or --server URL", kExitUsage);
    gateway::RouteTable routes = o->routes.empty() ? gateway::RouteTable{} : LoadRoutes(cmd, o->routes);
    const size_t colon = o->listen.rfind(':');
    int port = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(o->listen.substr(colon + 1), &port) || port < 0 ||
        port > 65535) {
      Fail(cmd, fmt::format("--listen \"{}\": give HOST:PORT, e.g. 127.0.0.1:8080", o->listen), kExitUsage);
    }
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    spdlog::set_default_logger(spdlog::stderr_color_mt("gpugeek-gateway"));

    metrics::Registry registry;
    gateway::GatewayOptions options;
    options.listen_host = o->listen.substr(0, colon);
    options.port = static_cast<uint16_t>(port);
    options.pipeline_depth = o->pipeline_depth;
    options.registry = &registry;
    if (!o->tls_cert.empty()) {
      auto tls = gateway::TlsServerContext::Load(o->tls_cert, o->tls_key);
      if (!tls.ok()) Fail(cmd, fmt::format("--tls-cert/--tls-key: {}", tls.status().message()), kExitUsage);
      options.tls = *std::move(tls);
    }
    if (!o->ca_file.empty() && o->server.empty() && o->token_server.empty()) {
      Fail(cmd, "--ca-file: give it with --server or --token-server (the control plane it verifies)", kExitUsage);
    }
    // Routes with auth (services with `traffic.auth: token`): callers' tokens are verified by the control plane.
    if (const std::string& verifier = o->server.empty() ? o->token_server : o->server; !verifier.empty()) {
      gateway::TokenCheckOptions check;
      check.client.base_url = verifier;
      check.client.ca_file = o->ca_file;
      options.token_check = check;
    }
    auto gw = gateway::Gateway::Start(options, std::move(routes));
    if (!gw.ok()) Fail(cmd, fmt::format("{}", gw.status().message()));
    std::unique_ptr<agent::MetricsListener> metrics_listener;
    if (!agent::MetricsListenDisabled(o->metrics_listen)) {
      auto m = agent::MetricsListener::Start(o->metrics_listen, &registry, "127.0.0.1");
      if (!m.ok()) Fail(cmd, fmt::format("--metrics-listen: {}", m.status().message()));
      metrics_listener = *std::move(m);
      std::cout << fmt::format("gpugeek gateway: metrics on http://{}/metrics\n", metrics_listener->address());
    }
    std::unique_ptr<gateway::EndpointSync> sync;
    if (!o->server.empty()) {
      gateway::EndpointSyncOptions so;
      so.client.base_url = o->server;
      so.client.ca_file = o->ca_file;
      if (!o->token_file.empty()) {
        so.client.bearer_token =
            std::string(absl::StripAsciiWhitespace(ReadFileOrFail(cmd, o->token_file, "--token-file")));
      }
      so.gateway_id = fmt::format("{}:{}", options.listen_host, (*gw)->port());
      auto started = gateway::EndpointSync::Start(so, gw->get());
      if (!started.ok()) Fail(cmd, fmt::format("--server: {}", started.status().message()), kExitUsage);
      sync = *std::move(started);
    }
    std::cout << fmt::format("gpugeek gateway listening on {}://{}:{}\n", options.tls ? "https" : "http",
                             options.listen_host, (*gw)->port())
              << std::flush;
    int signal = 0;
    while (sigwait(&signals, &signal) == 0 && signal == SIGHUP) {
      if (options.tls) {
        if (absl::Status st = options.tls->Reload(); st.ok()) {
          spdlog::info("SIGHUP: TLS certificate reloaded from {}", o->tls_cert);
        } else {
          spdlog::error("SIGHUP: TLS certificate not reloaded, the previous one stays: {}", st.message());
        }
      }
      if (sync) continue;  // routes come from the control plane
      auto table = gateway::ParseRouteTable(ReadFileOrFail(cmd, o->routes, "--routes"));
      absl::Status st = table.ok() ? (*gw)->SetRoutes(*std::move(table)) : table.status();
      if (st.ok()) {
        spdlog::info("SIGHUP: routes reloaded from {}", o->routes);
      } else {
        spdlog::error("SIGHUP: routes not reloaded, the previous ones stay: {}", st.message());
      }
    }
    if (sync) sync->Stop();
    (*gw)->Stop();
    pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
    std::cout << "gpugeek gateway: stopped\n";
  });
}

}  // namespace gpugeek::cli
