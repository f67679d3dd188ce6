// `gpugeek server [--listen HOST:PORT] [--agent-listen HOST:PORT] [--data-dir DIR] [--store postgres://... [--ha]]
// [--policy NAME]
// [--log-retention-days N] [--event-retention-days N] [--audit-retention-days N] [--fair-share-half-life 7d]
// [--tls-cert FILE --tls-key FILE
// [--tls-ca FILE]] [--insecure-no-tls]`: the control plane (REST API under /v1, SQLite store under DIR or
// the PostgreSQL database of --store,
// scheduling loop) until SIGINT or SIGTERM, then a graceful stop. `gpugeek openapi`: the API's OpenAPI
// document on stdout (what GET /v1/openapi.json serves).
// TLS 1.3 on both listeners by default: a local CA and server certificate under DIR/tls, made on the first
// start (clients trust DIR/tls/ca.crt), or the operator's --tls-cert/--tls-key. SIGHUP reloads the
// certificate files (renewing the local one when it expires within 30 days) without a restart.

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <random>
#include <regex>
#include <tuple>

#include <fmt/format.h>

#include "api/price_table.h"
#include "api/quantity.h"
#include "api/region_latency.h"
#include "cli/client.h"
#include "cli/commands.h"
#include "common/absl_fmt.h"
#include "controlplane/leader_election.h"
#include "controlplane/openapi.h"
#include "controlplane/server.h"
#include "controlplane/standby.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "store/postgres_store.h"

namespace gpugeek::cli {

namespace {

// The exit status of a server that lost the leader lease (sysexits.h EX_TEMPFAIL): its supervisor
// restarts it, as a standby.
constexpr int kExitLeadershipLost = 75;

// A leader that lost the lease stops acting at once: no graceful stop (its writes would be refused anyway);
// its agents keep their jobs and follow the new leader.
[[noreturn]] void ExitDeposed(const std::string& why) {
  spdlog::critical("{}; exiting at once (the new leader serves; agents keep their jobs)", why);
  spdlog::default_logger()->flush();
  std::_Exit(kExitLeadershipLost);
}

// Whether `url` is http(s)://HOST:PORT and nothing else (no path, query, spaces or control characters): it goes
// into standbys' Location headers.
bool IsBaseUrl(const std::string& url) {
  static const std::regex kBase(R"(^https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}$)");
  return std::regex_match(url, kBase);
}

// --ha: serves the standby's answers (controlplane/standby.h) on the server's ports and campaigns for the
// lease until it takes it (its token; the ports in `options` are then the ones bound, and the lease is being
// renewed) or SIGINT / SIGTERM arrives (std::nullopt).
template <typename Options>
std::optional<int64_t> Campaign(const Options& o, Duration leader_lease, sigset_t& stop_signals,
                                controlplane::ServerOptions& options,
                                std::unique_ptr<store::PostgresStore>& election_store,
                                std::unique_ptr<controlplane::LeaderElection>& election) {
  const std::string cmd = "server";
  // Short lock waits and no idle transaction: a renewal gives up before the watchdog must act, and a standby
  // frozen inside its taking cannot hold the lease row for more than a second.
  auto pg = store::PostgresStore::Open({.url = options.store,
                                        .connections = 2,
                                        .lock_timeout = leader_lease / 4,
                                        .idle_in_transaction_timeout = std::chrono::seconds(1)});
  if (!pg.ok()) Fail(cmd, fmt::format("{}", pg.status().message()));
  election_store = *std::move(pg);
  const bool tls = options.tls_mode == controlplane::TlsMode::kFiles;
  auto standby = controlplane::StandbyListeners::Start({.host = options.host,
                                                        .api_port = options.port,
                                                        .agent_port = options.agent_port,
                                                        .tls = tls ? options.tls : http::TlsOptions()});
  if (!standby.ok()) Fail(cmd, fmt::format("{}", standby.status().message()));
  options.port = (*standby)->api_port();
  options.agent_port = (*standby)->agent_port();
  const std::string scheme = tls ? "https" : "http";
  const std::string url_host = options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host;
  const std::string api_url =
      o.advertise_url.empty() ? fmt::format("{}://{}:{}", scheme, url_host, options.port) : o.advertise_url;
  const std::string agent_url = o.advertise_agent_url.empty()
                                    ? fmt::format("{}://{}:{}", scheme, url_host, options.agent_port)
                                    : o.advertise_agent_url;
  char host[256] = {};
  (void)gethostname(host, sizeof(host) - 1);
  // pid and random bits first: PostgreSQL keeps 63 bytes of the application_name made from it.
  const std::string holder =
      fmt::format("{}:{:016x}@{}", getpid(), (uint64_t{std::random_device()()} << 32) | std::random_device()(), host);
  auto e = controlplane::LeaderElection::Create(*election_store, {.holder = holder,
                                                                  .api_url = api_url,
                                                                  .agent_url = agent_url,
                                                                  .lease = leader_lease,
                                                                  .renew_every = leader_lease / 4});
  if (!e.ok()) Fail(cmd, fmt::format("{}", e.status().message()), kExitUsage);
  election = *std::move(e);
  options.leader_holder = holder;
  std::cout << fmt::format(
                   "gpugeek server: standby on {}, agents on {} (PostgreSQL at {}); campaigning for the lease\n",
                   api_url, agent_url, election_store->server())
            << std::flush;
  std::string leader_seen = "?";
  auto stopping = [&] {
    timespec zero{};
    const int signal = sigtimedwait(&stop_signals, nullptr, &zero);
    return signal == SIGINT || signal == SIGTERM;  // SIGHUP: nothing to reload yet
  };
  auto seen = [&](const store::PostgresStore::Leadership* leader) {
    (*standby)->SetLeader(leader ? leader->api_url : "", leader ? leader->agent_url : "");
    const std::string now = leader ? fmt::format("{} (token {})", leader->api_url, leader->token) : "";
    if (now == leader_seen) return;
    leader_seen = now;
    std::cout << (leader ? fmt::format("gpugeek server: standby; the leader is at {}\n", now)
                         : std::string("gpugeek server: standby; no leader now\n"))
              << std::flush;
  };
  std::optional<int64_t> token = election->Campaign(stopping, seen);
  if (token) {
    std::cout << fmt::format("gpugeek server: took the lease (token {}); starting\n", *token) << std::flush;
    // Renewing from now: closing the standby's listeners and loading the store must not outlast the lease.
    election->KeepLeading(*token, [](const std::string& why) { ExitDeposed("leadership lost: " + why); });
  }
  (*standby)->Stop();  // the ports are the leader's from here
  return token;
}

}  // namespace

void RegisterServerCommand(CLI::App& app) {
  struct Options {
    std::string listen = "127.0.0.1:8470";
    std::string data_dir;
    std::string store;
    std::string key_file;
    std::string policy = controlplane::ServerOptions().policy;
    std::string agent_listen = "127.0.0.1:8472";
    int log_retention_days = 7;
    int event_retention_days = 30;
    int audit_retention_days = 365;
    int block_after_losses = controlplane::ControlPlaneOptions().block_after_losses;
    std::string tls_cert;
    std::string tls_key;
    std::string tls_ca;
    bool insecure_no_tls = false;
    std::string fair_share_half_life = "7d";
    std::string gpu_quarantine = "10m";
    std::string reclaim_avoid = "10m";
    std::string heartbeat_interval = "1s", lease = "2s", fence_grace = "500ms", fence_margin = "500ms";
    std::string prices;
    std::string region_latency;
    std::string trial_credit = "0";
    int trial_credit_days = 30;
    int64_t platform_fee_bps = 0;
    std::string price_per_million_requests = "0", price_per_million_tokens = "0";
    bool enforce_budgets = false;
    uint64_t max_archive_bytes = controlplane::ServerOptions().max_archive_bytes;
    uint64_t max_archive_files = controlplane::ServerOptions().max_archive_files;
    uint64_t max_dataset_bytes = controlplane::ServerOptions().max_dataset_bytes;
    uint64_t max_model_bytes = controlplane::ServerOptions().max_model_bytes;
    bool ha = false;
    std::string advertise_url, advertise_agent_url;
    std::string leader_lease = "4s";
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
  sub->add_option("--store", o->store,
                  "Where jobs, events, nodes and accounts are stored: a PostgreSQL URI "
                  "(postgres://USER@HOST:PORT/DATABASE; a password is better kept in ~/.pgpass or PGPASSWORD); "
                  "default: SQLite at <data-dir>/gpugeek.db");
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
  sub->add_option("--audit-retention-days", o->audit_retention_days,
                  "Delete audit records (`gpugeek audit`) older than this many days")
      ->capture_default_str()
      ->check(CLI::Range(1, 36500));
  sub->add_option("--tls-cert", o->tls_cert,
                  "Serve this certificate chain (PEM, leaf first) instead of the local CA's (default: DIR/tls, "
                  "made on the first start)");
  sub->add_option("--tls-key", o->tls_key, "The private key of --tls-cert (PEM, unencrypted)");
  sub->add_option("--tls-ca", o->tls_ca, "With --tls-cert: the CA certificate clients trust (only shown in the log)");
  sub->add_flag("--insecure-no-tls", o->insecure_no_tls,
                "Serve plain HTTP: tokens and job data in clear text. For debugging only");
  sub->add_option("--fair-share-half-life", o->fair_share_half_life,
                  "Half-life of the tenants' GPU usage behind fair share: 7d, 12h, 90m, 3600s, or 0 for no decay "
                  "(Slurm's PriorityDecayHalfLife)")
      ->capture_default_str();
  sub->add_option("--gpu-quarantine", o->gpu_quarantine,
                  "How long a GPU that raised a hardware XID (48, 79, 94, ...) is not placed on: 10m, 90s, 1h")
      ->capture_default_str();
  sub->add_option("--block-after-losses", o->block_after_losses,
                  "A node lost (down) this many times within an hour takes no new work for 30 min; 0 never blocks")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  sub->add_option("--reclaim-avoid", o->reclaim_avoid,
                  "After a reclaim notice, place jobs outside the node's region for this long when they fit "
                  "elsewhere: 10m, 1h, 0 for never")
      ->capture_default_str();
  sub->add_option("--region-latency", o->region_latency,
                  "CSV of REGION_A,REGION_B,LATENCY_MS (us-east-1,us-west-2,62): a job is placed in the region of its "
                  "data (its checkpoint's, or resources.data_region) first, then the nearest regions first");
  sub->add_option("--prices", o->prices,
                  "CSV of GPU_MODEL,CAPACITY,PRICE per GPU-hour (A100-SXM-80GB,spot,1.23): the price of nodes whose "
                  "agents name none (--gpu-hour-price)");
  // The marketplace's money (controlplane/billing.h, docs/billing.md).
  sub->add_option("--trial-credit", o->trial_credit,
                  "Credit each tenant gets once, in the pool's currency (25.00); spent before its cash; 0 = none")
      ->capture_default_str();
  sub->add_option("--trial-credit-days", o->trial_credit_days, "Days a trial credit lasts; 0 = forever")
      ->capture_default_str()
      ->check(CLI::Range(0, 36500));
  sub->add_option("--platform-fee-bps", o->platform_fee_bps,
                  "The platform's fee on a provider's sale, in basis points (1500 = 15%)")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  sub->add_option("--price-per-million-requests", o->price_per_million_requests,
                  "Serverless price of a million requests a service's gateways answer (0.20); 0 = counted, not "
                  "charged (the replicas' GPU time is charged as jobs')")
      ->capture_default_str();
  sub->add_option("--price-per-million-tokens", o->price_per_million_tokens,
                  "Serverless price of a million tokens a service's replicas report (Gpugeek-Tokens header)")
      ->capture_default_str();
  sub->add_flag("--enforce-budgets", o->enforce_budgets,
                "Refuse new work of a tenant with nothing left to spend (402), and stop its running work (SIGTERM, "
                "its checkpoint moment) once its credit and cash are spent");
  // The failure-detection timeline (controlplane/control_plane.h, "Fencing timeline").
  sub->add_option("--heartbeat-interval", o->heartbeat_interval, "How often agents send heartbeats: 1s, 500ms")
      ->capture_default_str();
  sub->add_option("--lease", o->lease,
                  "A node whose heartbeats stop for this long is suspect (no new placements) and its agent fences "
                  "itself; more than one heartbeat interval (2s: suspect after 2 missed 1 s beats)")
      ->capture_default_str();
  sub->add_option("--fence-grace", o->fence_grace,
                  "Between a fenced member's SIGTERM and its SIGKILL: the time a workload has to checkpoint")
      ->capture_default_str();
  sub->add_option("--fence-margin", o->fence_margin,
                  "Slack for clock rates and delays: a silent node is down (its jobs requeued) after lease + "
                  "fence grace + this (the defaults: down at 3 s; --lease 3s --fence-grace 2s --fence-margin 1s: "
                  "down at 6 s, 2 s for a silent node's members to checkpoint)")
      ->capture_default_str();
  sub->add_option("--max-archive-bytes", o->max_archive_bytes,
                  "Largest workdir archive a tenant may upload, in bytes (default 1 GiB); larger uploads get 413")
      ->capture_default_str();
  sub->add_option("--max-archive-files", o->max_archive_files,
                  "Most files, folders and links in one workdir archive; more get 413")
      ->capture_default_str();
  sub->add_option("--max-dataset-bytes", o->max_dataset_bytes,
                  "Bytes of dataset objects one tenant may keep on this server (default 1 TiB); uploads past it get "
                  "413")
      ->capture_default_str();
  sub->add_option("--max-model-bytes", o->max_model_bytes,
                  "Bytes of model objects one tenant may keep in this server's registry (default 1 TiB); uploads "
                  "past it get 413")
      ->capture_default_str();
  // Active/standby (controlplane/leader_election.h, docs/postgres.md "Active/standby").
  sub->add_flag("--ha", o->ha,
                "Active/standby: with --store postgres://..., run as one of several servers on that database; one "
                "leads (holds the lease), the others redirect clients to it and take over when it is gone. Exits "
                "75 when it loses the lease: run it under a supervisor that restarts it");
  sub->add_option("--advertise-url", o->advertise_url,
                  "--ha: the API URL other servers send clients to (default: the scheme, host and port of --listen)");
  sub->add_option("--advertise-agent-url", o->advertise_agent_url,
                  "--ha: the agents' URL other servers send agents to (default: from --agent-listen)");
  sub->add_option("--leader-lease", o->leader_lease,
                  "--ha: how long a leader's lease lasts unrenewed (renewed every quarter of it): a dead leader is "
                  "replaced within about this plus half a second; --lease must be at least twice it, so agents do "
                  "not fence their jobs during a failover (with --ha, --lease defaults to 3 times it)")
      ->capture_default_str();
  sub->callback([o, sub] {
    const std::string cmd = "server";

    controlplane::ServerOptions options;
    if (o->tls_cert.empty() != o->tls_key.empty()) Fail(cmd, "--tls-cert and --tls-key go together", kExitUsage);
    if (!o->tls_ca.empty() && o->tls_cert.empty()) Fail(cmd, "--tls-ca needs --tls-cert and --tls-key", kExitUsage);
    if (o->insecure_no_tls && !o->tls_cert.empty()) {
      Fail(cmd, "--insecure-no-tls contradicts --tls-cert/--tls-key", kExitUsage);
    }
    if (o->insecure_no_tls) {
      options.tls_mode = controlplane::TlsMode::kOff;
    } else if (!o->tls_cert.empty()) {
      options.tls_mode = controlplane::TlsMode::kFiles;
      options.tls = {.cert_file = o->tls_cert, .key_file = o->tls_key};
      options.tls_ca_file = o->tls_ca;
    } else {
      options.tls_mode = controlplane::TlsMode::kLocalPki;
    }
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
    options.store = o->store;
    options.policy = o->policy;
    options.max_archive_bytes = o->max_archive_bytes;
    options.max_archive_files = o->max_archive_files;
    options.max_dataset_bytes = o->max_dataset_bytes;
    options.max_model_bytes = o->max_model_bytes;
    options.key_file = o->key_file;
    options.log_retention = std::chrono::hours(24) * o->log_retention_days;
    options.event_retention = std::chrono::hours(24) * o->event_retention_days;
    options.audit_retention = std::chrono::hours(24) * o->audit_retention_days;
    if (std::optional<int64_t> h = ParseDurationSeconds(o->fair_share_half_life); h) {
      options.fair_share_half_life = std::chrono::seconds(*h);
    } else {
      Fail(cmd,
           fmt::format("--fair-share-half-life '{}' must be a number with s, m, h or d (e.g. 7d), or 0",
                       o->fair_share_half_life),
           kExitUsage);
    }
    if (std::optional<int64_t> q = ParseDurationSeconds(o->gpu_quarantine); q && *q > 0) {
      options.gpu_quarantine = std::chrono::seconds(*q);
    } else {
      Fail(cmd,
           fmt::format("--gpu-quarantine '{}' must be a number with s, m, h or d (e.g. 10m), above 0",
                       o->gpu_quarantine),
           kExitUsage);
    }
    options.block_after_losses = o->block_after_losses;
    if (std::optional<int64_t> a = ParseDurationSeconds(o->reclaim_avoid); a && *a >= 0) {
      options.reclaim_avoid = std::chrono::seconds(*a);
    } else {
      Fail(cmd,
           fmt::format("--reclaim-avoid '{}' must be a number with s, m, h or d (e.g. 10m), or 0", o->reclaim_avoid),
           kExitUsage);
    }
    for (auto [flag, text, field] :
         {std::tuple{"--heartbeat-interval", &o->heartbeat_interval, &options.heartbeat_interval},
          std::tuple{"--lease", &o->lease, &options.lease},
          std::tuple{"--fence-grace", &o->fence_grace, &options.fence_grace},
          std::tuple{"--fence-margin", &o->fence_margin, &options.fence_margin}}) {
      absl::StatusOr<Duration> d = api::ParseDuration(*text);
      if (!d.ok() || *d < Duration::zero()) {
        Fail(cmd, fmt::format("{} '{}' must be a duration such as 3s, 500ms or 1m", flag, *text), kExitUsage);
      }
      *field = *d;
    }
    if (!o->prices.empty()) {
      absl::StatusOr<api::PriceTable> prices = api::ReadPriceTable(o->prices);
      if (!prices.ok()) Fail(cmd, fmt::format("--prices: {}", prices.status().message()), kExitUsage);
      options.gpu_hour_prices = *std::move(prices);
    }
    if (absl::StatusOr<int64_t> credit = api::ParseMoneyMicros(o->trial_credit); credit.ok()) {
      options.billing.trial_credit_micros = *credit;
    } else {
      Fail(cmd, fmt::format("--trial-credit '{}': {}", o->trial_credit, credit.status().message()), kExitUsage);
    }
    options.billing.trial_credit_ttl = std::chrono::hours(24) * o->trial_credit_days;
    options.billing.platform_fee_bps = o->platform_fee_bps;
    for (auto [flag, text, field] : {std::tuple{"--price-per-million-requests", &o->price_per_million_requests,
                                                &options.billing.price_per_million_requests_micros},
                                     std::tuple{"--price-per-million-tokens", &o->price_per_million_tokens,
                                                &options.billing.price_per_million_tokens_micros}}) {
      absl::StatusOr<int64_t> price = api::ParseMoneyMicros(*text);
      if (!price.ok()) Fail(cmd, fmt::format("{} '{}': {}", flag, *text, price.status().message()), kExitUsage);
      *field = *price;
    }
    options.billing.enforce = o->enforce_budgets;
    if (!o->region_latency.empty()) {
      absl::StatusOr<api::RegionLatency> latency = api::ReadRegionLatency(o->region_latency);
      if (!latency.ok()) Fail(cmd, fmt::format("--region-latency: {}", latency.status().message()), kExitUsage);
      options.region_latency = *std::move(latency);
    }
    Duration leader_lease{};
    if (o->ha) {
      absl::StatusOr<Duration> d = api::ParseDuration(o->leader_lease);
      if (!d.ok() || *d < std::chrono::seconds(1) || *d > std::chrono::minutes(5)) {
        Fail(cmd, fmt::format("--leader-lease '{}' must be a duration from 1s to 5m (e.g. 4s)", o->leader_lease),
             kExitUsage);
      }
      leader_lease = *d;
      if (!options.store.starts_with("postgres://") && !options.store.starts_with("postgresql://")) {
        Fail(cmd, "--ha needs --store postgres://... (the servers share that database and its leader lease)",
             kExitUsage);
      }
      if (options.tls_mode == controlplane::TlsMode::kLocalPki) {
        Fail(cmd,
             "--ha needs --tls-cert/--tls-key (one certificate naming every server, so clients trust one CA) or "
             "--insecure-no-tls: each server's own local CA would not be trusted by clients of the others",
             kExitUsage);
      }
      if (sub->count("--lease") == 0) options.lease = 3 * leader_lease;
      if (options.lease < 2 * leader_lease) {
        Fail(cmd,
             fmt::format("--lease ({}) must be at least twice --leader-lease ({}): agents would fence their jobs "
                         "while a standby takes over",
                         o->lease, o->leader_lease),
             kExitUsage);
      }
      for (const auto& [flag, url] : {std::pair{"--advertise-url", &o->advertise_url},
                                      std::pair{"--advertise-agent-url", &o->advertise_agent_url}}) {
        if (!url->empty() && !IsBaseUrl(*url)) {
          Fail(cmd, fmt::format("{} '{}' must be http(s)://HOST:PORT, without a path", flag, *url), kExitUsage);
        }
        if (url->empty() && (options.host == "0.0.0.0" || options.host == "::" || options.host.empty())) {
          Fail(cmd,
               fmt::format("{} is needed when listening on every address ({}): the URL other servers send "
                           "clients to",
                           flag, options.host),
               kExitUsage);
        }
      }
    } else if (!o->advertise_url.empty() || !o->advertise_agent_url.empty()) {
      Fail(cmd, "--advertise-url and --advertise-agent-url go with --ha", kExitUsage);
    }
    if (options.heartbeat_interval <= Duration::zero() || options.lease <= options.heartbeat_interval) {
      Fail(cmd,
           fmt::format("--lease ({}) must be longer than --heartbeat-interval ({}), which must be above 0", o->lease,
                       o->heartbeat_interval),
           kExitUsage);
    }
    std::error_code ec;
    std::filesystem::create_directories(options.data_dir, ec);
    if (ec) Fail(cmd, fmt::format("cannot create data directory {}: {}", options.data_dir, ec.message()));

    // Block the stop signals and SIGHUP before the server starts its threads (they inherit the mask),
    // so that only sigwait below receives them.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    // The server's log goes to stderr; stdout carries only what this command prints (the URL first).
    spdlog::set_default_logger(spdlog::stderr_color_mt("gpugeek-server"));
    std::unique_ptr<controlplane::LeaderElection> election;
    std::unique_ptr<store::PostgresStore> election_store;
    if (o->ha) {
      std::optional<int64_t> token = Campaign(*o, leader_lease, stop_signals, options, election_store, election);
      if (!token) {
        pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
        std::cout << "gpugeek server: stopped (a standby)\n";
        return;
      }
      options.leader_token = *token;
      options.on_fenced = [] { ExitDeposed("a write was refused: another server holds the leader lease now"); };
    }
    auto server = controlplane::ControlPlaneServer::Start(options);
    if (!server.ok()) {
      if (election) election->Resign();
      Fail(cmd, fmt::format("{}", server.status().message()));
    }
    if (election) {
      std::cout << fmt::format("gpugeek server: leader (lease token {})\n", options.leader_token) << std::flush;
    }
    std::cout << fmt::format("gpugeek server listening on {}, agents on {} (data: {}, policy: {})\n", (*server)->url(),
                             (*server)->agent_url(), options.data_dir, options.policy)
              << std::flush;
    if ((*server)->tls()) {
      std::cout << fmt::format("gpugeek server: TLS 1.3; clients trust {}\n",
                               (*server)->ca_file().empty() ? "the CA of --tls-cert" : (*server)->ca_file())
                << fmt::format("  try: gpugeek login {}{} --token-file {} && gpugeek nodes\n", (*server)->url(),
                               (*server)->ca_file().empty() ? "" : " --ca-file " + (*server)->ca_file(),
                               (*server)->admin_token_file())
                << std::flush;
    } else {
      std::cout << "gpugeek server: WARNING: TLS is off (--insecure-no-tls): API tokens and job data cross the "
                   "network in clear text. For debugging only\n"
                << fmt::format("  try: gpugeek login {} --token-file {} && gpugeek nodes\n", (*server)->url(),
                               (*server)->admin_token_file())
                << std::flush;
    }

    int signal = 0;
    while (sigwait(&stop_signals, &signal) == 0 && signal == SIGHUP) {
      if (!(*server)->tls()) {
        spdlog::info("SIGHUP received: TLS is off, nothing to reload");
      } else if (absl::Status st = (*server)->ReloadCertificates(); st.ok()) {
        spdlog::info("SIGHUP received: certificates reloaded");
      } else {
        spdlog::error("SIGHUP received: certificate reload failed, still serving the previous certificate: {}",
                      st.message());
      }
    }
    std::cout << fmt::format("gpugeek server: {} received, stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM")
              << std::flush;
    (*server)->Stop();
    server->reset();
    if (election) election->Resign();  // a standby takes over at its next poll, not after the lease
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
    std::cout << "gpugeek server: stopped\n";
  });
}

void RegisterOpenApiCommand(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "openapi", "Print the REST API's OpenAPI 3.0 document (as GET /v1/openapi.json serves it) without a server");
  sub->callback([] { std::cout << controlplane::OpenApiDocument().dump(2) << "\n"; });
}

}  // namespace gpugeek::cli
