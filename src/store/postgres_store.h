#pragma once
// PostgresStore: the Store on a PostgreSQL server (15 or later), for a control plane whose state must
// outlive its machine, or that several operators' tools read. SQLite (`sqlite_store.h`) stays the
// embedded default; both pass the same test suite (store_test.cc), so callers cannot tell them apart
// except by where the bytes live.
//
// Durability: a call returns after PostgreSQL acknowledged its COMMIT, which with the server's default
// synchronous_commit = on means the commit record is flushed to the server's WAL. Schema changes are
// numbered migrations (`postgres_migrations.h`, numbered as SQLite's) applied in order at open under an
// advisory lock (two servers opening one empty database at once do not both migrate); a database whose
// schema is newer than this binary knows is refused with FailedPrecondition rather than damaged.
//
// Concurrency: a pool of `connections` libpq connections, each used by one call at a time; the pool's
// lock is held only to take or give back a connection, never across network I/O. Reads run on any idle
// connection and see the last commit. Each write is one transaction (READ COMMITTED): a job or experiment
// update locks its row (SELECT ... FOR NO KEY UPDATE), checks the version and the state machine, and
// writes with `UPDATE ... WHERE version = $n` checking the affected rows (compare-and-set). Appends to a
// numbered log (events, audit, ledger, metric reports) lock that log's table against other writers
// (readers are not blocked) until the commit, so a log's sequence numbers are assigned in commit order:
// a reader paging by `after_seq` never skips a row committed later with a smaller number. A transaction
// that PostgreSQL aborts for a serialization failure or a deadlock (SQLSTATE 40001, 40P01) is retried.
// A write batch (Store::BeginWriteBatch) holds one connection with one open transaction for its owner;
// it begins once the other threads' writes under way have ended. Every call of the owner inside it, read
// or write, is a savepoint (PostgreSQL fails a whole transaction at its first failed statement: a call
// that fails takes back only itself), a write the server aborts for a deadlock or serialization failure
// is rolled back to its savepoint and run again, and a COMMIT the server answers with ROLLBACK is an
// error. The other threads' writes wait for the batch's end while their reads proceed on other
// connections. Statements are prepared once per connection (PQprepare) and always take their values as
// parameters. Thread-safe.
//
// Text: PostgreSQL's TEXT holds neither NUL bytes nor bytes that are not UTF-8, which SQLite stores. An
// id, name or other value stored as it is that holds one is InvalidArgument; looking one up finds
// nothing (NotFound, an empty list), as no row can have it. Free-form text (reasons, descriptions, every
// field of an audit record) is stored with NUL and each byte outside a well-formed UTF-8 sequence written
// as \xNN, so such a value never fails its write (nor the audit records appended with it); it reads back
// so escaped. A NaN double is NULL, as SQLite stores it.
//
// Network: unless the URL sets them, a connection gets connect_timeout=5, TCP keepalives (idle 10 s,
// every 5 s, 3 probes) and tcp_user_timeout=30000 ms, so a server that stops answering fails the call
// within about half a minute. A pooled connection the server closed since its last use (a restart) is
// noticed and replaced before the call's first statement; a write whose BEGIN fails for a lost connection
// runs once more on a new one (nothing of it ran).
//
// Errors: a lost or refused connection is Unavailable naming the server (host:port/database); the
// pool reconnects on the next call. Other server errors are Internal with PostgreSQL's message. No
// message quotes the URL's password.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"

namespace gpugeek::store {

class PgConnection;

struct PostgresStoreOptions {
  // A libpq connection URI, "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?PARAM=VALUE...]"
  // (https://www.postgresql.org/docs/15/libpq-connect.html#LIBPQ-CONNSTRING); "?options=-csearch_path%3DS"
  // keeps the tables in schema S. A password is better given in ~/.pgpass or PGPASSWORD than in the URI.
  std::string url;
  // Connections in the pool, 1..64: the most calls that run on the server at once. A write batch holds
  // one for its whole length, so with 1 every other thread waits for the batch to end.
  int connections = 8;
  Clock* clock = nullptr;  // for the times the store sets; nullptr = RealClock()
  // Session timeouts (0 = the server's): how long a statement waits for a lock (lock_timeout) and how long
  // a session may sit idle inside a transaction before the server ends it
  // (idle_in_transaction_session_timeout). A leader election's store sets both short, so that a frozen
  // standby cannot hold the lease row.
  Duration lock_timeout{};
  Duration idle_in_transaction_timeout{};
  // Names the sessions in pg_stat_activity (libpq's application_name, over the URL's); "" = the URL's.
  // A leader's store uses PostgresStore::LeaderApplicationName(holder).
  std::string application_name;
  // Encryption at rest, as SqliteStoreOptions::sealer: borrowed, must outlive the store; nullptr =
  // specs in the clear and PutSecret refused.
  Sealer* sealer = nullptr;
};

class PostgresStore final : public Store {
 public:
  // Connects every connection of the pool and migrates the schema. InvalidArgument for a URL that is not
  // a postgres:// or postgresql:// URI, one libpq cannot parse, or a pool size outside 1..64; Unavailable
  // when the server cannot be reached or refuses the login (the message names host:port/database);
  // FailedPrecondition when the schema is newer than this binary.
  static absl::StatusOr<std::unique_ptr<PostgresStore>> Open(const PostgresStoreOptions& options);
  // Closes every connection. A write batch still open is rolled back by the server.
  ~PostgresStore() override;

  absl::StatusOr<JobRecord> CreateJob(const JobRecord& job) override;
  absl::StatusOr<std::vector<absl::StatusOr<JobRecord>>> CreateJobs(const std::vector<JobRecord>& jobs) override;
  absl::StatusOr<JobRecord> GetJob(const std::string& id) override;
  absl::StatusOr<std::vector<JobRecord>> ListJobs(const JobFilter& filter) override;
  absl::StatusOr<std::vector<JobCount>> CountJobs() override;
  absl::StatusOr<JobRecord> UpdateJob(const JobRecord& job) override;
  absl::StatusOr<std::vector<EventRecord>> ListEvents(const EventFilter& filter) override;
  absl::StatusOr<int64_t> DeleteOldEvents(TimePoint before, int limit) override;
  absl::Status PutNode(const NodeRecord& node) override;
  absl::StatusOr<NodeRecord> GetNode(const std::string& id) override;
  absl::Status DeleteNode(const std::string& id) override;
  absl::StatusOr<std::vector<NodeRecord>> ListNodes() override;
  absl::Status CreateTenant(const TenantRecord& tenant) override;
  absl::StatusOr<std::vector<TenantRecord>> ListTenants() override;
  absl::Status CreateUser(const UserRecord& user) override;
  absl::StatusOr<std::vector<UserRecord>> ListUsers() override;
  absl::Status CreateToken(const TokenRecord& token) override;
  absl::StatusOr<std::vector<TokenRecord>> ListTokens() override;
  absl::Status RevokeToken(const std::string& id, TimePoint at) override;
  absl::Status CreateJoinToken(const JoinTokenRecord& token) override;
  absl::StatusOr<std::vector<JoinTokenRecord>> ListJoinTokens() override;
  absl::Status ConsumeJoinToken(const std::string& id, const std::string& node, uint64_t generation) override;
  absl::Status DeleteJoinToken(const std::string& id) override;
  absl::Status DeleteNodeCredential(const std::string& node) override;
  absl::StatusOr<std::vector<NodeCredentialRecord>> ListNodeCredentials() override;
  absl::Status AppendAudit(const std::vector<AuditRecord>& records) override;
  absl::StatusOr<std::vector<AuditRecord>> ListAudit(const AuditFilter& filter) override;
  absl::StatusOr<int64_t> DeleteOldAudit(TimePoint before, int limit) override;
  absl::StatusOr<SecretRecord> PutSecret(const SecretRecord& secret) override;
  absl::StatusOr<SecretRecord> GetSecret(const std::string& tenant, const std::string& name) override;
  absl::StatusOr<std::vector<SecretRecord>> ListSecrets(const std::string& tenant) override;
  absl::Status DeleteSecret(const std::string& tenant, const std::string& name) override;
  absl::Status PutTenantQuota(const TenantQuotaRecord& quota) override;
  absl::StatusOr<std::vector<TenantQuotaRecord>> ListTenantQuotas() override;
  absl::Status PutTenantUsage(const std::vector<TenantUsageRecord>& usage) override;
  absl::StatusOr<std::vector<TenantUsageRecord>> ListTenantUsage() override;
  absl::StatusOr<ExperimentRecord> CreateExperiment(const ExperimentRecord& experiment) override;
  absl::StatusOr<ExperimentRecord> GetExperiment(const std::string& id) override;
  absl::StatusOr<std::vector<ExperimentRecord>> ListExperiments(const ExperimentFilter& filter) override;
  absl::StatusOr<ExperimentRecord> UpdateExperiment(const ExperimentRecord& experiment) override;
  absl::Status PutTrial(const TrialRecord& trial) override;
  absl::StatusOr<std::vector<TrialRecord>> ListTrials(const std::string& experiment_id) override;
  absl::StatusOr<ServiceRecord> CreateService(const ServiceRecord& service) override;
  absl::StatusOr<ServiceRecord> GetService(const std::string& id) override;
  absl::StatusOr<std::vector<ServiceRecord>> ListServices(const ServiceFilter& filter) override;
  absl::StatusOr<ServiceRecord> UpdateService(const ServiceRecord& service) override;
  absl::Status PutReplica(const ReplicaRecord& replica) override;
  absl::StatusOr<std::vector<ReplicaRecord>> ListReplicas(const std::string& service_id, bool active_only) override;
  absl::Status PutServiceUsage(const ServiceUsageRecord& usage) override;
  absl::StatusOr<std::vector<ServiceUsageRecord>> ListServiceUsage(const std::string& service_id) override;
  absl::Status AppendMetricReports(const std::vector<MetricReportRecord>& reports) override;
  absl::StatusOr<std::vector<MetricReportRecord>> ListMetricReports(const std::string& job_id, int64_t after_id,
                                                                    int limit) override;
  absl::StatusOr<int64_t> CountMetricReports(const std::string& job_id, int64_t epoch, int node_rank) override;
  absl::Status AppendLedger(const std::vector<LedgerRecord>& records) override;
  absl::StatusOr<std::vector<LedgerRecord>> ListLedger(const LedgerFilter& filter) override;
  absl::Status PutBudget(const BudgetRecord& budget) override;
  absl::StatusOr<std::vector<BudgetRecord>> ListBudgets() override;
  absl::Status DeleteBudget(const std::string& tenant, const std::string& user) override;
  absl::Status MarkBudgetAlerted(const std::string& tenant, const std::string& user, TimePoint updated_at,
                                 const std::string& period, int percent) override;
  absl::Status InsertReservation(const ReservationRecord& r) override;
  absl::Status EndReservation(const std::string& id, TimePoint end) override;
  absl::Status UpdateReservationProgress(const ReservationRecord& r) override;
  absl::StatusOr<std::vector<ReservationRecord>> ListReservations() override;
  absl::Status BeginWriteBatch() override;
  absl::Status CommitWriteBatch() override;
  absl::Status AbortWriteBatch() override;

  // Leadership of an active/standby control plane (docs/postgres.md, "Active/standby"): one lease row
  // in the database names the leader, timed by PostgreSQL's clock (clock_timestamp()), so the servers'
  // clocks need not agree. Each takeover adds one to the lease's fencing token, and a leader's store
  // fences its writes with the token it took (FenceWrites), so a deposed leader that has not yet noticed
  // commits nothing.
  struct Leadership {
    std::string holder;     // the holder's id; "" = never held
    std::string api_url;    // where the holder serves users and the CLI
    std::string agent_url;  // where the holder serves agents
    int64_t token = 0;      // the fencing token of the current (or last) holder; 0 = never held
    Duration remaining{};   // time left on the lease; zero once it expired (anyone may take it then)
  };
  // The lease as the database holds it now.
  absl::StatusOr<Leadership> Leader();
  // Takes the lease for `holder` (an id unique to this process) for `ttl` when it has expired or
  // `holder` holds it, and returns the new fencing token (the previous one + 1); std::nullopt while
  // another holder's lease is live. A takeover waits for the writes under the previous token that are
  // under way (they hold the lease row, FenceWrites) and refuses every later one; when one
  // holds it past 1 s and the lease has expired (its holder frozen inside a transaction), the expired
  // holder's sessions (those named LeaderApplicationName(holder)) are ended, rolling it back, and the
  // next try takes the lease. InvalidArgument for a
  // `ttl` under 100 ms or an empty holder.
  absl::StatusOr<std::optional<int64_t>> TryAcquireLeadership(const std::string& holder, const std::string& api_url,
                                                              const std::string& agent_url, Duration ttl);
  // The application_name of a leader's store sessions ("gpugeek " + holder, cut to PostgreSQL's 63 bytes),
  // by which a takeover finds them.
  static std::string LeaderApplicationName(const std::string& holder);
  // Extends the lease taken under `token` to `ttl` from now. FailedPrecondition once it expired or
  // another holder took it: the caller is no longer the leader and must stop acting as one.
  absl::Status RenewLeadership(int64_t token, Duration ttl);
  // Ends the lease taken under `token` now (a graceful stop), so that a standby takes over without
  // waiting for it to expire. OK when it was already lost.
  absl::Status ReleaseLeadership(int64_t token);
  // From now on each write (every write call, and each write batch at its start) first checks in its
  // own transaction that the lease's token is still `token`, holding the lease row against a takeover
  // (SELECT ... FOR KEY SHARE; a renewal does not wait for it) until it commits. After a takeover a
  // write is refused with FailedPrecondition ("fenced") before anything of it ran, and `on_fenced` (may
  // be empty; called on the refusing thread, so it must be thread-safe) is called. Call it before the
  // writes it must fence, with no write batch open.
  void FenceWrites(int64_t token, std::function<void()> on_fenced);

  // The schema version after migration (the same number SqliteStore reports for the same tables).
  int schema_version() const { return schema_version_; }
  // "host:port/database", as errors name the server.
  const std::string& server() const { return server_; }
  // The libpq settings the connections were opened with (PQconninfo: keyword -> value, without the
  // password), e.g. "connect_timeout" -> "5".
  const std::map<std::string, std::string>& connection_settings() const { return connection_settings_; }

 private:
  PostgresStore(Clock& clock, Sealer* sealer);
  class Lease;
  // A connection of the pool for one call: the write batch's when the caller owns it, else an idle one
  // (waiting for one to be given back), reconnected first if it was lost. Unavailable when that fails.
  absl::StatusOr<Lease> Take();
  void Give(PgConnection* c);
  // Whether the calling thread owns the open write batch.
  bool InBatch() const;
  // Runs `body` as one atomic write: a savepoint inside the caller's write batch (BatchCall), else its
  // own transaction on a pooled connection once no other thread's batch is open, retried when the server
  // aborts it for a serialization failure or a deadlock, and once on a new connection when the pooled
  // one is found lost at BEGIN. A body that returns an error is rolled back.
  // `one_statement`: the body runs one statement, atomic on its own, so outside a batch no BEGIN/COMMIT.
  absl::Status Write(const std::function<absl::Status(PgConnection&)>& body, bool one_statement = false);
  // Runs `body` for a read: in autocommit on a pooled connection, or as a savepoint of the caller's batch.
  absl::Status Read(const std::function<absl::Status(PgConnection&)>& body);
  // Runs `body` inside the write batch on its connection `c` as a savepoint: a body that fails (or that
  // leaves the transaction failed) is rolled back to it, leaving the batch usable; one the server aborts
  // for a serialization failure or a deadlock is run again (kMaxAttempts in all).
  absl::Status BatchCall(PgConnection& c, const std::function<absl::Status(PgConnection&)>& body);
  absl::Status Migrate();
  absl::Status EndWriteBatch(bool commit);
  absl::StatusOr<std::string> SealSpec(const JobRecord& job) const;
  absl::Status OpenSpec(JobRecord& job, bool sealed) const;
  absl::StatusOr<std::string> SealExperiment(const ExperimentRecord& e) const;
  absl::Status OpenExperiment(ExperimentRecord& e, bool sealed) const;
  absl::StatusOr<std::string> SealService(const ServiceRecord& s) const;
  absl::Status OpenService(ServiceRecord& s, bool sealed) const;
  // Opens a sealed spec in place (`sealed` false: stored in the clear, left as is); DataLoss without the key or
  // when it does not open. `kind` ("job", "experiment") and `id` name it in the error.
  absl::Status OpenSealed(const char* kind, const std::string& id, const std::string& tenant, const std::string& aad,
                          std::string& spec_yaml, bool sealed) const;
  // With FenceWrites: OK when the lease's token is still fence_token_ (holding the lease row until `c`'s
  // transaction ends), else FailedPrecondition after on_fenced_. OK at once without fencing.
  absl::Status CheckFence(PgConnection& c);
  // Inserts one job and its creation event inside the caller's transaction.
  absl::StatusOr<JobRecord> InsertJob(PgConnection& c, const JobRecord& job);

  // Constant after Open.
  Clock& clock_;
  Sealer* const sealer_;  // nullable, borrowed
  std::string server_;
  int schema_version_ = 0;
  std::vector<std::unique_ptr<PgConnection>> connections_;  // every connection, owned
  std::map<std::string, std::string> connection_settings_;

  // Fencing (FenceWrites): 0 = writes are not fenced; set once before the fenced writes.
  std::atomic<int64_t> fence_token_{0};
  std::function<void()> on_fenced_;

  // The pool: connections not in use.
  std::mutex pool_mu_;
  std::condition_variable pool_returned_;
  std::vector<PgConnection*> idle_;  // guarded by pool_mu_

  // The write batch: its owner thread (default-constructed: none) and its connection, which only the
  // owner uses. batch_owner_ is written under batch_mu_ and read without it by the calls that only need to
  // know whether they are the owner.
  // batch_ended_ is also notified when writers_ drops: a batch begins once no write is under way.
  std::mutex batch_mu_;
  std::condition_variable batch_ended_;
  int writers_ = 0;  // writes outside a batch under way; guarded by batch_mu_
  std::atomic<std::thread::id> batch_owner_;
  PgConnection* batch_conn_ = nullptr;
};

}  // namespace gpugeek::store
