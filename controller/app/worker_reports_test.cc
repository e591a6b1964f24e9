// A worker's final report through the store's row and back.

#include "controller/app/worker_reports.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

WorkerReport Report() {
  WorkerReport r;
  RankExitInfo failed{"node2", 3, 1, 0, false, {"device_error"}, "Xid 79: \xff fell off the bus"};
  RankExitInfo stopped{"node2", 2, 143, 15, true, {}, ""};
  r.ranks = {failed, stopped};
  r.oom_kills = 2;
  r.time_limit_warned = true;
  r.exit_code = 1;
  r.reason = "rank 3 exited 1";
  return r;
}

TEST(WorkerReportsTest, AReportReadsBackWhatWasWritten) {
  WorkerId id{"r-1", 2, 3, "node2", "secret"};
  WorkerReportRecord row = WorkerReportRecordOf(id, WallTime{}, Report());
  EXPECT_EQ(row.run_id, "r-1");
  EXPECT_EQ(row.attempt, 2);
  EXPECT_EQ(row.launch, 3);
  EXPECT_EQ(row.node, "node2");
  EXPECT_EQ(row.ranks_json.find("secret"), std::string::npos);
  absl::StatusOr<WorkerReport> back = WorkerReportFromRecord(row);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->ranks.size(), 2u);
  const RankExitInfo& r3 = back->ranks[0];
  EXPECT_EQ(r3.node, "node2");
  EXPECT_EQ(r3.rank, 3);
  EXPECT_EQ(r3.exit_code, 1);
  EXPECT_EQ(r3.signal, 0);
  EXPECT_FALSE(r3.after_stop);
  EXPECT_EQ(r3.markers, std::vector<std::string>{"device_error"});
  // A byte that is not UTF-8 is replaced, the line kept.
  EXPECT_NE(r3.evidence_line.find("fell off the bus"), std::string::npos);
  EXPECT_EQ(back->ranks[1].signal, 15);
  EXPECT_TRUE(back->ranks[1].after_stop);
  EXPECT_EQ(back->oom_kills, 2);
  EXPECT_TRUE(back->time_limit_warned);
  EXPECT_EQ(back->exit_code, 1);
  EXPECT_EQ(back->reason, "rank 3 exited 1");
}

TEST(WorkerReportsTest, CorruptRanksAreDataLossNamingTheReport) {
  WorkerReportRecord row = WorkerReportRecordOf({"r-1", 2, 3, "node2", ""}, WallTime{}, Report());
  for (const char* bad : {"{", "{}", R"([{"rank":"three"}])", R"([{"rank":3}])"}) {
    row.ranks_json = bad;
    absl::StatusOr<WorkerReport> back = WorkerReportFromRecord(row);
    ASSERT_FALSE(back.ok()) << bad;
    EXPECT_EQ(back.status().code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_NE(back.status().message().find("final report of node2 on launch 2.3"),
              std::string::npos)
        << back.status();
  }
}

}  // namespace
}  // namespace trellis::controller
