// The reconciler alone: what Slurm says of each live attempt's job, and the
// commands that settle it (ended, failed, vanished, time limit, requeue).
#include "controller/app/reconciler.h"

#include <fstream>

#include "controller/app/launch_answers.h"
#include "controller/app/part_test_util.h"

namespace trellis::controller {
namespace {

class ReconcilerTest : public PartTest {
 protected:
  void SetUp() override {
    AddRun(RunState::kRunning);
    store_.AddAttempt("hello-1", 1, "42");
  }
  // A tick answered with squeue listing `listed`, and `shown` for job 42 when unlisted.
  Effects Seen(std::vector<SlurmJob> listed, std::optional<SlurmJob> shown = std::nullopt) {
    QueryJobs q = Only<QueryJobs>(reconciler_.Tick(/*startup=*/false));
    EXPECT_EQ(q.job_ids, std::vector<std::string>{"42"});
    JobsSeen seen{listed, {}, false};
    bool in_queue = false;
    for (const auto& j : listed) in_queue = in_queue || j.id == "42";
    if (!in_queue) seen.shown.emplace("42", shown);
    return reconciler_.OnSnapshot(seen);
  }
  static SlurmJob Job(std::string state, std::optional<int> exit_code = std::nullopt) {
    return {"42", std::move(state), "None", "node[1-2]", exit_code, 0};
  }
  Reconciler reconciler_{ctx_};
};

TEST_F(ReconcilerTest, OneQueryIsInFlightAtATimeAndNoneWithoutLiveJobs) {
  EXPECT_EQ(reconciler_.Tick(false).All<QueryJobs>().size(), 1u);
  EXPECT_TRUE(reconciler_.Tick(false).empty());
  reconciler_.OnSnapshot({std::vector<SlurmJob>{}, {}, false});
  store_.attempts["hello-1"][0].ended = clock_.Now();
  EXPECT_TRUE(reconciler_.Tick(false).empty());
}

TEST_F(ReconcilerTest, ARunningJobIsLeftAloneAndItsNodesRecorded) {
  Effects fx = Seen({Job("RUNNING")});
  EXPECT_TRUE(fx.All<Transition>().empty());
  EXPECT_TRUE(fx.All<AttemptEnded>().empty());
  EXPECT_EQ(Only<RecordAttemptNodes>(fx).nodes, "node[1-2]");
}

TEST_F(ReconcilerTest, AJobThatCompletedUnseenSucceedsTheRun) {
  Effects fx = Seen({}, Job("COMPLETED", 0));
  Transition t = Only<Transition>(fx);
  EXPECT_EQ(t.to, RunState::kSucceeded);
  EXPECT_EQ(std::get<RecordAttemptEnd>(t.also.at(0)).exit_code, 0);
  EXPECT_EQ(Only<EndLaunchesOfRun>(fx).why, "Slurm job ended");
}

TEST_F(ReconcilerTest, AFailedJobEndsTheAttemptForTheSchedulerToDecide) {
  Effects fx = Seen({}, Job("FAILED", 2));
  AttemptEnded end = Only<AttemptEnded>(fx);
  EXPECT_EQ(end.exit_code, 2);
  EXPECT_FALSE(end.decided) << "the restart budget decides";
  EXPECT_TRUE(fx.All<Transition>().empty());
}

TEST_F(ReconcilerTest, AVanishedJobEndsTheAttempt) {
  AttemptEnded end = Only<AttemptEnded>(Seen({}, std::nullopt));
  EXPECT_NE(end.why.find("vanished"), std::string::npos);
}

TEST_F(ReconcilerTest, TheTimeLimitIsAContinuationNotAFailure) {
  AttemptEnded end = Only<AttemptEnded>(Seen({}, Job("TIMEOUT", 0)));
  ASSERT_TRUE(end.decided);
  EXPECT_EQ(end.decided->kind, RecoveryDecision::kNewAttempt);
  EXPECT_FALSE(end.decided->uses_restart);
  EXPECT_EQ(end.failure_class, FailureClass::kTimeLimit);
}

// A time limit Slurm ended unseen, whose launch left no checkpoint newer than
// the step it resumed from: as on the launch path, no free continuation (it
// would redo the same steps); the restart budget decides. With progress, the
// continuation as above.
TEST_F(ReconcilerTest, AnUnseenTimeLimitWithoutProgressIsNotAFreeContinuation) {
  const std::string ckpt = root_.string() + "/ckpt";
  std::filesystem::create_directories(ckpt + "/step-00000019");
  std::ofstream(ckpt + "/step-00000019/manifest.json") << "{}";
  GoRecord go;
  go.go.ranks_per_node = 2;
  go.go.world_size = 4;
  go.go.resume_step = 19;
  go.go.checkpoint_dir = ckpt;
  LaunchRecord row;
  row.run_id = "hello-1";
  row.attempt = 1;
  row.launch = 1;
  row.go_json = GoRecordToJson(go);
  store_.launches["hello-1"].push_back(row);
  AttemptEnded end = Only<AttemptEnded>(Seen({}, Job("TIMEOUT", 0)));
  EXPECT_FALSE(end.decided) << "the budget decides";
  EXPECT_EQ(end.failure_class, FailureClass::kTimeLimit);
  EXPECT_NE(end.why.find("no checkpoint newer than step 19"), std::string::npos) << end.why;

  std::filesystem::create_directories(ckpt + "/step-00000040");
  std::ofstream(ckpt + "/step-00000040/manifest.json") << "{}";
  Reconciler again{ctx_};
  EXPECT_EQ(Only<QueryJobs>(again.Tick(false)).job_ids, std::vector<std::string>{"42"});
  JobsSeen seen{std::vector<SlurmJob>{}, {}, false};
  seen.shown.emplace("42", std::optional<SlurmJob>(Job("TIMEOUT", 0)));
  end = Only<AttemptEnded>(again.OnSnapshot(seen));
  ASSERT_TRUE(end.decided);
  EXPECT_EQ(end.decided->kind, RecoveryDecision::kNewAttempt);
}

TEST_F(ReconcilerTest, TheBatchScriptsExitFileIsTheMostPreciseRecord) {
  std::filesystem::create_directories(config_.output_root + "/hello-1/attempt-1");
  std::ofstream(config_.output_root + "/hello-1/attempt-1/exit.json")
      << R"({"exit_code": 143, "last_launch": 1, "reason": "wall-time warning"})";
  AttemptEnded end = Only<AttemptEnded>(Seen({}, Job("FAILED", 1)));
  EXPECT_EQ(end.exit_code, 143);
  EXPECT_EQ(end.failure_class, FailureClass::kTimeLimit);
}

TEST_F(ReconcilerTest, AJobPendingAgainAfterItStartedWasRequeuedBySlurm) {
  SlurmJob pending = Job("PENDING");
  pending.reason = "BeginTime";
  Effects fx = Seen({pending});
  EXPECT_EQ(Only<Transition>(fx).to, RunState::kSubmitted);
  EXPECT_EQ(Only<EndLaunchesOfRun>(fx).why, "Slurm requeued the job");
}

TEST_F(ReconcilerTest, SqueueFailingSettlesNothing) {
  reconciler_.Tick(false);
  Effects fx = reconciler_.OnSnapshot({absl::UnavailableError("squeue"), {}, false});
  EXPECT_TRUE(fx.empty());
  EXPECT_EQ(reconciler_.Tick(false).All<QueryJobs>().size(), 1u) << "asked again";
}

// A SUBMITTED run's job that Slurm keeps pending for a reason that does not
// pass: said as the run's wait reason, then after --unschedulable-after-s
// cancelled, the run FAILED. A reason that passes (Priority) says nothing.
TEST_F(ReconcilerTest, AJobPendingForGoodIsSaidThenFailsTheRun) {
  store_.runs["hello-1"].state = RunState::kSubmitted;
  config_.unschedulable_after = std::chrono::seconds(600);
  SlurmJob pending = Job("PENDING");
  pending.reason = "Priority";
  EXPECT_TRUE(Seen({pending}).empty()) << "a reason that passes by itself";
  pending.reason = "ReqNodeNotAvail, UnavailableNodes:node4";
  Effects fx = Seen({pending});
  EXPECT_EQ(Only<SetWaitReason>(fx).reason,
            "Slurm keeps job 42 pending: ReqNodeNotAvail, UnavailableNodes:node4 (a node it "
            "needs is down, drained or reserved); the run fails if it stays so for 600 s");
  store_.runs["hello-1"].state_reason = Only<SetWaitReason>(fx).reason;
  clock_.Advance(std::chrono::seconds(300));
  EXPECT_TRUE(Seen({pending}).empty()) << "said once";
  clock_.Advance(std::chrono::seconds(300));
  fx = Seen({pending});
  EXPECT_EQ(Only<CancelJob>(fx).job_id, "42");
  Transition t = Only<Transition>(fx);
  EXPECT_EQ(t.to, RunState::kRestarting);
  ASSERT_TRUE(t.next);
  EXPECT_EQ(t.next->to, RunState::kFailed);
  EXPECT_NE(t.reason.find("for 600 s (--unschedulable-after-s): it would not start"),
            std::string::npos)
      << t.reason;
}

}  // namespace
}  // namespace trellis::controller
