#include "common/sqlite.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace trellis::sqlite {
namespace {

TEST(SqliteTest, RealFileTransactionsCommitAndRollBack) {
  auto dir = std::filesystem::temp_directory_path() / ("sqlite_test_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto db = Db::Open((dir / "t.db").string());
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Exec("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)").ok());
  {
    Transaction tx(db->get());
    auto ins = (*db)->Prepare("INSERT INTO t VALUES (?, ?)");
    ASSERT_TRUE(ins.ok());
    ASSERT_TRUE(ins->Bind(1, "a").Bind(2, 1).Run().ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  {
    Transaction tx(db->get());
    auto ins = (*db)->Prepare("INSERT INTO t VALUES (?, ?)");
    ASSERT_TRUE(ins->Bind(1, "b").Bind(2, 2).Run().ok());
    // no commit: rolled back
  }
  auto q = (*db)->Prepare("SELECT k, v FROM t ORDER BY k");
  std::vector<std::string> keys;
  while (*q->Step()) keys.push_back(q->ColumnText(0));
  EXPECT_EQ(keys, std::vector<std::string>{"a"});
  auto dup = (*db)->Prepare("INSERT INTO t VALUES ('a', 3)");
  EXPECT_FALSE(dup->Run().ok());
  std::filesystem::remove_all(dir);
}

// The lease's check (controller/shell/lease.h): once it says no, no
// transaction commits, autocommit or explicit, and what was stored stays.
TEST(SqliteTest, ACommitGuardThatSaysNoStopsEveryWrite) {
  auto dir = std::filesystem::temp_directory_path() / ("sqlite_guard_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  bool allowed = true;
  auto db = Db::Open((dir / "t.db").string(), Journal::kRollback, [&] { return allowed; });
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ((*db)->journal(), Journal::kRollback);
  ASSERT_TRUE((*db)->Exec("CREATE TABLE t (k TEXT PRIMARY KEY)").ok());
  ASSERT_TRUE((*db)->Exec("INSERT INTO t VALUES ('kept')").ok());
  allowed = false;
  EXPECT_FALSE((*db)->Exec("INSERT INTO t VALUES ('refused')").ok());
  {
    Transaction tx(db->get());
    ASSERT_TRUE((*db)->Exec("INSERT INTO t VALUES ('also refused')").ok());
    EXPECT_FALSE(tx.Commit().ok());
  }
  allowed = true;
  auto q = (*db)->Prepare("SELECT k FROM t ORDER BY k");
  std::vector<std::string> keys;
  while (*q->Step()) keys.push_back(q->ColumnText(0));
  EXPECT_EQ(keys, std::vector<std::string>{"kept"});
  std::filesystem::remove_all(dir);
}

// A database moved to a network filesystem switches to the rollback journal
// (and back): the data stays, and no -wal or -shm file is left beside it.
TEST(SqliteTest, TheJournalIsSwitchedEitherWayAndTheDataStays) {
  auto dir =
      std::filesystem::temp_directory_path() / ("sqlite_journal_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "t.db").string();
  auto mode = [](Db& db) {
    auto q = db.Prepare("PRAGMA journal_mode");
    EXPECT_TRUE(q.ok() && *q->Step());
    return q->ColumnText(0);
  };
  {
    auto db = Db::Open(path);
    ASSERT_TRUE(db.ok()) << db.status();
    EXPECT_EQ(mode(**db), "wal");
    ASSERT_TRUE((*db)->Exec("CREATE TABLE t (k TEXT); INSERT INTO t VALUES ('kept')").ok());
  }
  {
    auto db = Db::Open(path, Journal::kRollback);
    ASSERT_TRUE(db.ok()) << db.status();
    EXPECT_EQ(mode(**db), "delete");
    auto q = (*db)->Prepare("SELECT k FROM t");
    ASSERT_TRUE(q.ok() && *q->Step());
    EXPECT_EQ(q->ColumnText(0), "kept");
    ASSERT_TRUE((*db)->Exec("INSERT INTO t VALUES ('more')").ok());
  }
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(path + "-shm"));
  auto db = Db::Open(path);
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(mode(**db), "wal");
  auto n = (*db)->Prepare("SELECT count(*) FROM t");
  ASSERT_TRUE(n.ok() && *n->Step());
  EXPECT_EQ(n->ColumnInt(0), 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace trellis::sqlite
