#pragma once
// A small RAII layer over SQLite: one connection, prepared statements that
// reset themselves, transactions that roll back unless committed.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

struct sqlite3;
struct sqlite3_stmt;

namespace trellis::sqlite {

class Statement;

// WAL: readers beside the writer, its index in shared memory (one host).
// Rollback: the journal beside the file, under POSIX locks; what a network
// filesystem (NFS, Lustre) supports (common/filesystem_kind.h).
enum class Journal { kWal, kRollback };

class Db {
 public:
  // Whether a transaction may commit, asked before each commit (a false
  // answer rolls it back: the write fails). The controller's lease
  // (controller/shell/lease.h). Empty: always.
  using CommitGuard = std::function<bool()>;
  // Opens (creating) the file with the journal, foreign keys, FULL sync and a
  // busy timeout. A file last opened with the other journal is switched.
  static absl::StatusOr<std::unique_ptr<Db>> Open(const std::string& path,
                                                  Journal journal = Journal::kWal,
                                                  CommitGuard may_commit = nullptr);
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  absl::Status Exec(std::string_view sql);
  absl::StatusOr<Statement> Prepare(std::string_view sql);
  int64_t LastInsertRowId() const;
  int Changes() const;
  sqlite3* raw() const { return db_; }
  const std::string& path() const { return path_; }
  Journal journal() const { return journal_; }
  const CommitGuard& commit_guard() const { return may_commit_; }

 private:
  Db(sqlite3* db, std::string path, Journal journal, CommitGuard may_commit)
      : db_(db), path_(std::move(path)), journal_(journal), may_commit_(std::move(may_commit)) {}
  sqlite3* db_;
  std::string path_;
  Journal journal_;
  CommitGuard may_commit_;
};

// A prepared statement. Bind indices start at 1, columns at 0. Step() returns
// true while rows remain. Reset() happens on every re-Bind cycle via Reset().
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  ~Statement();

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, double value);
  Statement& Bind(int index, std::string_view value);
  Statement& BindNull(int index);
  Statement& Bind(int index, const char* value) { return Bind(index, std::string_view(value)); }
  Statement& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }

  // Runs one step: true when a row is ready, false when done.
  absl::StatusOr<bool> Step();
  // Runs to completion (for writes).
  absl::Status Run();
  void Reset();

  int64_t ColumnInt(int col) const;
  double ColumnDouble(int col) const;
  std::string ColumnText(int col) const;
  bool ColumnIsNull(int col) const;

 private:
  friend class Db;
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  sqlite3* db_;
  sqlite3_stmt* stmt_;
  absl::Status bind_error_;
};

// BEGIN IMMEDIATE on construction; rolls back in the destructor unless Commit().
class Transaction {
 public:
  explicit Transaction(Db* db);
  ~Transaction();
  absl::Status status() const { return begin_; }
  absl::Status Commit();

 private:
  Db* db_;
  absl::Status begin_;
  bool done_ = false;
};

}  // namespace trellis::sqlite
