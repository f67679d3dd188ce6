#include "store/postgres_store.h"

#include <libpq-fe.h>

#include <poll.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "common/utf8.h"
#include "spdlog/spdlog.h"
#include "store/columns.h"
#include "store/postgres_migrations.h"

namespace gpugeek::store {
namespace {

using columns::kMaxListLimit;

// RETURN_IF_ERROR for a call whose argument is a lambda that uses RETURN_IF_ERROR itself (the same
// variable name in both would shadow).
#define RETURN_IF_CALL_FAILS(expr)                                                   \
  do {                                                                               \
    if (absl::Status call_status_ = (expr); !call_status_.ok()) return call_status_; \
  } while (0)

// The payload under which a server error's SQLSTATE travels with its Status, so Write can tell a
// transaction worth retrying from a failure of the call.
constexpr char kSqlStatePayload[] = "gpugeek.store/postgres-sqlstate";
// https://www.postgresql.org/docs/15/errcodes-appendix.html
constexpr char kUniqueViolation[] = "23505";
constexpr char kForeignKeyViolation[] = "23503";
// A transaction the server aborted only because of a concurrent one: running it again can succeed.
constexpr char kSerializationFailure[] = "40001";
constexpr char kDeadlockDetected[] = "40P01";
// How often Write runs a transaction the server keeps aborting for the above before it gives up.
constexpr int kMaxAttempts = 8;

// The libpq settings a connection gets unless the URL sets them itself: a server that stops answering
// (a network cut, a host gone) fails the call within about half a minute instead of holding its thread
// for the kernel's TCP timeouts (minutes to hours).
constexpr const char* kConnectDefaults[][2] = {
    {"connect_timeout", "5"},      // seconds to connect
    {"keepalives", "1"},           // TCP keepalives on an idle connection:
    {"keepalives_idle", "10"},     //   the first after 10 s of silence,
    {"keepalives_interval", "5"},  //   then every 5 s,
    {"keepalives_count", "3"},     //   the connection dead after 3 unanswered
    {"tcp_user_timeout", "30000"}  // ms that sent data may stay unacknowledged
};

int64_t ToNs(TimePoint t) { return t.time_since_epoch().count(); }
TimePoint FromNs(int64_t ns) { return TimePoint(Duration(ns)); }

std::string Trimmed(const char* message) {
  std::string s = message != nullptr ? message : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// `s` with each %XX decoded (a malformed escape is kept as written).
std::string PercentDecoded(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

}  // namespace

// The passwords a store URL holds (its userinfo's and a ?password= parameter's), as written and decoded:
// libpq's messages about a URL it cannot parse quote the URL or the bad piece of it, so every message
// that may come from libpq goes through Redact before it reaches a Status.
class UrlSecrets {
 public:
  explicit UrlSecrets(std::string_view url) {
    const size_t scheme = url.find("://");
    if (scheme == std::string_view::npos) return;
    std::string_view rest = url.substr(scheme + 3);
    // As libpq reads it: the userinfo ends at the first '@' before any '/'.
    const size_t at = rest.find_first_of("@/");
    if (at != std::string_view::npos && rest[at] == '@') {
      const std::string_view userinfo = rest.substr(0, at);
      if (const size_t colon = userinfo.find(':'); colon != std::string_view::npos) Add(userinfo.substr(colon + 1));
    }
    if (const size_t q = rest.find('?'); q != std::string_view::npos) {
      for (absl::string_view param : absl::StrSplit(absl::string_view(rest.data() + q + 1, rest.size() - q - 1), '&')) {
        const size_t eq = param.find('=');
        if (eq == absl::string_view::npos) continue;
        if (PercentDecoded(std::string_view(param.data(), eq)) == "password") {
          Add(std::string_view(param.data() + eq + 1, param.size() - eq - 1));
        }
      }
    }
  }
  // `message` with every occurrence of a secret replaced by "***".
  std::string Redact(std::string message) const {
    for (const std::string& secret : secrets_) {
      for (size_t at = message.find(secret); at != std::string::npos; at = message.find(secret, at + 3)) {
        message.replace(at, secret.size(), "***");
      }
    }
    return message;
  }

 private:
  void Add(std::string_view secret) {
    if (secret.empty()) return;
    secrets_.emplace_back(secret);
    if (std::string decoded = PercentDecoded(secret); decoded != secret && !decoded.empty()) {
      secrets_.push_back(std::move(decoded));
    }
    // The longest first, so a secret that holds another is replaced whole.
    std::sort(secrets_.begin(), secrets_.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  }
  std::vector<std::string> secrets_;
};

namespace {

// "host:port/database" of a connection (also of one that failed to connect: libpq keeps its options).
std::string ServerName(const PGconn* pg) {
  const char* host = PQhost(pg);
  const char* port = PQport(pg);
  const char* db = PQdb(pg);
  return fmt::format("{}:{}/{}", host ? host : "?", port ? port : "?", db ? db : "?");
}

std::string SqlState(const absl::Status& st) {
  const auto payload = st.GetPayload(kSqlStatePayload);
  return payload ? std::string(*payload) : std::string();
}

bool Retryable(const absl::Status& st) {
  const std::string state = SqlState(st);
  return state == kSerializationFailure || state == kDeadlockDetected;
}

// Whether PostgreSQL's TEXT can hold `v` as it is: it holds neither NUL nor bytes that are not UTF-8
// (the databases gpugeek uses are UTF-8; the server refuses such a value with SQLSTATE 22021, and libpq
// sends a text parameter only up to its first NUL).
bool Storable(std::string_view v) { return v.find('\0') == std::string_view::npos && IsUtf8(v); }

// `v` as PostgreSQL's TEXT can hold it: well-formed UTF-8 kept as it is, NUL and each byte that is not
// part of a well-formed UTF-8 sequence written as \xNN (two lowercase hex digits), as
// QuoteForMessage writes them. Text that was storable reads back unchanged.
std::string PostgresText(std::string_view v) {
  if (Storable(v)) return std::string(v);
  std::string out;
  out.reserve(v.size() + 8);
  for (size_t i = 0; i < v.size();) {
    const auto c = static_cast<unsigned char>(v[i]);
    if (c != 0 && c < 0x80) {
      out.push_back(v[i++]);
      continue;
    }
    const size_t n = c == 0 ? 0 : Utf8SequenceLength(v, i);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    } else {
      out.append(v.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace

// Statement parameters, all sent in text form except BYTEA values (binary): PostgreSQL parses each into
// the type the statement gives its placeholder. Text comes in three kinds, by what PostgreSQL does with
// a value its TEXT cannot hold (Storable) where SQLite would store any bytes:
//   Text  a value stored as it is (an id, a name, JSON): the statement is refused, InvalidArgument,
//         before anything is sent (status());
//   Key   a value looked up (WHERE col = $n): sent as NULL, which equals nothing, so the call finds
//         nothing, as no row can have been stored under it;
//   Prose free-form text (a reason, a description, the audit log's fields): stored as PostgresText
//         writes it, so one malformed value never fails the write of the others.
class PgParams {
 public:
  PgParams& Text(std::string v) {
    if (status_.ok() && !Storable(v)) {
      status_ = absl::InvalidArgumentError(
          fmt::format("value ${} = {} holds a NUL byte or is not UTF-8, which PostgreSQL's text cannot store",
                      size() + 1, QuoteForMessage(v)));
    }
    return Add(std::move(v), 0);
  }
  PgParams& Key(std::string v) { return Storable(v) ? Add(std::move(v), 0) : Null(); }
  PgParams& Prose(std::string_view v) { return Add(PostgresText(v), 0); }
  PgParams& Int(int64_t v) { return Add(std::to_string(v), 0); }
  // Shortest text that reads back as the same double (fmt's default), as PostgreSQL 12+ prints them too.
  // NaN is NULL, as SQLite stores it (sqlite3_bind_double): a NOT NULL column refuses it, a nullable one
  // reads back as none.
  PgParams& Real(double v) { return std::isnan(v) ? Null() : Add(fmt::format("{}", v), 0); }
  PgParams& Bool(bool v) { return Add(v ? "t" : "f", 0); }
  PgParams& Bytes(std::string v) { return Add(std::move(v), 1); }
  PgParams& Null() {
    values_.emplace_back();
    formats_.push_back(0);
    null_.push_back(true);
    return *this;
  }
  PgParams& OptInt(const std::optional<int64_t>& v) { return v ? Int(*v) : Null(); }
  PgParams& OptTime(const std::optional<TimePoint>& t) { return t ? Int(ToNs(*t)) : Null(); }

  int size() const { return static_cast<int>(values_.size()); }
  // InvalidArgument when a Text value cannot be stored (the statement must not run), else OK.
  const absl::Status& status() const { return status_; }
  // Argument arrays for PQexecPrepared, valid while this object is unchanged.
  void Arrays(std::vector<const char*>& values, std::vector<int>& lengths) const {
    values.clear();
    lengths.clear();
    for (size_t i = 0; i < values_.size(); ++i) {
      values.push_back(null_[i] ? nullptr : values_[i].data());
      lengths.push_back(static_cast<int>(values_[i].size()));
    }
  }
  const int* formats() const { return formats_.data(); }

 private:
  PgParams& Add(std::string v, int format) {
    values_.push_back(std::move(v));
    formats_.push_back(format);
    null_.push_back(false);
    return *this;
  }
  std::vector<std::string> values_;
  std::vector<int> formats_;
  std::vector<bool> null_;
  absl::Status status_;
};

// A statement's result, in text form; cleared on scope exit.
class PgResult {
 public:
  explicit PgResult(PGresult* r) : r_(r, &PQclear) {}
  int rows() const { return PQntuples(r_.get()); }
  // Rows an INSERT, UPDATE or DELETE touched.
  int64_t affected() const { return std::strtoll(PQcmdTuples(r_.get()), nullptr, 10); }
  bool IsNull(int row, int col) const { return PQgetisnull(r_.get(), row, col) != 0; }
  const PGresult* get() const { return r_.get(); }
  std::string Text(int row, int col) const {
    return std::string(PQgetvalue(r_.get(), row, col), static_cast<size_t>(PQgetlength(r_.get(), row, col)));
  }
  int64_t Int(int row, int col) const { return std::strtoll(PQgetvalue(r_.get(), row, col), nullptr, 10); }
  double Double(int row, int col) const { return std::strtod(PQgetvalue(r_.get(), row, col), nullptr); }
  bool Bool(int row, int col) const { return PQgetvalue(r_.get(), row, col)[0] == 't'; }
  // A BYTEA column, printed by the server in its hex form.
  std::string Bytes(int row, int col) const {
    size_t n = 0;
    unsigned char* raw = PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r_.get(), row, col)), &n);
    if (raw == nullptr) return std::string();
    std::string out(reinterpret_cast<const char*>(raw), n);
    PQfreemem(raw);
    return out;
  }

 private:
  std::unique_ptr<PGresult, decltype(&PQclear)> r_;
};

// One libpq connection and the statements prepared on it (by SQL text). Used by one thread at a time
// (the pool hands it out), so it needs no lock of its own.
class PgConnection {
 public:
  PgConnection(PGconn* pg, std::string server, UrlSecrets secrets)
      : pg_(pg), server_(std::move(server)), secrets_(std::move(secrets)) {}
  ~PgConnection() { PQfinish(pg_); }
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  // Connects `url`, with kConnectDefaults for the settings it does not make itself: InvalidArgument when
  // libpq cannot parse it, Unavailable naming the server when it cannot be reached or refuses the login.
  // No message quotes the URL's password.
  // `application_name` ("" = the URL's or libpq's) names the session in pg_stat_activity over the URL's.
  // `setup` (may be empty): statements run on each new session (SET ...), also after a reconnect.
  static absl::StatusOr<std::unique_ptr<PgConnection>> Connect(const std::string& url,
                                                               const std::string& application_name = "",
                                                               const std::string& setup = "") {
    UrlSecrets secrets(url);
    char* parse_error = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(url.c_str(), &parse_error);
    if (parsed == nullptr) {
      std::string msg = parse_error != nullptr ? Trimmed(parse_error) : "out of memory";
      if (parse_error != nullptr) PQfreemem(parse_error);
      return absl::InvalidArgumentError(fmt::format("postgres: malformed store URL: {}", secrets.Redact(msg)));
    }
    PQconninfoFree(parsed);
    // The defaults come before the URL (dbname, expanded): a setting of the URL's own replaces them.
    std::vector<const char*> keywords;
    std::vector<const char*> values;
    for (const auto& [keyword, value] : kConnectDefaults) {
      keywords.push_back(keyword);
      values.push_back(value);
    }
    keywords.push_back("dbname");
    values.push_back(url.c_str());
    if (!application_name.empty()) {  // after the URL: replaces its own
      keywords.push_back("application_name");
      values.push_back(application_name.c_str());
    }
    keywords.push_back(nullptr);
    values.push_back(nullptr);
    PGconn* pg = PQconnectdbParams(keywords.data(), values.data(), /*expand_dbname=*/1);
    if (pg == nullptr) return absl::UnavailableError("postgres: out of memory connecting");
    std::string server = secrets.Redact(ServerName(pg));
    if (PQstatus(pg) != CONNECTION_OK) {
      std::string msg = secrets.Redact(Trimmed(PQerrorMessage(pg)));
      PQfinish(pg);
      return absl::UnavailableError(fmt::format("postgres: cannot connect to {}: {}", server, msg));
    }
    // Notices (e.g. "relation already exists, skipping") are not errors; keep them off stderr.
    PQsetNoticeProcessor(
        pg, [](void*, const char*) {}, nullptr);
    auto c = std::make_unique<PgConnection>(pg, std::move(server), std::move(secrets));
    c->setup_ = setup;
    RETURN_IF_ERROR(c->Setup());
    return c;
  }

  // Runs the session's setup statements (Connect's `setup`).
  absl::Status Setup() {
    if (setup_.empty()) return absl::OkStatus();
    return Run(setup_.c_str());
  }

  // The connection's libpq settings, as PQconninfo reports them, but for the password.
  std::map<std::string, std::string> Settings() const {
    std::map<std::string, std::string> out;
    PQconninfoOption* options = PQconninfo(pg_);
    if (options == nullptr) return out;
    for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
      if (o->val != nullptr && std::string_view(o->keyword) != "password") out[o->keyword] = o->val;
    }
    PQconninfoFree(options);
    return out;
  }

  // Reads, without waiting, what the server sent this idle connection: nothing but notices, or the
  // reason it is closing the connection (a restart: "terminating connection due to administrator
  // command") followed by the close. After a close PQstatus is CONNECTION_BAD, so the pool reconnects
  // before the call sends its first statement.
  void Probe() {
    for (int i = 0; i < 8 && PQstatus(pg_) == CONNECTION_OK && !in_transaction(); ++i) {
      pollfd p{.fd = PQsocket(pg_), .events = POLLIN, .revents = 0};
      if (p.fd < 0 || poll(&p, 1, 0) <= 0) return;  // nothing arrived
      if (PQconsumeInput(pg_) == 0) return;         // the server closed it: CONNECTION_BAD
      (void)PQisBusy(pg_);  // parses it: an error on an idle connection goes to the notice processor
    }
  }

  // Reconnects a connection found lost (the server restarted, a network cut): its prepared statements
  // went with the session. Unavailable naming the server when reconnecting fails.
  absl::Status EnsureConnected() {
    if (PQstatus(pg_) == CONNECTION_OK) return absl::OkStatus();
    return Reconnect();
  }
  // Reconnects even a connection that libpq still takes for good (a statement on it just failed for a
  // connection error).
  absl::Status Reconnect() {
    prepared_.clear();
    abort_cause_.clear();
    PQreset(pg_);
    if (PQstatus(pg_) == CONNECTION_OK) return Setup();
    return absl::UnavailableError(fmt::format("postgres: lost the connection to {} and cannot reconnect: {}", server_,
                                              secrets_.Redact(Trimmed(PQerrorMessage(pg_)))));
  }

  bool in_transaction() const { return PQtransactionStatus(pg_) != PQTRANS_IDLE; }
  // A transaction is open and a statement of it failed: until a ROLLBACK (TO SAVEPOINT) the server
  // refuses every statement, and answers COMMIT with ROLLBACK.
  bool transaction_failed() const { return PQtransactionStatus(pg_) == PQTRANS_INERROR; }
  // The error that failed the open transaction ("" when none did).
  const std::string& abort_cause() const { return abort_cause_; }

  // Runs statements that take no values (BEGIN, SAVEPOINT, LOCK TABLE, a migration's DDL).
  absl::Status Run(const char* sql) {
    PgResult r(PQexec(pg_, sql));
    const ExecStatusType st = PQresultStatus(r.get());
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
      Done();
      return absl::OkStatus();
    }
    return Error(r.get(), std::string(sql).substr(0, 60));
  }

  // COMMIT, successful only when the server answers it with COMMIT: for a transaction a statement of
  // which had failed, PostgreSQL answers ROLLBACK, without an error.
  absl::Status Commit() {
    const std::string cause = abort_cause_;
    PgResult r(PQexec(pg_, "COMMIT"));
    const ExecStatusType st = PQresultStatus(r.get());
    if (st != PGRES_COMMAND_OK) return Error(r.get(), "COMMIT");
    Done();
    if (const char* tag = PQcmdStatus(const_cast<PGresult*>(r.get()));
        tag == nullptr || std::string_view(tag) != "COMMIT") {
      return absl::InternalError(fmt::format(
          "postgres: the server rolled the transaction back instead of committing it ({}); nothing of it is stored",
          cause.empty() ? fmt::format("it answered COMMIT with {}", tag != nullptr ? tag : "nothing")
                        : "a statement of it had failed: " + cause));
    }
    if (in_transaction()) return absl::InternalError("postgres: commit: the transaction is still open");
    return absl::OkStatus();
  }

  // Runs `sql` (placeholders $1, $2, ...) with `params`, preparing it on this connection the first time.
  // `what` names the operation in errors. InvalidArgument, sending nothing, for a value `params`
  // refused (PgParams::Text).
  absl::StatusOr<PgResult> Exec(const std::string& sql, const PgParams& params, std::string_view what) {
    if (!params.status().ok()) {
      return absl::InvalidArgumentError(fmt::format("store: {}: {}", what, std::string(params.status().message())));
    }
    auto it = prepared_.find(sql);
    if (it == prepared_.end()) {
      std::string name = fmt::format("gpugeek_{}", prepared_.size() + 1);
      PgResult prep(PQprepare(pg_, name.c_str(), sql.c_str(), 0, nullptr));
      if (PQresultStatus(prep.get()) != PGRES_COMMAND_OK) return Error(prep.get(), fmt::format("prepare {}", what));
      it = prepared_.emplace(sql, std::move(name)).first;
    }
    std::vector<const char*> values;
    std::vector<int> lengths;
    params.Arrays(values, lengths);
    PgResult r(PQexecPrepared(pg_, it->second.c_str(), params.size(), values.data(), lengths.data(), params.formats(),
                              /*resultFormat=*/0));
    const ExecStatusType st = PQresultStatus(r.get());
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
      Done();
      return r;
    }
    return Error(r.get(), what);
  }

  // The Status of a failed statement: Unavailable naming the server when the connection is gone (or the
  // server is shutting down), else Internal with the server's message and the SQLSTATE as payload.
  absl::Status Error(const PGresult* r, std::string_view what) {
    const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    const std::string sqlstate = state != nullptr ? state : "";
    std::string msg = secrets_.Redact(
        Trimmed(r != nullptr && PQresultErrorMessage(r)[0] != '\0' ? PQresultErrorMessage(r) : PQerrorMessage(pg_)));
    if (transaction_failed() && abort_cause_.empty()) abort_cause_ = fmt::format("{}: {}", what, msg);
    // Class 08: connection exceptions; 57P01..57P03: the server is shutting down or starting.
    if (PQstatus(pg_) != CONNECTION_OK || sqlstate.starts_with("08") || sqlstate.starts_with("57P")) {
      return absl::UnavailableError(fmt::format("postgres: lost the connection to {} ({}): {}", server_, what, msg));
    }
    absl::Status st = absl::InternalError(fmt::format("postgres: {}: {}", what, msg));
    st.SetPayload(kSqlStatePayload, absl::Cord(sqlstate));
    return st;
  }

  const std::string& server() const { return server_; }

 private:
  // After a statement succeeded: a transaction no longer failed (rolled back to a savepoint, or ended)
  // has no abort cause.
  void Done() {
    if (!transaction_failed()) abort_cause_.clear();
  }

  PGconn* const pg_;
  const std::string server_;
  const UrlSecrets secrets_;
  std::unordered_map<std::string, std::string> prepared_;  // SQL text -> statement name
  std::string abort_cause_;                                // see abort_cause()
  std::string setup_;                                      // Connect's `setup`
};

// A pooled connection for one call, given back on scope exit; the write batch's connection is only lent
// (it stays the batch's).
class PostgresStore::Lease {
 public:
  Lease(PostgresStore* store, PgConnection* c, bool pooled) : store_(store), c_(c), pooled_(pooled) {}
  Lease(Lease&& o) noexcept : store_(o.store_), c_(std::exchange(o.c_, nullptr)), pooled_(o.pooled_) {}
  Lease& operator=(Lease&&) = delete;
  ~Lease() {
    if (c_ != nullptr && pooled_) store_->Give(c_);
  }
  PgConnection& operator*() const { return *c_; }
  PgConnection* operator->() const { return c_; }
  bool pooled() const { return pooled_; }
  // Keeps the connection out of the pool (it becomes the write batch's).
  PgConnection* Release() { return std::exchange(c_, nullptr); }

 private:
  PostgresStore* store_;
  PgConnection* c_;
  bool pooled_;
};

PostgresStore::PostgresStore(Clock& clock, Sealer* sealer) : clock_(clock), sealer_(sealer) {}

PostgresStore::~PostgresStore() {
  // Closing a connection rolls back whatever it has open (a write batch never committed).
  batch_conn_ = nullptr;
  idle_.clear();
  connections_.clear();
}

namespace {
// SET statements for PostgresStoreOptions' session timeouts ("" = none).
std::string SessionSetup(const PostgresStoreOptions& o) {
  std::string sql;
  auto ms = [](Duration d) { return std::chrono::duration_cast<std::chrono::milliseconds>(d).count(); };
  if (o.lock_timeout > Duration::zero()) sql += fmt::format("SET lock_timeout = {};", ms(o.lock_timeout));
  if (o.idle_in_transaction_timeout > Duration::zero()) {
    sql += fmt::format("SET idle_in_transaction_session_timeout = {};", ms(o.idle_in_transaction_timeout));
  }
  return sql;
}
}  // namespace

absl::StatusOr<std::unique_ptr<PostgresStore>> PostgresStore::Open(const PostgresStoreOptions& options) {
  if (!options.url.starts_with("postgres://") && !options.url.starts_with("postgresql://")) {
    return absl::InvalidArgumentError("postgres: the store URL must start with postgres:// or postgresql://");
  }
  if (options.connections < 1 || options.connections > 64) {
    return absl::InvalidArgumentError(
        fmt::format("postgres: connections = {} must be between 1 and 64", options.connections));
  }
  auto store = std::unique_ptr<PostgresStore>(
      new PostgresStore(options.clock != nullptr ? *options.clock : RealClock(), options.sealer));
  for (int i = 0; i < options.connections; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> c,
                     PgConnection::Connect(options.url, options.application_name, SessionSetup(options)));
    store->idle_.push_back(c.get());
    store->connections_.push_back(std::move(c));
  }
  store->server_ = store->connections_.front()->server();
  store->connection_settings_ = store->connections_.front()->Settings();
  RETURN_IF_ERROR(store->Migrate());
  return store;
}

bool PostgresStore::InBatch() const {
  // Only the owner thread ever reads batch_conn_, and it set it itself.
  return batch_owner_.load() == std::this_thread::get_id() && batch_conn_ != nullptr;
}

absl::StatusOr<PostgresStore::Lease> PostgresStore::Take() {
  if (InBatch()) return Lease(this, batch_conn_, /*pooled=*/false);
  PgConnection* c = nullptr;
  {
    std::unique_lock<std::mutex> lock(pool_mu_);
    pool_returned_.wait(lock, [this] { return !idle_.empty(); });
    c = idle_.back();
    idle_.pop_back();
  }
  Lease lease(this, c, /*pooled=*/true);
  // Network I/O, outside the pool's lock: a connection the server closed since its last use (a restart)
  // is replaced before the call sends anything on it.
  c->Probe();
  RETURN_IF_ERROR(c->EnsureConnected());
  return lease;
}

void PostgresStore::Give(PgConnection* c) {
  // A call that failed mid-transaction (its connection lost, say) must not leave it open for the next.
  if (c->in_transaction()) (void)c->Run("ROLLBACK");
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    idle_.push_back(c);
  }
  pool_returned_.notify_one();
}

absl::Status PostgresStore::BatchCall(PgConnection& c, const std::function<absl::Status(PgConnection&)>& body) {
  for (int attempt = 1;; ++attempt) {
    RETURN_IF_ERROR(c.Run("SAVEPOINT gpugeek_call"));
    absl::Status st = body(c);
    if (st.ok() && c.transaction_failed()) {
      // The body went on past a failed statement: nothing of it may stand.
      st = absl::InternalError(fmt::format("postgres: a statement of the call failed: {}", c.abort_cause()));
    }
    if (st.ok()) st = c.Run("RELEASE SAVEPOINT gpugeek_call");
    if (st.ok()) return st;
    absl::Status undone = c.Run("ROLLBACK TO SAVEPOINT gpugeek_call");
    if (undone.ok()) undone = c.Run("RELEASE SAVEPOINT gpugeek_call");
    // Where the rollback failed too (the connection is lost) the batch is lost: its commit says so.
    if (!undone.ok() || !Retryable(st) || attempt == kMaxAttempts) return st;
  }
}

absl::Status PostgresStore::Write(const std::function<absl::Status(PgConnection&)>& body, bool one_statement) {
  if (InBatch()) return BatchCall(*batch_conn_, body);
  {
    // Another thread's batch: wait for its end, as SqliteStore's writers do (Store::BeginWriteBatch);
    // from here until this write ends, a batch waits for it to begin.
    std::unique_lock<std::mutex> lock(batch_mu_);
    batch_ended_.wait(lock, [this] { return batch_owner_.load() == std::thread::id(); });
    ++writers_;
  }
  struct WriterDone {
    PostgresStore* store;
    ~WriterDone() {
      {
        std::lock_guard<std::mutex> lock(store->batch_mu_);
        --store->writers_;
      }
      store->batch_ended_.notify_all();
    }
  } done{this};
  ASSIGN_OR_RETURN(Lease c, Take());
  bool reconnected = false;
  for (int attempt = 1;; ++attempt) {
    absl::Status st;
    bool sent = true;  // whether a statement of the call may have run on the server
    if (one_statement && fence_token_.load() == 0) {
      st = body(*c);  // autocommit: one statement is atomic on its own
    } else {
      st = c->Run("BEGIN");
      sent = st.ok();
      if (st.ok()) st = CheckFence(*c);
      if (st.ok()) st = body(*c);
      if (st.ok()) st = c->Commit();
      if (!st.ok() && c->in_transaction()) (void)c->Run("ROLLBACK");
    }
    if (!sent && st.code() == absl::StatusCode::kUnavailable && !reconnected) {
      // The connection broke before the call's first statement (BEGIN) ran: run the call once more on a
      // new one (after a server restart every pooled connection is found broken this way once).
      reconnected = true;
      RETURN_IF_ERROR(c->Reconnect());
      continue;
    }
    if (st.ok() || !Retryable(st) || attempt == kMaxAttempts) return st;
  }
}

absl::Status PostgresStore::Read(const std::function<absl::Status(PgConnection&)>& body) {
  // Inside the caller's batch a read is a savepoint too: a read that fails (PostgreSQL fails the whole
  // transaction at its first failed statement) must not take the batch's writes with it.
  if (InBatch()) return BatchCall(*batch_conn_, body);
  ASSIGN_OR_RETURN(Lease c, Take());
  absl::Status st = body(*c);
  // A connection lost since its last use (the server restarted) fails its first statement: reconnect
  // and read again once (a read changes nothing).
  if (st.code() == absl::StatusCode::kUnavailable) {
    RETURN_IF_ERROR(c->Reconnect());
    st = body(*c);
  }
  return st;
}

absl::Status PostgresStore::Migrate() {
  ASSIGN_OR_RETURN(Lease c, Take());
  RETURN_IF_ERROR(c->Run("BEGIN"));
  // Two servers opening one new database at once: the second waits, then finds the schema migrated.
  // The key is per schema, so stores in different schemas of one database migrate independently.
  RETURN_IF_ERROR(c->Exec("SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.gpugeek_schema_migrations'))",
                          PgParams(), "lock the schema")
                      .status());
  RETURN_IF_ERROR(
      c->Run("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at_ns BIGINT NOT "
             "NULL)"));
  ASSIGN_OR_RETURN(PgResult current, c->Exec("SELECT COALESCE(MAX(version), 0) FROM schema_migrations", PgParams(),
                                             "read schema version"));
  int version = static_cast<int>(current.Int(0, 0));
  const int known = static_cast<int>(std::size(kPostgresMigrations));
  if (version > known) {
    return absl::FailedPreconditionError(fmt::format(
        "postgres: database schema version {} is newer than this gpugeek knows ({}); upgrade gpugeek", version, known));
  }
  for (; version < known; ++version) {
    RETURN_IF_ERROR(c->Run(kPostgresMigrations[version]));
    RETURN_IF_ERROR(c->Exec("INSERT INTO schema_migrations (version, applied_at_ns) VALUES ($1, $2)",
                            PgParams().Int(version + 1).Int(ToNs(clock_.Now())), "record migration")
                        .status());
  }
  RETURN_IF_ERROR(c->Commit());
  schema_version_ = version;
  return absl::OkStatus();
}

namespace {
int64_t Micros(Duration d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); }
}  // namespace

absl::StatusOr<PostgresStore::Leadership> PostgresStore::Leader() {
  Leadership l;
  RETURN_IF_ERROR(Read([&](PgConnection& c) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult r,
                     c.Exec("SELECT holder, api_url, agent_url, token, CASE WHEN expires_at > clock_timestamp() THEN "
                            "(EXTRACT(EPOCH FROM expires_at - clock_timestamp()) * 1000000)::BIGINT ELSE 0 END "
                            "FROM leader_lease WHERE id = 1",
                            PgParams(), "read the leader lease"));
    if (r.rows() != 1) return absl::DataLossError("postgres: the leader_lease row is missing");
    l = Leadership{.holder = r.Text(0, 0),
                   .api_url = r.Text(0, 1),
                   .agent_url = r.Text(0, 2),
                   .token = r.Int(0, 3),
                   .remaining = std::chrono::microseconds(r.Int(0, 4))};
    return absl::OkStatus();
  }));
  return l;
}

absl::StatusOr<std::optional<int64_t>> PostgresStore::TryAcquireLeadership(const std::string& holder,
                                                                           const std::string& api_url,
                                                                           const std::string& agent_url, Duration ttl) {
  if (holder.empty()) return absl::InvalidArgumentError("leadership: the holder id is empty");
  if (ttl < std::chrono::milliseconds(100)) {
    return absl::InvalidArgumentError("leadership: the lease must last at least 100 ms");
  }
  ASSIGN_OR_RETURN(Lease c, Take());
  std::optional<int64_t> token;
  absl::Status st = c->Run("BEGIN");
  if (st.code() == absl::StatusCode::kUnavailable) {  // lost since its last use: nothing ran
    st = c->Reconnect();
    if (st.ok()) st = c->Run("BEGIN");
  }
  if (st.ok()) {
    // FOR UPDATE waits for the writes fenced by the current token (FOR KEY SHARE) to end; those that
    // come later read the new token.
    st = c->Run("SET LOCAL lock_timeout = '1s'");
    absl::StatusOr<PgResult> r =
        st.ok() ? c->Exec("SELECT holder, expires_at > clock_timestamp() FROM leader_lease WHERE id = 1 FOR UPDATE",
                          PgParams(), "lock the leader lease")
                : absl::StatusOr<PgResult>(st);
    st = r.status();
    if (st.ok() && r->rows() != 1) st = absl::DataLossError("postgres: the leader_lease row is missing");
    if (st.ok() && (r->Text(0, 0) == holder || !r->Bool(0, 1))) {
      absl::StatusOr<PgResult> u = c->Exec(
          "UPDATE leader_lease SET holder = $1, api_url = $2, agent_url = $3, token = token + 1, "
          "expires_at = clock_timestamp() + $4 * INTERVAL '1 microsecond' WHERE id = 1 RETURNING token",
          PgParams().Text(holder).Text(api_url).Text(agent_url).Int(Micros(ttl)), "take the leader lease");
      st = u.status();
      if (st.ok()) token = u->Int(0, 0);
    }
  }
  if (st.ok()) st = c->Commit();
  if (!st.ok() && c->in_transaction()) (void)c->Run("ROLLBACK");
  if (SqlState(st) == "55P03") {
    // A write of the holder holds the lease row past the lock timeout: a leader frozen (SIGSTOP, a
    // hung host) inside a transaction, which PostgreSQL would keep open as long as its TCP connection
    // lives. Once its lease has expired its sessions are ended (rolling that write back), so the next
    // try takes the lease; a live holder is left alone.
    absl::StatusOr<PgResult> ended = c->Exec(
        "SELECT count(pg_terminate_backend(a.pid)) FROM pg_stat_activity a, leader_lease l WHERE l.id = 1 AND "
        "l.expires_at <= clock_timestamp() AND l.holder <> $1 AND a.application_name = left('gpugeek ' || l.holder, "
        "63) AND a.pid <> pg_backend_pid()",
        PgParams().Text(holder), "end the expired leader's sessions");
    if (!ended.ok()) {
      spdlog::warn(
          "leadership: ending the expired leader's sessions failed (the servers must share a database role, "
          "or have pg_signal_backend): {}",
          std::string(ended.status().message()));
    } else {
      spdlog::warn("leadership: the expired leader held the lease row past 1 s; ended {} of its sessions",
                   ended->Int(0, 0));
    }
    return std::optional<int64_t>();
  }
  if (!st.ok()) return st;
  return token;
}

absl::Status PostgresStore::RenewLeadership(int64_t token, Duration ttl) {
  int64_t renewed = 0;
  // A plain UPDATE takes FOR NO KEY UPDATE, which fenced writes (FOR KEY SHARE) do not wait for.
  RETURN_IF_ERROR(Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(
            PgResult r, c.Exec("UPDATE leader_lease SET expires_at = clock_timestamp() + $2 * INTERVAL '1 microsecond' "
                               "WHERE id = 1 AND token = $1 AND expires_at > clock_timestamp()",
                               PgParams().Int(token).Int(Micros(ttl)), "renew the leader lease"));
        renewed = r.affected();
        return absl::OkStatus();
      },
      /*one_statement=*/true));
  if (renewed != 1) {
    return absl::FailedPreconditionError(
        fmt::format("the lease taken under token {} expired or was taken over", token));
  }
  return absl::OkStatus();
}

absl::Status PostgresStore::ReleaseLeadership(int64_t token) {
  return Write(
      [&](PgConnection& c) -> absl::Status {
        return c
            .Exec("UPDATE leader_lease SET expires_at = clock_timestamp() WHERE id = 1 AND token = $1",
                  PgParams().Int(token), "release the leader lease")
            .status();
      },
      /*one_statement=*/true);
}

std::string PostgresStore::LeaderApplicationName(const std::string& holder) {
  return ("gpugeek " + holder).substr(0, 63);  // PostgreSQL keeps 63 bytes (NAMEDATALEN - 1)
}

void PostgresStore::FenceWrites(int64_t token, std::function<void()> on_fenced) {
  on_fenced_ = std::move(on_fenced);
  fence_token_.store(token);
}

absl::Status PostgresStore::CheckFence(PgConnection& c) {
  const int64_t token = fence_token_.load();
  if (token == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT token FROM leader_lease WHERE id = 1 FOR KEY SHARE", PgParams(),
                                      "check the leader lease"));
  const int64_t now = r.rows() == 1 ? r.Int(0, 0) : 0;
  if (now == token) return absl::OkStatus();
  if (on_fenced_) on_fenced_();
  return absl::FailedPreconditionError(fmt::format(
      "store: fenced: this server's leadership (token {}) was taken over (token {}); write refused", token, now));
}

absl::Status PostgresStore::BeginWriteBatch() {
  const std::thread::id me = std::this_thread::get_id();
  {
    std::unique_lock<std::mutex> lock(batch_mu_);
    batch_ended_.wait(lock, [&] {
      const std::thread::id owner = batch_owner_.load();
      return owner == std::thread::id() || owner == me;
    });
    if (batch_owner_.load() == me) {
      return absl::FailedPreconditionError("store: a write batch is open already; commit it first");
    }
    batch_owner_.store(me);  // other threads' writes wait from here on
    // ... and those already running end first, as SqliteStore's writer lock orders them: a batch
    // overlapping them would wait on their row locks, or deadlock with them.
    batch_ended_.wait(lock, [this] { return writers_ == 0; });
  }
  absl::StatusOr<Lease> c = Take();
  absl::Status st = c.status();
  if (st.ok()) {
    st = (*c)->Run("BEGIN");
    // A connection found broken at BEGIN: once more on a new one (nothing ran).
    if (st.code() == absl::StatusCode::kUnavailable) {
      st = (*c)->Reconnect();
      if (st.ok()) st = (*c)->Run("BEGIN");
    }
  }
  if (st.ok()) {
    st = CheckFence(**c);
    if (!st.ok()) (void)(*c)->Run("ROLLBACK");
  }
  if (!st.ok()) {
    {
      std::lock_guard<std::mutex> lock(batch_mu_);
      batch_owner_.store(std::thread::id());
    }
    batch_ended_.notify_all();
    return st;
  }
  batch_conn_ = c->Release();
  return absl::OkStatus();
}

absl::Status PostgresStore::CommitWriteBatch() { return EndWriteBatch(/*commit=*/true); }

absl::Status PostgresStore::AbortWriteBatch() { return EndWriteBatch(/*commit=*/false); }

absl::Status PostgresStore::EndWriteBatch(bool commit) {
  if (batch_owner_.load() != std::this_thread::get_id() || batch_conn_ == nullptr) {
    return absl::FailedPreconditionError("store: no write batch is open on this thread");
  }
  PgConnection* c = std::exchange(batch_conn_, nullptr);
  absl::Status st = commit ? c->Commit() : c->Run("ROLLBACK");
  Give(c);  // rolls back what a failed COMMIT left open: nothing of the batch stays
  {
    std::lock_guard<std::mutex> lock(batch_mu_);
    batch_owner_.store(std::thread::id());
  }
  batch_ended_.notify_all();
  return st;
}

absl::StatusOr<std::string> PostgresStore::SealSpec(const JobRecord& job) const {
  if (sealer_ == nullptr) return job.spec_yaml;
  return sealer_->Seal(columns::SealTenant(job.tenant), job.spec_yaml, columns::SpecAad(job.id));
}

absl::Status PostgresStore::OpenSealed(const char* kind, const std::string& id, const std::string& tenant,
                                       const std::string& aad, std::string& spec_yaml, bool sealed) const {
  if (!sealed) return absl::OkStatus();
  if (sealer_ == nullptr) {
    return absl::DataLossError(
        fmt::format("postgres: {} {}'s spec is sealed and this store was opened without a key", kind, id));
  }
  absl::StatusOr<std::string> spec = sealer_->Open(columns::SealTenant(tenant), spec_yaml, aad);
  if (!spec.ok()) {
    return absl::DataLossError(
        fmt::format("postgres: {} {}'s spec: {}", kind, id, std::string(spec.status().message())));
  }
  spec_yaml = std::move(*spec);
  return absl::OkStatus();
}

absl::Status PostgresStore::OpenSpec(JobRecord& job, bool sealed) const {
  return OpenSealed("job", job.id, job.tenant, columns::SpecAad(job.id), job.spec_yaml, sealed);
}

absl::StatusOr<std::string> PostgresStore::SealExperiment(const ExperimentRecord& e) const {
  if (sealer_ == nullptr) return e.spec_yaml;
  return sealer_->Seal(columns::SealTenant(e.tenant), e.spec_yaml, columns::ExperimentAad(e.id));
}

absl::Status PostgresStore::OpenExperiment(ExperimentRecord& e, bool sealed) const {
  return OpenSealed("experiment", e.id, e.tenant, columns::ExperimentAad(e.id), e.spec_yaml, sealed);
}

namespace {

constexpr char kJobColumns[] =
    "id, tenant, name, spec_yaml, state, priority, plan_json, allocation_json, epoch, restarts, exit_code, reason, "
    "created_at_ns, updated_at_ns, version, retries, checkpoint_step, checkpoint_at_ns, usage_json, "
    "checkpoint_region, platform_env, submitted_by, spec_sealed";

// A job's values $1..$23 in kJobColumns order; spec_yaml is `spec` (sealed when `sealed`).
PgParams JobParams(const JobRecord& j, const std::string& spec, bool sealed) {
  PgParams p;
  p.Text(j.id).Text(j.tenant).Text(j.name).Bytes(spec).Text(std::string(api::JobStateName(j.state)));
  p.Int(j.priority).Text(j.plan_json).Text(j.allocation_json).Int(j.epoch).Int(j.restarts);
  p.OptInt(j.exit_code ? std::optional<int64_t>(*j.exit_code) : std::nullopt);
  p.Prose(j.reason).Int(ToNs(j.created_at)).Int(ToNs(j.updated_at)).Int(j.version);
  p.Text(columns::FormatRetries(j.retries)).OptInt(j.checkpoint_step).Int(ToNs(j.checkpoint_at));
  p.Text(j.usage_json).Text(j.checkpoint_region).Text(columns::FormatPlatformEnv(j.platform_env));
  p.Text(j.submitted_by).Bool(sealed);
  return p;
}

absl::StatusOr<JobRecord> ReadJob(const PgResult& r, int row, bool* sealed) {
  JobRecord j;
  j.id = r.Text(row, 0);
  j.tenant = r.Text(row, 1);
  j.name = r.Text(row, 2);
  j.spec_yaml = r.Bytes(row, 3);
  auto state = api::ParseJobState(r.Text(row, 4));
  // Only this file writes the column, always from api::JobStateName.
  if (!state) {
    return absl::DataLossError(fmt::format("postgres: job {} has unknown state '{}'", j.id, r.Text(row, 4)));
  }
  j.state = *state;
  j.priority = static_cast<int>(r.Int(row, 5));
  j.plan_json = r.Text(row, 6);
  j.allocation_json = r.Text(row, 7);
  j.epoch = r.Int(row, 8);
  j.restarts = static_cast<int>(r.Int(row, 9));
  if (!r.IsNull(row, 10)) j.exit_code = static_cast<int>(r.Int(row, 10));
  j.reason = r.Text(row, 11);
  j.created_at = FromNs(r.Int(row, 12));
  j.updated_at = FromNs(r.Int(row, 13));
  j.version = r.Int(row, 14);
  ASSIGN_OR_RETURN(j.retries, columns::ParseRetries("postgres", j.id, r.Text(row, 15)));
  if (!r.IsNull(row, 16)) j.checkpoint_step = r.Int(row, 16);
  j.checkpoint_at = FromNs(r.Int(row, 17));
  j.usage_json = r.Text(row, 18);
  j.checkpoint_region = r.Text(row, 19);
  ASSIGN_OR_RETURN(j.platform_env, columns::ParsePlatformEnv("postgres", j.id, r.Text(row, 20)));
  j.submitted_by = r.Text(row, 21);
  *sealed = r.Bool(row, 22);
  return j;
}

// Appends a numbered log's row after locking the log's table against other writers until the commit
// (readers go on): numbers are drawn in commit order, so a reader paging by seq misses nothing.
absl::Status LockLog(PgConnection& c, const char* lock_sql) { return c.Run(lock_sql); }

absl::Status InsertEvent(PgConnection& c, const std::string& job_id, TimePoint time, api::JobState from,
                         api::JobState to, const std::string& reason) {
  RETURN_IF_ERROR(LockLog(c, "LOCK TABLE events IN EXCLUSIVE MODE"));
  return c
      .Exec("INSERT INTO events (job_id, time_ns, from_state, to_state, reason) VALUES ($1, $2, $3, $4, $5)",
            PgParams()
                .Text(job_id)
                .Int(ToNs(time))
                .Text(std::string(api::JobStateName(from)))
                .Text(std::string(api::JobStateName(to)))
                .Prose(reason),
            "insert event")
      .status();
}

absl::Status CheckLimit(int limit) {
  if (limit < 1 || limit > kMaxListLimit) {
    return absl::InvalidArgumentError(fmt::format("store: limit = {} must be between 1 and {}", limit, kMaxListLimit));
  }
  return absl::OkStatus();
}

// The outcome of an INSERT that failed on a constraint: AlreadyExists for a taken key, NotFound for a
// missing parent row (`parent` names it), else `st` itself.
absl::Status InsertOutcome(const absl::Status& st, std::string_view what, std::string_view key,
                           std::string_view parent) {
  const std::string state = SqlState(st);
  if (state == kUniqueViolation)
    return absl::AlreadyExistsError(fmt::format("store: {} '{}' already exists", what, key));
  if (state == kForeignKeyViolation) {
    return absl::NotFoundError(fmt::format("store: {} '{}' names {} that does not exist", what, key, parent));
  }
  return st;
}

}  // namespace

absl::StatusOr<JobRecord> PostgresStore::InsertJob(PgConnection& c, const JobRecord& job) {
  if (job.id.empty()) return absl::InvalidArgumentError("store: job id must not be empty");
  JobRecord stored = job;
  stored.version = 1;
  ASSIGN_OR_RETURN(const std::string spec, SealSpec(stored));
  ASSIGN_OR_RETURN(PgResult r, c.Exec(fmt::format("INSERT INTO jobs ({}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
                                                  "$10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, "
                                                  "$23) ON CONFLICT (id) DO NOTHING",
                                                  kJobColumns),
                                      JobParams(stored, spec, sealer_ != nullptr), "insert job"));
  if (r.affected() == 0) return absl::AlreadyExistsError(fmt::format("store: job '{}' already exists", job.id));
  RETURN_IF_ERROR(InsertEvent(c, stored.id, stored.created_at, stored.state, stored.state,
                              stored.reason.empty() ? "submitted" : stored.reason));
  return stored;
}

absl::StatusOr<JobRecord> PostgresStore::CreateJob(const JobRecord& job) {
  ASSIGN_OR_RETURN(auto results, CreateJobs({job}));
  return std::move(results[0]);
}

absl::StatusOr<std::vector<absl::StatusOr<JobRecord>>> PostgresStore::CreateJobs(const std::vector<JobRecord>& jobs) {
  std::vector<absl::StatusOr<JobRecord>> results;
  RETURN_IF_CALL_FAILS(Write([&](PgConnection& c) -> absl::Status {
    results.clear();
    results.reserve(jobs.size());
    for (const JobRecord& job : jobs) {
      absl::StatusOr<JobRecord> r = InsertJob(c, job);
      // Only a duplicate or empty id is a per-job outcome (neither leaves the transaction failed: the
      // duplicate is skipped by ON CONFLICT); anything else fails the whole batch.
      if (!r.ok() && r.status().code() != absl::StatusCode::kAlreadyExists &&
          r.status().code() != absl::StatusCode::kInvalidArgument) {
        return r.status();
      }
      results.push_back(std::move(r));
    }
    return absl::OkStatus();
  }));
  return results;
}

absl::StatusOr<JobRecord> PostgresStore::GetJob(const std::string& id) {
  JobRecord out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult r, c.Exec(fmt::format("SELECT {} FROM jobs WHERE id = $1", kJobColumns),
                                        PgParams().Key(id), "get job"));
    if (r.rows() == 0) return absl::NotFoundError(fmt::format("store: no job '{}'", id));
    bool sealed = false;
    ASSIGN_OR_RETURN(out, ReadJob(r, 0, &sealed));
    return OpenSpec(out, sealed);
  }));
  return out;
}

absl::StatusOr<std::vector<JobRecord>> PostgresStore::ListJobs(const JobFilter& filter) {
  RETURN_IF_ERROR(CheckLimit(filter.limit));
  // Every filter is bound (an empty value disables it), so one statement serves all queries of one order.
  const std::string sql = fmt::format(
      "SELECT {} FROM jobs WHERE ($1 = '' OR id {} $1) AND ($2 = '' OR state = $2) AND ($3 = '' OR "
      "tenant = $3) AND ($4 = '' OR name = $4) ORDER BY id {} LIMIT $5",
      kJobColumns, filter.newest_first ? "<" : ">", filter.newest_first ? "DESC" : "ASC");
  std::vector<JobRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r,
                     c.Exec(sql,
                            PgParams()
                                .Key(filter.after_id)
                                .Key(filter.state ? std::string(api::JobStateName(*filter.state)) : std::string())
                                .Key(filter.tenant)
                                .Key(filter.name)
                                .Int(filter.limit),
                            "list jobs"));
    for (int i = 0; i < r.rows(); ++i) {
      bool sealed = false;
      ASSIGN_OR_RETURN(JobRecord j, ReadJob(r, i, &sealed));
      RETURN_IF_ERROR(OpenSpec(j, sealed));
      out.push_back(std::move(j));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<JobCount>> PostgresStore::CountJobs() {
  std::vector<JobCount> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT state, priority, COUNT(*), MIN(updated_at_ns) FROM jobs GROUP BY "
                                        "state, priority ORDER BY state, priority",
                                        PgParams(), "count jobs"));
    for (int i = 0; i < r.rows(); ++i) {
      auto state = api::ParseJobState(r.Text(i, 0));
      if (!state) return absl::DataLossError(fmt::format("postgres: jobs hold unknown state '{}'", r.Text(i, 0)));
      out.push_back({*state, static_cast<int>(r.Int(i, 1)), r.Int(i, 2), FromNs(r.Int(i, 3))});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<JobRecord> PostgresStore::UpdateJob(const JobRecord& job) {
  JobRecord stored;
  RETURN_IF_CALL_FAILS(Write([&](PgConnection& c) -> absl::Status {
    // The row stays locked until the commit: the version and state read here are those the write replaces.
    ASSIGN_OR_RETURN(PgResult cur,
                     c.Exec("SELECT version, state, created_at_ns FROM jobs WHERE id = $1 FOR NO KEY UPDATE",
                            PgParams().Key(job.id), "get job"));
    if (cur.rows() == 0) return absl::NotFoundError(fmt::format("store: no job '{}'", job.id));
    const int64_t version = cur.Int(0, 0);
    const auto state = api::ParseJobState(cur.Text(0, 1));
    if (!state) {
      return absl::DataLossError(fmt::format("postgres: job {} has unknown state '{}'", job.id, cur.Text(0, 1)));
    }
    if (version != job.version) {
      return absl::AbortedError(
          fmt::format("store: job '{}' changed (version {} != {}); re-read and retry", job.id, version, job.version));
    }
    if (*state != job.state && !api::CanTransition(*state, job.state)) {
      return absl::FailedPreconditionError(fmt::format("store: job '{}' cannot move from {} to {}", job.id,
                                                       api::JobStateName(*state), api::JobStateName(job.state)));
    }
    stored = job;
    stored.version = version + 1;
    stored.created_at = FromNs(cur.Int(0, 2));  // immutable
    ASSIGN_OR_RETURN(const std::string spec, SealSpec(stored));
    PgParams p = JobParams(stored, spec, sealer_ != nullptr);
    p.Int(version);
    ASSIGN_OR_RETURN(
        PgResult upd,
        c.Exec("UPDATE jobs SET tenant = $2, name = $3, spec_yaml = $4, state = $5, priority = $6, plan_json = $7, "
               "allocation_json = $8, epoch = $9, restarts = $10, exit_code = $11, reason = $12, created_at_ns = $13, "
               "updated_at_ns = $14, version = $15, retries = $16, checkpoint_step = $17, checkpoint_at_ns = $18, "
               "usage_json = $19, checkpoint_region = $20, platform_env = $21, submitted_by = $22, spec_sealed = $23 "
               "WHERE id = $1 AND version = $24",
               p, "update job"));
    // The compare-and-set holds on its own (WHERE version = $24); the lock above makes it succeed here.
    if (upd.affected() != 1) {
      return absl::AbortedError(fmt::format("store: job '{}' changed; re-read and retry", job.id));
    }
    if (*state != stored.state) {
      RETURN_IF_ERROR(InsertEvent(c, stored.id, stored.updated_at, *state, stored.state, stored.reason));
    }
    return absl::OkStatus();
  }));
  return stored;
}

absl::StatusOr<std::vector<EventRecord>> PostgresStore::ListEvents(const EventFilter& filter) {
  RETURN_IF_ERROR(CheckLimit(filter.limit));
  std::vector<EventRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    PgParams p;
    p.Int(filter.after_seq).Key(filter.job_id).Int(filter.limit);
    if (!filter.tenant.empty()) p.Key(filter.tenant);
    // Without a tenant the jobs table is not read; with one, the event's job must be that tenant's.
    ASSIGN_OR_RETURN(
        PgResult r,
        c.Exec(
            filter.tenant.empty()
                ? "SELECT seq, job_id, time_ns, from_state, to_state, reason FROM events WHERE seq > $1 AND ($2 = '' "
                  "OR job_id = $2) ORDER BY seq LIMIT $3"
                : "SELECT e.seq, e.job_id, e.time_ns, e.from_state, e.to_state, e.reason FROM events e JOIN jobs j "
                  "ON j.id = e.job_id WHERE e.seq > $1 AND ($2 = '' OR e.job_id = $2) AND j.tenant = $4 ORDER BY "
                  "e.seq LIMIT $3",
            p, "list events"));
    for (int i = 0; i < r.rows(); ++i) {
      EventRecord e;
      e.seq = r.Int(i, 0);
      e.job_id = r.Text(i, 1);
      e.time = FromNs(r.Int(i, 2));
      auto from = api::ParseJobState(r.Text(i, 3));
      auto to = api::ParseJobState(r.Text(i, 4));
      if (!from || !to) return absl::DataLossError(fmt::format("postgres: event {} has an unknown state", e.seq));
      e.from = *from;
      e.to = *to;
      e.reason = r.Text(i, 5);
      out.push_back(std::move(e));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<int64_t> PostgresStore::DeleteOldEvents(TimePoint before, int limit) {
  RETURN_IF_ERROR(CheckLimit(limit));
  int64_t deleted = 0;
  // In seq order from the oldest left, so each call starts where the last one stopped; the events of a
  // job still running are skipped until it ends.
  RETURN_IF_CALL_FAILS(Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult r,
                         c.Exec("DELETE FROM events WHERE seq IN (SELECT e.seq FROM events e JOIN jobs j ON "
                                "j.id = e.job_id WHERE e.time_ns < $1 AND j.updated_at_ns < $1 AND j.state "
                                "IN ('SUCCEEDED', 'FAILED', 'CANCELLED') ORDER BY e.seq LIMIT $2)",
                                PgParams().Int(ToNs(before)).Int(limit), "delete old events"));
        deleted = r.affected();
        return absl::OkStatus();
      },
      /*one_statement=*/true));
  return deleted;
}

absl::Status PostgresStore::PutNode(const NodeRecord& node) {
  if (node.id.empty()) return absl::InvalidArgumentError("store: node id must not be empty");
  return Write(
      [&](PgConnection& c) -> absl::Status {
        return c
            .Exec(
                "INSERT INTO nodes (id, inventory_json, state, last_heartbeat_ns, registered_at_ns) VALUES ($1, $2, "
                "$3, $4, $5) ON CONFLICT (id) DO UPDATE SET inventory_json = EXCLUDED.inventory_json, state = "
                "EXCLUDED.state, last_heartbeat_ns = EXCLUDED.last_heartbeat_ns, registered_at_ns = "
                "EXCLUDED.registered_at_ns",
                PgParams()
                    .Text(node.id)
                    .Text(node.inventory_json)
                    .Text(node.state)
                    .Int(ToNs(node.last_heartbeat))
                    .Int(ToNs(node.registered_at)),
                "put node")
            .status();
      },
      /*one_statement=*/true);
}

namespace {
NodeRecord ReadNode(const PgResult& r, int i) {
  return {.id = r.Text(i, 0),
          .inventory_json = r.Text(i, 1),
          .state = r.Text(i, 2),
          .last_heartbeat = FromNs(r.Int(i, 3)),
          .registered_at = FromNs(r.Int(i, 4))};
}
}  // namespace

absl::StatusOr<NodeRecord> PostgresStore::GetNode(const std::string& id) {
  NodeRecord out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT id, inventory_json, state, last_heartbeat_ns, registered_at_ns FROM "
                                        "nodes WHERE id = $1",
                                        PgParams().Key(id), "get node"));
    if (r.rows() == 0) return absl::NotFoundError(fmt::format("store: no node '{}'", id));
    out = ReadNode(r, 0);
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresStore::DeleteNode(const std::string& id) {
  return Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult r, c.Exec("DELETE FROM nodes WHERE id = $1", PgParams().Key(id), "delete node"));
        if (r.affected() == 0) return absl::NotFoundError(fmt::format("store: no node '{}'", id));
        return absl::OkStatus();
      },
      /*one_statement=*/true);
}

absl::StatusOr<std::vector<NodeRecord>> PostgresStore::ListNodes() {
  std::vector<NodeRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT id, inventory_json, state, last_heartbeat_ns, registered_at_ns FROM "
                                        "nodes ORDER BY id",
                                        PgParams(), "list nodes"));
    for (int i = 0; i < r.rows(); ++i) out.push_back(ReadNode(r, i));
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresStore::CreateTenant(const TenantRecord& tenant) {
  if (tenant.id.empty()) return absl::InvalidArgumentError("store: tenant id must not be empty");
  return Write(
      [&](PgConnection& c) -> absl::Status {
        return InsertOutcome(c.Exec("INSERT INTO tenants (id, created_at_ns) VALUES ($1, $2)",
                                    PgParams().Text(tenant.id).Int(ToNs(tenant.created_at)), "insert tenant")
                                 .status(),
                             "tenant", tenant.id, "");
      },
      /*one_statement=*/true);
}

absl::StatusOr<std::vector<TenantRecord>> PostgresStore::ListTenants() {
  std::vector<TenantRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r,
                     c.Exec("SELECT id, created_at_ns FROM tenants ORDER BY id", PgParams(), "list tenants"));
    for (int i = 0; i < r.rows(); ++i) out.push_back({r.Text(i, 0), FromNs(r.Int(i, 1))});
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresStore::CreateUser(const UserRecord& user) {
  if (user.name.empty()) return absl::InvalidArgumentError("store: user name must not be empty");
  return Write(
      [&](PgConnection& c) -> absl::Status {
        return InsertOutcome(
            c.Exec("INSERT INTO users (name, tenant, role, created_at_ns) VALUES ($1, $2, $3, $4)",
                   PgParams().Text(user.name).Text(user.tenant).Text(user.role).Int(ToNs(user.created_at)),
                   "insert user")
                .status(),
            "user", user.name, fmt::format("tenant '{}'", user.tenant));
      },
      /*one_statement=*/true);
}

absl::StatusOr<std::vector<UserRecord>> PostgresStore::ListUsers() {
  std::vector<UserRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT name, tenant, role, created_at_ns FROM users ORDER BY name", PgParams(),
                                        "list users"));
    for (int i = 0; i < r.rows(); ++i) out.push_back({r.Text(i, 0), r.Text(i, 1), r.Text(i, 2), FromNs(r.Int(i, 3))});
    return absl::OkStatus();
  }));
  return out;
}

namespace {
std::optional<TimePoint> OptionalTime(const PgResult& r, int row, int col) {
  if (r.IsNull(row, col)) return std::nullopt;
  return FromNs(r.Int(row, col));
}
}  // namespace

absl::Status PostgresStore::CreateToken(const TokenRecord& token) {
  if (token.id.empty()) return absl::InvalidArgumentError("store: token id must not be empty");
  return Write(
      [&](PgConnection& c) -> absl::Status {
        return InsertOutcome(c.Exec("INSERT INTO tokens (id, user_name, secret_hash, description, created_at_ns, "
                                    "expires_at_ns, revoked_at_ns) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                                    PgParams()
                                        .Text(token.id)
                                        .Text(token.user)
                                        .Text(token.secret_hash)
                                        .Prose(token.description)
                                        .Int(ToNs(token.created_at))
                                        .OptTime(token.expires_at)
                                        .OptTime(token.revoked_at),
                                    "insert token")
                                 .status(),
                             "token", token.id, fmt::format("user '{}'", token.user));
      },
      /*one_statement=*/true);
}

absl::StatusOr<std::vector<TokenRecord>> PostgresStore::ListTokens() {
  std::vector<TokenRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT id, user_name, secret_hash, description, created_at_ns, expires_at_ns, "
                                        "revoked_at_ns FROM tokens ORDER BY id",
                                        PgParams(), "list tokens"));
    for (int i = 0; i < r.rows(); ++i) {
      out.push_back({r.Text(i, 0), r.Text(i, 1), r.Text(i, 2), r.Text(i, 3), FromNs(r.Int(i, 4)), OptionalTime(r, i, 5),
                     OptionalTime(r, i, 6)});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresStore::RevokeToken(const std::string& id, TimePoint at) {
  return Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult r,
                         c.Exec("UPDATE tokens SET revoked_at_ns = COALESCE(revoked_at_ns, $2) WHERE id = $1",
                                PgParams().Key(id).Int(ToNs(at)), "revoke token"));
        if (r.affected() == 0) return absl::NotFoundError(fmt::format("store: no token '{}'", id));
        return absl::OkStatus();
      },
      /*one_statement=*/true);
}

absl::Status PostgresStore::CreateJoinToken(const JoinTokenRecord& token) {
  if (token.id.empty()) return absl::InvalidArgumentError("store: join token id must not be empty");
  return Write(
      [&](PgConnection& c) -> absl::Status {
        return InsertOutcome(c.Exec("INSERT INTO join_tokens (id, secret_sha256, description, created_by, "
                                    "created_at_ns, expires_at_ns, uses_left, provider) VALUES ($1, $2, $3, $4, $5, "
                                    "$6, $7, $8)",
                                    PgParams()
                                        .Text(token.id)
                                        .Text(token.secret_sha256)
                                        .Prose(token.description)
                                        .Text(token.created_by)
                                        .Int(ToNs(token.created_at))
                                        .OptTime(token.expires_at)
                                        .Int(token.uses_left)
                                        .Text(token.provider),
                                    "insert join token")
                                 .status(),
                             "join token", token.id, "");
      },
      /*one_statement=*/true);
}

absl::StatusOr<std::vector<JoinTokenRecord>> PostgresStore::ListJoinTokens() {
  std::vector<JoinTokenRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT id, secret_sha256, description, created_by, created_at_ns, "
                                        "expires_at_ns, uses_left, provider FROM join_tokens ORDER BY id",
                                        PgParams(), "list join tokens"));
    for (int i = 0; i < r.rows(); ++i) {
      out.push_back({r.Text(i, 0), r.Text(i, 1), r.Text(i, 2), r.Text(i, 3), FromNs(r.Int(i, 4)), OptionalTime(r, i, 5),
                     r.Int(i, 6), r.Text(i, 7)});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresStore::ConsumeJoinToken(const std::string& id, const std::string& node, uint64_t generation) {
  return Write([&](PgConnection& c) -> absl::Status {
    // One statement takes the use (the row lock orders concurrent joins: no use is taken twice).
    ASSIGN_OR_RETURN(PgResult r,
                     c.Exec("UPDATE join_tokens SET uses_left = uses_left - 1 WHERE id = $1 AND uses_left > 0",
                            PgParams().Key(id), "consume join token"));
    if (r.affected() == 1) {
      // The generation is a uint64, kept as the BIGINT of the same bits.
      return c
          .Exec(
              "INSERT INTO node_credentials (node, generation, provider) SELECT $1::text, $2::bigint, provider FROM "
              "join_tokens WHERE id = $3 ON CONFLICT (node) DO UPDATE SET generation = EXCLUDED.generation, "
              "provider = EXCLUDED.provider",
              PgParams().Text(node).Int(static_cast<int64_t>(generation)).Key(id), "put node credential")
          .status();
    }
    ASSIGN_OR_RETURN(PgResult exists,
                     c.Exec("SELECT 1 FROM join_tokens WHERE id = $1", PgParams().Key(id), "look up join token"));
    if (exists.rows() > 0) {
      return absl::FailedPreconditionError(fmt::format("store: join token '{}' has no use left", id));
    }
    return absl::NotFoundError(fmt::format("store: no join token '{}'", id));
  });
}

absl::Status PostgresStore::DeleteJoinToken(const std::string& id) {
  return Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult r,
                         c.Exec("DELETE FROM join_tokens WHERE id = $1", PgParams().Key(id), "delete join token"));
        if (r.affected() == 0) return absl::NotFoundError(fmt::format("store: no join token '{}'", id));
        return absl::OkStatus();
      },
      /*one_statement=*/true);
}

absl::Status PostgresStore::DeleteNodeCredential(const std::string& node) {
  return Write(
      [&](PgConnection& c) -> absl::Status {
        return c.Exec("DELETE FROM node_credentials WHERE node = $1", PgParams().Key(node), "delete node credential")
            .status();
      },
      /*one_statement=*/true);
}

absl::StatusOr<std::vector<NodeCredentialRecord>> PostgresStore::ListNodeCredentials() {
  std::vector<NodeCredentialRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT node, generation, provider FROM node_credentials ORDER BY node",
                                        PgParams(), "list node credentials"));
    for (int i = 0; i < r.rows(); ++i) {
      out.push_back({r.Text(i, 0), static_cast<uint64_t>(r.Int(i, 1)), r.Text(i, 2)});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresStore::AppendAudit(const std::vector<AuditRecord>& records) {
  if (records.empty()) return absl::OkStatus();
  return Write([&](PgConnection& c) -> absl::Status {
    RETURN_IF_ERROR(LockLog(c, "LOCK TABLE audit IN EXCLUSIVE MODE"));
    for (const AuditRecord& a : records) {
      RETURN_IF_ERROR(c.Exec("INSERT INTO audit (time_ns, user_name, tenant, token_id, role, method, route, path, "
                             "status, remote_address, request_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, "
                             "$11)",
                             PgParams()
                                 .Int(ToNs(a.time))
                                 .Prose(a.user)
                                 .Prose(a.tenant)
                                 .Prose(a.token_id)
                                 .Prose(a.role)
                                 .Prose(a.method)
                                 .Prose(a.route)
                                 .Prose(a.path)
                                 .Int(a.status)
                                 .Prose(a.remote_address)
                                 .Prose(a.request_id),
                             "insert audit record")
                          .status());
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<AuditRecord>> PostgresStore::ListAudit(const AuditFilter& filter) {
  RETURN_IF_ERROR(CheckLimit(filter.limit));
  std::vector<AuditRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(
        PgResult r,
        c.Exec("SELECT seq, time_ns, user_name, tenant, token_id, role, method, route, path, status, remote_address, "
               "request_id FROM audit WHERE seq > $1 AND ($2 = '' OR user_name = $2) AND ($3 = '' OR tenant = $3) "
               "ORDER BY seq LIMIT $4",
               PgParams().Int(filter.after_seq).Prose(filter.user).Prose(filter.tenant).Int(filter.limit),
               "list audit"));
    for (int i = 0; i < r.rows(); ++i) {
      out.push_back({.seq = r.Int(i, 0),
                     .time = FromNs(r.Int(i, 1)),
                     .user = r.Text(i, 2),
                     .tenant = r.Text(i, 3),
                     .token_id = r.Text(i, 4),
                     .role = r.Text(i, 5),
                     .method = r.Text(i, 6),
                     .route = r.Text(i, 7),
                     .path = r.Text(i, 8),
                     .status = static_cast<int>(r.Int(i, 9)),
                     .remote_address = r.Text(i, 10),
                     .request_id = r.Text(i, 11)});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<int64_t> PostgresStore::DeleteOldAudit(TimePoint before, int limit) {
  RETURN_IF_ERROR(CheckLimit(limit));
  int64_t deleted = 0;
  RETURN_IF_CALL_FAILS(Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult r, c.Exec("DELETE FROM audit WHERE seq IN (SELECT seq FROM audit WHERE time_ns < $1 "
                                            "ORDER BY seq LIMIT $2)",
                                            PgParams().Int(ToNs(before)).Int(limit), "delete old audit records"));
        deleted = r.affected();
        return absl::OkStatus();
      },
      /*one_statement=*/true));
  return deleted;
}

absl::StatusOr<SecretRecord> PostgresStore::PutSecret(const SecretRecord& secret) {
  if (secret.tenant.empty() || secret.name.empty()) {
    return absl::InvalidArgumentError("store: a secret needs a tenant and a name");
  }
  if (sealer_ == nullptr) {
    return absl::FailedPreconditionError(
        "store: secrets are kept only sealed, and this store was opened without a key (PostgresStoreOptions::sealer)");
  }
  ASSIGN_OR_RETURN(const std::string sealed,
                   sealer_->Seal(secret.tenant, secret.value, columns::SecretAad(secret.tenant, secret.name)));
  SecretRecord stored = secret;
  RETURN_IF_CALL_FAILS(Write(
      [&](PgConnection& c) -> absl::Status {
        // A replacement keeps the first creation time.
        ASSIGN_OR_RETURN(PgResult r, c.Exec("INSERT INTO secrets (tenant, name, value, created_at_ns, updated_at_ns) "
                                            "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (tenant, name) DO UPDATE SET "
                                            "value = EXCLUDED.value, updated_at_ns = EXCLUDED.updated_at_ns "
                                            "RETURNING created_at_ns",
                                            PgParams()
                                                .Text(secret.tenant)
                                                .Text(secret.name)
                                                .Bytes(sealed)
                                                .Int(ToNs(secret.created_at))
                                                .Int(ToNs(secret.updated_at)),
                                            "put secret"));
        if (r.rows() != 1) return absl::InternalError("postgres: put secret returned no row");
        stored.created_at = FromNs(r.Int(0, 0));
        return absl::OkStatus();
      },
      /*one_statement=*/true));
  return stored;
}

absl::StatusOr<SecretRecord> PostgresStore::GetSecret(const std::string& tenant, const std::string& name) {
  SecretRecord out;
  std::string sealed;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT value, created_at_ns, updated_at_ns FROM secrets WHERE tenant = $1 "
                                        "AND name = $2",
                                        PgParams().Key(tenant).Key(name), "get secret"));
    if (r.rows() == 0) return absl::NotFoundError(fmt_no_secret(tenant, name));
    sealed = r.Bytes(0, 0);
    out = {tenant, name, "", FromNs(r.Int(0, 1)), FromNs(r.Int(0, 2))};
    return absl::OkStatus();
  }));
  if (sealer_ == nullptr) {
    return absl::DataLossError(
        fmt::format("postgres: secret {}/{} is sealed and this store was opened without a key", tenant, name));
  }
  absl::StatusOr<std::string> value = sealer_->Open(tenant, sealed, columns::SecretAad(tenant, name));
  if (!value.ok()) {
    return absl::DataLossError(
        fmt::format("postgres: secret {}/{}: {}", tenant, name, std::string(value.status().message())));
  }
  out.value = std::move(*value);
  return out;
}

absl::StatusOr<std::vector<SecretRecord>> PostgresStore::ListSecrets(const std::string& tenant) {
  std::vector<SecretRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT name, created_at_ns, updated_at_ns FROM secrets WHERE tenant = $1 "
                                        "ORDER BY name",
                                        PgParams().Key(tenant), "list secrets"));
    for (int i = 0; i < r.rows(); ++i)
      out.push_back({tenant, r.Text(i, 0), "", FromNs(r.Int(i, 1)), FromNs(r.Int(i, 2))});
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresStore::DeleteSecret(const std::string& tenant, const std::string& name) {
  return Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult r, c.Exec("DELETE FROM secrets WHERE tenant = $1 AND name = $2",
                                            PgParams().Key(tenant).Key(name), "delete secret"));
        if (r.affected() == 0) return absl::NotFoundError(fmt_no_secret(tenant, name));
        return absl::OkStatus();
      },
      /*one_statement=*/true);
}

absl::Status PostgresStore::PutTenantQuota(const TenantQuotaRecord& quota) {
  if (quota.tenant.empty()) return absl::InvalidArgumentError("store: tenant must not be empty");
  for (const auto& [model, n] : quota.max_gpus_by_model) {
    if (model.empty() || model.find_first_of("=,") != std::string::npos) {
      return absl::InvalidArgumentError(
          fmt::format("store: GPU model '{}' must be non-empty without '=' or ','", model));
    }
  }
  return Write(
      [&](PgConnection& c) -> absl::Status {
        return c
            .Exec(
                "INSERT INTO tenant_quotas (tenant, weight, max_gpus_by_model, max_gpu_milli, max_jobs, "
                "updated_at_ns) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant) DO UPDATE SET weight = "
                "EXCLUDED.weight, max_gpus_by_model = EXCLUDED.max_gpus_by_model, max_gpu_milli = "
                "EXCLUDED.max_gpu_milli, max_jobs = EXCLUDED.max_jobs, updated_at_ns = EXCLUDED.updated_at_ns",
                PgParams()
                    .Text(quota.tenant)
                    .Real(quota.weight)
                    .Text(columns::EncodeModelCaps(quota.max_gpus_by_model))
                    .Int(quota.max_gpu_milli)
                    .Int(quota.max_jobs)
                    .Int(ToNs(quota.updated_at)),
                "put tenant quota")
            .status();
      },
      /*one_statement=*/true);
}

absl::StatusOr<std::vector<TenantQuotaRecord>> PostgresStore::ListTenantQuotas() {
  std::vector<TenantQuotaRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT tenant, weight, max_gpus_by_model, max_gpu_milli, max_jobs, "
                                        "updated_at_ns FROM tenant_quotas ORDER BY tenant",
                                        PgParams(), "list tenant quotas"));
    for (int i = 0; i < r.rows(); ++i) {
      out.push_back({.tenant = r.Text(i, 0),
                     .weight = r.Double(i, 1),
                     .max_gpus_by_model = columns::DecodeModelCaps(r.Text(i, 2)),
                     .max_gpu_milli = r.Int(i, 3),
                     .max_jobs = static_cast<int32_t>(r.Int(i, 4)),
                     .updated_at = FromNs(r.Int(i, 5))});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresStore::PutTenantUsage(const std::vector<TenantUsageRecord>& usage) {
  if (usage.empty()) return absl::OkStatus();
  return Write([&](PgConnection& c) -> absl::Status {
    for (const TenantUsageRecord& u : usage) {
      RETURN_IF_ERROR(c.Exec("INSERT INTO tenant_usage (tenant, usage, as_of_ns) VALUES ($1, $2, $3) ON CONFLICT "
                             "(tenant) DO UPDATE SET usage = EXCLUDED.usage, as_of_ns = EXCLUDED.as_of_ns",
                             PgParams().Text(u.tenant).Real(u.usage).Int(ToNs(u.as_of)), "put tenant usage")
                          .status());
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<TenantUsageRecord>> PostgresStore::ListTenantUsage() {
  std::vector<TenantUsageRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT tenant, usage, as_of_ns FROM tenant_usage ORDER BY tenant", PgParams(),
                                        "list tenant usage"));
    for (int i = 0; i < r.rows(); ++i) out.push_back({r.Text(i, 0), r.Double(i, 1), FromNs(r.Int(i, 2))});
    return absl::OkStatus();
  }));
  return out;
}

namespace {

constexpr char kExperimentColumns[] =
    "id, tenant, user_name, name, spec_yaml, state, reason, created_at_ns, updated_at_ns, version, spec_sealed";

ExperimentRecord ReadExperiment(const PgResult& r, int i, bool* sealed) {
  ExperimentRecord e;
  e.id = r.Text(i, 0);
  e.tenant = r.Text(i, 1);
  e.user = r.Text(i, 2);
  e.name = r.Text(i, 3);
  e.spec_yaml = r.Bytes(i, 4);
  e.state = r.Text(i, 5);
  e.reason = r.Text(i, 6);
  e.created_at = FromNs(r.Int(i, 7));
  e.updated_at = FromNs(r.Int(i, 8));
  e.version = r.Int(i, 9);
  *sealed = r.Bool(i, 10);
  return e;
}

}  // namespace

absl::StatusOr<ExperimentRecord> PostgresStore::CreateExperiment(const ExperimentRecord& experiment) {
  if (experiment.id.empty()) return absl::InvalidArgumentError("store: an experiment needs an id");
  ExperimentRecord stored = experiment;
  stored.version = 1;
  stored.created_at = stored.updated_at = clock_.Now();
  ASSIGN_OR_RETURN(const std::string spec, SealExperiment(stored));
  RETURN_IF_CALL_FAILS(Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult r, c.Exec(fmt::format("INSERT INTO experiments ({}) VALUES ($1, $2, $3, $4, $5, $6, "
                                                        "$7, $8, $9, $10, $11) ON CONFLICT (id) DO NOTHING",
                                                        kExperimentColumns),
                                            PgParams()
                                                .Text(stored.id)
                                                .Text(stored.tenant)
                                                .Text(stored.user)
                                                .Text(stored.name)
                                                .Bytes(spec)
                                                .Text(stored.state)
                                                .Prose(stored.reason)
                                                .Int(ToNs(stored.created_at))
                                                .Int(ToNs(stored.updated_at))
                                                .Int(stored.version)
                                                .Bool(sealer_ != nullptr),
                                            "insert experiment"));
        if (r.affected() == 0) {
          return absl::AlreadyExistsError(fmt::format("store: experiment '{}' already exists", stored.id));
        }
        return absl::OkStatus();
      },
      /*one_statement=*/true));
  return stored;
}

absl::StatusOr<ExperimentRecord> PostgresStore::GetExperiment(const std::string& id) {
  ExperimentRecord out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult r, c.Exec(fmt::format("SELECT {} FROM experiments WHERE id = $1", kExperimentColumns),
                                        PgParams().Key(id), "get experiment"));
    if (r.rows() == 0) return absl::NotFoundError(fmt::format("store: no experiment '{}'", id));
    bool sealed = false;
    out = ReadExperiment(r, 0, &sealed);
    return OpenExperiment(out, sealed);
  }));
  return out;
}

absl::StatusOr<std::vector<ExperimentRecord>> PostgresStore::ListExperiments(const ExperimentFilter& filter) {
  if (filter.limit < 1 || filter.limit > kMaxListLimit) {
    return absl::InvalidArgumentError(fmt::format("store: limit {} is outside 1..10000", filter.limit));
  }
  std::vector<ExperimentRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r,
                     c.Exec(fmt::format("SELECT {} FROM experiments WHERE ($1 = '' OR tenant = $1) AND "
                                        "($2 = '' OR state = $2) AND id > $3 ORDER BY id LIMIT $4",
                                        kExperimentColumns),
                            PgParams().Key(filter.tenant).Key(filter.state).Key(filter.after_id).Int(filter.limit),
                            "list experiments"));
    for (int i = 0; i < r.rows(); ++i) {
      bool sealed = false;
      ExperimentRecord e = ReadExperiment(r, i, &sealed);
      RETURN_IF_ERROR(OpenExperiment(e, sealed));
      out.push_back(std::move(e));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<ExperimentRecord> PostgresStore::UpdateExperiment(const ExperimentRecord& experiment) {
  ExperimentRecord stored = experiment;
  stored.version = experiment.version + 1;
  stored.updated_at = clock_.Now();
  ASSIGN_OR_RETURN(const std::string spec, SealExperiment(stored));
  RETURN_IF_CALL_FAILS(Write(
      [&](PgConnection& c) -> absl::Status {
        // Compare-and-set in one statement; created_at stays as stored.
        ASSIGN_OR_RETURN(PgResult r, c.Exec("UPDATE experiments SET tenant = $2, user_name = $3, name = $4, spec_yaml "
                                            "= $5, state = $6, reason = $7, updated_at_ns = $8, version = $9, "
                                            "spec_sealed = $10 WHERE id = $1 AND version = $11 RETURNING "
                                            "created_at_ns",
                                            PgParams()
                                                .Key(stored.id)
                                                .Text(stored.tenant)
                                                .Text(stored.user)
                                                .Text(stored.name)
                                                .Bytes(spec)
                                                .Text(stored.state)
                                                .Prose(stored.reason)
                                                .Int(ToNs(stored.updated_at))
                                                .Int(stored.version)
                                                .Bool(sealer_ != nullptr)
                                                .Int(experiment.version),
                                            "update experiment"));
        if (r.rows() == 1) {
          stored.created_at = FromNs(r.Int(0, 0));
          return absl::OkStatus();
        }
        ASSIGN_OR_RETURN(PgResult cur, c.Exec("SELECT version FROM experiments WHERE id = $1",
                                              PgParams().Key(experiment.id), "get experiment"));
        if (cur.rows() == 0) return absl::NotFoundError(fmt::format("store: no experiment '{}'", experiment.id));
        return absl::AbortedError(fmt::format("store: experiment '{}' is at version {}, not {}", experiment.id,
                                              cur.Int(0, 0), experiment.version));
      },
      /*one_statement=*/true));
  return stored;
}

absl::Status PostgresStore::PutTrial(const TrialRecord& trial) {
  const TimePoint now = clock_.Now();
  return Write(
      [&](PgConnection& c) -> absl::Status {
        PgParams p;
        p.Text(trial.experiment_id).Int(trial.number).Text(trial.params_json).Text(trial.state).Text(trial.job_id);
        if (trial.value) {
          p.Real(*trial.value);
        } else {
          p.Null();
        }
        p.Prose(trial.reason).Int(ToNs(now));
        return c
            .Exec(
                "INSERT INTO trials (experiment_id, number, params_json, state, job_id, value, reason, "
                "created_at_ns, updated_at_ns) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) ON CONFLICT "
                "(experiment_id, number) DO UPDATE SET params_json = $3, state = $4, job_id = $5, value = $6, "
                "reason = $7, updated_at_ns = $8",
                p, "put trial")
            .status();
      },
      /*one_statement=*/true);
}

absl::StatusOr<std::vector<TrialRecord>> PostgresStore::ListTrials(const std::string& experiment_id) {
  std::vector<TrialRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT experiment_id, number, params_json, state, job_id, value, reason, "
                                        "created_at_ns, updated_at_ns FROM trials WHERE experiment_id = $1 ORDER BY "
                                        "number",
                                        PgParams().Key(experiment_id), "list trials"));
    for (int i = 0; i < r.rows(); ++i) {
      TrialRecord t;
      t.experiment_id = r.Text(i, 0);
      t.number = r.Int(i, 1);
      t.params_json = r.Text(i, 2);
      t.state = r.Text(i, 3);
      t.job_id = r.Text(i, 4);
      if (!r.IsNull(i, 5)) t.value = r.Double(i, 5);
      t.reason = r.Text(i, 6);
      t.created_at = FromNs(r.Int(i, 7));
      t.updated_at = FromNs(r.Int(i, 8));
      out.push_back(std::move(t));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::string> PostgresStore::SealService(const ServiceRecord& s) const {
  if (sealer_ == nullptr) return s.spec_yaml;
  return sealer_->Seal(columns::SealTenant(s.tenant), s.spec_yaml, columns::ServiceAad(s.id));
}

absl::Status PostgresStore::OpenService(ServiceRecord& s, bool sealed) const {
  return OpenSealed("service", s.id, s.tenant, columns::ServiceAad(s.id), s.spec_yaml, sealed);
}

namespace {

constexpr char kServiceColumns[] =
    "id, tenant, user_name, name, spec_yaml, generation, desired, state, reason, created_at_ns, updated_at_ns, "
    "version, spec_sealed";

ServiceRecord ReadService(const PgResult& r, int i, bool* sealed) {
  ServiceRecord e;
  e.id = r.Text(i, 0);
  e.tenant = r.Text(i, 1);
  e.user = r.Text(i, 2);
  e.name = r.Text(i, 3);
  e.spec_yaml = r.Bytes(i, 4);
  e.generation = r.Int(i, 5);
  e.desired = r.Text(i, 6);
  e.state = r.Text(i, 7);
  e.reason = r.Text(i, 8);
  e.created_at = FromNs(r.Int(i, 9));
  e.updated_at = FromNs(r.Int(i, 10));
  e.version = r.Int(i, 11);
  *sealed = r.Bool(i, 12);
  return e;
}

}  // namespace

absl::StatusOr<ServiceRecord> PostgresStore::CreateService(const ServiceRecord& service) {
  if (service.id.empty()) return absl::InvalidArgumentError("store: a service needs an id");
  ServiceRecord stored = service;
  stored.version = 1;
  stored.created_at = stored.updated_at = clock_.Now();
  ASSIGN_OR_RETURN(const std::string spec, SealService(stored));
  RETURN_IF_CALL_FAILS(Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult r, c.Exec(fmt::format("INSERT INTO services ({}) VALUES ($1, $2, $3, $4, $5, $6, "
                                                        "$7, $8, $9, $10, $11, $12, $13) ON CONFLICT (id) DO NOTHING",
                                                        kServiceColumns),
                                            PgParams()
                                                .Text(stored.id)
                                                .Text(stored.tenant)
                                                .Text(stored.user)
                                                .Text(stored.name)
                                                .Bytes(spec)
                                                .Int(stored.generation)
                                                .Text(stored.desired)
                                                .Text(stored.state)
                                                .Prose(stored.reason)
                                                .Int(ToNs(stored.created_at))
                                                .Int(ToNs(stored.updated_at))
                                                .Int(stored.version)
                                                .Bool(sealer_ != nullptr),
                                            "insert service"));
        if (r.affected() == 0) {
          return absl::AlreadyExistsError(fmt::format("store: service '{}' already exists", stored.id));
        }
        return absl::OkStatus();
      },
      /*one_statement=*/true));
  return stored;
}

absl::StatusOr<ServiceRecord> PostgresStore::GetService(const std::string& id) {
  ServiceRecord out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult r, c.Exec(fmt::format("SELECT {} FROM services WHERE id = $1", kServiceColumns),
                                        PgParams().Key(id), "get service"));
    if (r.rows() == 0) return absl::NotFoundError(fmt::format("store: no service '{}'", id));
    bool sealed = false;
    out = ReadService(r, 0, &sealed);
    return OpenService(out, sealed);
  }));
  return out;
}

absl::StatusOr<std::vector<ServiceRecord>> PostgresStore::ListServices(const ServiceFilter& filter) {
  if (filter.limit < 1 || filter.limit > kMaxListLimit) {
    return absl::InvalidArgumentError(fmt::format("store: limit {} is outside 1..10000", filter.limit));
  }
  std::vector<ServiceRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(
        PgResult r,
        c.Exec(fmt::format("SELECT {} FROM services WHERE ($1 = '' OR tenant = $1) AND ($2 = '' OR "
                           "name = $2) AND ($3 = '' OR state = $3) AND id > $4 ORDER BY id LIMIT $5",
                           kServiceColumns),
               PgParams().Key(filter.tenant).Key(filter.name).Key(filter.state).Key(filter.after_id).Int(filter.limit),
               "list services"));
    for (int i = 0; i < r.rows(); ++i) {
      bool sealed = false;
      ServiceRecord e = ReadService(r, i, &sealed);
      RETURN_IF_ERROR(OpenService(e, sealed));
      out.push_back(std::move(e));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<ServiceRecord> PostgresStore::UpdateService(const ServiceRecord& service) {
  ServiceRecord stored = service;
  stored.version = service.version + 1;
  stored.updated_at = clock_.Now();
  ASSIGN_OR_RETURN(const std::string spec, SealService(stored));
  RETURN_IF_CALL_FAILS(Write(
      [&](PgConnection& c) -> absl::Status {
        // Compare-and-set in one statement; created_at stays as stored.
        ASSIGN_OR_RETURN(PgResult r,
                         c.Exec("UPDATE services SET tenant = $2, user_name = $3, name = $4, spec_yaml = $5, "
                                "generation = $6, desired = $7, state = $8, reason = $9, updated_at_ns = $10, "
                                "version = $11, spec_sealed = $12 WHERE id = $1 AND version = $13 RETURNING "
                                "created_at_ns",
                                PgParams()
                                    .Key(stored.id)
                                    .Text(stored.tenant)
                                    .Text(stored.user)
                                    .Text(stored.name)
                                    .Bytes(spec)
                                    .Int(stored.generation)
                                    .Text(stored.desired)
                                    .Text(stored.state)
                                    .Prose(stored.reason)
                                    .Int(ToNs(stored.updated_at))
                                    .Int(stored.version)
                                    .Bool(sealer_ != nullptr)
                                    .Int(service.version),
                                "update service"));
        if (r.rows() == 1) {
          stored.created_at = FromNs(r.Int(0, 0));
          return absl::OkStatus();
        }
        ASSIGN_OR_RETURN(PgResult cur, c.Exec("SELECT version FROM services WHERE id = $1", PgParams().Key(service.id),
                                              "get service"));
        if (cur.rows() == 0) return absl::NotFoundError(fmt::format("store: no service '{}'", service.id));
        return absl::AbortedError(
            fmt::format("store: service '{}' is at version {}, not {}", service.id, cur.Int(0, 0), service.version));
      },
      /*one_statement=*/true));
  return stored;
}

absl::Status PostgresStore::PutReplica(const ReplicaRecord& replica) {
  const TimePoint now = clock_.Now();
  return Write(
      [&](PgConnection& c) -> absl::Status {
        return c
            .Exec(
                "INSERT INTO service_replicas (service_id, version_name, ordinal, job_id, port, spec_digest, "
                "state, reason, created_at_ns, updated_at_ns) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) ON "
                "CONFLICT (service_id, version_name, ordinal) DO UPDATE SET job_id = $4, port = $5, spec_digest = "
                "$6, state = $7, reason = $8, updated_at_ns = $9",
                PgParams()
                    .Text(replica.service_id)
                    .Text(replica.version_name)
                    .Int(replica.ordinal)
                    .Text(replica.job_id)
                    .Int(replica.port)
                    .Text(replica.spec_digest)
                    .Text(replica.state)
                    .Prose(replica.reason)
                    .Int(ToNs(now)),
                "put replica")
            .status();
      },
      /*one_statement=*/true);
}

absl::StatusOr<std::vector<ReplicaRecord>> PostgresStore::ListReplicas(const std::string& service_id,
                                                                       bool active_only) {
  std::vector<ReplicaRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r,
                     c.Exec("SELECT service_id, version_name, ordinal, job_id, port, spec_digest, state, reason, "
                            "created_at_ns, updated_at_ns FROM service_replicas WHERE service_id = $1 AND (NOT $2 OR "
                            "state <> 'ENDED') ORDER BY version_name, ordinal",
                            PgParams().Key(service_id).Bool(active_only), "list replicas"));
    for (int i = 0; i < r.rows(); ++i) {
      ReplicaRecord t;
      t.service_id = r.Text(i, 0);
      t.version_name = r.Text(i, 1);
      t.ordinal = r.Int(i, 2);
      t.job_id = r.Text(i, 3);
      t.port = static_cast<int>(r.Int(i, 4));
      t.spec_digest = r.Text(i, 5);
      t.state = r.Text(i, 6);
      t.reason = r.Text(i, 7);
      t.created_at = FromNs(r.Int(i, 8));
      t.updated_at = FromNs(r.Int(i, 9));
      out.push_back(std::move(t));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresStore::PutServiceUsage(const ServiceUsageRecord& usage) {
  const TimePoint now = clock_.Now();
  return Write(
      [&](PgConnection& c) -> absl::Status {
        return c
            .Exec(
                "INSERT INTO service_usage (service_id, version_name, instance, requests, tokens, updated_at_ns) "
                "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (service_id, version_name, instance) DO UPDATE SET "
                "requests = GREATEST(service_usage.requests, $4), tokens = GREATEST(service_usage.tokens, $5), "
                "updated_at_ns = $6",
                PgParams()
                    .Text(usage.service_id)
                    .Text(usage.version_name)
                    .Text(usage.instance)
                    .Int(usage.requests)
                    .Int(usage.tokens)
                    .Int(ToNs(now)),
                "put service usage")
            .status();
      },
      /*one_statement=*/true);
}

absl::StatusOr<std::vector<ServiceUsageRecord>> PostgresStore::ListServiceUsage(const std::string& service_id) {
  std::vector<ServiceUsageRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT service_id, version_name, instance, requests, tokens, updated_at_ns "
                                        "FROM service_usage WHERE service_id = $1 ORDER BY version_name, instance",
                                        PgParams().Key(service_id), "list service usage"));
    for (int i = 0; i < r.rows(); ++i) {
      out.push_back({.service_id = r.Text(i, 0),
                     .version_name = r.Text(i, 1),
                     .instance = r.Text(i, 2),
                     .requests = r.Int(i, 3),
                     .tokens = r.Int(i, 4),
                     .updated_at = FromNs(r.Int(i, 5))});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresStore::AppendMetricReports(const std::vector<MetricReportRecord>& reports) {
  if (reports.empty()) return absl::OkStatus();
  const TimePoint now = clock_.Now();
  return Write([&](PgConnection& c) -> absl::Status {
    RETURN_IF_ERROR(LockLog(c, "LOCK TABLE metric_reports IN EXCLUSIVE MODE"));
    for (const MetricReportRecord& m : reports) {
      // NaN is NULL, which the column refuses: skipped, as SqliteStore's INSERT OR IGNORE skips it.
      if (std::isnan(m.value)) continue;
      RETURN_IF_ERROR(c.Exec("INSERT INTO metric_reports (job_id, epoch, node_rank, seq, step, value, "
                             "reported_at_ns) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (job_id, epoch, "
                             "node_rank, seq) DO NOTHING",
                             PgParams()
                                 .Text(m.job_id)
                                 .Int(m.epoch)
                                 .Int(m.node_rank)
                                 .Int(m.seq)
                                 .Int(m.step)
                                 .Real(m.value)
                                 .Int(ToNs(now)),
                             "insert metric report")
                          .status());
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<MetricReportRecord>> PostgresStore::ListMetricReports(const std::string& job_id,
                                                                                 int64_t after_id, int limit) {
  if (limit < 1 || limit > kMaxListLimit) {
    return absl::InvalidArgumentError(fmt::format("store: limit {} is outside 1..10000", limit));
  }
  std::vector<MetricReportRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT id, job_id, epoch, node_rank, seq, step, value, reported_at_ns FROM "
                                        "metric_reports WHERE job_id = $1 AND id > $2 ORDER BY id LIMIT $3",
                                        PgParams().Key(job_id).Int(after_id).Int(limit), "list metric reports"));
    for (int i = 0; i < r.rows(); ++i) {
      out.push_back({.id = r.Int(i, 0),
                     .job_id = r.Text(i, 1),
                     .epoch = r.Int(i, 2),
                     .node_rank = static_cast<int>(r.Int(i, 3)),
                     .seq = r.Int(i, 4),
                     .step = r.Int(i, 5),
                     .value = r.Double(i, 6),
                     .reported_at = FromNs(r.Int(i, 7))});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<int64_t> PostgresStore::CountMetricReports(const std::string& job_id, int64_t epoch, int node_rank) {
  int64_t n = 0;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT COUNT(*) FROM metric_reports WHERE job_id = $1 AND epoch = $2 AND "
                                        "node_rank = $3",
                                        PgParams().Key(job_id).Int(epoch).Int(node_rank), "count metric reports"));
    n = r.Int(0, 0);
    return absl::OkStatus();
  }));
  return n;
}

absl::Status PostgresStore::AppendLedger(const std::vector<LedgerRecord>& records) {
  if (records.empty()) return absl::OkStatus();
  return Write([&](PgConnection& c) -> absl::Status {
    RETURN_IF_ERROR(LockLog(c, "LOCK TABLE ledger IN EXCLUSIVE MODE"));
    for (const LedgerRecord& l : records) {
      absl::Status st = c.Exec("INSERT INTO ledger (id, tenant, kind, at_ns, body) VALUES ($1, $2, $3, $4, $5)",
                               PgParams().Text(l.id).Text(l.tenant).Text(l.kind).Int(ToNs(l.at)).Text(l.body),
                               "insert ledger transaction")
                            .status();
      if (SqlState(st) == kUniqueViolation) {
        return absl::AlreadyExistsError("store: ledger transaction " + l.id + " exists");
      }
      RETURN_IF_ERROR(st);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<LedgerRecord>> PostgresStore::ListLedger(const LedgerFilter& filter) {
  RETURN_IF_ERROR(CheckLimit(filter.limit));
  std::vector<LedgerRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r,
                     c.Exec("SELECT seq, id, tenant, kind, at_ns, body FROM ledger WHERE seq > $1 AND ($2 "
                            "= '' OR tenant = $2) ORDER BY seq LIMIT $3",
                            PgParams().Int(filter.after_seq).Key(filter.tenant).Int(filter.limit), "list ledger"));
    for (int i = 0; i < r.rows(); ++i) {
      out.push_back({.seq = r.Int(i, 0),
                     .id = r.Text(i, 1),
                     .tenant = r.Text(i, 2),
                     .kind = r.Text(i, 3),
                     .at = FromNs(r.Int(i, 4)),
                     .body = r.Text(i, 5)});
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresStore::PutBudget(const BudgetRecord& budget) {
  if (budget.tenant.empty()) return absl::InvalidArgumentError("store: a budget's tenant must not be empty");
  if (budget.monthly_limit_micros <= 0) return absl::InvalidArgumentError("store: a budget's limit must be > 0");
  std::string percents;
  for (int p : budget.alert_percents) percents += (percents.empty() ? "" : ",") + std::to_string(p);
  return Write(
      [&](PgConnection& c) -> absl::Status {
        return c
            .Exec(
                "INSERT INTO budgets (tenant, user_name, monthly_limit_micros, alert_percents, alerted_period, "
                "alerted_percent, updated_at_ns) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (tenant, "
                "user_name) DO UPDATE SET monthly_limit_micros = EXCLUDED.monthly_limit_micros, alert_percents = "
                "EXCLUDED.alert_percents, alerted_period = EXCLUDED.alerted_period, alerted_percent = "
                "EXCLUDED.alerted_percent, updated_at_ns = EXCLUDED.updated_at_ns",
                PgParams()
                    .Text(budget.tenant)
                    .Text(budget.user)
                    .Int(budget.monthly_limit_micros)
                    .Text(percents)
                    .Text(budget.alerted_period)
                    .Int(budget.alerted_percent)
                    .Int(ToNs(budget.updated_at)),
                "put budget")
            .status();
      },
      /*one_statement=*/true);
}

absl::StatusOr<std::vector<BudgetRecord>> PostgresStore::ListBudgets() {
  std::vector<BudgetRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT tenant, user_name, monthly_limit_micros, alert_percents, "
                                        "alerted_period, alerted_percent, updated_at_ns FROM budgets ORDER BY tenant, "
                                        "user_name",
                                        PgParams(), "list budgets"));
    for (int i = 0; i < r.rows(); ++i) {
      BudgetRecord b{.tenant = r.Text(i, 0),
                     .user = r.Text(i, 1),
                     .monthly_limit_micros = r.Int(i, 2),
                     .alerted_period = r.Text(i, 4),
                     .alerted_percent = static_cast<int>(r.Int(i, 5)),
                     .updated_at = FromNs(r.Int(i, 6))};
      for (absl::string_view p : absl::StrSplit(r.Text(i, 3), ',', absl::SkipEmpty())) {
        int percent = 0;
        if (!absl::SimpleAtoi(p, &percent)) {
          return absl::DataLossError(
              fmt::format("postgres: budget of {}/{} has malformed alert percents", b.tenant, b.user));
        }
        b.alert_percents.push_back(percent);
      }
      out.push_back(std::move(b));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::Status PostgresStore::DeleteBudget(const std::string& tenant, const std::string& user) {
  return Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult r, c.Exec("DELETE FROM budgets WHERE tenant = $1 AND user_name = $2",
                                            PgParams().Key(tenant).Key(user), "delete budget"));
        if (r.affected() == 0) {
          return absl::NotFoundError(
              fmt::format("no budget for {}", user.empty() ? "tenant " + tenant : "user " + user));
        }
        return absl::OkStatus();
      },
      /*one_statement=*/true);
}

absl::Status PostgresStore::MarkBudgetAlerted(const std::string& tenant, const std::string& user, TimePoint updated_at,
                                              const std::string& period, int percent) {
  return Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult r,
                         c.Exec("UPDATE budgets SET alerted_period = $1, alerted_percent = $2 WHERE tenant "
                                "= $3 AND user_name = $4 AND updated_at_ns = $5",
                                PgParams().Text(period).Int(percent).Key(tenant).Key(user).Int(ToNs(updated_at)),
                                "mark budget alerted"));
        if (r.affected() == 0) {
          return absl::FailedPreconditionError(
              fmt::format("store: the budget of {}/{} changed meanwhile", tenant, user));
        }
        return absl::OkStatus();
      },
      /*one_statement=*/true);
}

absl::Status PostgresStore::InsertReservation(const ReservationRecord& r) {
  if (r.id.empty() || r.tenant.empty()) {
    return absl::InvalidArgumentError("store: a reservation needs an id and a tenant");
  }
  return Write(
      [&](PgConnection& c) -> absl::Status {
        absl::Status st = c.Exec(
                               "INSERT INTO reservations (id, tenant, gpu_model, gpus, price_micros, start_ns, "
                               "end_ns, created_by, created_at_ns, nodes, charged_hours, held_gpu_milli_seconds, "
                               "used_gpu_milli_seconds) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, "
                               "$13)",
                               PgParams()
                                   .Text(r.id)
                                   .Text(r.tenant)
                                   .Text(r.gpu_model)
                                   .Int(r.gpus)
                                   .Int(r.price_micros)
                                   .Int(ToNs(r.start))
                                   .Int(ToNs(r.end))
                                   .Text(r.created_by)
                                   .Int(ToNs(r.created_at))
                                   .Text(fmt::format("{}", fmt::join(r.nodes, ",")))
                                   .Int(r.charged_hours)
                                   .Int(r.held_gpu_milli_seconds)
                                   .Int(r.used_gpu_milli_seconds),
                               "insert reservation")
                              .status();
        if (SqlState(st) == kUniqueViolation) {
          return absl::AlreadyExistsError(fmt::format("store: reservation '{}' already exists", r.id));
        }
        return st;
      },
      /*one_statement=*/true);
}

absl::Status PostgresStore::EndReservation(const std::string& id, TimePoint end) {
  return Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult r, c.Exec("UPDATE reservations SET end_ns = GREATEST(start_ns, LEAST(end_ns, "
                                            "$1::bigint)) WHERE id = $2",
                                            PgParams().Int(ToNs(end)).Key(id), "end reservation"));
        if (r.affected() == 0) return absl::NotFoundError(fmt::format("no reservation '{}'", id));
        return absl::OkStatus();
      },
      /*one_statement=*/true);
}

absl::Status PostgresStore::UpdateReservationProgress(const ReservationRecord& r) {
  return Write(
      [&](PgConnection& c) -> absl::Status {
        ASSIGN_OR_RETURN(PgResult res, c.Exec("UPDATE reservations SET nodes = $1, charged_hours = $2, "
                                              "held_gpu_milli_seconds = $3, used_gpu_milli_seconds = $4 WHERE id = $5",
                                              PgParams()
                                                  .Text(fmt::format("{}", fmt::join(r.nodes, ",")))
                                                  .Int(r.charged_hours)
                                                  .Int(r.held_gpu_milli_seconds)
                                                  .Int(r.used_gpu_milli_seconds)
                                                  .Key(r.id),
                                              "update reservation"));
        if (res.affected() == 0) return absl::NotFoundError(fmt::format("no reservation '{}'", r.id));
        return absl::OkStatus();
      },
      /*one_statement=*/true);
}

absl::StatusOr<std::vector<ReservationRecord>> PostgresStore::ListReservations() {
  std::vector<ReservationRecord> out;
  RETURN_IF_CALL_FAILS(Read([&](PgConnection& c) -> absl::Status {
    out.clear();
    ASSIGN_OR_RETURN(PgResult r, c.Exec("SELECT id, tenant, gpu_model, gpus, price_micros, start_ns, end_ns, "
                                        "created_by, created_at_ns, nodes, charged_hours, held_gpu_milli_seconds, "
                                        "used_gpu_milli_seconds FROM reservations ORDER BY id",
                                        PgParams(), "list reservations"));
    for (int i = 0; i < r.rows(); ++i) {
      ReservationRecord v{.id = r.Text(i, 0),
                          .tenant = r.Text(i, 1),
                          .gpu_model = r.Text(i, 2),
                          .gpus = static_cast<int32_t>(r.Int(i, 3)),
                          .price_micros = r.Int(i, 4),
                          .start = FromNs(r.Int(i, 5)),
                          .end = FromNs(r.Int(i, 6)),
                          .created_by = r.Text(i, 7),
                          .created_at = FromNs(r.Int(i, 8)),
                          .charged_hours = r.Int(i, 10),
                          .held_gpu_milli_seconds = r.Int(i, 11),
                          .used_gpu_milli_seconds = r.Int(i, 12)};
      for (absl::string_view n : absl::StrSplit(r.Text(i, 9), ',', absl::SkipEmpty())) v.nodes.emplace_back(n);
      out.push_back(std::move(v));
    }
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace gpugeek::store
