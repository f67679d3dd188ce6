// `gpugeek up [--listen HOST:PORT] [--emulate SPEC] [--data-dir DIR] [--store postgres://...] [--policy NAME]
//  [--agent-metrics-listen HOST:PORT|off] [--gateway-listen HOST:PORT|off] [--insecure-no-tls]`: the embedded
// single-machine default. One process runs the control plane (SQLite under DIR/server, or the PostgreSQL
// database of --store) and one agent
// for this host (DIR/agent): real GPUs when NVML or ROCm SMI finds any, else an emulated 8-GPU node,
// so the whole job flow works on a machine without a GPU. The agent serves its Prometheus metrics
// (docs/metrics.md, "Agent") on --agent-metrics-listen, apart from the server's own /metrics. Runs until SIGINT /
// SIGTERM; then the agent stops its workloads gracefully and the server stops. The serving gateway runs in the
// same process on --gateway-listen (HTTP/1.1, HTTP/2 and WebSocket for the services' clients; routes from
// this server's deployments, gateway/endpoint_sync.h), its metrics beside the agent's.
// TLS 1.3 on every listener with zero configuration: the server's local CA and certificate (DIR/server/tls,
// made on the first start) serve the API, the agents' listener, the agent's metrics and the gateway; the agent trusts
// that CA, and so does the CLI profile "local" saved here. SIGHUP reloads (and renews) the certificates.

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include <fmt/format.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "agent/agent.h"
#include "agent/engine_runtimes.h"
#include "agent/metrics_listener.h"
#include "agent/workload_listener.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "cli/config.h"
#include "cli/podman_flags.h"
#include "common/absl_fmt.h"
#include "controlplane/server.h"
#include "gateway/endpoint_sync.h"
#include "gateway/gateway.h"
#include "hw/composite_discovery.h"
#include "hw/emulated_discovery.h"
#include "metrics/registry.h"

namespace gpugeek::cli {
namespace {

// The pool `up` emulates when the host has no GPU: one 8-GPU HGX A100 80GB board (NVSwitch), the
// classic machine for fine-tuning a 70B model.
constexpr char kDefaultEmulation[] = "8xA100-SXM-80GB";

}  // namespace

void RegisterUpCommand(CLI::App& app) {
  struct Options {
    std::string listen = "127.0.0.1:8470";
    std::string emulate;
    std::string data_dir;
    std::string store;
    std::string key_file;
    std::string policy = controlplane::ServerOptions().policy;
    std::string agent_listen = "127.0.0.1:8472";
    std::string agent_metrics_listen = "127.0.0.1:8471";
    std::string gateway_listen = "127.0.0.1:8480";
    bool insecure_no_tls = false;
    std::string podman = "off";
    std::string podman_run_flags;
    std::string engines = "auto";
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "up", "Run server + an agent for this host in one process (real GPUs, else an emulated 8-GPU node)");
  sub->add_option("--listen", o->listen, "HOST:PORT of the API for users and the CLI (port 0: any free port)")
      ->capture_default_str();
  sub->add_option("--agent-listen", o->agent_listen,
                  "HOST:PORT of the agents' own listener (registrations and heartbeats only; port 0: any free port)")
      ->capture_default_str();
  sub->add_option("--emulate", o->emulate,
                  fmt::format("Emulate GPUs instead of discovering them, e.g. 8xH100-SXM-80GB (default when the host "
                              "has none: {})",
                              kDefaultEmulation));
  sub->add_option(
      "--data-dir", o->data_dir,
      "Store, logs and workload directories (default: $XDG_DATA_HOME/gpugeek, else ~/.local/share/gpugeek)");
  sub->add_option("--store", o->store,
                  "Keep jobs, events, nodes and accounts in this PostgreSQL database (postgres://USER@HOST:PORT/DB; "
                  "as `gpugeek server --store`) instead of SQLite under DIR/server");
  sub->add_option("--policy", o->policy, "Scheduling policy (see `gpugeek sim`)")->capture_default_str();
  sub->add_option("--key-file", o->key_file,
                  "Master key file sealing secrets and job specs at rest (`gpugeek keys init --key-file F`; default: "
                  "<data-dir>/master.key, created on the first start; in production keep it apart from the data)");
  sub->add_option("--podman", o->podman,
                  "How the agent runs rootful podman for jobs with image: (as gpugeek agent --podman: a command, "
                  "auto or off)")
      ->capture_default_str();
  sub->add_option("--podman-run-flags", o->podman_run_flags, "Extra `podman run` flags (as gpugeek agent)");
  sub->add_option("--engines", o->engines,
                  "Compiled-engine runtimes the agent reports (as gpugeek agent: auto, none or a list)")
      ->capture_default_str();
  sub->add_option("--gateway-listen", o->gateway_listen,
                  "HOST:PORT of the serving gateway for the services' clients (numeric IPv4), or off")
      ->capture_default_str();
  sub->add_option("--agent-metrics-listen", o->agent_metrics_listen,
                  "HOST:PORT where the agent serves its Prometheus metrics (GET /metrics; port 0: any free port; "
                  "\"off\": none)")
      ->capture_default_str();
  sub->add_flag("--insecure-no-tls", o->insecure_no_tls,
                "Serve plain HTTP: tokens and job data in clear text. For debugging only");
  sub->callback([o] {
    const std::string cmd = "up";
    controlplane::ServerOptions options;
    options.tls_mode = o->insecure_no_tls ? controlplane::TlsMode::kOff : controlplane::TlsMode::kLocalPki;
    if (absl::Status s = ParseListen(o->listen, &options.host, &options.port); !s.ok()) {
      Fail(cmd, std::string(s.message()), kExitUsage);
    }
    if (std::string agent_host; true) {
      if (absl::Status s = ParseListen(o->agent_listen, &agent_host, &options.agent_port); !s.ok()) {
        Fail(cmd, "--agent-listen: " + std::string(s.message()), kExitUsage);
      }
      if (agent_host != options.host) {
        Fail(cmd, "--agent-listen must use the same host as --listen (one bind address for the server)", kExitUsage);
      }
    }
    const std::filesystem::path data = o->data_dir.empty() ? DefaultDataDir() : o->data_dir;
    options.data_dir = (data / "server").string();
    options.store = o->store;
    options.policy = o->policy;
    options.key_file = o->key_file;
    const bool agent_metrics = !agent::MetricsListenDisabled(o->agent_metrics_listen);
    if (agent_metrics) {
      if (auto listen = agent::ParseMetricsListen(o->agent_metrics_listen); !listen.ok()) {
        Fail(cmd, fmt::format("--agent-metrics-listen: {}", listen.status().message()), kExitUsage);
      }
    }

    // GPUs: real ones if this host has any, else emulated.
    std::unique_ptr<hw::Discovery> discovery;
    std::string emulate = o->emulate;
    if (emulate.empty()) {
      discovery = hw::MakeHostDiscovery();
      auto inventory = discovery->Discover();
      if (!inventory.ok() || inventory->gpus.empty()) {
        emulate = kDefaultEmulation;
        std::cout << fmt::format("gpugeek up: no GPU found on this host; emulating {}\n", emulate);
      } else {
        std::cout << fmt::format("gpugeek up: found {} GPU(s) on this host\n", inventory->gpus.size());
      }
    }
    if (!emulate.empty()) {
      auto emulated = hw::EmulatedDiscovery::Create({.spec = emulate});
      if (!emulated.ok()) Fail(cmd, fmt::format("--emulate: {}", emulated.status().message()), kExitUsage);
      discovery = std::move(*emulated);
    }

    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGHUP);  // reloads the certificates
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    auto server = controlplane::ControlPlaneServer::Start(options);
    if (!server.ok()) Fail(cmd, fmt::format("{}", server.status().message()));

    agent::AgentOptions ao;
    ao.server_url = (*server)->agent_url();
    ao.ca_file = (*server)->ca_file();
    char host[256] = {};
    ao.node = gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0' ? host : "local";
    ao.discovery = discovery.get();
    ao.data_dir = (data / "agent").string();
    // The in-process agent joins with a one-use token the first time; later it has its credential.
    if (!std::filesystem::exists(ao.data_dir + "/node.credential")) {
      auto token = (*server)->nodes().LocalJoinToken();
      if (!token.ok()) Fail(cmd, fmt::format("join token for the local agent: {}", token.status().message()));
      ao.join_token = *token;
    }
    metrics::Registry agent_registry;  // outlives the agent and its listener
    if (agent_metrics) ao.metrics = &agent_registry;
    absl::StatusOr<std::vector<std::string>> podman = PodmanCommand(o->podman);
    if (!podman.ok()) Fail(cmd, std::string(podman.status().message()), kExitUsage);
    ao.podman = *podman;
    ao.podman_run_flags = SplitWords(o->podman_run_flags);
    std::string engines_note;
    absl::StatusOr<std::vector<std::string>> engines = agent::EngineRuntimesFromFlag(o->engines, &engines_note);
    if (!engines.ok()) Fail(cmd, std::string(engines.status().message()), kExitUsage);
    if (!engines_note.empty()) std::cerr << "gpugeek up: " << engines_note << "\n";
    ao.engines = *engines;
    auto agent = agent::Agent::Create(ao);
    if (!agent.ok()) Fail(cmd, fmt::format("agent: {}", agent.status().message()));
    // The serving gateway: its instruments go in the agent's registry (served with the agent's metrics), so it
    // starts before that listener (Registry: families before concurrent use).
    std::unique_ptr<gateway::Gateway> gw;
    std::unique_ptr<gateway::EndpointSync> gw_sync;
    std::shared_ptr<gateway::TlsServerContext> gateway_tls;
    if (o->gateway_listen != "off" && !o->gateway_listen.empty()) {
      const size_t colon = o->gateway_listen.rfind(':');
      int port = -1;
      if (colon == std::string::npos || !absl::SimpleAtoi(o->gateway_listen.substr(colon + 1), &port) || port < 0 ||
          port > 65535) {
        Fail(cmd, fmt::format("--gateway-listen \"{}\": give HOST:PORT or off", o->gateway_listen), kExitUsage);
      }
      gateway::GatewayOptions go;
      go.listen_host = o->gateway_listen.substr(0, colon);
      go.port = static_cast<uint16_t>(port);
      go.registry = agent_metrics ? &agent_registry : nullptr;
      if ((*server)->tls()) {  // the server's certificate names this host's addresses: it fits this listener too
        auto tls =
            gateway::TlsServerContext::Load((*server)->tls_options().cert_file, (*server)->tls_options().key_file);
        if (!tls.ok()) Fail(cmd, fmt::format("gateway: {}", tls.status().message()));
        go.tls = *std::move(tls);
      }
      gateway_tls = go.tls;
      gateway::TokenCheckOptions check;  // services with `traffic.auth: token`: callers' tokens are verified here
      check.client.base_url = (*server)->url();
      check.client.ca_file = (*server)->ca_file();
      go.token_check = check;
      auto started = gateway::Gateway::Start(go, {});
      if (!started.ok())
        Fail(cmd, fmt::format("--gateway-listen {}: {}", o->gateway_listen, started.status().message()));
      gw = *std::move(started);
      gateway::EndpointSyncOptions so;
      so.client.base_url = (*server)->url();
      so.client.ca_file = (*server)->ca_file();
      so.client.bearer_token = std::string(
          absl::StripAsciiWhitespace(ReadFileOrFail(cmd, (*server)->admin_token_file(), "the admin token")));
      so.gateway_id = o->gateway_listen;
      auto sync = gateway::EndpointSync::Start(so, gw.get());
      if (!sync.ok()) Fail(cmd, fmt::format("gateway: {}", sync.status().message()));
      gw_sync = *std::move(sync);
    }
    std::unique_ptr<agent::MetricsListener> metrics_listener;
    if (agent_metrics) {
      // The server's certificate names 127.0.0.1, ::1, localhost and this host: it fits this listener too.
      auto listener = agent::MetricsListener::Start(o->agent_metrics_listen, &agent_registry, ao.address,
                                                    (*server)->tls_options(), agent->get());
      if (!listener.ok()) {
        Fail(cmd, fmt::format("--agent-metrics-listen {}: {}", o->agent_metrics_listen, listener.status().message()));
      }
      metrics_listener = std::move(*listener);
      (*agent)->SetMetricsAddress(metrics_listener->address(), metrics_listener->tls());
    }
    // The members' checkpoint reports (docs/checkpointing.md): loopback, any free port.
    auto workload_listener = agent::WorkloadListener::Start("127.0.0.1:0", agent->get());
    if (!workload_listener.ok()) Fail(cmd, fmt::format("workload endpoint: {}", workload_listener.status().message()));
    (*agent)->SetWorkloadUrl((*workload_listener)->url());
    // The CLI on this machine talks to this server from now on, as its admin: profile "local".
    const std::string config_path = ConfigPath();
    if (absl::Status st = SaveProfile(
            config_path, "local",
            {.server = (*server)->url(), .token_file = (*server)->admin_token_file(), .ca_file = (*server)->ca_file()});
        !st.ok()) {
      std::cout << fmt::format("gpugeek up: cannot save the CLI profile: {}\n", st.message());
    } else {
      std::cout << fmt::format("gpugeek up: CLI profile 'local' (admin token {}) saved in {}\n",
                               (*server)->admin_token_file(), config_path);
    }
    std::jthread agent_thread([a = agent->get()](std::stop_token stop) { (void)a->Run(stop); });

    std::cout << fmt::format("gpugeek up: server on {} (data: {}), node {} with {} GPU(s), workload limits: {}\n",
                             (*server)->url(), data.string(), (*agent)->node(), (*agent)->inventory().gpus.size(),
                             (*agent)->CgroupDescription())
              << (metrics_listener != nullptr
                      ? fmt::format("gpugeek up: agent metrics on {}\n", metrics_listener->url())
                      : std::string())
              << ((*server)->tls() ? fmt::format("gpugeek up: TLS 1.3 on every listener; CA {}\n", (*server)->ca_file())
                                   : std::string("gpugeek up: WARNING: TLS is off (--insecure-no-tls): API tokens and "
                                                 "job data cross the network in clear text. For debugging only\n"))
              << (gw ? fmt::format("gpugeek up: serving gateway on {}://{}:{} (services: gpugeek serve SPEC.yaml)\n",
                                   gateway_tls ? "https" : "http",
                                   o->gateway_listen.substr(0, o->gateway_listen.rfind(':')), gw->port())
                     : std::string())
              << "  submit: gpugeek submit examples/llama2-70b-lora.yaml --follow\n"
              << std::flush;

    int signal = 0;
    while (sigwait(&stop_signals, &signal) == 0 && signal == SIGHUP) {
      if (!(*server)->tls()) {
        std::cout << "gpugeek up: SIGHUP received: TLS is off, nothing to reload\n" << std::flush;
        continue;
      }
      absl::Status st = (*server)->ReloadCertificates();
      if (st.ok() && metrics_listener != nullptr) st = metrics_listener->ReloadCertificates();
      if (st.ok() && gateway_tls != nullptr) st = gateway_tls->Reload();
      std::cout << (st.ok() ? std::string("gpugeek up: SIGHUP received: certificates reloaded\n")
                            : fmt::format("gpugeek up: SIGHUP received: certificate reload failed, still serving the "
                                          "previous certificate: {}\n",
                                          st.message()))
                << std::flush;
    }
    std::cout << fmt::format("gpugeek up: {} received, stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM")
              << std::flush;
    if (gw_sync) gw_sync->Stop();
    if (gw) gw->Stop();
    (*agent)->Stop();
    agent_thread.join();
    if (metrics_listener != nullptr) metrics_listener->Stop();
    (*workload_listener)->Stop();
    (*server)->Stop();
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
    std::cout << "gpugeek up: stopped\n";
  });
}

}  // namespace gpugeek::cli
