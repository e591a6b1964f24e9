// Which files `trellis logs` reads, and what it says of an attempt, launch,
// rank or node that does not exist; where the last N lines of a file start.
#include "controller/rpc/log_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace trellis::controller {
namespace {

namespace fs = std::filesystem;

class LogFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("log_files_test_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    view_.run.run_id = "hello-1";
    view_.run.run_dir = dir_.string();
    view_.run.nodes = 2;
    view_.run.ranks_per_node = 2;
    for (int a : {1, 2}) {
      AttemptRecord rec;
      rec.attempt = a;
      view_.attempts.push_back(rec);
    }
    for (int l : {1, 2}) {
      LaunchRecord rec;
      rec.attempt = 2;
      rec.launch = l;
      rec.nodes = l == 1 ? "node1,node2" : "node2,node3";
      view_.launches.push_back(rec);
      for (int r = 0; r < 4; ++r) {
        const std::string log =
            "attempt-2/launch-" + std::to_string(l) + "/rank-" + std::to_string(r) + ".log";
        Write(log, "x\n");
        Write(log + ".times", "1796665897123 2\n");  // beside it, not a log of its own
      }
    }
    Write("attempt-2/slurm-77.out", "batch\n");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
  }
  std::vector<int> Ranks(const v1::ReadLogsRequest& req) {
    auto found = FindLogFiles(view_, req);
    EXPECT_TRUE(found.ok()) << found.status();
    std::vector<int> ranks;
    if (found.ok())
      for (const LogFile& f : found->files) ranks.push_back(f.rank);
    return ranks;
  }
  std::string Error(const v1::ReadLogsRequest& req) {
    return std::string(FindLogFiles(view_, req).status().message());
  }
  fs::path dir_;
  RunView view_;
};

TEST_F(LogFilesTest, TheLatestLaunchOfTheLatestAttemptByDefault) {
  v1::ReadLogsRequest req;
  req.set_rank(-1);
  EXPECT_EQ(Ranks(req), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(FindLogFiles(view_, req)->dir, dir_.string() + "/attempt-2/launch-2");
  req.set_launch(1);
  EXPECT_EQ(FindLogFiles(view_, req)->dir, dir_.string() + "/attempt-2/launch-1");
  req.set_rank(3);
  EXPECT_EQ(Ranks(req), std::vector<int>{3});
}

TEST_F(LogFilesTest, ANodesRanksAreItsPlaceInTheLaunch) {
  v1::ReadLogsRequest req;
  req.set_rank(-1);
  req.set_node("node2");
  EXPECT_EQ(Ranks(req), (std::vector<int>{0, 1})) << "launch 2: node2 first";
  req.set_launch(1);
  EXPECT_EQ(Ranks(req), (std::vector<int>{2, 3})) << "launch 1: node2 second";
}

TEST_F(LogFilesTest, WhatDoesNotExistIsNamedWithWhatDoes) {
  v1::ReadLogsRequest req;
  req.set_rank(7);
  EXPECT_EQ(Error(req), "run hello-1 has ranks 0..3; no rank 7");
  req.set_rank(-1);
  req.set_attempt(5);
  EXPECT_EQ(Error(req), "run hello-1 has no attempt 5; its attempts: 1, 2");
  req.set_attempt(2);
  req.set_launch(4);
  EXPECT_EQ(Error(req), "attempt 2 of run hello-1 has no launch 4; its launches: 1, 2");
  req.set_launch(2);
  req.set_node("node9");
  EXPECT_EQ(Error(req), "node node9 ran no rank of launch 2.2 of run hello-1; its nodes: node2, "
                        "node3");
}

TEST_F(LogFilesTest, TheBatchScriptsOutputIsTheAttempts) {
  v1::ReadLogsRequest req;
  req.set_batch_script(true);
  auto found = FindLogFiles(view_, req);
  ASSERT_TRUE(found.ok());
  ASSERT_EQ(found->files.size(), 1u);
  EXPECT_EQ(found->files[0].rank, -1);
  EXPECT_EQ(found->files[0].path, dir_.string() + "/attempt-2/slurm-77.out");
}

TEST_F(LogFilesTest, TailOffsetIsWhereTheLastLinesStart) {
  Write("t.log", "a\nbb\nccc\n");
  const std::string path = (dir_ / "t.log").string();
  EXPECT_EQ(TailOffset(path, 1), 5u);
  EXPECT_EQ(TailOffset(path, 2), 2u);
  EXPECT_EQ(TailOffset(path, 3), 0u);
  EXPECT_EQ(TailOffset(path, 10), 0u);
  Write("u.log", "a\nbb\nunterminated");
  EXPECT_EQ(TailOffset((dir_ / "u.log").string(), 1), 5u);
  EXPECT_EQ(TailOffset((dir_ / "u.log").string(), 2), 2u);
}

}  // namespace
}  // namespace trellis::controller
