#pragma once
// The SQLite schema, as numbered migrations. Never edit a released migration: append a new one.
// Migration i (1-based) moves the schema from version i-1 to i.

namespace gpugeek::store {

inline constexpr const char* kSqliteMigrations[] = {
    // 1: jobs, their state-change events, nodes.
    R"sql(
CREATE TABLE jobs (
  id              TEXT PRIMARY KEY,
  tenant          TEXT NOT NULL,
  name            TEXT NOT NULL,
  spec_yaml       TEXT NOT NULL,
  state           TEXT NOT NULL,
  priority        INTEGER NOT NULL,
  plan_json       TEXT NOT NULL,
  allocation_json TEXT NOT NULL,
  epoch           INTEGER NOT NULL,
  restarts        INTEGER NOT NULL,
  exit_code       INTEGER,
  reason          TEXT NOT NULL,
  created_at_ns   INTEGER NOT NULL,
  updated_at_ns   INTEGER NOT NULL,
  version         INTEGER NOT NULL
);
CREATE INDEX jobs_by_state ON jobs(state, id);
CREATE INDEX jobs_by_tenant ON jobs(tenant, id);
CREATE TABLE events (
  seq        INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id     TEXT NOT NULL REFERENCES jobs(id),
  time_ns    INTEGER NOT NULL,
  from_state TEXT NOT NULL,
  to_state   TEXT NOT NULL,
  reason     TEXT NOT NULL
);
CREATE INDEX events_by_job ON events(job_id, seq);
CREATE TABLE nodes (
  id                 TEXT PRIMARY KEY,
  inventory_json     TEXT NOT NULL,
  state              TEXT NOT NULL,
  last_heartbeat_ns  INTEGER NOT NULL,
  registered_at_ns   INTEGER NOT NULL
);
)sql",
    // 2: a covering index for CountJobs (GROUP BY state, priority with MIN(updated_at_ns)), so the
    // metrics scrape reads the index, never the job rows.
    R"sql(
CREATE INDEX jobs_by_state_priority ON jobs(state, priority, updated_at_ns);
)sql",
    // 3: accounts: tenants, users with a role, API tokens (hashed secrets), and the tenant of an event's
    // job reachable through jobs(id) for tenant-scoped event listings.
    R"sql(
CREATE TABLE tenants (
  id            TEXT PRIMARY KEY,
  created_at_ns INTEGER NOT NULL
);
CREATE TABLE users (
  name          TEXT PRIMARY KEY,
  tenant        TEXT NOT NULL REFERENCES tenants(id),
  role          TEXT NOT NULL,
  created_at_ns INTEGER NOT NULL
);
CREATE TABLE tokens (
  id            TEXT PRIMARY KEY,
  user          TEXT NOT NULL REFERENCES users(name),
  secret_hash   TEXT NOT NULL,
  description   TEXT NOT NULL,
  created_at_ns INTEGER NOT NULL,
  expires_at_ns INTEGER,
  revoked_at_ns INTEGER
);
)sql",
    // 4: join tokens (a SHA-256 of the secret) and the generation of each node's credential.
    R"sql(
CREATE TABLE join_tokens (
  id            TEXT PRIMARY KEY,
  secret_sha256 TEXT NOT NULL,
  description   TEXT NOT NULL,
  created_by    TEXT NOT NULL,
  created_at_ns INTEGER NOT NULL,
  expires_at_ns INTEGER,
  uses_left     INTEGER NOT NULL
);
CREATE TABLE node_credentials (
  node       TEXT PRIMARY KEY,
  generation INTEGER NOT NULL
);
)sql",
    // 5: the audit log of state-changing API calls (controlplane/audit_log.h), listed by seq with an
    // optional user or tenant filter, and deleted by age (oldest seq first: the oldest rows).
    R"sql(
CREATE TABLE audit (
  seq            INTEGER PRIMARY KEY AUTOINCREMENT,
  time_ns        INTEGER NOT NULL,
  user           TEXT NOT NULL,
  tenant         TEXT NOT NULL,
  token_id       TEXT NOT NULL,
  role           TEXT NOT NULL,
  method         TEXT NOT NULL,
  route          TEXT NOT NULL,
  path           TEXT NOT NULL,
  status         INTEGER NOT NULL,
  remote_address TEXT NOT NULL,
  request_id     TEXT NOT NULL
);
CREATE INDEX audit_by_user ON audit(user, seq);
CREATE INDEX audit_by_tenant ON audit(tenant, seq);
)sql",
    // 6: secrets per tenant; `value` is a sealed blob (store::Sealer). From this version on, jobs'
    // spec_yaml is written sealed too, as a BLOB: a TEXT spec_yaml is a row from before, read as it is.
    R"sql(
CREATE TABLE secrets (
  tenant        TEXT NOT NULL,
  name          TEXT NOT NULL,
  value         BLOB NOT NULL,
  created_at_ns INTEGER NOT NULL,
  updated_at_ns INTEGER NOT NULL,
  PRIMARY KEY (tenant, name)
);
)sql",
    // 7: per-tenant scheduling: fair-share weight and caps (max_gpus_by_model as "MODEL=N,MODEL=N"), and
    // the decayed usage behind fair share, so both survive a restart.
    R"sql(
CREATE TABLE tenant_quotas (
  tenant            TEXT PRIMARY KEY,
  weight            REAL NOT NULL,
  max_gpus_by_model TEXT NOT NULL,
  max_gpu_milli     INTEGER NOT NULL,
  max_jobs          INTEGER NOT NULL,
  updated_at_ns     INTEGER NOT NULL
);
CREATE TABLE tenant_usage (
  tenant   TEXT PRIMARY KEY,
  usage    REAL NOT NULL,
  as_of_ns INTEGER NOT NULL
);
)sql",
    // 8: the retries a job has used, per cause (api::RetrySpec: a budget per cause), as "error=1,node-failure=2".
    R"sql(
ALTER TABLE jobs ADD COLUMN retries TEXT NOT NULL DEFAULT '';
)sql",
    // 9: the last checkpoint the workload reported complete (docs/checkpointing.md): its step (NULL =
    // none yet) and when the report arrived.
    R"sql(
ALTER TABLE jobs ADD COLUMN checkpoint_step INTEGER;
ALTER TABLE jobs ADD COLUMN checkpoint_at_ns INTEGER NOT NULL DEFAULT 0;
)sql",
    // 10: the job's metered usage (controlplane/usage.h), as compact JSON ("" = none yet).
    R"sql(
ALTER TABLE jobs ADD COLUMN usage_json TEXT NOT NULL DEFAULT '';
)sql",
    // 11: the region of the node that reported the last checkpoint ("" = none): where it lives.
    R"sql(
ALTER TABLE jobs ADD COLUMN checkpoint_region TEXT NOT NULL DEFAULT '';
)sql",
    // 12: hyper-parameter experiments (store/experiment_records.h): experiments (spec_yaml sealed like a
    // job's), their trials, the metrics members report per step; and the platform's own variables of a
    // job (JSON object, "" = none).
    R"sql(
ALTER TABLE jobs ADD COLUMN platform_env TEXT NOT NULL DEFAULT '';
CREATE TABLE experiments (
  id            TEXT PRIMARY KEY,
  tenant        TEXT NOT NULL,
  user          TEXT NOT NULL,
  name          TEXT NOT NULL,
  spec_yaml     BLOB NOT NULL,
  state         TEXT NOT NULL,
  reason        TEXT NOT NULL,
  created_at_ns INTEGER NOT NULL,
  updated_at_ns INTEGER NOT NULL,
  version       INTEGER NOT NULL
);
CREATE INDEX experiments_by_tenant ON experiments(tenant, id);
CREATE TABLE trials (
  experiment_id TEXT NOT NULL,
  number        INTEGER NOT NULL,
  params_json   TEXT NOT NULL,
  state         TEXT NOT NULL,
  job_id        TEXT NOT NULL,
  value         REAL,
  reason        TEXT NOT NULL,
  created_at_ns INTEGER NOT NULL,
  updated_at_ns INTEGER NOT NULL,
  PRIMARY KEY (experiment_id, number)
);
CREATE TABLE metric_reports (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id         TEXT NOT NULL,
  epoch          INTEGER NOT NULL,
  node_rank      INTEGER NOT NULL,
  seq            INTEGER NOT NULL,
  step           INTEGER NOT NULL,
  value          REAL NOT NULL,
  reported_at_ns INTEGER NOT NULL,
  UNIQUE (job_id, epoch, node_rank, seq)
);
CREATE INDEX metric_reports_by_job ON metric_reports(job_id, id);
)sql",
    // 13: the ledger (store.h LedgerRecord): append-only, one row per balanced transaction.
    R"sql(
CREATE TABLE ledger (
  seq    INTEGER PRIMARY KEY AUTOINCREMENT,
  id     TEXT NOT NULL UNIQUE,
  tenant TEXT NOT NULL,
  kind   TEXT NOT NULL,
  at_ns  INTEGER NOT NULL,
  body   TEXT NOT NULL
);
CREATE INDEX ledger_by_tenant ON ledger(tenant, seq);
)sql",
    // 14: who submitted each job, and monthly budgets of tenants and users (store.h BudgetRecord).
    R"sql(
ALTER TABLE jobs ADD COLUMN submitted_by TEXT NOT NULL DEFAULT '';
CREATE TABLE budgets (
  tenant               TEXT NOT NULL,
  user                 TEXT NOT NULL,
  monthly_limit_micros INTEGER NOT NULL,
  alert_percents       TEXT NOT NULL,
  alerted_period       TEXT NOT NULL,
  alerted_percent      INTEGER NOT NULL,
  updated_at_ns        INTEGER NOT NULL,
  PRIMARY KEY (tenant, user)
);
)sql",
    // 15: the provider a join token binds its nodes to, kept with each node's credential.
    R"sql(
ALTER TABLE join_tokens ADD COLUMN provider TEXT NOT NULL DEFAULT '';
ALTER TABLE node_credentials ADD COLUMN provider TEXT NOT NULL DEFAULT '';
)sql",
    // 16: reserved capacity (store.h ReservationRecord).
    R"sql(
CREATE TABLE reservations (
  id                     TEXT PRIMARY KEY,
  tenant                 TEXT NOT NULL,
  gpu_model              TEXT NOT NULL,
  gpus                   INTEGER NOT NULL,
  price_micros           INTEGER NOT NULL,
  start_ns               INTEGER NOT NULL,
  end_ns                 INTEGER NOT NULL,
  created_by             TEXT NOT NULL,
  created_at_ns          INTEGER NOT NULL,
  nodes                  TEXT NOT NULL,
  charged_hours          INTEGER NOT NULL,
  held_gpu_milli_seconds INTEGER NOT NULL,
  used_gpu_milli_seconds INTEGER NOT NULL
);
)sql",
    // 17: the leader lease of an active/standby control plane, which only a PostgreSQL store holds
    // (postgres_migrations.h); the table keeps both schemas numbered alike and stays empty here.
    R"sql(
CREATE TABLE leader_lease (
  id            INTEGER PRIMARY KEY CHECK (id = 1),
  holder        TEXT NOT NULL,
  api_url       TEXT NOT NULL,
  agent_url     TEXT NOT NULL,
  token         INTEGER NOT NULL,
  expires_at_ns INTEGER NOT NULL
);
)sql",
    // 18: model services (store/service_records.h): services (spec_yaml sealed like a job's) and the replica
    // jobs each started.
    R"sql(
CREATE TABLE services (
  id            TEXT PRIMARY KEY,
  tenant        TEXT NOT NULL,
  user          TEXT NOT NULL,
  name          TEXT NOT NULL,
  spec_yaml     BLOB NOT NULL,
  generation    INTEGER NOT NULL,
  desired       TEXT NOT NULL,
  state         TEXT NOT NULL,
  reason        TEXT NOT NULL,
  created_at_ns INTEGER NOT NULL,
  updated_at_ns INTEGER NOT NULL,
  version       INTEGER NOT NULL
);
CREATE INDEX services_by_tenant ON services(tenant, id);
CREATE INDEX services_by_name ON services(name, state);
CREATE TABLE service_replicas (
  service_id    TEXT NOT NULL,
  version_name  TEXT NOT NULL,
  ordinal       INTEGER NOT NULL,
  job_id        TEXT NOT NULL,
  port          INTEGER NOT NULL,
  spec_digest   TEXT NOT NULL,
  state         TEXT NOT NULL,
  reason        TEXT NOT NULL,
  created_at_ns INTEGER NOT NULL,
  updated_at_ns INTEGER NOT NULL,
  PRIMARY KEY (service_id, version_name, ordinal)
);
)sql",
    // 19: serverless metering (store/service_records.h ServiceUsageRecord): each gateway instance's cumulative
    // request and token counters per service version.
    R"sql(
CREATE TABLE service_usage (
  service_id    TEXT NOT NULL,
  version_name  TEXT NOT NULL,
  instance      TEXT NOT NULL,
  requests      INTEGER NOT NULL,
  tokens        INTEGER NOT NULL,
  updated_at_ns INTEGER NOT NULL,
  PRIMARY KEY (service_id, version_name, instance)
);
)sql",
};

}  // namespace gpugeek::store
