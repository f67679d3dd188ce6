// `gpugeek agent --server URL [--ca-file FILE] [--name NODE] [--address ADDR] [--emulate SPEC] [--data-dir DIR]
//  [--capacity on-demand|spot|reserved] [--region R] [--label K=V]... [--no-cgroups]
//  [--metrics-listen HOST:PORT|off] [--metrics-tls-cert FILE --metrics-tls-key FILE]
//  [--podman auto|off|"podman --root DIR ..."] [--podman-run-flags "FLAGS"]`: the per-node agent.
// Registers this node's GPUs (NVML + ROCm SMI, or emulated ones) with the server, heartbeats, and runs the
// workloads it is assigned until SIGINT or SIGTERM; then stops them gracefully and exits. Serves its
// Prometheus metrics (docs/metrics.md) on --metrics-listen and announces that address when it registers.
// TLS: an https:// server is verified against --ca-file only (never the system store); the metrics are
// served over TLS 1.3 with --metrics-tls-cert/--metrics-tls-key, files that SIGHUP reloads.

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "agent/agent.h"
#include "agent/engine_runtimes.h"
#include "agent/metrics_listener.h"
#include "agent/workload_listener.h"
#include "api/agent_protocol.h"
#include "api/quantity.h"
#include "cli/commands.h"
#include "cli/podman_flags.h"
#include "common/absl_fmt.h"
#include "common/file.h"
#include "hw/composite_discovery.h"
#include "hw/emulated_discovery.h"
#include "metrics/registry.h"

namespace gpugeek::cli {
namespace {

[[noreturn]] void Fail(const std::string& message, int code) {
  std::cerr << "gpugeek agent: " << message << "\n";
  throw CLI::RuntimeError(code);
}

// $XDG_DATA_HOME/gpugeek/agent/<node>, else ~/.local/share/gpugeek/agent/<node>.
std::string DefaultAgentDataDir(const std::string& node) {
  std::string base;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && *xdg == '/') {
    base = xdg;
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    base = std::string(home) + "/.local/share";
  } else {
    base = "/tmp";
  }
  return fmt::format("{}/gpugeek/agent/{}", base, node);
}

std::string LocalHostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

}  // namespace

void RegisterAgentCommand(CLI::App& app) {
  struct Options {
    std::string server;
    std::string name;
    std::string address = "127.0.0.1";
    std::string emulate;
    std::string data_dir;
    std::string capacity = "on-demand";
    std::string region;
    std::vector<std::string> labels;
    bool no_cgroups = false;
    // Loopback, any free port: agents sharing a host never collide, and Prometheus finds the port through
    // the server (GET /v1/prometheus/targets). On a multi-host pool: --metrics-listen 0.0.0.0:9471.
    std::string metrics_listen = "127.0.0.1:0";
    std::string gpu_hour_price;  // "0.85": currency units per GPU-hour; "" = unpriced
    std::string min_rental;      // "10m": the shortest rental charged; "" = per second
    std::string reclaim_notice_url;
    // The members' own endpoint (checkpoint reports, docs/checkpointing.md): loopback only.
    std::string workload_listen = "127.0.0.1:0";
    std::string join_token;
    std::string join_token_file;
    bool allow_root_workloads = false;
    std::string workload_uids = "200000-265535";
    std::string ca_file;
    std::string metrics_tls_cert;
    std::string metrics_tls_key;
    std::string podman = "auto";
    std::string podman_run_flags;
    std::string engines = "auto";
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand("agent",
                                     "Run this node's agent: register its GPUs with a server and run the "
                                     "workloads it assigns (until SIGINT/SIGTERM)");
  sub->add_option("--server", o->server,
                  "The control plane's agent listener (gpugeek server --agent-listen), e.g. https://10.0.0.1:8472")
      ->required();
  sub->add_option("--ca-file", o->ca_file,
                  "CA certificate the server's certificate must chain to (required for https://; the server's "
                  "DATA-DIR/tls/ca.crt with its local CA)");
  sub->add_option("--name", o->name, "Node name in the pool (default: the host name)");
  sub->add_option("--address", o->address, "Address gang peers use to reach this node (GPUGEEK_MASTER_ADDR)")
      ->capture_default_str();
  sub->add_option("--emulate", o->emulate, "Emulate GPUs instead of discovering them, e.g. 8xH100-SXM-80GB, 8xMI300X");
  sub->add_option("--data-dir", o->data_dir,
                  "Logs and working directories (default: $XDG_DATA_HOME/gpugeek/agent/<node>, else "
                  "~/.local/share/gpugeek/agent/<node>)");
  sub->add_option("--capacity", o->capacity, "Capacity type of this node")
      ->check(CLI::IsMember({"on-demand", "spot", "reserved"}))
      ->capture_default_str();
  sub->add_option("--region", o->region, "Region of this node, e.g. cn-east-1");
  sub->add_option("--gpu-hour-price", o->gpu_hour_price,
                  "What a GPU-hour of this node costs, e.g. 0.85 (up to six decimals; usage is metered against it)");
  sub->add_option("--min-rental", o->min_rental,
                  "The shortest rental sold: each placement's time on this node is charged at least this long, e.g. "
                  "10m (default: per second)");
  sub->add_option("--reclaim-notice-url", o->reclaim_notice_url,
                  "Spot nodes: the provider's instance-action document to poll for a reclaim notice, e.g. "
                  "http://169.254.169.254/latest/meta-data/spot/instance-action (docs/capacity.md)");
  sub->add_option("--label", o->labels, "A node label KEY=VALUE (repeatable)");
  sub->add_flag("--no-cgroups", o->no_cgroups, "Do not enforce CPU/memory limits with cgroups");
  sub->add_option("--metrics-listen", o->metrics_listen,
                  "HOST:PORT to serve Prometheus metrics on (GET /metrics; port 0: any free port; 0.0.0.0 or an "
                  "empty host: every interface, announced as --address; \"off\" or \"\": none)")
      ->capture_default_str();
  sub->add_option("--workload-listen", o->workload_listen,
                  "Loopback HOST:PORT of the endpoint this node's workloads report checkpoints to "
                  "(GPUGEEK_AGENT_URL; docs/checkpointing.md; \"off\": none)")
      ->capture_default_str();
  sub->add_option("--join-token", o->join_token,
                  "Join token for the first registration (default: $GPUGEEK_JOIN_TOKEN); afterwards the node "
                  "credential kept in the data directory is used");
  sub->add_option("--join-token-file", o->join_token_file, "File whose first line is the join token");
  sub->add_flag("--allow-root-workloads", o->allow_root_workloads,
                "Run workloads as root when the agent is root (default: each tenant's own unprivileged uid)");
  sub->add_option("--workload-uids", o->workload_uids, "Range of uids tenants' workloads run as, FIRST-LAST")
      ->capture_default_str();
  sub->add_option("--metrics-tls-cert", o->metrics_tls_cert,
                  "Serve the metrics over TLS 1.3 with this certificate chain (PEM, leaf first; SIGHUP reloads it)");
  sub->add_option("--metrics-tls-key", o->metrics_tls_key, "The private key of --metrics-tls-cert (PEM, unencrypted)");
  sub->add_option("--podman", o->podman,
                  "How to run rootful podman for jobs with image: (words split on spaces), e.g. \"podman --root "
                  "/var/lib/gpugeek/podman --runtime runc --cgroup-manager=cgroupfs\"; auto: plain `podman` when it "
                  "is installed and the agent is root; off: no containers")
      ->capture_default_str();
  sub->add_option("--engines", o->engines,
                  "Compiled-engine runtimes this node reports, which jobs' engine: formats are placed by: auto "
                  "(libraries found in the linker cache: libtorch, onnxruntime, opencv-dnn, tensorrt), none, or a "
                  "comma-separated list, e.g. onnxruntime,tensorrt (docs/models.md)")
      ->capture_default_str();
  sub->add_option("--podman-run-flags", o->podman_run_flags,
                  "Extra `podman run` flags this machine needs (words split on spaces), e.g. \"--ulimit "
                  "nofile=4096:4096 --ulimit nproc=4096:4096\"");
  sub->callback([o] {
    if (o->server.starts_with("https://") && o->ca_file.empty()) {
      Fail("--server " + o->server + " is https: --ca-file is required (the agent trusts no system CA)", 2);
    }
    if (o->metrics_tls_cert.empty() != o->metrics_tls_key.empty()) {
      Fail("--metrics-tls-cert and --metrics-tls-key go together", 2);
    }
    if (o->join_token.empty() && !o->join_token_file.empty()) {
      auto text = ReadFileBounded(o->join_token_file, 4096, "join token file");
      if (!text.ok()) Fail(std::string(text.status().message()), 2);
      o->join_token = std::string(absl::StripAsciiWhitespace(text->substr(0, text->find('\n'))));
    }
    if (o->join_token.empty()) {
      if (const char* env = std::getenv("GPUGEEK_JOIN_TOKEN"); env != nullptr) o->join_token = env;
    }
    agent::RunAsOptions run_as;
    run_as.allow_root_workloads = o->allow_root_workloads;
    {
      unsigned long first = 0, last = 0;
      char dash = 0;
      std::istringstream in(o->workload_uids);
      if (!(in >> first >> dash >> last) || dash != '-' || !in.eof() || first == 0 || last < first ||
          last >= 0xffffffffUL) {
        Fail(fmt::format("--workload-uids '{}': expected FIRST-LAST, e.g. 200000-265535", o->workload_uids), 2);
      }
      run_as.first_uid = static_cast<uid_t>(first);
      run_as.count = static_cast<uint32_t>(last - first + 1);
    }
    std::map<std::string, std::string> labels;
    for (const std::string& l : o->labels) {
      const size_t eq = l.find('=');
      if (eq == std::string::npos || eq == 0) Fail(fmt::format("--label {}: expected KEY=VALUE", l), 2);
      labels[l.substr(0, eq)] = l.substr(eq + 1);
    }
    absl::StatusOr<std::vector<std::string>> podman = PodmanCommand(o->podman);
    if (!podman.ok()) Fail(std::string(podman.status().message()), 2);
    const std::string node = o->name.empty() ? LocalHostName() : o->name;
    std::string engines_note;
    absl::StatusOr<std::vector<std::string>> engines = agent::EngineRuntimesFromFlag(o->engines, &engines_note);
    if (!engines.ok()) Fail(std::string(engines.status().message()), 2);
    int64_t price_micros = 0;
    if (!o->gpu_hour_price.empty()) {
      absl::StatusOr<int64_t> price = api::ParseMoneyMicros(o->gpu_hour_price);
      if (!price.ok() || *price > api::kMaxPriceMicrosPerGpuHour) {
        Fail(fmt::format("--gpu-hour-price: {}", price.ok() ? "at most 1000 per GPU-hour" : price.status().message()),
             2);
      }
      price_micros = *price;
    }
    int64_t min_rental_s = 0;
    if (!o->min_rental.empty()) {
      absl::StatusOr<Duration> d = api::ParseDuration(o->min_rental);
      if (!d.ok() || *d < Duration::zero() || *d > std::chrono::seconds(api::kMaxMinRentalS)) {
        Fail(fmt::format("--min-rental: {}", d.ok() ? "at most 7d" : d.status().message()), 2);
      }
      min_rental_s = std::chrono::duration_cast<std::chrono::seconds>(*d).count();
    }
    std::unique_ptr<agent::ReclaimNoticeSource> reclaim_notice;
    if (!o->reclaim_notice_url.empty()) {
      auto source = agent::InstanceActionNotice(o->reclaim_notice_url);
      if (!source.ok()) Fail(fmt::format("--reclaim-notice-url: {}", source.status().message()), 2);
      reclaim_notice = std::move(*source);
    }
    const bool serve_metrics = !agent::MetricsListenDisabled(o->metrics_listen);
    if (serve_metrics) {
      if (auto listen = agent::ParseMetricsListen(o->metrics_listen); !listen.ok()) {
        Fail(fmt::format("--metrics-listen: {}", listen.status().message()), 2);
      }
    }
    std::unique_ptr<hw::Discovery> discovery;
    if (!o->emulate.empty()) {
      auto emulated = hw::EmulatedDiscovery::Create({.spec = o->emulate, .host_name = node});
      if (!emulated.ok()) Fail(fmt::format("--emulate: {}", emulated.status().message()), 2);
      discovery = *std::move(emulated);
    } else {
      discovery = hw::MakeHostDiscovery();
    }

    // Block the stop signals before any thread starts (threads inherit the mask; the executor resets it
    // in workloads), so that only the sigwait thread below receives them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGHUP);  // reloads the metrics certificate
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    // Declared before the agent and the listener: it outlives both.
    metrics::Registry registry;
    auto agent = agent::Agent::Create({.server_url = o->server,
                                       .ca_file = o->ca_file,
                                       .join_token = o->join_token,
                                       .node = node,
                                       .address = o->address,
                                       .capacity_type = o->capacity,
                                       .region = o->region,
                                       .reclaim_notice = reclaim_notice.get(),
                                       .price_micros_per_gpu_hour = price_micros,
                                       .min_rental_s = min_rental_s,
                                       .labels = labels,
                                       .discovery = discovery.get(),
                                       .data_dir = o->data_dir.empty() ? DefaultAgentDataDir(node) : o->data_dir,
                                       .cgroup_limits = !o->no_cgroups,
                                       .metrics = serve_metrics ? &registry : nullptr,
                                       .run_as = run_as,
                                       .podman = *podman,
                                       .podman_run_flags = SplitWords(o->podman_run_flags),
                                       .engines = *engines});
    if (!agent.ok()) {
      pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
      Fail(std::string(agent.status().message()), absl::IsInvalidArgument(agent.status()) ? 2 : 1);
    }
    const hw::NodeInventory& inv = (*agent)->inventory();
    spdlog::info("gpugeek agent {}: {} GPU(s){}, server {}, data in {}", node, inv.gpus.size(),
                 o->emulate.empty() ? "" : " (emulated " + o->emulate + ")", o->server,
                 o->data_dir.empty() ? DefaultAgentDataDir(node) : o->data_dir);
    for (const std::string& p : inv.problems) spdlog::info("gpugeek agent {}: discovery: {}", node, p);
    spdlog::info("gpugeek agent {}: CPU/memory limits: {}", node, (*agent)->CgroupDescription());
    if (!engines_note.empty()) spdlog::warn("gpugeek agent {}: {}", node, engines_note);
    spdlog::info("gpugeek agent {}: engine runtimes: {}", node,
                 engines->empty() ? "none" : absl::StrJoin(*engines, ", "));
    std::unique_ptr<agent::MetricsListener> metrics_listener;
    if (serve_metrics) {
      // After Agent::Create: the registry has every family before the first scrape can render it.
      // The node's API listener: /metrics, and `POST /v1/exec` for the server (exec_route.h).
      auto listener = agent::MetricsListener::Start(o->metrics_listen, &registry, o->address,
                                                    {.cert_file = o->metrics_tls_cert, .key_file = o->metrics_tls_key},
                                                    agent->get());
      if (!listener.ok()) {
        agent->reset();
        pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
        Fail(fmt::format("--metrics-listen {}: {}", o->metrics_listen, listener.status().message()), 1);
      }
      metrics_listener = std::move(*listener);
      (*agent)->SetMetricsAddress(metrics_listener->address(), metrics_listener->tls());
      spdlog::info("gpugeek agent {}: agent metrics on {} (announced as {})", node, metrics_listener->url(),
                   metrics_listener->address());
    } else {
      spdlog::info("gpugeek agent {}: metrics off", node);
    }

    std::unique_ptr<agent::WorkloadListener> workload_listener;
    if (!agent::WorkloadListenDisabled(o->workload_listen)) {
      auto listener = agent::WorkloadListener::Start(o->workload_listen, agent->get());
      if (!listener.ok()) {
        if (metrics_listener != nullptr) metrics_listener->Stop();
        agent->reset();
        pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
        Fail(fmt::format("--workload-listen {}: {}", o->workload_listen, listener.status().message()),
             absl::IsInvalidArgument(listener.status()) ? 2 : 1);
      }
      workload_listener = std::move(*listener);
      (*agent)->SetWorkloadUrl(workload_listener->url());
      spdlog::info("gpugeek agent {}: workloads report checkpoints to {}", node, workload_listener->url());
    }

    agent::Agent* a = agent->get();
    auto signalled = std::make_shared<std::atomic<bool>>(false);
    agent::MetricsListener* tls_listener =
        metrics_listener != nullptr && !o->metrics_tls_cert.empty() ? metrics_listener.get() : nullptr;
    std::thread waiter([a, stop_signals, node, signalled, tls_listener] {
      int sig = 0;
      while (sigwait(&stop_signals, &sig) == 0 && sig == SIGHUP) {
        if (tls_listener == nullptr) {
          spdlog::info("gpugeek agent {}: SIGHUP received: no TLS listener, nothing to reload", node);
        } else if (absl::Status st = tls_listener->ReloadCertificates(); st.ok()) {
          spdlog::info("gpugeek agent {}: SIGHUP received: metrics certificate reloaded", node);
        } else {
          spdlog::error(
              "gpugeek agent {}: SIGHUP received: metrics certificate reload failed, still serving the "
              "previous one: {}",
              node, st.message());
        }
      }
      signalled->store(true);
      spdlog::info("gpugeek agent {}: {} received, stopping workloads", node, sig == SIGINT ? "SIGINT" : "SIGTERM");
      a->Stop();
    });
    const absl::Status status = (*agent)->Run();
    // Wake the waiter if Run ended for another reason (a thread-directed signal reaches only it).
    if (!signalled->load()) pthread_kill(waiter.native_handle(), SIGTERM);
    waiter.join();
    if (metrics_listener != nullptr) metrics_listener->Stop();
    if (workload_listener != nullptr) workload_listener->Stop();
    agent->reset();
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
    if (!status.ok()) Fail(std::string(status.message()), 1);
    spdlog::info("gpugeek agent {}: stopped", node);
  });
}

}  // namespace gpugeek::cli
