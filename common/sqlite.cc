#include "common/sqlite.h"

#include <sqlite3.h>

namespace trellis::sqlite {
namespace {
// A full disk is its own code (RESOURCE_EXHAUSTED at the API, exit 6 of the
// CLI): nothing is wrong with the request, and it can be sent again once
// space is freed.
absl::Status ErrorOf(int code, std::string message) {
  if ((code & 0xff) == SQLITE_FULL)
    return absl::ResourceExhaustedError(message + " (the controller's disk is full)");
  return absl::InternalError(std::move(message));
}

absl::Status SqlError(sqlite3* db, std::string_view what) {
  return ErrorOf(sqlite3_extended_errcode(db), std::string(what) + ": " + sqlite3_errmsg(db));
}
}  // namespace

absl::StatusOr<std::unique_ptr<Db>> Db::Open(const std::string& path, Journal journal,
                                             CommitGuard may_commit) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = raw ? sqlite3_errmsg(raw) : "out of memory";
    sqlite3_close(raw);
    return absl::FailedPreconditionError("cannot open database " + path + ": " + msg);
  }
  std::unique_ptr<Db> db(new Db(raw, path, journal, std::move(may_commit)));
  sqlite3_busy_timeout(raw, 5000);
  // FULL sync because runs are acknowledged to users once stored.
  const char* mode =
      journal == Journal::kWal ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode=DELETE";
  for (const char* pragma : {mode, "PRAGMA foreign_keys=ON", "PRAGMA synchronous=FULL"}) {
    absl::Status st = db->Exec(pragma);
    if (!st.ok())
      return absl::FailedPreconditionError("database " + path + ": " + std::string(st.message()));
  }
  // After the pragmas: a guard that already says no must not stop the open.
  if (db->may_commit_) {
    sqlite3_commit_hook(
        raw, [](void* self) { return static_cast<Db*>(self)->may_commit_() ? 0 : 1; },
        db.get());
  }
  return db;
}

Db::~Db() { sqlite3_close_v2(db_); }

absl::Status Db::Exec(std::string_view sql) {
  char* err = nullptr;
  std::string text(sql);
  if (int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err); rc != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return ErrorOf(rc, "sql: " + msg);
  }
  return absl::OkStatus();
}

absl::StatusOr<Statement> Db::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr) !=
      SQLITE_OK) {
    return SqlError(db_, "prepare '" + std::string(sql.substr(0, 60)) + "'");
  }
  return Statement(db_, stmt);
}

int64_t Db::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int Db::Changes() const { return sqlite3_changes(db_); }

Statement::Statement(Statement&& o) noexcept
    : db_(o.db_), stmt_(o.stmt_), bind_error_(std::move(o.bind_error_)) {
  o.stmt_ = nullptr;
}

Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    sqlite3_finalize(stmt_);
    db_ = o.db_;
    stmt_ = o.stmt_;
    bind_error_ = std::move(o.bind_error_);
    o.stmt_ = nullptr;
  }
  return *this;
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::Bind(int i, int64_t v) {
  if (sqlite3_bind_int64(stmt_, i, v) != SQLITE_OK) bind_error_ = SqlError(db_, "bind");
  return *this;
}
Statement& Statement::Bind(int i, double v) {
  if (sqlite3_bind_double(stmt_, i, v) != SQLITE_OK) bind_error_ = SqlError(db_, "bind");
  return *this;
}
Statement& Statement::Bind(int i, std::string_view v) {
  if (sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT) !=
      SQLITE_OK)
    bind_error_ = SqlError(db_, "bind");
  return *this;
}
Statement& Statement::BindNull(int i) {
  if (sqlite3_bind_null(stmt_, i) != SQLITE_OK) bind_error_ = SqlError(db_, "bind");
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  if (!bind_error_.ok()) return bind_error_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return SqlError(db_, "step");
}

absl::Status Statement::Run() {
  absl::StatusOr<bool> row;
  do {
    row = Step();
    if (!row.ok()) {
      Reset();
      return row.status();
    }
  } while (*row);
  Reset();
  return absl::OkStatus();
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = absl::OkStatus();
}

int64_t Statement::ColumnInt(int c) const { return sqlite3_column_int64(stmt_, c); }
double Statement::ColumnDouble(int c) const { return sqlite3_column_double(stmt_, c); }
std::string Statement::ColumnText(int c) const {
  const unsigned char* t = sqlite3_column_text(stmt_, c);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(stmt_, c)) : "";
}
bool Statement::ColumnIsNull(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }

Transaction::Transaction(Db* db) : db_(db), begin_(db->Exec("BEGIN IMMEDIATE")) {}

Transaction::~Transaction() {
  if (!done_ && begin_.ok()) (void)db_->Exec("ROLLBACK");
}

absl::Status Transaction::Commit() {
  if (!begin_.ok()) return begin_;
  done_ = true;
  return db_->Exec("COMMIT");
}

}  // namespace trellis::sqlite
