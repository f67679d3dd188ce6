#pragma once
// ControlPlaneServer: `gpugeek server` in one object. It opens the store (SQLite under data_dir, or the
// PostgreSQL database ServerOptions::store names),
// rebuilds the control plane from it, serves the REST API, and runs the controllers' loop.
//
// Two listeners, so user traffic can never starve liveness: the API (`port`) for users, the CLI and
// Prometheus, and the agents' listener (`agent_port`) for registrations and heartbeats only. Each has
// its own I/O threads, worker pool, connection limit and deadlines (http/server.h).
//
// Metrics: GET /metrics on the same port serves the server half of docs/metrics.md (controlplane/
// metrics.h) from a metrics::Registry the server owns, or the caller's (ServerOptions::metrics).
//
// Accounts: every API call but health and the API document needs a token (access.h). On the first
// start (no user in the store) the server creates tenant "default", user "admin" and an admin token,
// written to admin_token_file(). Every state-changing API call is recorded in the audit log (audit_log.h,
// GET /v1/audit), kept for audit_retention.
//
// TLS (ServerOptions::tls_mode): both listeners speak TLS 1.3 only (http/tls.h) with one certificate.
// kLocalPki makes a private CA and a server certificate under <data_dir>/tls on the first start
// (pki::EnsureLocalPki) so `gpugeek server` and `gpugeek up` are encrypted with zero configuration;
// kFiles serves the operator's certificate and key. ReloadCertificates (the CLI calls it on SIGHUP) reads
// the files again, renewing the local PKI's server certificate first when it expires soon. kOff, the
// default of this library (in-process tests), serves plain HTTP.
//
// Encryption at rest (crypto/README.md): the server opens the master key file (`key_file`, default
// <data_dir>/master.key) and the keyring <data_dir>/keyring.json at start; the store seals secrets'
// values and jobs' specs with the tenants' data keys. Zero-config: when neither the key file nor the
// keyring exists (a first start, or data from before encryption), a key file is created (mode 0600)
// and the log says to keep it apart from the data in production. When the keyring exists but the key
// file does not, or the key file cannot unwrap the keyring's data keys, Start fails naming both files
// and the fix, before anything is served.
//
// Graceful shutdown (Stop): stop accepting requests, finish those in flight, stop the loop; every
// acknowledged change is already in the store.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "controlplane/accounts.h"
#include "controlplane/archive_store.h"
#include "controlplane/audit_log.h"
#include "controlplane/control_plane.h"
#include "controlplane/controllers/deployment.h"
#include "controlplane/controllers/experiment.h"
#include "controlplane/dataset_store.h"
#include "controlplane/exec_relay.h"
#include "controlplane/model_registry.h"
#include "controlplane/node_authority.h"
#include "controlplane/port_relay.h"
#include "controlplane/secrets.h"
#include "crypto/key_provider.h"
#include "crypto/keyring.h"
#include "http/server.h"
#include "http/tls.h"
#include "metrics/registry.h"
#include "store/postgres_store.h"
#include "store/sqlite_store.h"

namespace gpugeek::controlplane {

enum class TlsMode {
  kOff,       // plain HTTP on both listeners (the library default; `gpugeek server --insecure-no-tls`)
  kLocalPki,  // a local CA and server certificate under <data_dir>/tls, made on the first start
  kFiles,     // ServerOptions::tls: the operator's certificate and key
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8470;        // the API; 0 = any free port
  int agent_port = 8472;  // the agents' listener; 0 = any free port
  std::string data_dir;   // required: gpugeek.db (the SQLite store), logs/, keys, archives
  // Where the store lives (`--store`): "" = SQLite at <data_dir>/gpugeek.db; a "postgres://" or
  // "postgresql://" URI = that PostgreSQL database (store/postgres_store.h), data_dir still holding the rest.
  std::string store;
  // Active/standby (leader_election.h): the fencing token of the leader lease this server holds; its
  // PostgreSQL store then refuses every write once another server took the lease over, and calls
  // `on_fenced` (thread-safe; e.g. to exit). 0 = not fenced (a lone server). Only with a PostgreSQL store.
  // With a token the keyring file is opened shared (crypto::KeyringSharing::kShared): the servers of one
  // control plane share the data directory, and a deposed leader that has not exited must not hold it.
  int64_t leader_token = 0;
  std::string leader_holder;  // the lease's holder id: names the store's sessions for a takeover to end
  std::function<void()> on_fenced;
  std::string policy = "FGDFit";
  Duration heartbeat_interval = std::chrono::seconds(1);
  // The fencing timeline (control_plane.h): suspect after `lease`, down after lease + fence_grace +
  // fence_margin.
  Duration lease = std::chrono::seconds(3);
  Duration fence_grace = std::chrono::seconds(2);
  Duration fence_margin = std::chrono::seconds(1);
  Duration reconcile_interval = std::chrono::milliseconds(100);
  // Retention of ended jobs' logs and events (ControlPlaneOptions).
  Duration log_retention = ControlPlaneOptions().log_retention;
  Duration event_retention = ControlPlaneOptions().event_retention;
  Duration audit_retention = ControlPlaneOptions().audit_retention;  // of the audit log (audit_log.h)
  // Half-life of the tenants' usage behind fair share (ControlPlaneOptions); 0 = no decay.
  Duration fair_share_half_life = ControlPlaneOptions().fair_share_half_life;
  // How long a GPU that raised a hardware XID is not placed on (ControlPlaneOptions::gpu_quarantine).
  Duration gpu_quarantine = ControlPlaneOptions().gpu_quarantine;
  // Losses within an hour that block a node for a while (ControlPlaneOptions::block_after_losses; 0 = never).
  int block_after_losses = ControlPlaneOptions().block_after_losses;
  // How long placement keeps out of a region after a reclaim notice (ControlPlaneOptions::reclaim_avoid).
  Duration reclaim_avoid = ControlPlaneOptions().reclaim_avoid;
  // Prices for nodes whose agents name none (ControlPlaneOptions::gpu_hour_prices; `--prices FILE`).
  api::PriceTable gpu_hour_prices;
  // Trial credit, the platform's fee and budgets (ControlPlaneOptions::billing).
  BillingOptions billing;
  // Latencies between regions, for data locality (ControlPlaneOptions::region_latency; `--region-latency`).
  api::RegionLatency region_latency;
  // Borrowed registry for GET /metrics, e.g. one an in-process agent (`gpugeek up`) also writes to;
  // it must outlive the server. nullptr: the server owns one (metrics()). The server adds its
  // families, gpugeek_build_info included, in Start: whoever shares the registry must not add that
  // family again, and must add its own before Start (Registry::Add* is not safe against a scrape).
  // After a failed Start the registry holds collectors over a destroyed control plane: drop it too.
  metrics::Registry* metrics = nullptr;
  // TLS of both listeners (see the file comment). kOff by default here; the CLI defaults to kLocalPki.
  TlsMode tls_mode = TlsMode::kOff;
  // kFiles: cert_file and key_file (PEM), optionally client_ca_file; ignored otherwise (kLocalPki fills
  // it from <data_dir>/tls).
  http::TlsOptions tls;
  // kFiles: the CA certificate clients should trust, reported by ca_file() and the start log; "" when
  // the operator's certificate chains to a CA this server does not know about.
  std::string tls_ca_file;
  // The master key file (crypto/key_provider.h): "" = <data_dir>/master.key, created on the first start
  // when no keyring exists yet. Given explicitly, it must exist (`gpugeek keys init --key-file FILE`).
  std::string key_file;
  // A keyring the caller opened (e.g. over a KMS provider); borrowed, must outlive the server. When set,
  // key_file is not read and POST /v1/keys/rotate answers FailedPrecondition (rotate in the KMS).
  crypto::Keyring* keyring = nullptr;
  // Workdir archives (archive_store.h, under <data_dir>/archives): the largest archive in bytes
  // (`--max-archive-bytes`, default 1 GiB) and in entries (`--max-archive-files`); over either, 413.
  uint64_t max_archive_bytes = ArchiveStoreOptions().max_archive_bytes;
  uint64_t max_archive_files = ArchiveStoreOptions().max_entries;
  // Dataset versions (dataset_store.h, under <data_dir>/datasets): bytes of objects one tenant may hold
  // (`--max-dataset-bytes`, default 1 TiB); an upload past it is answered 413.
  uint64_t max_dataset_bytes = DatasetStoreOptions().max_tenant_bytes;
  // The model registry (model_routes.h: versions under <data_dir>/models, grants and pull logs under
  // <data_dir>/model-registry): bytes of model objects one tenant may hold (`--max-model-bytes`, 1 TiB).
  uint64_t max_model_bytes = DatasetStoreOptions().max_tenant_bytes;
};

class ControlPlaneServer {
 public:
  // Opens the store, makes or checks the TLS files (tls_mode), and binds the ports. Unavailable when a
  // port is taken or the store cannot be opened; InvalidArgument / NotFound naming the file when a TLS
  // file is missing or does not parse (kFiles: cert_file and key_file are required); the local PKI's
  // errors (pki::EnsureLocalPki).
  static absl::StatusOr<std::unique_ptr<ControlPlaneServer>> Start(const ServerOptions& options);
  ~ControlPlaneServer();
  void Stop();

  // "https://host:port" with TLS, else "http://host:port".
  std::string url() const { return http_->url(); }
  int port() const { return http_->port(); }
  // Where agents register and heartbeat.
  std::string agent_url() const { return agents_http_->url(); }
  int agent_port() const { return agents_http_->port(); }
  ControlPlane& control_plane() { return *control_plane_; }
  Accounts& accounts() { return *accounts_; }
  // Join tokens and node credentials; NodeAuthority::LocalJoinToken lets `gpugeek up`'s agent join.
  NodeAuthority& nodes() { return *nodes_; }
  // The tenants' workdir archives.
  ArchiveStore& archives() { return *archives_; }
  // The tenants' dataset versions.
  DatasetStores& datasets() { return *datasets_; }
  // The tenants' models and who else may use them.
  DatasetStores& models() { return *models_; }
  ModelRegistry& model_registry() { return *model_registry_; }
  // <data_dir>/admin.token: the admin token made on the first start (mode 0600).
  std::string admin_token_file() const { return options_.data_dir + "/admin.token"; }
  // The token in admin_token_file(); "" when it cannot be read (an operator removed it).
  std::string admin_token() const;
  // Whether both listeners serve TLS.
  bool tls() const { return options_.tls_mode != TlsMode::kOff; }
  // The CA certificate (PEM file) clients should trust: <data_dir>/tls/ca.crt with kLocalPki,
  // ServerOptions::tls_ca_file with kFiles, "" without TLS.
  const std::string& ca_file() const { return ca_file_; }
  // The listeners' certificate and key files (empty without TLS), e.g. for another listener of the same
  // host (`gpugeek up` serves its agent's metrics with them).
  const http::TlsOptions& tls_options() const { return options_.tls; }
  // Re-reads the certificate and key on both listeners for connections accepted from now on (on
  // SIGHUP). With kLocalPki, first runs pki::EnsureLocalPki again, which issues a new server certificate
  // when the old one expires within 30 days. On an error (naming the file) the listeners keep serving
  // the certificate they had. FailedPrecondition without TLS. Thread-safe against requests; not to be
  // called concurrently with itself or Stop.
  absl::Status ReloadCertificates();
  // The keyring the store seals with (the server's own, or ServerOptions::keyring).
  crypto::Keyring& keyring() { return *keyring_; }
  // The master key file in use; "" with a borrowed keyring.
  const std::string& key_file() const { return key_file_; }
  // What GET /metrics renders.
  metrics::Registry& metrics() { return *metrics_; }

 private:
  ControlPlaneServer() = default;
  void Loop();
  void ExperimentsLoop();
  void DeploymentsLoop();
  void ProbeLoop();

  // Runs pki::EnsureLocalPki for kLocalPki and fills options_.tls and ca_file_.
  absl::Status PrepareTls();

  ServerOptions options_;
  std::string ca_file_;
  // Declared first, destroyed last: the control plane's collectors and instruments live in it.
  std::unique_ptr<metrics::Registry> own_metrics_;
  metrics::Registry* metrics_ = nullptr;
  // Keys outlive the store that seals with them.
  std::string key_file_;
  std::unique_ptr<crypto::FileKeyProvider> key_provider_;
  std::unique_ptr<crypto::Keyring> own_keyring_;
  crypto::Keyring* keyring_ = nullptr;
  std::unique_ptr<KeyringSealer> sealer_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ArchiveStore> archives_;   // before control_plane_, which asks it at admission
  std::unique_ptr<DatasetStores> datasets_;  // before control_plane_, which resolves `dataset:` with it
  std::unique_ptr<DatasetStores> models_;
  std::unique_ptr<ModelRegistry> model_registry_;
  std::unique_ptr<ControlPlane> control_plane_;
  std::unique_ptr<ExperimentController> experiments_;  // a client of control_plane_, on its own thread
  std::unique_ptr<DeploymentController> deployments_;  // a client of control_plane_, on its own threads
  std::unique_ptr<AuditLog> audit_log_;                // before accounts_, which borrows it
  std::unique_ptr<Accounts> accounts_;
  std::unique_ptr<NodeAuthority> nodes_;
  const std::unique_ptr<ExecTokens> exec_tokens_ = std::make_unique<ExecTokens>();  // exec_relay.h
  std::unique_ptr<http::Server> http_;                                              // users
  std::unique_ptr<http::Server> agents_http_;                                       // agents
  std::thread loop_;
  std::thread experiments_loop_;
  std::thread deployments_loop_;
  std::thread probe_loop_;
  std::mutex mu_;
  bool stopping_ = false;  // guarded by mu_
  std::mutex rotate_mu_;   // one key rotation at a time
};

}  // namespace gpugeek::controlplane
