#include "controlplane/server.h"

#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "absl/strings/strip.h"
#include "common/absl_fmt.h"
#include "common/file.h"
#include "common/status_macros.h"
#include "controlplane/api_routes.h"
#include "controlplane/archive_routes.h"
#include "controlplane/dataset_routes.h"
#include "controlplane/experiment_routes.h"
#include "controlplane/metrics.h"
#include "controlplane/model_routes.h"
#include "controlplane/secret_routes.h"
#include "controlplane/service_routes.h"
#include "pki/pki.h"

namespace gpugeek::controlplane {
namespace {

// A job spec is at most 1 MiB and a model config 4 MiB (api/job_spec.h, workload/model_config.h);
// a submission carries both, JSON-escaped.
constexpr size_t kMaxApiBodyBytes = size_t{12} << 20;
// A heartbeat carries at most 4 MiB of log bytes (base64) plus telemetry and reports.
constexpr size_t kMaxAgentBodyBytes = size_t{8} << 20;
// The shortest time between two controller passes.
constexpr auto kMinPassGap = std::chrono::milliseconds(10);

// Opens (or, on a first start, creates) the master key file and the keyring of `data_dir`.
absl::Status OpenKeys(const ServerOptions& options, std::string& key_file,
                      std::unique_ptr<crypto::FileKeyProvider>& provider, std::unique_ptr<crypto::Keyring>& keyring) {
  namespace fs = std::filesystem;
  const std::string keyring_file = (fs::path(options.data_dir) / "keyring.json").string();
  key_file = options.key_file.empty() ? (fs::path(options.data_dir) / "master.key").string() : options.key_file;
  std::error_code ec;
  if (!fs::exists(key_file, ec)) {
    if (fs::exists(keyring_file, ec)) {
      return absl::FailedPreconditionError(fmt::format(
          "server: the keyring {} holds data keys, but the master key file {} does not exist: restore that key file "
          "from its backup (or start with --key-file naming where it is); without it no secret, spec or log sealed "
          "here can be read",
          keyring_file, key_file));
    }
    if (!options.key_file.empty()) {
      return absl::NotFoundError(fmt::format(
          "server: master key file {} does not exist; create one with `gpugeek keys init --key-file {}` (and back it "
          "up apart from the data)",
          key_file, key_file));
    }
    ASSIGN_OR_RETURN(std::string id, crypto::CreateMasterKeyFile(key_file));
    spdlog::warn(
        "first start: created master key file {} (key {}), which seals tenants' secrets and job specs at rest. In "
        "production keep it apart from the data directory and back it up separately (`gpugeek keys init --key-file "
        "/etc/gpugeek/master.key`, then --key-file): a copy of the data next to its key is not encrypted at all, and "
        "losing the key loses every sealed byte",
        key_file, id);
  }
  absl::StatusOr<std::unique_ptr<crypto::FileKeyProvider>> p = crypto::FileKeyProvider::Open(key_file);
  if (!p.ok()) return absl::Status(p.status().code(), fmt::format("server: {}", p.status().message()));
  provider = std::move(*p);
  absl::StatusOr<std::unique_ptr<crypto::Keyring>> k = crypto::Keyring::Open(
      keyring_file, *provider,
      options.leader_token > 0 ? crypto::KeyringSharing::kShared : crypto::KeyringSharing::kExclusive);
  if (!k.ok()) {
    return absl::Status(k.status().code(),
                        fmt::format("server: {} (start with --key-file naming the master key file this data directory "
                                    "was sealed with; it is not {})",
                                    k.status().message(), key_file));
  }
  keyring = std::move(*k);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ControlPlaneServer>> ControlPlaneServer::Start(const ServerOptions& options) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("server: --data-dir is required");
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir, ec);
  if (ec) return absl::UnavailableError(fmt::format("server: cannot create {}: {}", options.data_dir, ec.message()));
  auto s = std::unique_ptr<ControlPlaneServer>(new ControlPlaneServer());
  s->options_ = options;
  if (options.metrics == nullptr) s->own_metrics_ = std::make_unique<metrics::Registry>();
  s->metrics_ = options.metrics != nullptr ? options.metrics : s->own_metrics_.get();
  RETURN_IF_ERROR(s->PrepareTls());
  if (options.keyring != nullptr) {
    s->keyring_ = options.keyring;
  } else {
    RETURN_IF_ERROR(OpenKeys(options, s->key_file_, s->key_provider_, s->own_keyring_));
    s->keyring_ = s->own_keyring_.get();
  }
  s->sealer_ = std::make_unique<KeyringSealer>(*s->keyring_);
  if (options.store.starts_with("postgres://") || options.store.starts_with("postgresql://")) {
    ASSIGN_OR_RETURN(std::unique_ptr<store::PostgresStore> pg,
                     store::PostgresStore::Open(
                         {.url = options.store,
                          .application_name = options.leader_holder.empty()
                                                  ? ""
                                                  : store::PostgresStore::LeaderApplicationName(options.leader_holder),
                          .sealer = s->sealer_.get()}));
    spdlog::info("store: PostgreSQL at {} (schema version {})", pg->server(), pg->schema_version());
    if (options.leader_token > 0) pg->FenceWrites(options.leader_token, options.on_fenced);
    s->store_ = std::move(pg);
  } else if (options.leader_token > 0) {
    return absl::InvalidArgumentError("server: a leader lease (active/standby) needs a PostgreSQL store");
  } else if (options.store.empty()) {
    ASSIGN_OR_RETURN(
        s->store_, store::SqliteStore::Open({.path = (std::filesystem::path(options.data_dir) / "gpugeek.db").string(),
                                             .sealer = s->sealer_.get()}));
  } else {
    return absl::InvalidArgumentError(fmt::format(
        "server: --store must be a postgres:// or postgresql:// URI (or left out for SQLite under --data-dir)"));
  }
  ASSIGN_OR_RETURN(s->archives_,
                   ArchiveStore::Open({.dir = (std::filesystem::path(options.data_dir) / "archives").string(),
                                       .keyring = s->keyring_,
                                       .max_archive_bytes = options.max_archive_bytes,
                                       .max_entries = options.max_archive_files}));
  ASSIGN_OR_RETURN(s->datasets_,
                   DatasetStores::Open({.dir = (std::filesystem::path(options.data_dir) / "datasets").string(),
                                        .max_tenant_bytes = options.max_dataset_bytes},
                                       RealClock()));
  ASSIGN_OR_RETURN(s->models_,
                   DatasetStores::Open({.dir = (std::filesystem::path(options.data_dir) / "models").string(),
                                        .max_tenant_bytes = options.max_model_bytes,
                                        .limit_flag = "--max-model-bytes",
                                        .noun = "models"},
                                       RealClock()));
  ASSIGN_OR_RETURN(
      s->model_registry_,
      ModelRegistry::Open((std::filesystem::path(options.data_dir) / "model-registry").string(), RealClock()));
  ControlPlaneOptions cp;
  cp.store = s->store_.get();
  cp.resolve_dataset = [d = s->datasets_.get()](const std::string& tenant, const std::string& dataset,
                                                const std::string& rev) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(data::VersionStore * store, d->For(tenant));
    ASSIGN_OR_RETURN(std::string commit, store->Resolve(dataset, rev));
    // Only a commit the server accepted as one (checked whole and within its size limits).
    if (!data::IsAccepted(*store, data::ObjectKind::kCommit, commit)) {
      return absl::NotFoundError(fmt::format("{} is not a commit pushed to the server", commit.substr(0, 12)));
    }
    return commit;
  };
  cp.resolve_weights = [m = s->models_.get(), reg = s->model_registry_.get()](
                           const std::string& tenant, const std::string& user, const std::string& owner,
                           const std::string& model, const std::string& rev, bool finetune, const std::string& engine) {
    return AdmitWeights(*m, *reg, tenant, user, owner, model, rev, finetune ? kModelFinetune : kModelDeploy, engine);
  };
  cp.has_archive = [a = s->archives_.get()](const std::string& tenant, const std::string& digest) {
    return a->Has(tenant, digest);
  };
  cp.data_dir = options.data_dir;
  cp.keyring = s->keyring_;
  cp.policy = options.policy;
  cp.heartbeat_interval = options.heartbeat_interval;
  cp.lease = options.lease;
  cp.fence_grace = options.fence_grace;
  cp.fence_margin = options.fence_margin;
  cp.log_retention = options.log_retention;
  cp.event_retention = options.event_retention;
  cp.audit_retention = options.audit_retention;
  cp.fair_share_half_life = options.fair_share_half_life;
  cp.gpu_quarantine = options.gpu_quarantine;
  cp.block_after_losses = options.block_after_losses;
  cp.reclaim_avoid = options.reclaim_avoid;
  cp.gpu_hour_prices = options.gpu_hour_prices;
  cp.billing = options.billing;
  cp.region_latency = options.region_latency;
  cp.metrics = s->metrics_;
  ASSIGN_OR_RETURN(s->control_plane_, ControlPlane::Create(cp));
  ASSIGN_OR_RETURN(s->nodes_, NodeAuthority::Open(*s->store_, RealClock(), options.data_dir + "/node-credentials.key"));
  // Whose each stored node is comes from its credential, not from a label stored with it.
  s->control_plane_->SetNodeProviders(s->nodes_->NodeProviders());
  s->audit_log_ = std::make_unique<AuditLog>(*s->store_, RealClock());
  Billing& billing = s->control_plane_->billing();
  const auto grant_trial = [&billing](const std::string& tenant) {
    if (absl::StatusOr<std::optional<ledger::Transaction>> g = billing.GrantTrial(tenant); !g.ok()) {
      spdlog::error("billing: the trial credit of tenant '{}' (granted at the next start): {}", tenant, g.status());
    }
  };
  ASSIGN_OR_RETURN(s->accounts_, Accounts::Open(*s->store_, RealClock(),
                                                {.audit_log = s->audit_log_.get(), .on_tenant_created = grant_trial}));
  ASSIGN_OR_RETURN(std::optional<std::string> bootstrap, s->accounts_->Bootstrap());
  // Every tenant has its trial credit, once (one created while the server was down, or before credits).
  for (const std::string& tenant : s->accounts_->TenantIds()) grant_trial(tenant);
  if (bootstrap) {
    // First start: the operator's admin token, readable by the server's user only. The CLI of `gpugeek
    // up` and `gpugeek login --token-file` read it from here.
    RETURN_IF_ERROR(WriteFilePrivate(s->admin_token_file(), *bootstrap + "\n"));
    spdlog::info("first start: created tenant 'default' and user 'admin'; admin token written to {}",
                 s->admin_token_file());
  }
  auto observer = [m = s->control_plane_->metrics()](const std::string& method, const std::string& route, int status,
                                                     Duration elapsed) {
    m->HttpRequest(method, route, status, elapsed);
  };
  http::ServerOptions api;
  api.name = "api";
  api.host = options.host;
  api.port = options.port;
  api.max_body_bytes = kMaxApiBodyBytes;
  api.observer = observer;
  api.tls = s->options_.tls;
  ASSIGN_OR_RETURN(s->http_, http::Server::Create(api));
  RegisterApiRoutes(*s->http_, *s->control_plane_, *s->accounts_, *s->nodes_, RealClock());
  // The agents' node API certificates: `gpugeek up`'s agent serves with this server's certificate.
  RegisterExecRoute(*s->http_, *s->control_plane_, *s->accounts_, *s->exec_tokens_, {.ca_file = s->ca_file_});
  RegisterPortRoutes(*s->http_, *s->control_plane_, *s->accounts_, *s->exec_tokens_, {.ca_file = s->ca_file_});
  RotateKeysFn rotate;
  if (s->key_provider_ != nullptr) {
    rotate = [p = s.get()](bool retire) -> absl::StatusOr<crypto::MasterKeyRotation> {
      // One rotation at a time (the key file's own flock serializes processes; this, the server's calls).
      std::lock_guard<std::mutex> lock(p->rotate_mu_);
      ASSIGN_OR_RETURN(crypto::MasterKeyRotation done,
                       crypto::RotateMasterKeyAndRewrap(*p->key_provider_, *p->own_keyring_, retire));
      spdlog::info("keys: master key rotated to {} ({} data keys re-wrapped, {} retired)", done.new_key_id,
                   done.rewrapped, done.retired.size());
      return done;
    };
  }
  RegisterSecretRoutes(*s->http_, *s->accounts_, s->control_plane_->secrets(), std::move(rotate));
  RegisterArchiveRoutes(*s->http_, *s->accounts_, *s->archives_);
  RegisterDatasetRoutes(*s->http_, *s->accounts_, *s->datasets_);
  RegisterModelRoutes(*s->http_, *s->accounts_, *s->models_, *s->model_registry_);
  s->experiments_ = std::make_unique<ExperimentController>(*s->control_plane_, *s->store_, s->control_plane_->clock());
  RegisterExperimentRoutes(*s->http_, *s->accounts_, *s->control_plane_, *s->store_, *s->experiments_);
  s->deployments_ = std::make_unique<DeploymentController>(*s->control_plane_, *s->store_, s->control_plane_->clock());
  RegisterServiceRoutes(*s->http_, *s->accounts_, *s->store_, *s->deployments_, s->control_plane_->serving_meter());
  http::ServerOptions agents;
  agents.name = "agents";
  agents.host = options.host;
  agents.port = options.agent_port;
  agents.max_body_bytes = kMaxAgentBodyBytes;
  agents.observer = observer;
  agents.tls = s->options_.tls;
  // Agents heartbeat every second over keep-alive connections; one that stays silent past its lease
  // is handled by the lease, not the socket.
  agents.idle_timeout = std::chrono::seconds(30);
  agents.header_timeout = std::chrono::seconds(5);
  ASSIGN_OR_RETURN(s->agents_http_, http::Server::Create(agents));
  RegisterAgentRoutes(*s->agents_http_, *s->control_plane_, *s->nodes_, s->exec_tokens_.get());
  RegisterAgentArchiveRoute(*s->agents_http_, *s->archives_, *s->control_plane_, *s->nodes_);
  RegisterAgentDatasetRoute(*s->agents_http_, *s->datasets_, *s->control_plane_, *s->nodes_);
  RegisterAgentModelRoute(*s->agents_http_, *s->models_, *s->control_plane_, *s->nodes_);
  RETURN_IF_ERROR(s->agents_http_->Start());
  RETURN_IF_ERROR(s->http_->Start());
  s->loop_ = std::thread([p = s.get()] { p->Loop(); });
  s->experiments_loop_ = std::thread([p = s.get()] { p->ExperimentsLoop(); });
  s->deployments_loop_ = std::thread([p = s.get()] { p->DeploymentsLoop(); });
  s->probe_loop_ = std::thread([p = s.get()] { p->ProbeLoop(); });
  spdlog::info("gpugeek server listening on {} (agents on {}; data in {})", s->url(), s->agent_url(), options.data_dir);
  if (s->tls()) {
    spdlog::info("TLS 1.3 with {} (clients trust {})", s->options_.tls.cert_file,
                 s->ca_file_.empty() ? "the operator's CA" : s->ca_file_);
  } else {
    spdlog::warn("TLS is off: API tokens and job data cross the network in clear text");
  }
  return s;
}

absl::Status ControlPlaneServer::PrepareTls() {
  switch (options_.tls_mode) {
    case TlsMode::kOff:
      options_.tls = {};
      return absl::OkStatus();
    case TlsMode::kFiles:
      if (options_.tls.cert_file.empty() || options_.tls.key_file.empty()) {
        return absl::InvalidArgumentError("server: TLS needs both a certificate and a key file");
      }
      ca_file_ = options_.tls_ca_file;
      return absl::OkStatus();
    case TlsMode::kLocalPki: {
      ASSIGN_OR_RETURN(pki::LocalPki local,
                       pki::EnsureLocalPki({.dir = (std::filesystem::path(options_.data_dir) / "tls").string()}));
      if (local.created_ca) spdlog::info("created a local CA: {} (clients trust it)", local.ca_cert_file);
      if (local.issued_server) spdlog::info("issued the server certificate {}", local.server_cert_file);
      options_.tls.cert_file = local.server_cert_file;
      options_.tls.key_file = local.server_key_file;
      ca_file_ = local.ca_cert_file;
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError("server: unknown TLS mode");
}

absl::Status ControlPlaneServer::ReloadCertificates() {
  if (!tls()) return absl::FailedPreconditionError("server: TLS is off; there are no certificates to reload");
  // A renewal rewrites server.crt and server.key atomically, each listener then reads both.
  if (options_.tls_mode == TlsMode::kLocalPki) RETURN_IF_ERROR(PrepareTls());
  RETURN_IF_ERROR(http_->ReloadCertificates());
  return agents_http_->ReloadCertificates();
}

ControlPlaneServer::~ControlPlaneServer() { Stop(); }

std::string ControlPlaneServer::admin_token() const {
  absl::StatusOr<std::string> text = ReadFileBounded(admin_token_file(), 4096, "admin token");
  if (!text.ok()) return "";
  return std::string(absl::StripAsciiWhitespace(text->substr(0, text->find('\n'))));
}

void ControlPlaneServer::Stop() {
  if (control_plane_) control_plane_->BeginShutdown();
  // The controllers stop first: while the HTTP server drains its connections (up to its timeouts) no
  // heartbeat may be served, and a reconcile pass would take the silence for dead nodes and requeue
  // their running jobs. A restarted server gives every node a fresh node_timeout.
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  if (loop_.joinable()) loop_.join();
  if (experiments_) experiments_->Wake();  // its loop then sees stopping_
  if (experiments_loop_.joinable()) experiments_loop_.join();
  if (deployments_) deployments_->Wake();
  if (deployments_loop_.joinable()) deployments_loop_.join();
  if (probe_loop_.joinable()) probe_loop_.join();
  if (http_) http_->Stop();
  if (agents_http_) agents_http_->Stop();
}

// The experiment controller's own loop (controllers/experiment.h): a pass every 200 ms, or at once when
// an experiment is created or stopped. It calls the control plane as the API does, never under its
// writer token.
void ControlPlaneServer::ExperimentsLoop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    experiments_->Reconcile();
    experiments_->WaitForWork(std::chrono::milliseconds(200));
  }
}

// The deployment controller's loop (controllers/deployment.h): a pass every 200 ms, or at once when a
// service changes or a replica's readiness does.
void ControlPlaneServer::DeploymentsLoop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    deployments_->Reconcile();
    deployments_->WaitForWork(std::chrono::milliseconds(200));
  }
}

// The replicas' readiness probes, apart from the reconcile loop so a slow replica delays no pass: a round
// every 100 ms (each replica is probed at its own period).
void ControlPlaneServer::ProbeLoop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    deployments_->Probe();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void ControlPlaneServer::Loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    const auto start = std::chrono::steady_clock::now();
    control_plane_->Reconcile();
    // The next pass comes after reconcile_interval, or sooner when reports or submissions arrive,
    // but not within kMinPassGap of this one's start, so a stream of heartbeats is handled in batches.
    std::this_thread::sleep_until(start + kMinPassGap);
    control_plane_->WaitForWork(options_.reconcile_interval - kMinPassGap);
  }
}

}  // namespace gpugeek::controlplane
