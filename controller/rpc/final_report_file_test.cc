// A worker's final report read from its launch's directory: what a worker
// writes reads back; anything else is refused, naming the path.
#include "controller/rpc/final_report_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/run_layout.h"

namespace trellis::controller {
namespace {

namespace fs = std::filesystem;

class FinalReportFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("final_report_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "attempt-2" / "launch-3");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path() const { return FinalReportPath(dir_.string(), 2, 3, "node2"); }
  void Write(const std::string& text) const { std::ofstream(Path()) << text; }
  WorkerId Node2() const { return {"r-1", 2, 3, "node2", ""}; }

  fs::path dir_;
};

// As the worker writes it (protobuf's JSON, field names kept, no secret).
constexpr char kReport[] = R"({"id":{"run_id":"r-1","attempt":2,"launch":3,"node":"node2"},
  "ranks":[{"rank":3,"exit_code":1,"markers":["device_error"],"evidence":"Xid 79"},
           {"rank":2,"exit_code":143,"signal":15,"after_stop":true}],
  "exit_code":1,"reason":"rank 3 exited 1","oom_kills":0,"planned_stop":"time_limit"})";

TEST_F(FinalReportFileTest, AWorkersFileReadsBack) {
  Write(kReport);
  absl::StatusOr<WorkerReport> r = ReadFinalReportFile(dir_.string(), Node2());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->ranks.size(), 2u);
  EXPECT_EQ(r->ranks[0].node, "node2");
  EXPECT_EQ(r->ranks[0].rank, 3);
  EXPECT_EQ(r->ranks[0].markers, std::vector<std::string>{"device_error"});
  EXPECT_EQ(r->ranks[0].evidence_line, "Xid 79");
  EXPECT_EQ(r->ranks[1].signal, 15);
  EXPECT_TRUE(r->ranks[1].after_stop);
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_EQ(r->reason, "rank 3 exited 1");
  EXPECT_EQ(r->oom_kills, 0);
  EXPECT_TRUE(r->time_limit_warned);
}

TEST_F(FinalReportFileTest, NoFileIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(ReadFinalReportFile(dir_.string(), Node2()).status()));
}

TEST_F(FinalReportFileTest, AnythingElseIsRefusedNamingThePath) {
  auto refused = [&](const std::string& why) {
    absl::StatusOr<WorkerReport> r = ReadFinalReportFile(dir_.string(), Node2());
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_FALSE(absl::IsNotFound(r.status())) << why;
    EXPECT_NE(r.status().message().find(Path()), std::string::npos) << why << ": " << r.status();
  };
  Write("{not json");
  refused("not JSON");
  Write(R"({"id":{"run_id":"r-1","attempt":2,"launch":3,"node":"node1"},"exit_code":0})");
  refused("another node's report");
  Write(R"({"id":{"run_id":"r-1","attempt":2,"launch":2,"node":"node2"},"exit_code":0})");
  refused("another launch's report");
  Write(R"({"id":{"run_id":"r-1","attempt":2,"launch":3,"node":"node2"},"exit_code":300})");
  refused("an exit code out of range");
  Write(R"({"id":{"run_id":"r-1","attempt":2,"launch":3,"node":"node2"},"planned_stop":"x"})");
  refused("an unknown planned stop");
  Write(std::string(2 << 20, ' '));
  refused("over 1 MiB");
  fs::remove(Path());
  std::ofstream(dir_ / "elsewhere.json") << kReport;
  fs::create_symlink(dir_ / "elsewhere.json", Path());
  refused("a link");
  fs::remove(Path());
  fs::create_directory(Path());
  refused("a directory");
}

}  // namespace
}  // namespace trellis::controller
