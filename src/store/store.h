#pragma once
// Store: the control plane's durable record of jobs, their events and nodes.
//
// Contract ("durable before acknowledged", ARCHITECTURE.md): when a mutating call returns OK the
// change is committed and synced to stable storage, so the caller may acknowledge it to a client
// or send it to an agent. A restarted control plane rebuilds all of its state from the store.
//
// Every job change is a compare-and-set on the job's `version`, and a state change appends its
// event in the same transaction, so the event log and the job rows never disagree.
//
// Implementations: SqliteStore (embedded default, `sqlite_store.h`), PostgresStore (`postgres_store.h`).
// Thread-safety: every method may be called from any thread.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "api/job_state.h"
#include "common/clock.h"
#include "store/experiment_records.h"
#include "store/service_records.h"

namespace gpugeek::store {

struct JobRecord {
  std::string id;         // unique, chosen by the caller (e.g. "j-000042")
  std::string tenant;     // owning tenant; "" = default tenant
  std::string name;       // JobSpec::name, for filtering
  std::string spec_yaml;  // the submitted spec, as accepted
  api::JobState state = api::JobState::kPending;
  int priority = 0;
  std::string plan_json;        // planner output kept at admission; "" = none
  std::string allocation_json;  // where it runs; "" while unplaced
  int64_t epoch = 0;            // fencing token: raised on every new placement
  int restarts = 0;             // requeues after failures / reclaims
  // Retries used per cause of the job's retry policy (api::RetryCauseName -> count): each cause has
  // its own budget. Counted by the control plane; `restarts` counts every requeue.
  std::map<std::string, int> retries;
  std::optional<int> exit_code;
  std::string reason;  // why the job is in its current state
  // The last checkpoint the workload reported complete (docs/checkpointing.md): the step it resumes
  // from, and when the report arrived (wall clock). nullopt = none reported yet.
  std::optional<int64_t> checkpoint_step;
  TimePoint checkpoint_at;
  // The region of the node that reported it ("" = none, or a node without a region): where the
  // checkpoint lives, so placement tries that region first (api/region_latency.h).
  std::string checkpoint_region;
  // The usage metered so far (controlplane/usage.h's stored form); "" = none.
  std::string usage_json;
  // Variables the platform gives every member beside the spec's env (api::kPlatformEnvNames: a trial's
  // GPUGEEK_EXPERIMENT, GPUGEEK_TRIAL_ID, GPUGEEK_PARAMS), set by internal submitters. Empty = none.
  std::map<std::string, std::string> platform_env;
  // The user who submitted it (UserRecord::name; "" for an internal submitter or an embedded pool): whose
  // budget its charges count against (controlplane/budgets.h).
  std::string submitted_by;
  TimePoint created_at;
  TimePoint updated_at;
  int64_t version = 0;  // set by the store; bumped on every write
};

struct EventRecord {
  int64_t seq = 0;  // global, strictly increasing in commit order
  std::string job_id;
  TimePoint time;
  api::JobState from = api::JobState::kPending;
  api::JobState to = api::JobState::kPending;
  std::string reason;
};

struct NodeRecord {
  std::string id;              // node name, unique
  std::string inventory_json;  // hw::NodeInventory as JSON
  std::string state;           // "ready", "cordoned", "draining", "down"
  TimePoint last_heartbeat;
  TimePoint registered_at;
};

// The accounts (auth/README.md): tenants own every object; users belong to one tenant with one role;
// API tokens belong to a user and are stored only as a hash of their secret.
struct TenantRecord {
  std::string id;  // unique name, api::ValidateName rules (e.g. "team-a")
  TimePoint created_at;
};

struct UserRecord {
  std::string name;    // unique across tenants
  std::string tenant;  // TenantRecord::id
  std::string role;    // "admin", "member" or "viewer" (auth/role.h)
  TimePoint created_at;
};

struct TokenRecord {
  std::string id;           // public part of the token, unique
  std::string user;         // UserRecord::name
  std::string secret_hash;  // argon2id string of the secret part (auth/api_token.h); never the secret
  std::string description;
  TimePoint created_at;
  std::optional<TimePoint> expires_at;  // none: never expires
  std::optional<TimePoint> revoked_at;  // set once, by RevokeToken
};

// A join token (auth/node_credential.h): lets `uses_left` more agents join the pool. The secret is
// high-entropy random, so its SHA-256 (hex) is stored: no slow hash is needed against guessing, and
// a thousand agents joining at once cost microseconds each.
struct JoinTokenRecord {
  std::string id;
  std::string secret_sha256;  // lowercase hex
  std::string description;
  std::string created_by;  // user
  TimePoint created_at;
  std::optional<TimePoint> expires_at;
  int64_t uses_left = 1;
  // The provider whose nodes join with it (a tenant: it is owed their usage, controlplane/billing.h);
  // "" = the platform's own nodes. Its nodes' credentials carry it (NodeCredentialRecord).
  std::string provider;
};

// A node's credential: its generation (auth/node_credential.h) and the provider its join token bound it
// to ("" = the platform's own).
struct NodeCredentialRecord {
  std::string node;
  uint64_t generation = 0;
  std::string provider;
};

// One state-changing API call (controlplane/audit_log.h): who, what, when, from where, and its answer.
// Holds no token secret and no request body.
struct AuditRecord {
  int64_t seq = 0;             // set by the store: global, strictly increasing in commit order
  TimePoint time;              // when the call was answered (wall clock)
  std::string user;            // "" when the call carried no valid token
  std::string tenant;          // the user's tenant
  std::string token_id;        // the public id of the token presented (TokenRecord::id)
  std::string role;            // the user's role then
  std::string method;          // "POST", "DELETE", ...
  std::string route;           // the route pattern, e.g. "/v1/jobs/{id}/cancel"
  std::string path;            // the path called, with the object ids, e.g. "/v1/jobs/j-000042/cancel"
  int status = 0;              // the HTTP status answered
  std::string remote_address;  // the peer's "IP:port"
  std::string request_id;      // the client's X-Request-Id, "" if none
};

// Which audit records Store::ListAudit returns: seq > after_seq, oldest first, at most `limit`
// (1..10000); an empty user or tenant matches every one.
struct AuditFilter {
  int64_t after_seq = 0;
  std::string user;
  std::string tenant;
  int limit = 100;
};

// A tenant's secret (`gpugeek secret set NAME`): a value jobs of that tenant refer to from their env.
struct SecretRecord {
  std::string tenant;
  std::string name;   // unique per tenant
  std::string value;  // plaintext in memory only; empty in listings (ListSecrets never reads values)
  TimePoint created_at;
  TimePoint updated_at;
};

// Encryption at rest: what a store seals before it writes a tenant's confidential bytes (secrets'
// values, jobs' spec_yaml, whose env holds values) and opens after it reads them. The server's
// implementation seals with the tenant's data key of a crypto::Keyring (controlplane/secrets.h), so
// the database file holds no such byte in the clear. `aad` names what the bytes are (e.g.
// "job-spec:j-000042", "secret:acme/hf"): a blob opens only for the tenant and aad it was sealed for,
// so sealed values cannot be swapped between rows. Thread-safe.
class Sealer {
 public:
  virtual ~Sealer() = default;
  // The sealed form of `plaintext` (binary). Errors: the keyring's (a failed key file write, a KMS).
  virtual absl::StatusOr<std::string> Seal(std::string_view tenant, std::string_view plaintext,
                                           std::string_view aad) = 0;
  // The plaintext of what Seal returned for the same tenant and aad. DataLoss when it does not
  // authenticate (altered, another row's, another key).
  virtual absl::StatusOr<std::string> Open(std::string_view tenant, std::string_view sealed,
                                           std::string_view aad) const = 0;
};

// A tenant's scheduling configuration (sched/quota.h: TenantConfig): its fair-share weight and its caps,
// each 0 (or a model absent from the map) = unlimited. One row per configured tenant; a tenant without
// a row has weight 1 and no caps.
struct TenantQuotaRecord {
  std::string tenant;  // TenantRecord::id (not enforced by the store: the control plane checks it)
  double weight = 1;   // fair-share weight (Slurm's shares), > 0
  std::map<std::string, int64_t> max_gpus_by_model;  // whole GPUs per GPU model id
  int64_t max_gpu_milli = 0;                         // milli-GPU over all models (1000 = one GPU)
  int32_t max_jobs = 0;                              // jobs holding GPUs at once
  TimePoint updated_at;
};

// A tenant's decayed usage (sched::TenantLedger), persisted so fair share survives a restart.
struct TenantUsageRecord {
  std::string tenant;
  double usage = 0;  // milli-GPU-seconds, decayed, as of `as_of`
  TimePoint as_of;   // wall time the value was taken
};

// Which events Store::ListEvents returns: seq > after_seq, oldest first, at most `limit` (1..10000).
struct EventFilter {
  std::string job_id;  // "" = every job's
  std::string tenant;  // "" = every tenant's; else only events of that tenant's jobs
  int64_t after_seq = 0;
  int limit = 100;
};

// One ledger transaction (ledger/transaction.h), stored as its text form; the store only keeps the
// order (seq) and the columns it filters by. Append-only: never updated or deleted.
struct LedgerRecord {
  int64_t seq = 0;     // set by the store: global, strictly increasing in commit order
  std::string id;      // the transaction id, unique (its idempotency key)
  std::string tenant;  // "" for a provider's payout
  std::string kind;    // "grant", "charge", ...
  TimePoint at;        // wall clock
  std::string body;    // ledger::ToText
};

// A monthly spending limit (controlplane/budgets.h): of a tenant (user "") or of one of its users, in
// integer micro-units per calendar month (UTC), with the percents of it at which to alert, and the alerts
// fired so far in `alerted_period` (each percent once per month).
struct BudgetRecord {
  std::string tenant;
  std::string user;                  // "" = the whole tenant
  int64_t monthly_limit_micros = 0;  // > 0
  std::vector<int> alert_percents;   // ascending, each 1..1000
  std::string alerted_period;        // "2026-12"; "" = none yet
  int alerted_percent = 0;           // the highest percent alerted in alerted_period
  TimePoint updated_at;
};

// A reservation (controlplane/reservations.h): `gpus` GPUs of `gpu_model` held for `tenant` on whole nodes
// from start to end (wall clock), charged per hour of the term at price_micros (per GPU-hour) for the GPUs
// held at each hour's close. The operator's columns (the term: end shortened by a cancel) and the writer's
// (nodes held, hours charged, GPU time held and used) are written apart, so neither overwrites the other.
struct ReservationRecord {
  std::string id;  // "rsv-00000001"
  std::string tenant;
  std::string gpu_model;
  int32_t gpus = 0;
  int64_t price_micros = 0;  // per GPU-hour
  TimePoint start, end;
  std::string created_by;
  TimePoint created_at;
  std::vector<std::string> nodes;      // held now, by name
  int64_t charged_hours = 0;           // hours of the term charged so far (the last may be partial)
  int64_t held_gpu_milli_seconds = 0;  // GPU time charged (held at the close of each charged hour)
  int64_t used_gpu_milli_seconds = 0;  // the tenant's metered segments on held nodes (usage.h)
};

// Which ledger records Store::ListLedger returns: seq > after_seq, oldest first, at most `limit`
// (1..10000); an empty tenant matches every one.
struct LedgerFilter {
  int64_t after_seq = 0;
  std::string tenant;
  int limit = 100;
};

struct JobFilter {
  std::optional<api::JobState> state;
  std::string tenant;         // "" = all tenants
  std::string name;           // "" = any name
  bool newest_first = false;  // order by id descending (ids are issued in submission order)
  std::string after_id;       // paging: ids strictly after this one in the listing order
  int limit = 100;            // 1..10000
};

// How many jobs are in one state at one priority (Store::CountJobs).
struct JobCount {
  api::JobState state = api::JobState::kPending;
  int priority = 0;
  int64_t count = 0;
  // The earliest updated_at among them. For PENDING jobs that is when the longest-waiting one entered
  // the queue (submission or requeue: nothing else updates a PENDING job).
  TimePoint oldest_update;
};

class Store {
 public:
  virtual ~Store() = default;

  // Inserts a new job (version becomes 1) and its creation event (from == to == its state).
  // AlreadyExists if the id is taken. Returns the stored record.
  virtual absl::StatusOr<JobRecord> CreateJob(const JobRecord& job) = 0;

  // Group commit: creates every job of `jobs` in ONE transaction (one fsync), each as CreateJob
  // would. Returns one result per job, in order; a job whose id is taken gets AlreadyExists and
  // the others are still stored. A store-level failure fails them all (nothing stored).
  virtual absl::StatusOr<std::vector<absl::StatusOr<JobRecord>>> CreateJobs(const std::vector<JobRecord>& jobs) = 0;

  // NotFound if absent.
  virtual absl::StatusOr<JobRecord> GetJob(const std::string& id) = 0;

  // Jobs matching `filter`, ordered by id (descending when newest_first). InvalidArgument for a limit
  // outside 1..10000.
  virtual absl::StatusOr<std::vector<JobRecord>> ListJobs(const JobFilter& filter) = 0;

  // Jobs per (state, priority), ordered by state name then priority; only pairs with jobs appear.
  // One aggregate query (no rows are read into memory), for metrics scraped every few seconds.
  virtual absl::StatusOr<std::vector<JobCount>> CountJobs() = 0;

  // Replaces the job's row if its stored version equals `job.version` (compare-and-set), bumping the
  // version. If the state differs from the stored one, the move must be allowed by
  // api::CanTransition (else FailedPrecondition) and an event with `job.reason` is appended at
  // `job.updated_at`. Aborted on a version mismatch: re-read and retry. NotFound if absent.
  virtual absl::StatusOr<JobRecord> UpdateJob(const JobRecord& job) = 0;

  // Events matching `filter`, oldest first. InvalidArgument for a limit outside 1..10000.
  virtual absl::StatusOr<std::vector<EventRecord>> ListEvents(const EventFilter& filter) = 0;

  // Retention: deletes up to `limit` events, oldest first, that were recorded before `before` and belong
  // to jobs that ended (SUCCEEDED, FAILED, CANCELLED) before `before`. The job rows stay. Returns how
  // many were deleted (fewer than `limit`: none of that age is left). InvalidArgument for a limit
  // outside 1..10000.
  virtual absl::StatusOr<int64_t> DeleteOldEvents(TimePoint before, int limit) = 0;

  // Inserts or replaces a node row.
  virtual absl::Status PutNode(const NodeRecord& node) = 0;
  // NotFound if absent.
  virtual absl::StatusOr<NodeRecord> GetNode(const std::string& id) = 0;
  // Deletes a node row (a node removed from the pool). NotFound if absent. Jobs are untouched: their
  // allocations keep naming the node as history.
  virtual absl::Status DeleteNode(const std::string& id) = 0;
  // All nodes, ordered by id.
  virtual absl::StatusOr<std::vector<NodeRecord>> ListNodes() = 0;

  // Accounts. Creation is AlreadyExists when the id/name is taken; the lists return every row ordered by
  // id/name (accounts are few: hundreds, loaded once at start by the authenticator).
  virtual absl::Status CreateTenant(const TenantRecord& tenant) = 0;
  virtual absl::StatusOr<std::vector<TenantRecord>> ListTenants() = 0;
  // NotFound when the user's tenant does not exist.
  virtual absl::Status CreateUser(const UserRecord& user) = 0;
  virtual absl::StatusOr<std::vector<UserRecord>> ListUsers() = 0;
  // NotFound when the token's user does not exist.
  virtual absl::Status CreateToken(const TokenRecord& token) = 0;
  virtual absl::StatusOr<std::vector<TokenRecord>> ListTokens() = 0;
  // Sets revoked_at (the first revocation's time stays). NotFound if absent.
  virtual absl::Status RevokeToken(const std::string& id, TimePoint at) = 0;

  // Join tokens and node credentials. ConsumeJoinToken takes one use of the token and records `node`'s
  // credential generation with the token's provider, in one transaction: FailedPrecondition when no use is left,
  // NotFound for an unknown id (then nothing is recorded). DeleteJoinToken: NotFound if absent.
  virtual absl::Status CreateJoinToken(const JoinTokenRecord& token) = 0;
  virtual absl::StatusOr<std::vector<JoinTokenRecord>> ListJoinTokens() = 0;
  virtual absl::Status ConsumeJoinToken(const std::string& id, const std::string& node, uint64_t generation) = 0;
  virtual absl::Status DeleteJoinToken(const std::string& id) = 0;
  // The generation of each node's credential (ConsumeJoinToken records it); Delete is idempotent.
  virtual absl::Status DeleteNodeCredential(const std::string& node) = 0;
  virtual absl::StatusOr<std::vector<NodeCredentialRecord>> ListNodeCredentials() = 0;
  // Audit log. AppendAudit stores every record of `records` in one transaction (one fsync: callers batch
  // concurrent calls' records, controlplane/audit_log.h), all or none; seq is assigned by the store.
  virtual absl::Status AppendAudit(const std::vector<AuditRecord>& records) = 0;
  // Records matching `filter`, oldest first. InvalidArgument for a limit outside 1..10000.
  virtual absl::StatusOr<std::vector<AuditRecord>> ListAudit(const AuditFilter& filter) = 0;
  // Retention: deletes up to `limit` records, oldest first, answered before `before`. Returns how many
  // (fewer than `limit`: none of that age is left). InvalidArgument for a limit outside 1..10000.
  virtual absl::StatusOr<int64_t> DeleteOldAudit(TimePoint before, int limit) = 0;
  // Secrets, per tenant, their values sealed at rest (a store without a Sealer refuses them with
  // FailedPrecondition rather than store a value in the clear). The defaults answer Unimplemented
  // (stores that keep no secrets, test doubles).
  // Creates or replaces the secret (tenant, name): a replacement keeps created_at. Returns the stored
  // record (with its value).
  virtual absl::StatusOr<SecretRecord> PutSecret(const SecretRecord& /*secret*/) {
    return absl::UnimplementedError("store: this store keeps no secrets");
  }
  // The secret with its value. NotFound when the tenant has none of that name; DataLoss when its
  // sealed value does not open (wrong key, altered row).
  virtual absl::StatusOr<SecretRecord> GetSecret(const std::string& tenant, const std::string& name) {
    return absl::NotFoundError(fmt_no_secret(tenant, name));
  }
  // The tenant's secrets ordered by name, WITHOUT values (nothing is unsealed).
  virtual absl::StatusOr<std::vector<SecretRecord>> ListSecrets(const std::string& /*tenant*/) {
    return std::vector<SecretRecord>{};
  }
  // NotFound when absent.
  virtual absl::Status DeleteSecret(const std::string& tenant, const std::string& name) {
    return absl::NotFoundError(fmt_no_secret(tenant, name));
  }
  // The NotFound message of an absent secret, word for word the same for every store.
  static std::string fmt_no_secret(const std::string& tenant, const std::string& name) {
    return "store: tenant '" + tenant + "' has no secret '" + name + "'";
  }
  // Tenant quotas and usage (the scheduler's TenantLedger). PutTenantQuota inserts or replaces the
  // tenant's row (InvalidArgument for an empty tenant); the lists return every row by tenant.
  virtual absl::Status PutTenantQuota(const TenantQuotaRecord& quota) = 0;
  virtual absl::StatusOr<std::vector<TenantQuotaRecord>> ListTenantQuotas() = 0;
  // Inserts or replaces the usage row of each tenant of `usage`, all in one transaction.
  virtual absl::Status PutTenantUsage(const std::vector<TenantUsageRecord>& usage) = 0;
  virtual absl::StatusOr<std::vector<TenantUsageRecord>> ListTenantUsage() = 0;

  // Experiments (store/experiment_records.h). The defaults answer Unimplemented (test doubles).
  // CreateExperiment: AlreadyExists for a taken id. Get: NotFound. Update: compare-and-set on `version`
  // (Aborted when it moved; NotFound when absent); returns the stored record.
  virtual absl::StatusOr<ExperimentRecord> CreateExperiment(const ExperimentRecord& /*experiment*/) {
    return absl::UnimplementedError("store: this store keeps no experiments");
  }
  virtual absl::StatusOr<ExperimentRecord> GetExperiment(const std::string& id) {
    return absl::NotFoundError("store: no experiment " + id);
  }
  virtual absl::StatusOr<std::vector<ExperimentRecord>> ListExperiments(const ExperimentFilter& /*filter*/) {
    return std::vector<ExperimentRecord>{};
  }
  virtual absl::StatusOr<ExperimentRecord> UpdateExperiment(const ExperimentRecord& /*experiment*/) {
    return absl::UnimplementedError("store: this store keeps no experiments");
  }
  // Inserts or replaces the trial (experiment_id, number); created_at is kept from the first write.
  virtual absl::Status PutTrial(const TrialRecord& /*trial*/) {
    return absl::UnimplementedError("store: this store keeps no experiments");
  }
  // The experiment's trials by number.
  virtual absl::StatusOr<std::vector<TrialRecord>> ListTrials(const std::string& /*experiment_id*/) {
    return std::vector<TrialRecord>{};
  }
  // Stores each report not stored yet (by job, epoch, node_rank, seq; a resent one is skipped), all in
  // one transaction; id and reported_at are set here.
  virtual absl::Status AppendMetricReports(const std::vector<MetricReportRecord>& /*reports*/) {
    return absl::UnimplementedError("store: this store keeps no metric reports");
  }
  // The job's reports with id > after_id, by id, at most `limit` (1..10000).
  virtual absl::StatusOr<std::vector<MetricReportRecord>> ListMetricReports(const std::string& /*job_id*/,
                                                                            int64_t /*after_id*/, int /*limit*/) {
    return std::vector<MetricReportRecord>{};
  }
  // How many reports of (job, epoch, node_rank) are stored: the seq its member's next report gets
  // acknowledged from (seq numbers are stored as a prefix 0..n-1).
  virtual absl::StatusOr<int64_t> CountMetricReports(const std::string& /*job_id*/, int64_t /*epoch*/,
                                                     int /*node_rank*/) {
    return int64_t{0};
  }

  // Services (store/service_records.h). The defaults answer Unimplemented (test doubles).
  // CreateService: AlreadyExists for a taken id. Get: NotFound. Update: compare-and-set on `version`
  // (Aborted when it moved; NotFound when absent); returns the stored record.
  virtual absl::StatusOr<ServiceRecord> CreateService(const ServiceRecord& /*service*/) {
    return absl::UnimplementedError("store: this store keeps no services");
  }
  virtual absl::StatusOr<ServiceRecord> GetService(const std::string& id) {
    return absl::NotFoundError("store: no service " + id);
  }
  virtual absl::StatusOr<std::vector<ServiceRecord>> ListServices(const ServiceFilter& /*filter*/) {
    return std::vector<ServiceRecord>{};
  }
  virtual absl::StatusOr<ServiceRecord> UpdateService(const ServiceRecord& /*service*/) {
    return absl::UnimplementedError("store: this store keeps no services");
  }
  // Inserts or replaces the replica (service_id, version_name, ordinal); created_at is kept from the first
  // write.
  virtual absl::Status PutReplica(const ReplicaRecord& /*replica*/) {
    return absl::UnimplementedError("store: this store keeps no services");
  }
  // The service's replicas by version name, then ordinal; `active_only`: those not ENDED.
  virtual absl::StatusOr<std::vector<ReplicaRecord>> ListReplicas(const std::string& /*service_id*/,
                                                                  bool /*active_only*/) {
    return std::vector<ReplicaRecord>{};
  }

  // Raises the stored counters of (service_id, version_name, instance) to those of `usage` (a counter never
  // goes down: each is the greater of the stored and the given); inserts the row when absent.
  virtual absl::Status PutServiceUsage(const ServiceUsageRecord& /*usage*/) {
    return absl::UnimplementedError("store: this store keeps no services");
  }
  // The service's usage rows by version name, then instance.
  virtual absl::StatusOr<std::vector<ServiceUsageRecord>> ListServiceUsage(const std::string& /*service_id*/) {
    return std::vector<ServiceUsageRecord>{};
  }

  // The ledger (controlplane/billing.h). AppendLedger stores every record of `records` in one transaction,
  // all or none: AlreadyExists (naming the id) when one's id is stored already. seq is set by the store.
  // The defaults answer Unimplemented / nothing (test doubles).
  virtual absl::Status AppendLedger(const std::vector<LedgerRecord>& /*records*/) {
    return absl::UnimplementedError("store: this store keeps no ledger");
  }
  // Records matching `filter`, oldest first. InvalidArgument for a limit outside 1..10000.
  virtual absl::StatusOr<std::vector<LedgerRecord>> ListLedger(const LedgerFilter& /*filter*/) {
    return std::vector<LedgerRecord>{};
  }

  // Budgets (controlplane/budgets.h), one per (tenant, user). PutBudget inserts or replaces;
  // DeleteBudget: NotFound when there is none. InvalidArgument for an empty tenant or a limit <= 0. The
  // defaults answer Unimplemented / nothing (test doubles).
  virtual absl::Status PutBudget(const BudgetRecord& /*budget*/) {
    return absl::UnimplementedError("store: this store keeps no budgets");
  }
  virtual absl::StatusOr<std::vector<BudgetRecord>> ListBudgets() { return std::vector<BudgetRecord>{}; }
  virtual absl::Status DeleteBudget(const std::string& /*tenant*/, const std::string& /*user*/) {
    return absl::UnimplementedError("store: this store keeps no budgets");
  }
  // Records an alert of (tenant, user)'s budget only if it is still the one set at `updated_at`:
  // FailedPrecondition when it was replaced or removed meanwhile (nothing changes then).
  virtual absl::Status MarkBudgetAlerted(const std::string& /*tenant*/, const std::string& /*user*/,
                                         TimePoint /*updated_at*/, const std::string& /*period*/, int /*percent*/) {
    return absl::UnimplementedError("store: this store keeps no budgets");
  }

  // Reservations (controlplane/reservations.h). InsertReservation: AlreadyExists for a taken id,
  // InvalidArgument for an empty id or tenant. EndReservation sets end to max(start, min(end, `end`)) (a
  // cancel); UpdateReservationProgress writes the writer's columns (nodes, charged_hours, held and used GPU time).
  // Both NotFound for an unknown id. ListReservations: every one, by id. The defaults answer Unimplemented /
  // nothing (test doubles).
  virtual absl::Status InsertReservation(const ReservationRecord& /*r*/) {
    return absl::UnimplementedError("store: this store keeps no reservations");
  }
  virtual absl::Status EndReservation(const std::string& /*id*/, TimePoint /*end*/) {
    return absl::UnimplementedError("store: this store keeps no reservations");
  }
  virtual absl::Status UpdateReservationProgress(const ReservationRecord& /*r*/) {
    return absl::UnimplementedError("store: this store keeps no reservations");
  }
  virtual absl::StatusOr<std::vector<ReservationRecord>> ListReservations() { return std::vector<ReservationRecord>{}; }

  // Write batch: from BeginWriteBatch until CommitWriteBatch, the calling thread's writes form one
  // transaction, made durable together by the commit (one fsync instead of one per write). Each call
  // inside stays atomic on its own: one that fails leaves none of its writes in the batch. Other
  // threads' calls wait until the batch ends, so they never read what is not committed.
  // FailedPrecondition when a batch is open already.
  virtual absl::Status BeginWriteBatch() = 0;
  // Ends the batch. On an error (Unavailable, Internal) nothing of the batch is stored and the batch is
  // over: what the caller derived from its writes must be re-read from the store.
  // FailedPrecondition when this thread has no batch open.
  virtual absl::Status CommitWriteBatch() = 0;
  // Ends the batch storing nothing of it. FailedPrecondition when this thread has no batch open.
  virtual absl::Status AbortWriteBatch() = 0;
};

}  // namespace gpugeek::store
