// The latest step record of every rank, as GetRun returns it on request.

#include "controller/app/controller_fixture.h"

namespace trellis::controller {
namespace {

class RanksTest : public GateTest {
 protected:
  // One worker stream carrying step records: (rank, record) in order.
  void SendSteps(const std::string& run_id, const std::string& node, int launch,
                 const std::vector<std::pair<int, v1::StepRecord>>& steps) {
    v1::WorkerIdentity id = Identity(run_id, node);
    id.set_launch(launch);
    std::vector<v1::AgentReport> reports;
    for (const auto& [rank, record] : steps) reports.push_back(StepBatchOf(rank, record));
    for (const v1::ReportAck& a : SendReports(id, reports))
      EXPECT_EQ(a.result(), v1::ReportAck::RESULT_STORED) << a.error();
  }
  v1::Run GetRanks(const std::string& id, int from = 0, int limit = 0) {
    grpc::ClientContext ctx;
    v1::GetRunRequest req;
    req.set_run_id(id);
    req.set_include_ranks(true);
    req.set_ranks_from(from);
    req.set_ranks_limit(limit);
    v1::Run run;
    EXPECT_TRUE(user_stub_->GetRun(&ctx, req, &run).ok());
    return run;
  }
};

v1::StepRecord Record(int64_t step, double loss = 2.0) {
  v1::StepRecord r;
  r.set_step(step);
  r.set_loss(loss);
  r.set_tokens(100);
  r.set_step_seconds(0.5);
  return r;
}

std::vector<int> RanksOf(const v1::Run& run) {
  std::vector<int> out;
  for (const auto& r : run.ranks()) out.push_back(r.rank());
  return out;
}

TEST_F(RanksTest, GetRunHasTheLatestRecordOfEveryRankWhenAsked) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp).ok());
  WaitFor("hello-1", v1::RUN_STATE_SUBMITTED);
  RegisterAll("hello-1", {"node1", "node2"});
  WaitFor("hello-1", v1::RUN_STATE_RUNNING);

  v1::StepRecord busy = Record(1);
  busy.set_alloc_retries(2);
  busy.set_mem_reserved_peak_bytes(3 * kGiB);
  busy.set_nccl_max_ctas(16);
  SendSteps("hello-1", "node1", 1, {{0, Record(1)}, {1, busy}, {0, Record(2, 1.5)}});
  SendSteps("hello-1", "node2", 1, {{2, Record(1)}, {3, Record(1)}, {4, Record(1)}});

  // Not unless asked.
  v1::Run plain = Get("hello-1");
  EXPECT_EQ(plain.ranks_size(), 0);
  EXPECT_EQ(plain.ranks_world(), 0);

  v1::Run run = GetRanks("hello-1");
  EXPECT_EQ(run.ranks_world(), 4);
  EXPECT_EQ(run.ranks_reported(), 4);  // rank 4 is outside the world: not kept
  EXPECT_EQ(run.ranks_next(), 0);
  ASSERT_EQ(RanksOf(run), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(run.ranks(0).record().step(), 2);
  EXPECT_DOUBLE_EQ(run.ranks(0).record().loss(), 1.5);
  EXPECT_EQ(run.ranks(0).node(), "node1");
  EXPECT_EQ(run.ranks(1).record().alloc_retries(), 2);
  EXPECT_EQ(run.ranks(1).record().mem_reserved_peak_bytes(), 3 * kGiB);
  EXPECT_EQ(run.ranks(1).record().nccl_max_ctas(), 16);
  EXPECT_FALSE(run.ranks(0).record().has_alloc_retries());
  EXPECT_EQ(run.ranks(2).node(), "node2");
  EXPECT_EQ(run.ranks(3).attempt(), 1);
  EXPECT_EQ(run.ranks(3).launch(), 1);
  EXPECT_EQ(run.ranks(3).received_unix_ms(), ToUnixMillis(clock_.Now()));
  // The step summaries are unchanged: rank 0 and 1 at step 1, rank 0 at 2.
  EXPECT_EQ(run.recent_steps_size(), 2);

  // Paged by rank.
  run = GetRanks("hello-1", 0, 3);
  EXPECT_EQ(RanksOf(run), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(run.ranks_next(), 3);
  run = GetRanks("hello-1", run.ranks_next(), 3);
  EXPECT_EQ(RanksOf(run), std::vector<int>{3});
  EXPECT_EQ(run.ranks_next(), 0);
  EXPECT_EQ(run.ranks_reported(), 4);

  // A newer launch replaces the set; a late record of the old one is ignored.
  SendSteps("hello-1", "node2", 2, {{3, Record(7)}});
  SendSteps("hello-1", "node1", 1, {{0, Record(3)}});
  run = GetRanks("hello-1");
  EXPECT_EQ(run.ranks_reported(), 1);
  ASSERT_EQ(RanksOf(run), std::vector<int>{3});
  EXPECT_EQ(run.ranks(0).launch(), 2);
  EXPECT_EQ(run.ranks(0).record().step(), 7);

  // A run that just ended keeps its set.
  grpc::ClientContext ctx;
  v1::CancelRunRequest cancel;
  cancel.set_run_id("hello-1");
  v1::CancelRunResponse cresp;
  ASSERT_TRUE(user_stub_->CancelRun(&ctx, cancel, &cresp).ok());
  run = GetRanks("hello-1");
  EXPECT_EQ(run.summary().state(), v1::RUN_STATE_CANCELLED);
  EXPECT_EQ(RanksOf(run), std::vector<int>{3});
}

TEST_F(RanksTest, ARunWithoutStepsHasNoRanks) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp).ok());
  v1::Run run = GetRanks(WaitFor("hello-1", v1::RUN_STATE_SUBMITTED).summary().run_id());
  EXPECT_EQ(run.ranks_size(), 0);
  EXPECT_EQ(run.ranks_world(), 0);
  EXPECT_EQ(run.ranks_reported(), 0);
}

}  // namespace
}  // namespace trellis::controller
