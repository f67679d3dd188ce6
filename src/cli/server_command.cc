// `gpugeek server [--listen HOST:PORT] [--agent-listen HOST:PORT] [--data-dir DIR] [--policy NAME]
// [--log-retention-days N] [--event-retention-days N]`: the control plane (REST API under /v1, SQLite store
// under DIR, scheduling loop) until SIGINT or SIGTERM, then a graceful stop.

#include <signal.h>

#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "cli/client.h"
#include "cli/commands.h"
#include "common/absl_fmt.h"
#include "controlplane/server.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace gpugeek::cli {

void RegisterServerCommand(CLI::App& app) {
  struct Options {
    std::string listen = "127.0.0.1:8470";
    std::string data_dir;
    std::string key_file;
    std::string policy = controlplane::ServerOptions().policy;
    std::string agent_listen = "127.0.0.1:8472";
    int log_retention_days = 7;
    int event_retention_days = 30;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "server", "Run the control plane: REST API under /v1, job store, scheduler (until Ctrl-C / SIGTERM)");
  sub->add_option("--listen", o->listen, "HOST:PORT of the API for users and the CLI (port 0: any free port)")
      ->capture_default_str();
  sub->add_option("--agent-listen", o->agent_listen,
                  "HOST:PORT of the agents' own listener (registrations and heartbeats only; port 0: any free port)")
      ->capture_default_str();
  sub->add_option("--data-dir", o->data_dir,
                  "Store and logs directory (default: $XDG_DATA_HOME/gpugeek, else ~/.local/share/gpugeek)");
  sub->add_option("--policy", o->policy, "Scheduling policy (see `gpugeek sim`)")->capture_default_str();
  sub->add_option("--key-file", o->key_file,
                  "Master key file sealing secrets and job specs at rest (`gpugeek keys init --key-file F`; default: "
                  "<data-dir>/master.key, created on the first start; in production keep it apart from the data)");
  sub->add_option("--log-retention-days", o->log_retention_days, "Delete the logs of jobs ended this many days ago")
      ->capture_default_str()
      ->check(CLI::Range(1, 36500));
  sub->add_option("--event-retention-days", o->event_retention_days,
                  "Delete the state-change events of jobs ended this many days ago (the jobs stay listed)")
      ->capture_default_str()
      ->check(CLI::Range(1, 36500));
  sub->callback([o] {
    const std::string cmd = "server";
    controlplane::ServerOptions options;
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
    options.data_dir = o->data_dir.empty() ? DefaultDataDir() : o->data_dir;
    options.policy = o->policy;
    options.key_file = o->key_file;
    options.log_retention = std::chrono::hours(24) * o->log_retention_days;
    options.event_retention = std::chrono::hours(24) * o->event_retention_days;
    std::error_code ec;
    std::filesystem::create_directories(options.data_dir, ec);
    if (ec) Fail(cmd, fmt::format("cannot create data directory {}: {}", options.data_dir, ec.message()));

    // Block the stop signals before the server starts its threads (they inherit the mask), so that
    // only sigwait below receives them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    // The server's log goes to stderr; stdout carries only what this command prints (the URL first).
    spdlog::set_default_logger(spdlog::stderr_color_mt("gpugeek-server"));
    auto server = controlplane::ControlPlaneServer::Start(options);
    if (!server.ok()) Fail(cmd, fmt::format("{}", server.status().message()));
    std::cout << fmt::format("gpugeek server listening on {}, agents on {} (data: {}, policy: {})\n", (*server)->url(),
                             (*server)->agent_url(), options.data_dir, options.policy)
              << fmt::format("  try: gpugeek nodes --server {}\n", (*server)->url()) << std::flush;

    int signal = 0;
    sigwait(&stop_signals, &signal);
    std::cout << fmt::format("gpugeek server: {} received, stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM")
              << std::flush;
    (*server)->Stop();
    server->reset();
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
    std::cout << "gpugeek server: stopped\n";
  });
}

}  // namespace gpugeek::cli
