// The answers to questions asked again, from the launch row alone.

#include "controller/app/launch_answers.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

GoRecord Record() {
  GoRecord record;
  GateAnswer& go = record.go;
  go.reason = "2 nodes go, 1 standing by";
  go.ranks_per_node = 4;
  go.world_size = 8;
  go.master_addr = "host-a";
  go.master_port = 29612;
  go.resume_step = 40;
  go.checkpoint_dir = "/out/r-1/checkpoints";
  record.step = {"812", "2"};
  record.allocation = {"a", "b", "c"};
  record.metrics_addrs = {{"a", "a:9400"}, {"c", "c:9400"}};
  return record;
}

LaunchRecord GoRow() {
  LaunchRecord row;
  row.run_id = "r-1";
  row.attempt = 2;
  row.launch = 3;
  row.nodes = "a,b";
  row.go_json = GoRecordToJson(Record());
  return row;
}

TEST(LaunchAnswersTest, AGoRecordReadsBackWhatWasWritten) {
  absl::StatusOr<GoRecord> back = GoRecordFromJson(GoRow().go_json);
  ASSERT_TRUE(back.ok()) << back.status();
  const GoRecord want = Record();
  EXPECT_EQ(back->go.kind, GateAnswer::kGo);
  EXPECT_EQ(back->go.reason, want.go.reason);
  EXPECT_EQ(back->go.master_port, want.go.master_port);
  EXPECT_EQ(back->step.job_id, "812");
  EXPECT_EQ(back->step.step_id, "2");
  EXPECT_EQ(back->allocation, want.allocation);
  EXPECT_EQ(back->metrics_addrs, want.metrics_addrs);
  EXPECT_TRUE(back->reports_kept);
  // Without the launch's step, allocation and metrics: read as empty; a
  // record of schema 6 says nothing of final reports, which were not kept.
  auto bare = GoRecordFromJson(R"({"reason":"x","ranks_per_node":1,"world_size":2,)"
                               R"("master_addr":"h","master_port":1,"resume_step":-1,)"
                               R"("checkpoint_dir":""})");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_TRUE(bare->step.job_id.empty());
  EXPECT_TRUE(bare->allocation.empty());
  EXPECT_TRUE(bare->metrics_addrs.empty());
  EXPECT_FALSE(bare->reports_kept);
  // A wrong type is named, not taken for empty.
  auto wrong = GoRecordFromJson(R"({"reason":"x","ranks_per_node":1,"world_size":2,)"
                                R"("master_addr":"h","master_port":1,"resume_step":-1,)"
                                R"("checkpoint_dir":"","allocation":"a,b"})");
  EXPECT_FALSE(wrong.ok());
}

TEST(LaunchAnswersTest, AGoNodeGetsItsPlaceInTheRankOrderAndTheSharedFields) {
  GateAnswer b = AnswerDecidedLaunch(GoRow(), "b");
  EXPECT_EQ(b.kind, GateAnswer::kGo);
  EXPECT_EQ(b.node_index, 1);
  EXPECT_EQ(b.rank_offset, 4);
  EXPECT_EQ(b.world_size, 8);
  EXPECT_EQ(b.master_addr, "host-a");
  EXPECT_EQ(b.master_port, 29612);
  EXPECT_EQ(b.resume_step, 40);
  EXPECT_EQ(b.checkpoint_dir, "/out/r-1/checkpoints");
  EXPECT_EQ(AnswerDecidedLaunch(GoRow(), "a").rank_offset, 0);
  GateAnswer c = AnswerDecidedLaunch(GoRow(), "c");
  EXPECT_EQ(c.kind, GateAnswer::kStandby);
  EXPECT_EQ(c.reason, "the gate of launch 2.3 already decided: a, b go");
}

TEST(LaunchAnswersTest, AnEndedLaunchAnOldRowOrACorruptGoIsAborted) {
  LaunchRecord ended = GoRow();
  ended.ended = WallTime{};
  ended.reason = "rank 0 on a exited with 3";
  GateAnswer late = AnswerDecidedLaunch(ended, "a");
  EXPECT_EQ(late.kind, GateAnswer::kAbort);
  EXPECT_EQ(late.reason,
            "launch 2.3 already ended (rank 0 on a exited with 3); this worker registered late");

  LaunchRecord old = GoRow();
  old.go_json.clear();
  EXPECT_EQ(AnswerDecidedLaunch(old, "a").kind, GateAnswer::kAbort);
  EXPECT_NE(AnswerDecidedLaunch(old, "a").reason.find("schema 6"), std::string::npos);

  for (const char* bad : {"{", "[]", R"({"reason":"x"})", R"({"reason":"x","ranks_per_node":0,
      "world_size":8,"master_addr":"h","master_port":1,"resume_step":-1,"checkpoint_dir":""})"}) {
    LaunchRecord corrupt = GoRow();
    corrupt.go_json = bad;
    GateAnswer a = AnswerDecidedLaunch(corrupt, "a");
    EXPECT_EQ(a.kind, GateAnswer::kAbort) << bad;
    EXPECT_NE(a.reason.find("launch GO record"), std::string::npos) << a.reason;
  }
}

TEST(LaunchAnswersTest, ASettledLaunchAskedAgainGetsTheSameRelaunchOrExit) {
  LaunchRecord row = GoRow();
  row.ended = WallTime{};
  row.reason = "node b lost";
  row.exit_code = 137;
  row.recovery = "relaunch";
  row.next_nodes = "a,c";
  NextLaunchAnswer again = AnswerSettledLaunch(row, /*relaunch_due=*/true);
  EXPECT_TRUE(again.relaunch);
  EXPECT_EQ(again.next_launch, 4);
  EXPECT_EQ(again.nodes, (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(again.reason, "launch 2.3 ended (node b lost); asked again: relaunch 4 on a, c");

  NextLaunchAnswer late = AnswerSettledLaunch(row, /*relaunch_due=*/false);
  EXPECT_FALSE(late.relaunch);
  EXPECT_EQ(late.exit_code, 137);
  EXPECT_EQ(late.reason,
            "launch 2.3 ended (node b lost); asked again: its relaunch is no longer due");

  row.recovery = "succeed";
  row.exit_code = 0;
  row.reason = "all 8 ranks exited 0";
  NextLaunchAnswer done = AnswerSettledLaunch(row, true);
  EXPECT_FALSE(done.relaunch);
  EXPECT_EQ(done.exit_code, 0);
}

}  // namespace
}  // namespace trellis::controller
