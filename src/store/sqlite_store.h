#pragma once
// SqliteStore: the embedded default Store, one SQLite database file.
//
// Durability: WAL journal with synchronous=FULL, so each commit is fsync'ed before the call returns
// (https://www.sqlite.org/pragma.html#pragma_synchronous). Schema changes are numbered migrations
// (`sqlite_migrations.h`) applied in order at open; a database written by a newer gpugeek (higher
// schema version than this binary knows) is refused with FailedPrecondition rather than damaged.
//
// One write connection guarded by a mutex: SQLite serialises writers anyway, and this keeps every
// compare-and-set simple. A write batch (Store::BeginWriteBatch) makes one caller's writes one
// transaction; the other threads' writes wait for its commit. Reads from other threads go to a second,
// read-only connection and see the last commit without waiting (WAL). Prepared statements are cached
// per connection. Thread-safe.

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "store/store.h"

struct sqlite3;

namespace gpugeek::store {

class StatementCache;

struct SqliteStoreOptions {
  std::string path;        // database file; ":memory:" for a private in-memory database (tests only)
  Clock* clock = nullptr;  // for event and node timestamps the caller leaves unset; nullptr = RealClock()
  // Encryption at rest (store.h, Sealer); borrowed, must outlive the store. When set, jobs' spec_yaml
  // is written sealed (tenant = the job's, "default" when empty; aad "job-spec:<id>") and secrets can
  // be stored. nullptr: specs are written in the clear and PutSecret is refused (tests of other parts).
  // Rows written without a sealer (TEXT) stay readable with one; sealed rows need it (DataLoss without).
  Sealer* sealer = nullptr;
};

class SqliteStore final : public Store {
 public:
  // Opens (creating if needed) and migrates the database. Unavailable if the file cannot be opened,
  // FailedPrecondition if its schema is newer than this binary.
  static absl::StatusOr<std::unique_ptr<SqliteStore>> Open(const SqliteStoreOptions& options);
  ~SqliteStore() override;

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
  absl::Status BeginWriteBatch() override;
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
  absl::Status CommitWriteBatch() override;
  absl::Status AbortWriteBatch() override;

  // The schema version after migration.
  int schema_version() const { return schema_version_; }

 private:
  SqliteStore(sqlite3* db, Clock& clock, Sealer* sealer);
  // The spec_yaml column's value for `job`: sealed when there is a sealer.
  absl::StatusOr<std::string> SealSpec(const JobRecord& job);
  // Opens a job's spec read as a sealed BLOB (ReadJob marks it); TEXT rows are plaintext already.
  absl::Status OpenSpec(JobRecord& job, bool sealed) const;
  // The same for an experiment's spec.
  absl::StatusOr<std::string> SealExperiment(const ExperimentRecord& experiment) const;
  absl::Status OpenExperiment(ExperimentRecord& experiment, bool sealed) const;
  absl::StatusOr<std::string> SealService(const ServiceRecord& service) const;
  absl::Status OpenService(ServiceRecord& service, bool sealed) const;
  absl::Status Migrate();
  absl::Status Exec(const char* sql);
  // Ends the open batch (the caller holds mu_ through `lock`): COMMIT when `commit`, else ROLLBACK.
  absl::Status EndWriteBatch(std::unique_lock<std::mutex> lock, bool commit);
  absl::StatusOr<JobRecord> GetJobIn(StatementCache& statements, const std::string& id);
  // A connection to read with, locked: see ReadAccess in sqlite_store.cc.
  struct Reader {
    std::unique_lock<std::mutex> lock;
    sqlite3* db;
    StatementCache* statements;
  };
  Reader ReadAccess();
  // Inserts one job and its creation event inside the caller's transaction.
  absl::StatusOr<JobRecord> InsertJobLocked(const JobRecord& job);

  sqlite3* const db_;  // owned; closed in the destructor
  Clock& clock_;
  Sealer* const sealer_;  // nullable, borrowed
  int schema_version_ = 0;
  std::unique_ptr<StatementCache> statements_;  // used under mu_
  // mu_ guards every use of db_ after Open, held for one call; while a write batch is open, only its
  // owner's calls get it (Acquire).
  std::unique_lock<std::mutex> Acquire();
  std::mutex mu_;
  std::condition_variable batch_ended_;
  std::atomic<std::thread::id> batch_owner_;  // written under mu_; default-constructed: no batch open
  // The read-only connection (nullptr for an in-memory database) and its statements, under read_mu_.
  sqlite3* read_db_ = nullptr;
  std::mutex read_mu_;
  std::unique_ptr<StatementCache> read_statements_;
};

}  // namespace gpugeek::store
