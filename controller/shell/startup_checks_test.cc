#include "controller/shell/startup_checks.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "controller/app/sbatch_template.h"

namespace trellis::controller {
namespace {

namespace fs = std::filesystem;

// Flags as the command line leaves them, with `args` given.
ControllerFlags Parse(std::vector<std::string> args) {
  CLI::App app;
  ControllerFlags flags;
  AddControllerFlags(app, flags);
  args.insert(args.begin(), {"--db", "/tmp/db", "--output-root", "/tmp/out"});
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
  return flags;
}

TEST(ControllerFlagsTest, DefaultsAndTheTestOnlyFlag) {
  ControllerFlags flags = Parse({});
  EXPECT_EQ(flags.listen, "127.0.0.1:50151");
  EXPECT_EQ(flags.metrics_listen, "127.0.0.1:9152");
  EXPECT_FALSE(flags.test_kill_after_sbatch);
  EXPECT_TRUE(Parse({"--test-kill-after-sbatch"}).test_kill_after_sbatch);

  CLI::App app;
  ControllerFlags hidden;
  AddControllerFlags(app, hidden);
  EXPECT_EQ(app.help().find("test-kill"), std::string::npos) << "not in --help";
}

TEST(ControllerFlagsTest, ConfigTakesTheTypedFigures) {
  ControllerConfig config = ConfigFromFlags(
      Parse({"--schedule-interval-ms", "200", "--reconcile-interval-ms", "1000", "--quarantine-s",
             "60", "--quarantine-max-s", "600", "--probation-s", "0", "--steps-keep-full", "7",
             "--steps-thin-every", "3", "--data-root", "/data"}));
  EXPECT_EQ(config.schedule_interval, std::chrono::milliseconds(200));
  EXPECT_EQ(config.reconcile_interval, std::chrono::milliseconds(1000));
  EXPECT_EQ(config.quarantine.base_duration, std::chrono::seconds(60));
  EXPECT_EQ(config.quarantine.max_duration, std::chrono::seconds(600));
  EXPECT_EQ(config.quarantine.probation, std::chrono::seconds(0));
  EXPECT_EQ(config.step_retention.keep_full, 7);
  EXPECT_EQ(config.step_retention.thin_every, 3);
  EXPECT_EQ(config.output_root, "/tmp/out");
  EXPECT_EQ(config.data_roots, std::vector<std::string>{"/data"});
}

TEST(StoreJournalTest, WalOnLocalDiskTheRollbackJournalOnANetworkFilesystem) {
  const FilesystemKind ext4{"ext4", false}, nfs{"nfs", true};
  StoreJournal local = ChooseStoreJournal("auto", "/var/t.db", ext4);
  EXPECT_EQ(local.journal, sqlite::Journal::kWal);
  EXPECT_EQ(local.said, "db /var/t.db on ext4, local: WAL");
  StoreJournal shared = ChooseStoreJournal("auto", "/home/a/t.db", nfs);
  EXPECT_EQ(shared.journal, sqlite::Journal::kRollback);
  EXPECT_EQ(shared.said, "db /home/a/t.db on nfs, a network filesystem: rollback journal (WAL's "
                         "shared memory is one host's; --db-journal wal to force it)");
  EXPECT_EQ(ChooseStoreJournal("wal", "/home/a/t.db", nfs).journal, sqlite::Journal::kWal);
  EXPECT_EQ(ChooseStoreJournal("rollback", "/var/t.db", ext4).journal,
            sqlite::Journal::kRollback);
  StoreJournal unknown =
      ChooseStoreJournal("auto", "/x/t.db", absl::NotFoundError("/x/t.db: neither it nor its "
                                                                  "directory exists"));
  EXPECT_EQ(unknown.journal, sqlite::Journal::kWal);
  EXPECT_NE(unknown.said.find("statfs could not tell"), std::string::npos) << unknown.said;
}

TEST(TcpSecurityTest, PlainTcpOnlyOnLoopbackOrWhenToldItIsSafe) {
  auto loopback = CheckTcpSecurity(Parse({}));
  ASSERT_TRUE(loopback.ok()) << loopback.status();
  EXPECT_FALSE(loopback->tls);
  EXPECT_NE(loopback->credentials, nullptr);

  auto open = CheckTcpSecurity(Parse({"--listen", "0.0.0.0:50151"}));
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("--listen 0.0.0.0:50151"), std::string::npos)
      << open.status();
  EXPECT_TRUE(CheckTcpSecurity(Parse({"--listen", "0.0.0.0:50151", "--insecure-tcp"})).ok());
}

TEST(TcpSecurityTest, TlsNeedsTheWholePair) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--tls-cert", "/c.pem"}, {"--tls-key", "/k.pem"}, {"--tls-ca", "/ca.pem"}}) {
    auto st = CheckTcpSecurity(Parse(args));
    ASSERT_FALSE(st.ok()) << args[0];
    EXPECT_NE(st.status().message().find("TLS needs both"), std::string::npos) << st.status();
  }
  auto missing = CheckTcpSecurity(
      Parse({"--tls-cert", "/nonexistent/c.pem", "--tls-key", "/nonexistent/k.pem"}));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/"), std::string::npos)
      << missing.status();
}

class SettlePathsTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("settle_paths_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SettlePathsTest, MakesTheOutputRootAbsoluteAndDefaultsTheWorker) {
  ControllerFlags flags = Parse({});
  flags.config.output_root = (dir_ / "a/../runs").string();
  ASSERT_TRUE(SettlePaths(flags, TcpSecurity{}).ok());
  EXPECT_EQ(flags.config.output_root, (dir_ / "runs").string());
  EXPECT_TRUE(fs::is_directory(dir_ / "runs"));
  EXPECT_EQ(fs::path(flags.config.worker_bin).filename(), "trellis-worker");
  EXPECT_EQ(flags.config.worker_bin[0], '/');
  EXPECT_EQ(flags.config.worker_tls_ca, "") << "no TLS";
}

TEST_F(SettlePathsTest, WithTlsTheWorkersCaLiesUnderTheOutputRoot) {
  ControllerFlags flags = Parse({});
  flags.config.output_root = dir_.string();
  TcpSecurity tls{true, nullptr, "-----BEGIN CERTIFICATE-----\n"};
  ASSERT_TRUE(SettlePaths(flags, tls).ok());
  EXPECT_EQ(flags.config.worker_tls_ca, (dir_ / "controller-ca.pem").string());
  std::stringstream text;
  text << std::ifstream(flags.config.worker_tls_ca).rdbuf();
  EXPECT_EQ(text.str(), tls.worker_ca_pem);
}

TEST_F(SettlePathsTest, RefusesRelativeRootsAndWorkersAndAnUnwritableSdDirectory) {
  struct Case {
    std::vector<std::string> args;
    std::string named;
  };
  for (const Case& c : std::vector<Case>{
           {{"--data-root", "data"}, "--data-root data"},
           {{"--worker-bin", "bin/trellis-worker"}, "--worker-bin bin/trellis-worker"},
           {{"--prometheus-sd-file", "/nonexistent/targets.json"}, "--prometheus-sd-file"}}) {
    ControllerFlags flags = Parse(c.args);
    flags.config.output_root = dir_.string();
    absl::Status st = SettlePaths(flags, TcpSecurity{});
    ASSERT_FALSE(st.ok()) << c.named;
    EXPECT_NE(st.message().find(c.named), std::string::npos) << st;
  }
}

TEST_F(SettlePathsTest, TheStateDirHoldsTheDatabaseAndTheRunsUnlessTold) {
  ControllerFlags flags;
  flags.state_dir = (dir_ / "state/../state").string();
  ASSERT_TRUE(SettleStateDir(flags).ok());
  EXPECT_EQ(flags.state_dir, (dir_ / "state").string());
  EXPECT_TRUE(fs::is_directory(dir_ / "state"));
  EXPECT_EQ(flags.db_path, (dir_ / "state/trellis.db").string());
  EXPECT_EQ(flags.config.output_root, (dir_ / "state/runs").string());

  ControllerFlags told;
  told.state_dir = (dir_ / "s2").string();
  told.db_path = (dir_ / "elsewhere.db").string();
  told.config.output_root = "/shared/runs";
  ASSERT_TRUE(SettleStateDir(told).ok());
  EXPECT_EQ(told.db_path, (dir_ / "elsewhere.db").string());
  EXPECT_EQ(told.config.output_root, "/shared/runs");
}

TEST_F(SettlePathsTest, WithOnlyTheDatabaseItsDirectoryIsTheStateDir) {
  ControllerFlags flags = Parse({});
  flags.db_path = (dir_ / "controller.db").string();
  ASSERT_TRUE(SettleStateDir(flags).ok());
  EXPECT_EQ(flags.state_dir, dir_.string());
  EXPECT_EQ(flags.config.output_root, "/tmp/out") << "as given";

  ControllerFlags none;
  absl::Status st = SettleStateDir(none);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--state-dir"), std::string::npos) << st;
  ControllerFlags no_root;
  no_root.db_path = (dir_ / "controller.db").string();
  st = SettleStateDir(no_root);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--output-root is required"), std::string::npos) << st;
}

TEST(SbatchTemplateTest, BuiltInOrTheFileGiven) {
  auto built_in = SbatchTemplate(Parse({}));
  ASSERT_TRUE(built_in.ok());
  EXPECT_EQ(*built_in, kSbatchTemplate);
  auto missing = SbatchTemplate(Parse({"--sbatch-template", "/nonexistent/t.sh"}));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/t.sh"), std::string::npos);
}

}  // namespace
}  // namespace trellis::controller
