#include "store/sqlite_store.h"

#include <sqlite3.h>

#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/absl_fmt.h"
#include "common/status_macros.h"
#include "store/columns.h"
#include "store/sqlite_migrations.h"

namespace gpugeek::store {
namespace {

using columns::kMaxListLimit;

absl::Status SqliteError(sqlite3* db, std::string_view what) {
  return absl::InternalError(fmt::format("sqlite: {}: {}", what, sqlite3_errmsg(db)));
}

int64_t ToNs(TimePoint t) { return t.time_since_epoch().count(); }
TimePoint FromNs(int64_t ns) { return TimePoint(Duration(ns)); }

}  // namespace

// Prepared statements kept for reuse, by SQL text: parsing and planning a statement costs more than
// running it (a job update is three statements). Used under SqliteStore::mu_ only.
class StatementCache {
 public:
  explicit StatementCache(sqlite3* db) : db_(db) {}
  ~StatementCache() {
    for (auto& [sql, stmt] : idle_) sqlite3_finalize(stmt);
  }
  StatementCache(const StatementCache&) = delete;
  StatementCache& operator=(const StatementCache&) = delete;

  sqlite3* db() const { return db_; }
  // A statement for `sql`, ready to bind: an idle one, or a new one (rc = the prepare's result).
  sqlite3_stmt* Take(const std::string& sql, int* rc) {
    if (auto it = idle_.find(sql); it != idle_.end()) {
      sqlite3_stmt* stmt = it->second;
      idle_.erase(it);
      *rc = SQLITE_OK;
      return stmt;
    }
    sqlite3_stmt* stmt = nullptr;
    *rc = sqlite3_prepare_v3(db_, sql.c_str(), -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    return stmt;
  }
  // Returns `stmt` after use: reset and unbound, kept (one per SQL text; a second is finalised).
  void Give(const std::string& sql, sqlite3_stmt* stmt) {
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    if (!idle_.try_emplace(sql, stmt).second) sqlite3_finalize(stmt);
  }

 private:
  sqlite3* const db_;
  std::unordered_map<std::string, sqlite3_stmt*> idle_;
};

namespace {

// A prepared statement, finalised (or given back to its cache) on scope exit. Bind indices are 1-based
// as in SQLite.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) { rc_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  Statement(StatementCache& cache, std::string sql) : db_(cache.db()), cache_(&cache), sql_(std::move(sql)) {
    stmt_ = cache.Take(sql_, &rc_);
  }
  ~Statement() {
    if (cache_ != nullptr && stmt_ != nullptr) {
      cache_->Give(sql_, stmt_);
    } else {
      sqlite3_finalize(stmt_);
    }
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  absl::Status status() const { return rc_ == SQLITE_OK ? absl::OkStatus() : SqliteError(db_, "prepare"); }
  Statement& Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& BindBlob(int i, const std::string& v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& Bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Statement& BindNull(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE, or an error code.
  int Step() { return sqlite3_step(stmt_); }
  std::string Text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  bool IsBlob(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_BLOB; }
  std::string Blob(int col) const {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }

 private:
  sqlite3* db_;
  StatementCache* cache_ = nullptr;  // nullptr: finalised on scope exit
  std::string sql_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

// One call's writes, atomic: BEGIN IMMEDIATE ... COMMIT, rolled back unless Commit() succeeded. Inside a
// write batch (a transaction already open) it is a savepoint instead: Commit() releases it into the
// batch, and a call that fails rolls back its own writes only.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db), nested_(sqlite3_get_autocommit(db) == 0) {
    rc_ = sqlite3_exec(db, nested_ ? "SAVEPOINT op" : "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
  }
  ~Transaction() {
    if (rc_ != SQLITE_OK || committed_) return;
    sqlite3_exec(db_, nested_ ? "ROLLBACK TO op; RELEASE op" : "ROLLBACK", nullptr, nullptr, nullptr);
  }
  absl::Status status() const { return rc_ == SQLITE_OK ? absl::OkStatus() : SqliteError(db_, "begin"); }
  absl::Status Commit() {
    if (sqlite3_exec(db_, nested_ ? "RELEASE op" : "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
      return SqliteError(db_, "commit");
    }
    committed_ = true;
    return absl::OkStatus();
  }

 private:
  sqlite3* db_;
  bool nested_;
  int rc_;
  bool committed_ = false;
};

constexpr char kJobColumns[] =
    "id, tenant, name, spec_yaml, state, priority, plan_json, allocation_json, epoch, restarts, exit_code, reason, "
    "created_at_ns, updated_at_ns, version, retries, checkpoint_step, checkpoint_at_ns, usage_json, "
    "checkpoint_region, platform_env, submitted_by";

// `sealed` tells whether spec_yaml holds a sealed blob (a BLOB value) rather than the spec (TEXT: a row
// written without a sealer, or before migration 4).
absl::StatusOr<JobRecord> ReadJob(const Statement& s, bool* sealed) {
  JobRecord j;
  j.id = s.Text(0);
  j.tenant = s.Text(1);
  j.name = s.Text(2);
  *sealed = s.IsBlob(3);
  j.spec_yaml = *sealed ? s.Blob(3) : s.Text(3);
  auto state = api::ParseJobState(s.Text(4));
  // Only this file writes the column, always from api::JobStateName.
  if (!state) return absl::DataLossError(fmt::format("sqlite: job {} has unknown state '{}'", j.id, s.Text(4)));
  j.state = *state;
  j.priority = static_cast<int>(s.Int(5));
  j.plan_json = s.Text(6);
  j.allocation_json = s.Text(7);
  j.epoch = s.Int(8);
  j.restarts = static_cast<int>(s.Int(9));
  if (!s.IsNull(10)) j.exit_code = static_cast<int>(s.Int(10));
  j.reason = s.Text(11);
  j.created_at = FromNs(s.Int(12));
  j.updated_at = FromNs(s.Int(13));
  j.version = s.Int(14);
  ASSIGN_OR_RETURN(j.retries, columns::ParseRetries("sqlite", j.id, s.Text(15)));
  if (!s.IsNull(16)) j.checkpoint_step = s.Int(16);
  j.checkpoint_at = FromNs(s.Int(17));
  j.usage_json = s.Text(18);
  j.checkpoint_region = s.Text(19);
  ASSIGN_OR_RETURN(j.platform_env, columns::ParsePlatformEnv("sqlite", j.id, s.Text(20)));
  j.submitted_by = s.Text(21);
  return j;
}

// Binds a job's columns 1..22 in kJobColumns order; spec_yaml is `spec`: a sealed blob (bound as a BLOB)
// when `sealed`, else the text.
void BindJob(Statement& s, const JobRecord& j, int64_t version, const std::string& spec, bool sealed) {
  s.Bind(1, j.id).Bind(2, j.tenant).Bind(3, j.name);
  if (sealed) {
    s.BindBlob(4, spec);
  } else {
    s.Bind(4, spec);
  }
  s.Bind(5, std::string(api::JobStateName(j.state))).Bind(6, int64_t{j.priority});
  s.Bind(7, j.plan_json).Bind(8, j.allocation_json).Bind(9, j.epoch).Bind(10, int64_t{j.restarts});
  if (j.exit_code) {
    s.Bind(11, int64_t{*j.exit_code});
  } else {
    s.BindNull(11);
  }
  s.Bind(12, j.reason).Bind(13, ToNs(j.created_at)).Bind(14, ToNs(j.updated_at)).Bind(15, version);
  s.Bind(16, columns::FormatRetries(j.retries));
  if (j.checkpoint_step) {
    s.Bind(17, *j.checkpoint_step);
  } else {
    s.BindNull(17);
  }
  s.Bind(18, ToNs(j.checkpoint_at));
  s.Bind(19, j.usage_json);
  s.Bind(20, j.checkpoint_region);
  s.Bind(21, columns::FormatPlatformEnv(j.platform_env));
  s.Bind(22, j.submitted_by);
}

absl::Status InsertEvent(StatementCache& statements, const std::string& job_id, TimePoint time, api::JobState from,
                         api::JobState to, const std::string& reason) {
  sqlite3* db = statements.db();
  Statement s(statements, "INSERT INTO events (job_id, time_ns, from_state, to_state, reason) VALUES (?, ?, ?, ?, ?)");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, job_id).Bind(2, ToNs(time)).Bind(3, std::string(api::JobStateName(from)));
  s.Bind(4, std::string(api::JobStateName(to))).Bind(5, reason);
  if (s.Step() != SQLITE_DONE) return SqliteError(db, "insert event");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const SqliteStoreOptions& options) {
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX;
  if (sqlite3_open_v2(options.path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return absl::UnavailableError(fmt::format("sqlite: cannot open '{}': {}", options.path, msg));
  }
  auto store =
      std::unique_ptr<SqliteStore>(new SqliteStore(db, options.clock ? *options.clock : RealClock(), options.sealer));
  sqlite3_busy_timeout(db, 5000);
  // WAL + synchronous=FULL: a commit returns only after its WAL frames are fsync'ed.
  RETURN_IF_ERROR(store->Exec("PRAGMA journal_mode=WAL"));
  RETURN_IF_ERROR(store->Exec("PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(store->Exec("PRAGMA foreign_keys=ON"));
  RETURN_IF_ERROR(store->Migrate());
  // A second, read-only connection for reads from other threads than a write batch's owner: in WAL mode
  // it reads the last commit while a write transaction is open (https://www.sqlite.org/wal.html).
  // A private in-memory database has no second connection: reads share the first.
  if (options.path != ":memory:" && !options.path.empty()) {
    sqlite3* read_db = nullptr;
    if (sqlite3_open_v2(options.path.c_str(), &read_db, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX, nullptr) !=
        SQLITE_OK) {
      std::string msg = read_db ? sqlite3_errmsg(read_db) : "out of memory";
      sqlite3_close(read_db);
      return absl::UnavailableError(fmt::format("sqlite: cannot open '{}' for reading: {}", options.path, msg));
    }
    sqlite3_busy_timeout(read_db, 5000);
    store->read_db_ = read_db;
    store->read_statements_ = std::make_unique<StatementCache>(read_db);
  }
  return store;
}

absl::StatusOr<std::string> SqliteStore::SealSpec(const JobRecord& job) {
  if (sealer_ == nullptr) return job.spec_yaml;
  return sealer_->Seal(columns::SealTenant(job.tenant), job.spec_yaml, columns::SpecAad(job.id));
}

absl::Status SqliteStore::OpenSpec(JobRecord& job, bool sealed) const {
  if (!sealed) return absl::OkStatus();
  if (sealer_ == nullptr) {
    return absl::DataLossError(
        fmt::format("sqlite: job {}'s spec is sealed and this store was opened without a key", job.id));
  }
  absl::StatusOr<std::string> spec =
      sealer_->Open(columns::SealTenant(job.tenant), job.spec_yaml, columns::SpecAad(job.id));
  if (!spec.ok()) return absl::DataLossError(fmt::format("sqlite: job {}'s spec: {}", job.id, spec.status().message()));
  job.spec_yaml = std::move(*spec);
  return absl::OkStatus();
}

SqliteStore::SqliteStore(sqlite3* db, Clock& clock, Sealer* sealer)
    : db_(db), clock_(clock), sealer_(sealer), statements_(std::make_unique<StatementCache>(db)) {}

SqliteStore::~SqliteStore() {
  // Statements are finalised before their connection closes.
  read_statements_.reset();
  if (read_db_ != nullptr) sqlite3_close(read_db_);
  statements_.reset();
  sqlite3_close(db_);
}

absl::Status SqliteStore::Exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return absl::InternalError(fmt::format("sqlite: {}: {}", std::string(sql).substr(0, 60), msg));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::Migrate() {
  std::unique_lock<std::mutex> lock = Acquire();
  RETURN_IF_ERROR(
      Exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at_ns "
           "INTEGER NOT NULL)"));
  Statement current(db_, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations");
  RETURN_IF_ERROR(current.status());
  if (current.Step() != SQLITE_ROW) return SqliteError(db_, "read schema version");
  int version = static_cast<int>(current.Int(0));
  const int known = static_cast<int>(std::size(kSqliteMigrations));
  if (version > known) {
    return absl::FailedPreconditionError(fmt::format(
        "sqlite: database schema version {} is newer than this gpugeek knows ({}); upgrade gpugeek", version, known));
  }
  for (; version < known; ++version) {
    Transaction tx(db_);
    RETURN_IF_ERROR(tx.status());
    RETURN_IF_ERROR(Exec(kSqliteMigrations[version]));
    Statement mark(db_, "INSERT INTO schema_migrations (version, applied_at_ns) VALUES (?, ?)");
    RETURN_IF_ERROR(mark.status());
    mark.Bind(1, int64_t{version + 1}).Bind(2, ToNs(clock_.Now()));
    if (mark.Step() != SQLITE_DONE) return SqliteError(db_, "record migration");
    RETURN_IF_ERROR(tx.Commit());
  }
  schema_version_ = version;
  return absl::OkStatus();
}

std::unique_lock<std::mutex> SqliteStore::Acquire() {
  std::unique_lock<std::mutex> lock(mu_);
  batch_ended_.wait(lock, [this] {
    const std::thread::id owner = batch_owner_.load();
    return owner == std::thread::id() || owner == std::this_thread::get_id();
  });
  return lock;
}

SqliteStore::Reader SqliteStore::ReadAccess() {
  // The batch's owner reads its own writes; everyone else reads the last commit, on the read
  // connection when there is one (WAL readers never wait for the writer).
  if (read_db_ == nullptr || batch_owner_.load() == std::this_thread::get_id()) {
    return Reader{Acquire(), db_, statements_.get()};
  }
  return Reader{std::unique_lock<std::mutex>(read_mu_), read_db_, read_statements_.get()};
}

absl::Status SqliteStore::BeginWriteBatch() {
  std::unique_lock<std::mutex> lock = Acquire();
  if (batch_owner_.load() != std::thread::id()) {
    return absl::FailedPreconditionError("store: a write batch is open already; commit it first");
  }
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return SqliteError(db_, "begin write batch");
  }
  batch_owner_.store(std::this_thread::get_id());
  return absl::OkStatus();
}

absl::Status SqliteStore::CommitWriteBatch() { return EndWriteBatch(Acquire(), /*commit=*/true); }

absl::Status SqliteStore::AbortWriteBatch() { return EndWriteBatch(Acquire(), /*commit=*/false); }

absl::Status SqliteStore::EndWriteBatch(std::unique_lock<std::mutex> lock, bool commit) {
  if (batch_owner_.load() != std::this_thread::get_id()) {
    return absl::FailedPreconditionError("store: no write batch is open on this thread");
  }
  absl::Status st = absl::OkStatus();
  if (!commit) {
    if (sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr) != SQLITE_OK)
      st = SqliteError(db_, "abort write batch");
  } else if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
    st = SqliteError(db_, "commit write batch");
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);  // nothing of the batch stays
  }
  batch_owner_.store(std::thread::id());
  lock.unlock();
  batch_ended_.notify_all();
  return st;
}

absl::StatusOr<JobRecord> SqliteStore::InsertJobLocked(const JobRecord& job) {
  if (job.id.empty()) return absl::InvalidArgumentError("store: job id must not be empty");
  JobRecord stored = job;
  stored.version = 1;
  ASSIGN_OR_RETURN(const std::string spec, SealSpec(stored));
  Statement s(*statements_,
              fmt::format("INSERT INTO jobs ({}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", kJobColumns));
  RETURN_IF_ERROR(s.status());
  BindJob(s, stored, stored.version, spec, sealer_ != nullptr);
  if (s.Step() != SQLITE_DONE) {
    if (sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_PRIMARYKEY) {
      return absl::AlreadyExistsError(fmt::format("store: job '{}' already exists", job.id));
    }
    return SqliteError(db_, "insert job");
  }
  RETURN_IF_ERROR(InsertEvent(*statements_, stored.id, stored.created_at, stored.state, stored.state,
                              stored.reason.empty() ? "submitted" : stored.reason));
  return stored;
}

absl::StatusOr<JobRecord> SqliteStore::CreateJob(const JobRecord& job) {
  ASSIGN_OR_RETURN(auto results, CreateJobs({job}));
  return std::move(results[0]);
}

absl::StatusOr<std::vector<absl::StatusOr<JobRecord>>> SqliteStore::CreateJobs(const std::vector<JobRecord>& jobs) {
  std::unique_lock<std::mutex> lock = Acquire();
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.status());
  std::vector<absl::StatusOr<JobRecord>> results;
  results.reserve(jobs.size());
  for (const JobRecord& job : jobs) {
    absl::StatusOr<JobRecord> r = InsertJobLocked(job);
    // Only a duplicate or empty id is a per-job outcome; anything else fails the whole batch.
    if (!r.ok() && r.status().code() != absl::StatusCode::kAlreadyExists &&
        r.status().code() != absl::StatusCode::kInvalidArgument) {
      return r.status();
    }
    results.push_back(std::move(r));
  }
  RETURN_IF_ERROR(tx.Commit());
  return results;
}

absl::StatusOr<JobRecord> SqliteStore::GetJobIn(StatementCache& statements, const std::string& id) {
  Statement s(statements, fmt::format("SELECT {} FROM jobs WHERE id = ?", kJobColumns));
  RETURN_IF_ERROR(s.status());
  s.Bind(1, id);
  const int rc = s.Step();
  if (rc == SQLITE_DONE) return absl::NotFoundError(fmt::format("store: no job '{}'", id));
  if (rc != SQLITE_ROW) return SqliteError(statements.db(), "get job");
  bool sealed = false;
  ASSIGN_OR_RETURN(JobRecord j, ReadJob(s, &sealed));
  RETURN_IF_ERROR(OpenSpec(j, sealed));
  return j;
}

absl::StatusOr<JobRecord> SqliteStore::GetJob(const std::string& id) {
  Reader r = ReadAccess();
  return GetJobIn(*r.statements, id);
}

absl::StatusOr<std::vector<JobRecord>> SqliteStore::ListJobs(const JobFilter& filter) {
  if (filter.limit < 1 || filter.limit > kMaxListLimit) {
    return absl::InvalidArgumentError(
        fmt::format("store: limit = {} must be between 1 and {}", filter.limit, kMaxListLimit));
  }
  Reader r = ReadAccess();
  // Every filter is bound (an empty value disables it), so one statement text serves all queries of
  // one order.
  Statement s(*r.statements,
              fmt::format("SELECT {} FROM jobs WHERE (?1 = '' OR id {} ?1) AND (?2 = '' OR state = ?2) AND (?3 = '' "
                          "OR tenant = ?3) AND (?4 = '' OR name = ?4) ORDER BY id {} LIMIT ?5",
                          kJobColumns, filter.newest_first ? "<" : ">", filter.newest_first ? "DESC" : "ASC"));
  RETURN_IF_ERROR(s.status());
  s.Bind(1, filter.after_id).Bind(2, filter.state ? std::string(api::JobStateName(*filter.state)) : std::string());
  s.Bind(3, filter.tenant).Bind(4, filter.name).Bind(5, int64_t{filter.limit});
  std::vector<JobRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    bool sealed = false;
    ASSIGN_OR_RETURN(JobRecord j, ReadJob(s, &sealed));
    RETURN_IF_ERROR(OpenSpec(j, sealed));
    out.push_back(std::move(j));
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list jobs");
  return out;
}

absl::StatusOr<std::vector<JobCount>> SqliteStore::CountJobs() {
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT state, priority, COUNT(*), MIN(updated_at_ns) FROM jobs GROUP BY state, priority ORDER BY "
              "state, priority");
  RETURN_IF_ERROR(s.status());
  std::vector<JobCount> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    auto state = api::ParseJobState(s.Text(0));
    if (!state) return absl::DataLossError(fmt::format("sqlite: jobs hold unknown state '{}'", s.Text(0)));
    out.push_back({*state, static_cast<int>(s.Int(1)), s.Int(2), FromNs(s.Int(3))});
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "count jobs");
  return out;
}

absl::StatusOr<JobRecord> SqliteStore::UpdateJob(const JobRecord& job) {
  std::unique_lock<std::mutex> lock = Acquire();
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.status());
  ASSIGN_OR_RETURN(JobRecord current, GetJobIn(*statements_, job.id));
  if (current.version != job.version) {
    return absl::AbortedError(fmt::format("store: job '{}' changed (version {} != {}); re-read and retry", job.id,
                                          current.version, job.version));
  }
  if (current.state != job.state && !api::CanTransition(current.state, job.state)) {
    return absl::FailedPreconditionError(fmt::format("store: job '{}' cannot move from {} to {}", job.id,
                                                     api::JobStateName(current.state), api::JobStateName(job.state)));
  }
  JobRecord stored = job;
  stored.version = current.version + 1;
  stored.created_at = current.created_at;  // immutable
  ASSIGN_OR_RETURN(const std::string spec, SealSpec(stored));
  Statement s(
      *statements_,
      "UPDATE jobs SET id = ?1, tenant = ?2, name = ?3, spec_yaml = ?4, state = ?5, priority = ?6, plan_json "
      "= ?7, allocation_json = ?8, epoch = ?9, restarts = ?10, exit_code = ?11, reason = ?12, created_at_ns "
      "= ?13, updated_at_ns = ?14, version = ?15, retries = ?16, checkpoint_step = ?17, checkpoint_at_ns = ?18, "
      "usage_json = ?19, checkpoint_region = ?20, platform_env = ?21, submitted_by = ?22 WHERE id = ?1");
  RETURN_IF_ERROR(s.status());
  BindJob(s, stored, stored.version, spec, sealer_ != nullptr);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "update job");
  if (current.state != stored.state) {
    RETURN_IF_ERROR(
        InsertEvent(*statements_, stored.id, stored.updated_at, current.state, stored.state, stored.reason));
  }
  RETURN_IF_ERROR(tx.Commit());
  return stored;
}

absl::StatusOr<std::vector<EventRecord>> SqliteStore::ListEvents(const EventFilter& filter) {
  if (filter.limit < 1 || filter.limit > kMaxListLimit) {
    return absl::InvalidArgumentError(
        fmt::format("store: limit = {} must be between 1 and {}", filter.limit, kMaxListLimit));
  }
  Reader r = ReadAccess();
  // Without a tenant the jobs table is not read; with one, the event's job must be that tenant's.
  Statement s(*r.statements,
              filter.tenant.empty()
                  ? "SELECT seq, job_id, time_ns, from_state, to_state, reason FROM events WHERE seq > ?1 AND (?2 = '' "
                    "OR job_id = ?2) ORDER BY seq LIMIT ?3"
                  : "SELECT e.seq, e.job_id, e.time_ns, e.from_state, e.to_state, e.reason FROM events e JOIN jobs j "
                    "ON j.id = e.job_id WHERE e.seq > ?1 AND (?2 = '' OR e.job_id = ?2) AND j.tenant = ?4 ORDER BY "
                    "e.seq LIMIT ?3");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, filter.after_seq).Bind(2, filter.job_id).Bind(3, int64_t{filter.limit});
  if (!filter.tenant.empty()) s.Bind(4, filter.tenant);
  std::vector<EventRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    EventRecord e;
    e.seq = s.Int(0);
    e.job_id = s.Text(1);
    e.time = FromNs(s.Int(2));
    auto from = api::ParseJobState(s.Text(3));
    auto to = api::ParseJobState(s.Text(4));
    if (!from || !to) return absl::DataLossError(fmt::format("sqlite: event {} has an unknown state", e.seq));
    e.from = *from;
    e.to = *to;
    e.reason = s.Text(5);
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list events");
  return out;
}

absl::StatusOr<int64_t> SqliteStore::DeleteOldEvents(TimePoint before, int limit) {
  if (limit < 1 || limit > kMaxListLimit) {
    return absl::InvalidArgumentError(fmt::format("store: limit = {} must be between 1 and {}", limit, kMaxListLimit));
  }
  std::unique_lock<std::mutex> lock = Acquire();
  // In seq order from the oldest left, so each call starts where the last one stopped (a deleted row is
  // not scanned again); the events of a job still running are skipped until it ends.
  Statement s(*statements_,
              "DELETE FROM events WHERE seq IN (SELECT e.seq FROM events e JOIN jobs j ON j.id = e.job_id WHERE "
              "e.time_ns < ?1 AND j.updated_at_ns < ?1 AND j.state IN ('SUCCEEDED', 'FAILED', 'CANCELLED') ORDER BY "
              "e.seq LIMIT ?2)");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, ToNs(before)).Bind(2, int64_t{limit});
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "delete old events");
  return static_cast<int64_t>(sqlite3_changes(db_));
}

absl::Status SqliteStore::PutNode(const NodeRecord& node) {
  if (node.id.empty()) return absl::InvalidArgumentError("store: node id must not be empty");
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              "INSERT INTO nodes (id, inventory_json, state, last_heartbeat_ns, registered_at_ns) VALUES (?, ?, ?, ?, "
              "?) ON CONFLICT(id) DO UPDATE SET inventory_json = excluded.inventory_json, state = excluded.state, "
              "last_heartbeat_ns = excluded.last_heartbeat_ns, registered_at_ns = excluded.registered_at_ns");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, node.id).Bind(2, node.inventory_json).Bind(3, node.state);
  s.Bind(4, ToNs(node.last_heartbeat)).Bind(5, ToNs(node.registered_at));
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "put node");
  return absl::OkStatus();
}

namespace {
NodeRecord ReadNode(const Statement& s) {
  NodeRecord n;
  n.id = s.Text(0);
  n.inventory_json = s.Text(1);
  n.state = s.Text(2);
  n.last_heartbeat = FromNs(s.Int(3));
  n.registered_at = FromNs(s.Int(4));
  return n;
}
}  // namespace

absl::StatusOr<NodeRecord> SqliteStore::GetNode(const std::string& id) {
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT id, inventory_json, state, last_heartbeat_ns, registered_at_ns FROM nodes WHERE id = ?");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, id);
  const int rc = s.Step();
  if (rc == SQLITE_DONE) return absl::NotFoundError(fmt::format("store: no node '{}'", id));
  if (rc != SQLITE_ROW) return SqliteError(r.db, "get node");
  return ReadNode(s);
}

absl::Status SqliteStore::DeleteNode(const std::string& id) {
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_, "DELETE FROM nodes WHERE id = ?");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, id);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "delete node");
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(fmt::format("store: no node '{}'", id));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NodeRecord>> SqliteStore::ListNodes() {
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT id, inventory_json, state, last_heartbeat_ns, registered_at_ns FROM nodes ORDER BY id");
  RETURN_IF_ERROR(s.status());
  std::vector<NodeRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back(ReadNode(s));
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list nodes");
  return out;
}

namespace {

void BindOptionalTime(Statement& s, int i, const std::optional<TimePoint>& t) {
  if (t) {
    s.Bind(i, ToNs(*t));
  } else {
    s.BindNull(i);
  }
}

std::optional<TimePoint> OptionalTime(const Statement& s, int col) {
  if (s.IsNull(col)) return std::nullopt;
  return FromNs(s.Int(col));
}

// The outcome of an account INSERT: AlreadyExists for a taken key, NotFound for a missing parent row
// (`parent` names it), else the SQLite error.
absl::Status InsertOutcome(sqlite3* db, int rc, std::string_view what, std::string_view key, std::string_view parent) {
  if (rc == SQLITE_DONE) return absl::OkStatus();
  const int ext = sqlite3_extended_errcode(db);
  if (ext == SQLITE_CONSTRAINT_PRIMARYKEY) {
    return absl::AlreadyExistsError(fmt::format("store: {} '{}' already exists", what, key));
  }
  if (ext == SQLITE_CONSTRAINT_FOREIGNKEY) {
    return absl::NotFoundError(fmt::format("store: {} '{}' names {} that does not exist", what, key, parent));
  }
  return SqliteError(db, fmt::format("insert {}", what));
}

}  // namespace

absl::Status SqliteStore::CreateTenant(const TenantRecord& tenant) {
  if (tenant.id.empty()) return absl::InvalidArgumentError("store: tenant id must not be empty");
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_, "INSERT INTO tenants (id, created_at_ns) VALUES (?, ?)");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, tenant.id).Bind(2, ToNs(tenant.created_at));
  return InsertOutcome(db_, s.Step(), "tenant", tenant.id, "");
}

absl::StatusOr<std::vector<TenantRecord>> SqliteStore::ListTenants() {
  Reader r = ReadAccess();
  Statement s(*r.statements, "SELECT id, created_at_ns FROM tenants ORDER BY id");
  RETURN_IF_ERROR(s.status());
  std::vector<TenantRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back({s.Text(0), FromNs(s.Int(1))});
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list tenants");
  return out;
}

absl::Status SqliteStore::CreateUser(const UserRecord& user) {
  if (user.name.empty()) return absl::InvalidArgumentError("store: user name must not be empty");
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_, "INSERT INTO users (name, tenant, role, created_at_ns) VALUES (?, ?, ?, ?)");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, user.name).Bind(2, user.tenant).Bind(3, user.role).Bind(4, ToNs(user.created_at));
  return InsertOutcome(db_, s.Step(), "user", user.name, fmt::format("tenant '{}'", user.tenant));
}

absl::StatusOr<std::vector<UserRecord>> SqliteStore::ListUsers() {
  Reader r = ReadAccess();
  Statement s(*r.statements, "SELECT name, tenant, role, created_at_ns FROM users ORDER BY name");
  RETURN_IF_ERROR(s.status());
  std::vector<UserRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back({s.Text(0), s.Text(1), s.Text(2), FromNs(s.Int(3))});
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list users");
  return out;
}

absl::Status SqliteStore::CreateToken(const TokenRecord& token) {
  if (token.id.empty()) return absl::InvalidArgumentError("store: token id must not be empty");
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              "INSERT INTO tokens (id, user, secret_hash, description, created_at_ns, expires_at_ns, revoked_at_ns) "
              "VALUES (?, ?, ?, ?, ?, ?, ?)");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, token.id).Bind(2, token.user).Bind(3, token.secret_hash).Bind(4, token.description);
  s.Bind(5, ToNs(token.created_at));
  BindOptionalTime(s, 6, token.expires_at);
  BindOptionalTime(s, 7, token.revoked_at);
  return InsertOutcome(db_, s.Step(), "token", token.id, fmt::format("user '{}'", token.user));
}

absl::StatusOr<std::vector<TokenRecord>> SqliteStore::ListTokens() {
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT id, user, secret_hash, description, created_at_ns, expires_at_ns, revoked_at_ns FROM tokens "
              "ORDER BY id");
  RETURN_IF_ERROR(s.status());
  std::vector<TokenRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    out.push_back(
        {s.Text(0), s.Text(1), s.Text(2), s.Text(3), FromNs(s.Int(4)), OptionalTime(s, 5), OptionalTime(s, 6)});
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list tokens");
  return out;
}

absl::Status SqliteStore::AppendAudit(const std::vector<AuditRecord>& records) {
  if (records.empty()) return absl::OkStatus();
  std::unique_lock<std::mutex> lock = Acquire();
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.status());
  for (const AuditRecord& a : records) {
    Statement s(*statements_,
                "INSERT INTO audit (time_ns, user, tenant, token_id, role, method, route, path, status, "
                "remote_address, request_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    RETURN_IF_ERROR(s.status());
    s.Bind(1, ToNs(a.time)).Bind(2, a.user).Bind(3, a.tenant).Bind(4, a.token_id).Bind(5, a.role);
    s.Bind(6, a.method).Bind(7, a.route).Bind(8, a.path).Bind(9, int64_t{a.status});
    s.Bind(10, a.remote_address).Bind(11, a.request_id);
    if (s.Step() != SQLITE_DONE) return SqliteError(db_, "insert audit record");
  }
  return tx.Commit();
}

absl::StatusOr<std::vector<AuditRecord>> SqliteStore::ListAudit(const AuditFilter& filter) {
  if (filter.limit < 1 || filter.limit > kMaxListLimit) {
    return absl::InvalidArgumentError(
        fmt::format("store: limit = {} must be between 1 and {}", filter.limit, kMaxListLimit));
  }
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT seq, time_ns, user, tenant, token_id, role, method, route, path, status, remote_address, "
              "request_id FROM audit WHERE seq > ?1 AND (?2 = '' OR user = ?2) AND (?3 = '' OR tenant = ?3) ORDER BY "
              "seq LIMIT ?4");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, filter.after_seq).Bind(2, filter.user).Bind(3, filter.tenant).Bind(4, int64_t{filter.limit});
  std::vector<AuditRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    out.push_back({.seq = s.Int(0),
                   .time = FromNs(s.Int(1)),
                   .user = s.Text(2),
                   .tenant = s.Text(3),
                   .token_id = s.Text(4),
                   .role = s.Text(5),
                   .method = s.Text(6),
                   .route = s.Text(7),
                   .path = s.Text(8),
                   .status = static_cast<int>(s.Int(9)),
                   .remote_address = s.Text(10),
                   .request_id = s.Text(11)});
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list audit");
  return out;
}

absl::StatusOr<int64_t> SqliteStore::DeleteOldAudit(TimePoint before, int limit) {
  if (limit < 1 || limit > kMaxListLimit) {
    return absl::InvalidArgumentError(fmt::format("store: limit = {} must be between 1 and {}", limit, kMaxListLimit));
  }
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              "DELETE FROM audit WHERE seq IN (SELECT seq FROM audit WHERE time_ns < ?1 ORDER BY seq LIMIT ?2)");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, ToNs(before)).Bind(2, int64_t{limit});
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "delete old audit records");
  return static_cast<int64_t>(sqlite3_changes(db_));
}

absl::Status SqliteStore::RevokeToken(const std::string& id, TimePoint at) {
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_, "UPDATE tokens SET revoked_at_ns = COALESCE(revoked_at_ns, ?2) WHERE id = ?1");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, id).Bind(2, ToNs(at));
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "revoke token");
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(fmt::format("store: no token '{}'", id));
  return absl::OkStatus();
}

absl::Status SqliteStore::CreateJoinToken(const JoinTokenRecord& token) {
  if (token.id.empty()) return absl::InvalidArgumentError("store: join token id must not be empty");
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              "INSERT INTO join_tokens (id, secret_sha256, description, created_by, created_at_ns, expires_at_ns, "
              "uses_left, provider) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, token.id).Bind(2, token.secret_sha256).Bind(3, token.description).Bind(4, token.created_by);
  s.Bind(5, ToNs(token.created_at));
  BindOptionalTime(s, 6, token.expires_at);
  s.Bind(7, token.uses_left).Bind(8, token.provider);
  return InsertOutcome(db_, s.Step(), "join token", token.id, "");
}

absl::StatusOr<std::vector<JoinTokenRecord>> SqliteStore::ListJoinTokens() {
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT id, secret_sha256, description, created_by, created_at_ns, expires_at_ns, uses_left, provider "
              "FROM join_tokens ORDER BY id");
  RETURN_IF_ERROR(s.status());
  std::vector<JoinTokenRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    out.push_back(
        {s.Text(0), s.Text(1), s.Text(2), s.Text(3), FromNs(s.Int(4)), OptionalTime(s, 5), s.Int(6), s.Text(7)});
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list join tokens");
  return out;
}

absl::Status SqliteStore::ConsumeJoinToken(const std::string& id, const std::string& node, uint64_t generation) {
  std::unique_lock<std::mutex> lock = Acquire();
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.status());
  Statement s(*statements_, "UPDATE join_tokens SET uses_left = uses_left - 1 WHERE id = ? AND uses_left > 0");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, id);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "consume join token");
  if (sqlite3_changes(db_) == 1) {
    Statement put(*statements_,
                  "INSERT INTO node_credentials (node, generation, provider) SELECT ?1, ?2, provider FROM join_tokens "
                  "WHERE id = ?3 ON CONFLICT(node) DO UPDATE SET generation = excluded.generation, provider = "
                  "excluded.provider");
    RETURN_IF_ERROR(put.status());
    put.Bind(1, node).Bind(2, static_cast<int64_t>(generation)).Bind(3, id);
    if (put.Step() != SQLITE_DONE) return SqliteError(db_, "put node credential");
    return tx.Commit();
  }
  Statement exists(*statements_, "SELECT 1 FROM join_tokens WHERE id = ?");
  RETURN_IF_ERROR(exists.status());
  exists.Bind(1, id);
  if (exists.Step() == SQLITE_ROW) {
    return absl::FailedPreconditionError(fmt::format("store: join token '{}' has no use left", id));
  }
  return absl::NotFoundError(fmt::format("store: no join token '{}'", id));
}

absl::Status SqliteStore::DeleteJoinToken(const std::string& id) {
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_, "DELETE FROM join_tokens WHERE id = ?");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, id);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "delete join token");
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(fmt::format("store: no join token '{}'", id));
  return absl::OkStatus();
}

absl::Status SqliteStore::DeleteNodeCredential(const std::string& node) {
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_, "DELETE FROM node_credentials WHERE node = ?");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, node);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "delete node credential");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NodeCredentialRecord>> SqliteStore::ListNodeCredentials() {
  Reader r = ReadAccess();
  Statement s(*r.statements, "SELECT node, generation, provider FROM node_credentials ORDER BY node");
  RETURN_IF_ERROR(s.status());
  std::vector<NodeCredentialRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back({s.Text(0), static_cast<uint64_t>(s.Int(1)), s.Text(2)});
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list node credentials");
  return out;
}

absl::StatusOr<SecretRecord> SqliteStore::PutSecret(const SecretRecord& secret) {
  if (secret.tenant.empty() || secret.name.empty()) {
    return absl::InvalidArgumentError("store: a secret needs a tenant and a name");
  }
  if (sealer_ == nullptr) {
    return absl::FailedPreconditionError(
        "store: secrets are kept only sealed, and this store was opened without a key (SqliteStoreOptions::sealer)");
  }
  ASSIGN_OR_RETURN(const std::string sealed,
                   sealer_->Seal(secret.tenant, secret.value, columns::SecretAad(secret.tenant, secret.name)));
  std::unique_lock<std::mutex> lock = Acquire();
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.status());
  // A replacement keeps the first creation time.
  Statement s(*statements_,
              "INSERT INTO secrets (tenant, name, value, created_at_ns, updated_at_ns) VALUES (?1, ?2, ?3, ?4, ?5) "
              "ON CONFLICT (tenant, name) DO UPDATE SET value = excluded.value, updated_at_ns = excluded.updated_at_ns "
              "RETURNING created_at_ns");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, secret.tenant).Bind(2, secret.name).BindBlob(3, sealed);
  s.Bind(4, ToNs(secret.created_at)).Bind(5, ToNs(secret.updated_at));
  if (s.Step() != SQLITE_ROW) return SqliteError(db_, "put secret");
  SecretRecord stored = secret;
  stored.created_at = FromNs(s.Int(0));
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "put secret");
  RETURN_IF_ERROR(tx.Commit());
  return stored;
}

absl::StatusOr<SecretRecord> SqliteStore::GetSecret(const std::string& tenant, const std::string& name) {
  SecretRecord out;
  std::string sealed;
  {
    Reader r = ReadAccess();
    Statement s(*r.statements, "SELECT value, created_at_ns, updated_at_ns FROM secrets WHERE tenant = ? AND name = ?");
    RETURN_IF_ERROR(s.status());
    s.Bind(1, tenant).Bind(2, name);
    const int rc = s.Step();
    if (rc == SQLITE_DONE) return absl::NotFoundError(fmt_no_secret(tenant, name));
    if (rc != SQLITE_ROW) return SqliteError(r.db, "get secret");
    sealed = s.Blob(0);
    out = {tenant, name, "", FromNs(s.Int(1)), FromNs(s.Int(2))};
  }
  if (sealer_ == nullptr) {
    return absl::DataLossError(
        fmt::format("sqlite: secret {}/{} is sealed and this store was opened without a key", tenant, name));
  }
  absl::StatusOr<std::string> value = sealer_->Open(tenant, sealed, columns::SecretAad(tenant, name));
  if (!value.ok()) {
    return absl::DataLossError(fmt::format("sqlite: secret {}/{}: {}", tenant, name, value.status().message()));
  }
  out.value = std::move(*value);
  return out;
}

absl::StatusOr<std::vector<SecretRecord>> SqliteStore::ListSecrets(const std::string& tenant) {
  Reader r = ReadAccess();
  Statement s(*r.statements, "SELECT name, created_at_ns, updated_at_ns FROM secrets WHERE tenant = ? ORDER BY name");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, tenant);
  std::vector<SecretRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back({tenant, s.Text(0), "", FromNs(s.Int(1)), FromNs(s.Int(2))});
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list secrets");
  return out;
}

absl::Status SqliteStore::DeleteSecret(const std::string& tenant, const std::string& name) {
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_, "DELETE FROM secrets WHERE tenant = ? AND name = ?");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, tenant).Bind(2, name);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "delete secret");
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(fmt_no_secret(tenant, name));
  return absl::OkStatus();
}

absl::Status SqliteStore::PutTenantQuota(const TenantQuotaRecord& quota) {
  if (quota.tenant.empty()) return absl::InvalidArgumentError("store: tenant must not be empty");
  for (const auto& [model, n] : quota.max_gpus_by_model) {
    if (model.empty() || model.find_first_of("=,") != std::string::npos) {
      return absl::InvalidArgumentError(
          fmt::format("store: GPU model '{}' must be non-empty without '=' or ','", model));
    }
  }
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              "INSERT OR REPLACE INTO tenant_quotas (tenant, weight, max_gpus_by_model, max_gpu_milli, max_jobs, "
              "updated_at_ns) VALUES (?, ?, ?, ?, ?, ?)");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, quota.tenant).Bind(2, quota.weight).Bind(3, columns::EncodeModelCaps(quota.max_gpus_by_model));
  s.Bind(4, quota.max_gpu_milli).Bind(5, int64_t{quota.max_jobs}).Bind(6, ToNs(quota.updated_at));
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "put tenant quota");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TenantQuotaRecord>> SqliteStore::ListTenantQuotas() {
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT tenant, weight, max_gpus_by_model, max_gpu_milli, max_jobs, updated_at_ns FROM tenant_quotas "
              "ORDER BY tenant");
  RETURN_IF_ERROR(s.status());
  std::vector<TenantQuotaRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    out.push_back({.tenant = s.Text(0),
                   .weight = s.Double(1),
                   .max_gpus_by_model = columns::DecodeModelCaps(s.Text(2)),
                   .max_gpu_milli = s.Int(3),
                   .max_jobs = static_cast<int32_t>(s.Int(4)),
                   .updated_at = FromNs(s.Int(5))});
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list tenant quotas");
  return out;
}

absl::Status SqliteStore::PutTenantUsage(const std::vector<TenantUsageRecord>& usage) {
  std::unique_lock<std::mutex> lock = Acquire();
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.status());
  for (const TenantUsageRecord& u : usage) {
    Statement s(*statements_, "INSERT OR REPLACE INTO tenant_usage (tenant, usage, as_of_ns) VALUES (?, ?, ?)");
    RETURN_IF_ERROR(s.status());
    s.Bind(1, u.tenant).Bind(2, u.usage).Bind(3, ToNs(u.as_of));
    if (s.Step() != SQLITE_DONE) return SqliteError(db_, "put tenant usage");
  }
  return tx.Commit();
}

absl::StatusOr<std::vector<TenantUsageRecord>> SqliteStore::ListTenantUsage() {
  Reader r = ReadAccess();
  Statement s(*r.statements, "SELECT tenant, usage, as_of_ns FROM tenant_usage ORDER BY tenant");
  RETURN_IF_ERROR(s.status());
  std::vector<TenantUsageRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) out.push_back({s.Text(0), s.Double(1), FromNs(s.Int(2))});
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list tenant usage");
  return out;
}

namespace {

constexpr char kExperimentColumns[] =
    "id, tenant, user, name, spec_yaml, state, reason, created_at_ns, updated_at_ns, version";

ExperimentRecord ReadExperiment(const Statement& s, bool* sealed) {
  ExperimentRecord e;
  e.id = s.Text(0);
  e.tenant = s.Text(1);
  e.user = s.Text(2);
  e.name = s.Text(3);
  *sealed = s.IsBlob(4);
  e.spec_yaml = *sealed ? s.Blob(4) : s.Text(4);
  e.state = s.Text(5);
  e.reason = s.Text(6);
  e.created_at = FromNs(s.Int(7));
  e.updated_at = FromNs(s.Int(8));
  e.version = s.Int(9);
  return e;
}

void BindExperiment(Statement& s, const ExperimentRecord& e, const std::string& spec, bool sealed) {
  s.Bind(1, e.id).Bind(2, e.tenant).Bind(3, e.user).Bind(4, e.name);
  if (sealed) {
    s.BindBlob(5, spec);
  } else {
    s.Bind(5, spec);
  }
  s.Bind(6, e.state).Bind(7, e.reason).Bind(8, ToNs(e.created_at)).Bind(9, ToNs(e.updated_at)).Bind(10, e.version);
}

}  // namespace

absl::StatusOr<std::string> SqliteStore::SealExperiment(const ExperimentRecord& e) const {
  if (sealer_ == nullptr) return e.spec_yaml;
  return sealer_->Seal(columns::SealTenant(e.tenant), e.spec_yaml, columns::ExperimentAad(e.id));
}

absl::Status SqliteStore::OpenExperiment(ExperimentRecord& e, bool sealed) const {
  if (!sealed) return absl::OkStatus();
  if (sealer_ == nullptr) {
    return absl::DataLossError(
        fmt::format("sqlite: experiment {}'s spec is sealed and this store was opened without a key", e.id));
  }
  absl::StatusOr<std::string> spec =
      sealer_->Open(columns::SealTenant(e.tenant), e.spec_yaml, columns::ExperimentAad(e.id));
  if (!spec.ok()) {
    return absl::DataLossError(fmt::format("sqlite: experiment {}'s spec: {}", e.id, spec.status().message()));
  }
  e.spec_yaml = std::move(*spec);
  return absl::OkStatus();
}

absl::StatusOr<ExperimentRecord> SqliteStore::CreateExperiment(const ExperimentRecord& experiment) {
  if (experiment.id.empty()) return absl::InvalidArgumentError("store: an experiment needs an id");
  ExperimentRecord stored = experiment;
  stored.version = 1;
  const TimePoint now = clock_.Now();
  stored.created_at = stored.updated_at = now;
  ASSIGN_OR_RETURN(const std::string spec, SealExperiment(stored));
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              fmt::format("INSERT INTO experiments ({}) VALUES (?,?,?,?,?,?,?,?,?,?)", kExperimentColumns));
  RETURN_IF_ERROR(s.status());
  BindExperiment(s, stored, spec, sealer_ != nullptr);
  if (s.Step() != SQLITE_DONE) {
    if (sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_PRIMARYKEY) {
      return absl::AlreadyExistsError(fmt::format("store: experiment '{}' already exists", stored.id));
    }
    return SqliteError(db_, "insert experiment");
  }
  return stored;
}

absl::StatusOr<ExperimentRecord> SqliteStore::GetExperiment(const std::string& id) {
  Reader r = ReadAccess();
  Statement s(*r.statements, fmt::format("SELECT {} FROM experiments WHERE id = ?", kExperimentColumns));
  RETURN_IF_ERROR(s.status());
  s.Bind(1, id);
  const int rc = s.Step();
  if (rc == SQLITE_DONE) return absl::NotFoundError(fmt::format("store: no experiment '{}'", id));
  if (rc != SQLITE_ROW) return SqliteError(r.db, "get experiment");
  bool sealed = false;
  ExperimentRecord e = ReadExperiment(s, &sealed);
  RETURN_IF_ERROR(OpenExperiment(e, sealed));
  return e;
}

absl::StatusOr<std::vector<ExperimentRecord>> SqliteStore::ListExperiments(const ExperimentFilter& filter) {
  if (filter.limit < 1 || filter.limit > 10000) {
    return absl::InvalidArgumentError(fmt::format("store: limit {} is outside 1..10000", filter.limit));
  }
  Reader r = ReadAccess();
  Statement s(*r.statements, fmt::format("SELECT {} FROM experiments WHERE (?1 = '' OR tenant = ?1) AND (?2 = '' OR "
                                         "state = ?2) AND id > ?3 ORDER BY id LIMIT ?4",
                                         kExperimentColumns));
  RETURN_IF_ERROR(s.status());
  s.Bind(1, filter.tenant).Bind(2, filter.state).Bind(3, filter.after_id).Bind(4, int64_t{filter.limit});
  std::vector<ExperimentRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    bool sealed = false;
    ExperimentRecord e = ReadExperiment(s, &sealed);
    RETURN_IF_ERROR(OpenExperiment(e, sealed));
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list experiments");
  return out;
}

absl::StatusOr<ExperimentRecord> SqliteStore::UpdateExperiment(const ExperimentRecord& experiment) {
  std::unique_lock<std::mutex> lock = Acquire();
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.status());
  Statement get(*statements_, "SELECT version, created_at_ns FROM experiments WHERE id = ?");
  RETURN_IF_ERROR(get.status());
  get.Bind(1, experiment.id);
  const int rc = get.Step();
  if (rc == SQLITE_DONE) return absl::NotFoundError(fmt::format("store: no experiment '{}'", experiment.id));
  if (rc != SQLITE_ROW) return SqliteError(db_, "get experiment");
  if (get.Int(0) != experiment.version) {
    return absl::AbortedError(
        fmt::format("store: experiment '{}' is at version {}, not {}", experiment.id, get.Int(0), experiment.version));
  }
  ExperimentRecord stored = experiment;
  stored.version = experiment.version + 1;
  stored.created_at = FromNs(get.Int(1));
  stored.updated_at = clock_.Now();
  ASSIGN_OR_RETURN(const std::string spec, SealExperiment(stored));
  Statement s(*statements_,
              "UPDATE experiments SET id = ?1, tenant = ?2, user = ?3, name = ?4, spec_yaml = ?5, state = ?6, "
              "reason = ?7, created_at_ns = ?8, updated_at_ns = ?9, version = ?10 WHERE id = ?1");
  RETURN_IF_ERROR(s.status());
  BindExperiment(s, stored, spec, sealer_ != nullptr);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "update experiment");
  RETURN_IF_ERROR(tx.Commit());
  return stored;
}

absl::Status SqliteStore::PutTrial(const TrialRecord& trial) {
  const TimePoint now = clock_.Now();
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              "INSERT INTO trials (experiment_id, number, params_json, state, job_id, value, reason, created_at_ns, "
              "updated_at_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8) ON CONFLICT (experiment_id, number) DO "
              "UPDATE SET params_json = ?3, state = ?4, job_id = ?5, value = ?6, reason = ?7, updated_at_ns = ?8");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, trial.experiment_id).Bind(2, trial.number).Bind(3, trial.params_json).Bind(4, trial.state);
  s.Bind(5, trial.job_id);
  if (trial.value) {
    s.Bind(6, *trial.value);
  } else {
    s.BindNull(6);
  }
  s.Bind(7, trial.reason).Bind(8, ToNs(now));
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "put trial");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<TrialRecord>> SqliteStore::ListTrials(const std::string& experiment_id) {
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT experiment_id, number, params_json, state, job_id, value, reason, created_at_ns, updated_at_ns "
              "FROM trials WHERE experiment_id = ? ORDER BY number");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, experiment_id);
  std::vector<TrialRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    TrialRecord t;
    t.experiment_id = s.Text(0);
    t.number = s.Int(1);
    t.params_json = s.Text(2);
    t.state = s.Text(3);
    t.job_id = s.Text(4);
    if (!s.IsNull(5)) t.value = s.Double(5);
    t.reason = s.Text(6);
    t.created_at = FromNs(s.Int(7));
    t.updated_at = FromNs(s.Int(8));
    out.push_back(std::move(t));
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list trials");
  return out;
}

namespace {

constexpr char kServiceColumns[] =
    "id, tenant, user, name, spec_yaml, generation, desired, state, reason, created_at_ns, updated_at_ns, version";

ServiceRecord ReadService(const Statement& s, bool* sealed) {
  ServiceRecord e;
  e.id = s.Text(0);
  e.tenant = s.Text(1);
  e.user = s.Text(2);
  e.name = s.Text(3);
  *sealed = s.IsBlob(4);
  e.spec_yaml = *sealed ? s.Blob(4) : s.Text(4);
  e.generation = s.Int(5);
  e.desired = s.Text(6);
  e.state = s.Text(7);
  e.reason = s.Text(8);
  e.created_at = FromNs(s.Int(9));
  e.updated_at = FromNs(s.Int(10));
  e.version = s.Int(11);
  return e;
}

void BindService(Statement& s, const ServiceRecord& e, const std::string& spec, bool sealed) {
  s.Bind(1, e.id).Bind(2, e.tenant).Bind(3, e.user).Bind(4, e.name);
  if (sealed) {
    s.BindBlob(5, spec);
  } else {
    s.Bind(5, spec);
  }
  s.Bind(6, e.generation).Bind(7, e.desired).Bind(8, e.state).Bind(9, e.reason);
  s.Bind(10, ToNs(e.created_at)).Bind(11, ToNs(e.updated_at)).Bind(12, e.version);
}

}  // namespace

absl::StatusOr<std::string> SqliteStore::SealService(const ServiceRecord& e) const {
  if (sealer_ == nullptr) return e.spec_yaml;
  return sealer_->Seal(columns::SealTenant(e.tenant), e.spec_yaml, columns::ServiceAad(e.id));
}

absl::Status SqliteStore::OpenService(ServiceRecord& e, bool sealed) const {
  if (!sealed) return absl::OkStatus();
  if (sealer_ == nullptr) {
    return absl::DataLossError(
        fmt::format("sqlite: service {}'s spec is sealed and this store was opened without a key", e.id));
  }
  absl::StatusOr<std::string> spec =
      sealer_->Open(columns::SealTenant(e.tenant), e.spec_yaml, columns::ServiceAad(e.id));
  if (!spec.ok()) {
    return absl::DataLossError(fmt::format("sqlite: service {}'s spec: {}", e.id, spec.status().message()));
  }
  e.spec_yaml = std::move(*spec);
  return absl::OkStatus();
}

absl::StatusOr<ServiceRecord> SqliteStore::CreateService(const ServiceRecord& service) {
  if (service.id.empty()) return absl::InvalidArgumentError("store: a service needs an id");
  ServiceRecord stored = service;
  stored.version = 1;
  stored.created_at = stored.updated_at = clock_.Now();
  ASSIGN_OR_RETURN(const std::string spec, SealService(stored));
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_, fmt::format("INSERT INTO services ({}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", kServiceColumns));
  RETURN_IF_ERROR(s.status());
  BindService(s, stored, spec, sealer_ != nullptr);
  if (s.Step() != SQLITE_DONE) {
    if (sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_PRIMARYKEY) {
      return absl::AlreadyExistsError(fmt::format("store: service '{}' already exists", stored.id));
    }
    return SqliteError(db_, "insert service");
  }
  return stored;
}

absl::StatusOr<ServiceRecord> SqliteStore::GetService(const std::string& id) {
  Reader r = ReadAccess();
  Statement s(*r.statements, fmt::format("SELECT {} FROM services WHERE id = ?", kServiceColumns));
  RETURN_IF_ERROR(s.status());
  s.Bind(1, id);
  const int rc = s.Step();
  if (rc == SQLITE_DONE) return absl::NotFoundError(fmt::format("store: no service '{}'", id));
  if (rc != SQLITE_ROW) return SqliteError(r.db, "get service");
  bool sealed = false;
  ServiceRecord e = ReadService(s, &sealed);
  RETURN_IF_ERROR(OpenService(e, sealed));
  return e;
}

absl::StatusOr<std::vector<ServiceRecord>> SqliteStore::ListServices(const ServiceFilter& filter) {
  if (filter.limit < 1 || filter.limit > 10000) {
    return absl::InvalidArgumentError(fmt::format("store: limit {} is outside 1..10000", filter.limit));
  }
  Reader r = ReadAccess();
  Statement s(*r.statements, fmt::format("SELECT {} FROM services WHERE (?1 = '' OR tenant = ?1) AND (?2 = '' OR "
                                         "name = ?2) AND (?3 = '' OR state = ?3) AND id > ?4 ORDER BY id LIMIT ?5",
                                         kServiceColumns));
  RETURN_IF_ERROR(s.status());
  s.Bind(1, filter.tenant).Bind(2, filter.name).Bind(3, filter.state).Bind(4, filter.after_id);
  s.Bind(5, int64_t{filter.limit});
  std::vector<ServiceRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    bool sealed = false;
    ServiceRecord e = ReadService(s, &sealed);
    RETURN_IF_ERROR(OpenService(e, sealed));
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list services");
  return out;
}

absl::StatusOr<ServiceRecord> SqliteStore::UpdateService(const ServiceRecord& service) {
  std::unique_lock<std::mutex> lock = Acquire();
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.status());
  Statement get(*statements_, "SELECT version, created_at_ns FROM services WHERE id = ?");
  RETURN_IF_ERROR(get.status());
  get.Bind(1, service.id);
  const int rc = get.Step();
  if (rc == SQLITE_DONE) return absl::NotFoundError(fmt::format("store: no service '{}'", service.id));
  if (rc != SQLITE_ROW) return SqliteError(db_, "get service");
  if (get.Int(0) != service.version) {
    return absl::AbortedError(
        fmt::format("store: service '{}' is at version {}, not {}", service.id, get.Int(0), service.version));
  }
  ServiceRecord stored = service;
  stored.version = service.version + 1;
  stored.created_at = FromNs(get.Int(1));
  stored.updated_at = clock_.Now();
  ASSIGN_OR_RETURN(const std::string spec, SealService(stored));
  Statement s(*statements_,
              "UPDATE services SET id = ?1, tenant = ?2, user = ?3, name = ?4, spec_yaml = ?5, generation = ?6, "
              "desired = ?7, state = ?8, reason = ?9, created_at_ns = ?10, updated_at_ns = ?11, version = ?12 "
              "WHERE id = ?1");
  RETURN_IF_ERROR(s.status());
  BindService(s, stored, spec, sealer_ != nullptr);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "update service");
  RETURN_IF_ERROR(tx.Commit());
  return stored;
}

absl::Status SqliteStore::PutReplica(const ReplicaRecord& replica) {
  const TimePoint now = clock_.Now();
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              "INSERT INTO service_replicas (service_id, version_name, ordinal, job_id, port, spec_digest, state, "
              "reason, created_at_ns, updated_at_ns) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?9) ON CONFLICT "
              "(service_id, version_name, ordinal) DO UPDATE SET job_id = ?4, port = ?5, spec_digest = ?6, state = "
              "?7, reason = ?8, updated_at_ns = ?9");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, replica.service_id).Bind(2, replica.version_name).Bind(3, replica.ordinal).Bind(4, replica.job_id);
  s.Bind(5, int64_t{replica.port}).Bind(6, replica.spec_digest).Bind(7, replica.state).Bind(8, replica.reason);
  s.Bind(9, ToNs(now));
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "put replica");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ReplicaRecord>> SqliteStore::ListReplicas(const std::string& service_id, bool active_only) {
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT service_id, version_name, ordinal, job_id, port, spec_digest, state, reason, created_at_ns, "
              "updated_at_ns FROM service_replicas WHERE service_id = ?1 AND (?2 = 0 OR state <> 'ENDED') ORDER BY "
              "version_name, ordinal");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, service_id).Bind(2, int64_t{active_only ? 1 : 0});
  std::vector<ReplicaRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    ReplicaRecord t;
    t.service_id = s.Text(0);
    t.version_name = s.Text(1);
    t.ordinal = s.Int(2);
    t.job_id = s.Text(3);
    t.port = static_cast<int>(s.Int(4));
    t.spec_digest = s.Text(5);
    t.state = s.Text(6);
    t.reason = s.Text(7);
    t.created_at = FromNs(s.Int(8));
    t.updated_at = FromNs(s.Int(9));
    out.push_back(std::move(t));
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list replicas");
  return out;
}

absl::Status SqliteStore::PutServiceUsage(const ServiceUsageRecord& usage) {
  const TimePoint now = clock_.Now();
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              "INSERT INTO service_usage (service_id, version_name, instance, requests, tokens, updated_at_ns) VALUES "
              "(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (service_id, version_name, instance) DO UPDATE SET requests = "
              "max(requests, ?4), tokens = max(tokens, ?5), updated_at_ns = ?6");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, usage.service_id).Bind(2, usage.version_name).Bind(3, usage.instance).Bind(4, usage.requests);
  s.Bind(5, usage.tokens).Bind(6, ToNs(now));
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "put service usage");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ServiceUsageRecord>> SqliteStore::ListServiceUsage(const std::string& service_id) {
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT service_id, version_name, instance, requests, tokens, updated_at_ns FROM service_usage WHERE "
              "service_id = ?1 ORDER BY version_name, instance");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, service_id);
  std::vector<ServiceUsageRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    out.push_back({.service_id = s.Text(0),
                   .version_name = s.Text(1),
                   .instance = s.Text(2),
                   .requests = s.Int(3),
                   .tokens = s.Int(4),
                   .updated_at = FromNs(s.Int(5))});
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list service usage");
  return out;
}

absl::Status SqliteStore::AppendMetricReports(const std::vector<MetricReportRecord>& reports) {
  if (reports.empty()) return absl::OkStatus();
  const TimePoint now = clock_.Now();
  std::unique_lock<std::mutex> lock = Acquire();
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.status());
  for (const MetricReportRecord& m : reports) {
    Statement s(*statements_,
                "INSERT OR IGNORE INTO metric_reports (job_id, epoch, node_rank, seq, step, value, reported_at_ns) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)");
    RETURN_IF_ERROR(s.status());
    s.Bind(1, m.job_id).Bind(2, m.epoch).Bind(3, int64_t{m.node_rank}).Bind(4, m.seq).Bind(5, m.step);
    s.Bind(6, m.value).Bind(7, ToNs(now));
    if (s.Step() != SQLITE_DONE) return SqliteError(db_, "insert metric report");
  }
  return tx.Commit();
}

absl::StatusOr<std::vector<MetricReportRecord>> SqliteStore::ListMetricReports(const std::string& job_id,
                                                                               int64_t after_id, int limit) {
  if (limit < 1 || limit > 10000) {
    return absl::InvalidArgumentError(fmt::format("store: limit {} is outside 1..10000", limit));
  }
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT id, job_id, epoch, node_rank, seq, step, value, reported_at_ns FROM metric_reports WHERE "
              "job_id = ? AND id > ? ORDER BY id LIMIT ?");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, job_id).Bind(2, after_id).Bind(3, int64_t{limit});
  std::vector<MetricReportRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    out.push_back({.id = s.Int(0),
                   .job_id = s.Text(1),
                   .epoch = s.Int(2),
                   .node_rank = static_cast<int>(s.Int(3)),
                   .seq = s.Int(4),
                   .step = s.Int(5),
                   .value = s.Double(6),
                   .reported_at = FromNs(s.Int(7))});
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list metric reports");
  return out;
}

absl::StatusOr<int64_t> SqliteStore::CountMetricReports(const std::string& job_id, int64_t epoch, int node_rank) {
  Reader r = ReadAccess();
  Statement s(*r.statements, "SELECT COUNT(*) FROM metric_reports WHERE job_id = ? AND epoch = ? AND node_rank = ?");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, job_id).Bind(2, epoch).Bind(3, int64_t{node_rank});
  if (s.Step() != SQLITE_ROW) return SqliteError(r.db, "count metric reports");
  return s.Int(0);
}

absl::Status SqliteStore::AppendLedger(const std::vector<LedgerRecord>& records) {
  if (records.empty()) return absl::OkStatus();
  std::unique_lock<std::mutex> lock = Acquire();
  Transaction tx(db_);
  RETURN_IF_ERROR(tx.status());
  for (const LedgerRecord& l : records) {
    Statement s(*statements_, "INSERT INTO ledger (id, tenant, kind, at_ns, body) VALUES (?, ?, ?, ?, ?)");
    RETURN_IF_ERROR(s.status());
    s.Bind(1, l.id).Bind(2, l.tenant).Bind(3, l.kind).Bind(4, ToNs(l.at)).Bind(5, l.body);
    if (s.Step() != SQLITE_DONE) {
      if (sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_UNIQUE) {
        return absl::AlreadyExistsError("store: ledger transaction " + l.id + " exists");
      }
      return SqliteError(db_, "insert ledger transaction");
    }
  }
  return tx.Commit();
}

absl::StatusOr<std::vector<LedgerRecord>> SqliteStore::ListLedger(const LedgerFilter& filter) {
  if (filter.limit < 1 || filter.limit > kMaxListLimit) {
    return absl::InvalidArgumentError(
        fmt::format("store: limit = {} must be between 1 and {}", filter.limit, kMaxListLimit));
  }
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT seq, id, tenant, kind, at_ns, body FROM ledger WHERE seq > ?1 AND (?2 = '' OR tenant = ?2) "
              "ORDER BY seq LIMIT ?3");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, filter.after_seq).Bind(2, filter.tenant).Bind(3, int64_t{filter.limit});
  std::vector<LedgerRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    out.push_back({.seq = s.Int(0),
                   .id = s.Text(1),
                   .tenant = s.Text(2),
                   .kind = s.Text(3),
                   .at = FromNs(s.Int(4)),
                   .body = s.Text(5)});
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list ledger");
  return out;
}

absl::Status SqliteStore::PutBudget(const BudgetRecord& budget) {
  if (budget.tenant.empty()) return absl::InvalidArgumentError("store: a budget's tenant must not be empty");
  if (budget.monthly_limit_micros <= 0) return absl::InvalidArgumentError("store: a budget's limit must be > 0");
  std::string percents;
  for (int p : budget.alert_percents) percents += (percents.empty() ? "" : ",") + std::to_string(p);
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              "INSERT OR REPLACE INTO budgets (tenant, user, monthly_limit_micros, alert_percents, alerted_period, "
              "alerted_percent, updated_at_ns) VALUES (?, ?, ?, ?, ?, ?, ?)");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, budget.tenant).Bind(2, budget.user).Bind(3, budget.monthly_limit_micros).Bind(4, percents);
  s.Bind(5, budget.alerted_period).Bind(6, int64_t{budget.alerted_percent}).Bind(7, ToNs(budget.updated_at));
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "put budget");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<BudgetRecord>> SqliteStore::ListBudgets() {
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT tenant, user, monthly_limit_micros, alert_percents, alerted_period, alerted_percent, "
              "updated_at_ns FROM budgets ORDER BY tenant, user");
  RETURN_IF_ERROR(s.status());
  std::vector<BudgetRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    BudgetRecord b{.tenant = s.Text(0),
                   .user = s.Text(1),
                   .monthly_limit_micros = s.Int(2),
                   .alerted_period = s.Text(4),
                   .alerted_percent = static_cast<int>(s.Int(5)),
                   .updated_at = FromNs(s.Int(6))};
    for (absl::string_view p : absl::StrSplit(s.Text(3), ',', absl::SkipEmpty())) {
      int percent = 0;
      if (!absl::SimpleAtoi(p, &percent)) {
        return absl::DataLossError(
            fmt::format("sqlite: budget of {}/{} has malformed alert percents", b.tenant, b.user));
      }
      b.alert_percents.push_back(percent);
    }
    out.push_back(std::move(b));
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list budgets");
  return out;
}

absl::Status SqliteStore::DeleteBudget(const std::string& tenant, const std::string& user) {
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_, "DELETE FROM budgets WHERE tenant = ? AND user = ?");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, tenant).Bind(2, user);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "delete budget");
  if (sqlite3_changes(db_) == 0) {
    return absl::NotFoundError(fmt::format("no budget for {}", user.empty() ? "tenant " + tenant : "user " + user));
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::MarkBudgetAlerted(const std::string& tenant, const std::string& user, TimePoint updated_at,
                                            const std::string& period, int percent) {
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              "UPDATE budgets SET alerted_period = ?, alerted_percent = ? WHERE tenant = ? AND user = ? AND "
              "updated_at_ns = ?");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, period).Bind(2, int64_t{percent}).Bind(3, tenant).Bind(4, user).Bind(5, ToNs(updated_at));
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "mark budget alerted");
  if (sqlite3_changes(db_) == 0) {
    return absl::FailedPreconditionError(fmt::format("store: the budget of {}/{} changed meanwhile", tenant, user));
  }
  return absl::OkStatus();
}

}  // namespace gpugeek::store

namespace gpugeek::store {

absl::Status SqliteStore::InsertReservation(const ReservationRecord& r) {
  if (r.id.empty() || r.tenant.empty()) {
    return absl::InvalidArgumentError("store: a reservation needs an id and a tenant");
  }
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              "INSERT INTO reservations (id, tenant, gpu_model, gpus, price_micros, start_ns, end_ns, created_by, "
              "created_at_ns, nodes, charged_hours, held_gpu_milli_seconds, used_gpu_milli_seconds) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, r.id).Bind(2, r.tenant).Bind(3, r.gpu_model).Bind(4, int64_t{r.gpus}).Bind(5, r.price_micros);
  s.Bind(6, ToNs(r.start)).Bind(7, ToNs(r.end)).Bind(8, r.created_by).Bind(9, ToNs(r.created_at));
  s.Bind(10, fmt::format("{}", fmt::join(r.nodes, ","))).Bind(11, r.charged_hours);
  s.Bind(12, r.held_gpu_milli_seconds).Bind(13, r.used_gpu_milli_seconds);
  if (s.Step() != SQLITE_DONE) {
    if (sqlite3_extended_errcode(db_) == SQLITE_CONSTRAINT_PRIMARYKEY) {
      return absl::AlreadyExistsError(fmt::format("store: reservation '{}' already exists", r.id));
    }
    return SqliteError(db_, "insert reservation");
  }
  return absl::OkStatus();
}

absl::Status SqliteStore::EndReservation(const std::string& id, TimePoint end) {
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_, "UPDATE reservations SET end_ns = MAX(start_ns, MIN(end_ns, ?)) WHERE id = ?");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, ToNs(end)).Bind(2, id);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "end reservation");
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(fmt::format("no reservation '{}'", id));
  return absl::OkStatus();
}

absl::Status SqliteStore::UpdateReservationProgress(const ReservationRecord& r) {
  std::unique_lock<std::mutex> lock = Acquire();
  Statement s(*statements_,
              "UPDATE reservations SET nodes = ?, charged_hours = ?, held_gpu_milli_seconds = ?, "
              "used_gpu_milli_seconds = ? WHERE id = ?");
  RETURN_IF_ERROR(s.status());
  s.Bind(1, fmt::format("{}", fmt::join(r.nodes, ","))).Bind(2, r.charged_hours);
  s.Bind(3, r.held_gpu_milli_seconds).Bind(4, r.used_gpu_milli_seconds).Bind(5, r.id);
  if (s.Step() != SQLITE_DONE) return SqliteError(db_, "update reservation");
  if (sqlite3_changes(db_) == 0) return absl::NotFoundError(fmt::format("no reservation '{}'", r.id));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ReservationRecord>> SqliteStore::ListReservations() {
  Reader r = ReadAccess();
  Statement s(*r.statements,
              "SELECT id, tenant, gpu_model, gpus, price_micros, start_ns, end_ns, created_by, created_at_ns, nodes, "
              "charged_hours, held_gpu_milli_seconds, used_gpu_milli_seconds FROM reservations ORDER BY id");
  RETURN_IF_ERROR(s.status());
  std::vector<ReservationRecord> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    ReservationRecord v{.id = s.Text(0),
                        .tenant = s.Text(1),
                        .gpu_model = s.Text(2),
                        .gpus = static_cast<int32_t>(s.Int(3)),
                        .price_micros = s.Int(4),
                        .start = FromNs(s.Int(5)),
                        .end = FromNs(s.Int(6)),
                        .created_by = s.Text(7),
                        .created_at = FromNs(s.Int(8)),
                        .charged_hours = s.Int(10),
                        .held_gpu_milli_seconds = s.Int(11),
                        .used_gpu_milli_seconds = s.Int(12)};
    for (absl::string_view n : absl::StrSplit(s.Text(9), ',', absl::SkipEmpty())) v.nodes.emplace_back(n);
    out.push_back(std::move(v));
  }
  if (rc != SQLITE_DONE) return SqliteError(r.db, "list reservations");
  return out;
}

}  // namespace gpugeek::store
