// Slurm ending or requeueing a job under a launch (launch_requeue.cc;
// tests/e2e/requeue.sh runs `scontrol requeue` on Slurm). A batch script that
// Slurm signalled records its launch as terminated and decides nothing; a job
// pending again is a requeue: the run waits as SUBMITTED, the batch script
// started over gets the attempt's next launch, which is gated again, and no
// restart is used.

#include "absl/strings/str_join.h"
#include "controller/app/controller_health_fixture.h"

namespace trellis::controller {
namespace {

constexpr char kRequeueRun[] = "requeue-1";

class RequeueTest : public HealthTest {
 protected:
  void StartRun() {
    SubmitAndRun(
        "[job]\nname = \"requeue\"\ncommand = \"train\"\n"
        "[slurm]\nnodes = 2\nranks_per_node = 2\n"
        "[restart]\nmax_restarts = 0\n",
        kRequeueRun);
  }

  void SetJob(const std::string& state, const std::string& nodelist = "node[1-2]") {
    std::lock_guard<std::mutex> l(slurm_->mu);
    slurm_->jobs["100"].state = state;
    slurm_->jobs["100"].reason = state == "PENDING" ? "BeginTime" : "None";
    slurm_->jobs["100"].nodelist = nodelist;
  }

  // The batch script of a requeued job (on node3), before any launch.
  grpc::Status AskAfterRequeue(int restart_count, const std::string& nodelist,
                               v1::NextLaunchResponse* resp, int launch = 0) {
    grpc::ClientContext ctx;
    v1::NextLaunchRequest req;
    *req.mutable_id() = Id(kRequeueRun, "node3", launch);
    req.set_step_exit_code(1);
    req.set_requeue_count(restart_count);
    req.set_allocation_nodelist(nodelist);
    return agent_stub_->NextLaunch(&ctx, req, resp);
  }

  v1::NextLaunchResponse Terminated(int launch, int step_exit_code) {
    grpc::ClientContext ctx;
    v1::NextLaunchRequest req;
    *req.mutable_id() = Id(kRequeueRun, "node1", launch);
    req.set_step_exit_code(step_exit_code);
    req.set_terminated_by_slurm(true);
    v1::NextLaunchResponse resp;
    EXPECT_TRUE(agent_stub_->NextLaunch(&ctx, req, &resp).ok());
    return resp;
  }
};

TEST_F(RequeueTest, ARequeuedJobIsGatedAgainAndSucceedsWithoutARestart) {
  StartRun();
  Send(Id(kRequeueRun, "node1", 1), {StepReport(0, 5, 0.5)});
  // scontrol requeue: TERM to the ranks and the batch script.
  ReportExit(kRequeueRun, "node1", 1, {RankEnded(0, 143, 15, false), RankEnded(1, 143, 15, false)},
             143);
  ReportExit(kRequeueRun, "node2", 1, {RankEnded(2, 143, 15, false), RankEnded(3, 143, 15, false)},
             143);
  v1::NextLaunchResponse next = Terminated(1, 143);
  EXPECT_EQ(next.action(), v1::NextLaunchResponse::ACTION_EXIT);
  v1::Run run = Get(kRequeueRun);
  EXPECT_EQ(run.summary().state(), v1::RUN_STATE_RUNNING) << "nothing decided yet";
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_EQ(run.launches(0).failure_class(), "terminated");

  SetJob("PENDING", "");
  run = WaitFor(kRequeueRun, v1::RUN_STATE_SUBMITTED);
  EXPECT_NE(run.summary().state_reason().find("requeued"), std::string::npos)
      << run.summary().state_reason();

  // Slurm starts the job again, on other nodes.
  SetJob("RUNNING", "node[3-4]");
  v1::NextLaunchResponse again;
  ASSERT_TRUE(AskAfterRequeue(1, "node[3-4]", &again).ok());
  ASSERT_EQ(again.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << again.reason();
  EXPECT_EQ(again.next_launch(), 2);
  EXPECT_TRUE(again.nodes().empty()) << "every node of the new allocation";
  auto decisions = Register(kRequeueRun, 2, {"node3", "node4"});
  for (const auto& [node, d] : decisions)
    EXPECT_EQ(d.decision(), v1::GateDecision::DECISION_GO) << node << ": " << d.reason();
  WaitFor(kRequeueRun, v1::RUN_STATE_RUNNING);
  ReportExit(kRequeueRun, "node3", 2, {RankEnded(0, 0, 0, false), RankEnded(1, 0, 0, false)}, 0);
  ReportExit(kRequeueRun, "node4", 2, {RankEnded(2, 0, 0, false), RankEnded(3, 0, 0, false)}, 0);
  next = NextLaunch(kRequeueRun, 2, 0, /*batch_host=*/"node3");
  EXPECT_EQ(next.action(), v1::NextLaunchResponse::ACTION_EXIT);
  run = WaitFor(kRequeueRun, v1::RUN_STATE_SUCCEEDED);
  EXPECT_EQ(run.summary().restarts(), 0) << "max_restarts = 0, and the run went on";
  EXPECT_EQ(run.attempts_size(), 1) << "one Slurm job";
  EXPECT_EQ(slurm_->Submissions().size(), 1u);
  ASSERT_EQ(run.launches_size(), 2);
  EXPECT_EQ(absl::StrJoin(run.launches(1).nodes(), ","), "node3,node4");
}

TEST_F(RequeueTest, TheRestartedBatchScriptMayAskBeforeTheRequeueIsSeen) {
  StartRun();
  // The controller missed the pending spell (it was down, or Slurm was quick):
  // the question alone moves the run back to SUBMITTED and numbers launch 2.
  // Its node is checked against Slurm's allocation now, not the one known.
  v1::NextLaunchResponse again;
  EXPECT_EQ(AskAfterRequeue(2, "node[3-4]", &again).error_code(),
            grpc::StatusCode::PERMISSION_DENIED)
      << "node3 is not in job 100's allocation yet";
  SetJob("RUNNING", "node[3-4]");
  ASSERT_TRUE(AskAfterRequeue(2, "node[3-4]", &again).ok());
  ASSERT_EQ(again.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << again.reason();
  EXPECT_EQ(again.next_launch(), 2);
  v1::Run run = WaitFor(kRequeueRun, v1::RUN_STATE_SUBMITTED);
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_EQ(run.launches(0).failure_class(), "terminated");
  // A late question of launch 1 (its batch script, on node1 of the old
  // allocation, was killed) is refused and decides nothing.
  {
    grpc::ClientContext ctx;
    v1::NextLaunchRequest req;
    *req.mutable_id() = Id(kRequeueRun, "node1", 1);
    req.set_step_exit_code(143);
    v1::NextLaunchResponse late;
    EXPECT_EQ(agent_stub_->NextLaunch(&ctx, req, &late).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  EXPECT_EQ(Get(kRequeueRun).summary().state(), v1::RUN_STATE_SUBMITTED);
  Register(kRequeueRun, 2, {"node3", "node4"});
  WaitFor(kRequeueRun, v1::RUN_STATE_RUNNING);
  EXPECT_EQ(Get(kRequeueRun).summary().restarts(), 0);
}

// The new allocation's nodes are blamed if they never register: they are
// Slurm's, whatever the batch script reports.
TEST_F(RequeueTest, TheNewAllocationsNodesAreSlurmsNotTheScripts) {
  StartRun();
  SetJob("RUNNING", "node[3-4]");
  v1::NextLaunchResponse again;
  ASSERT_TRUE(AskAfterRequeue(1, "node[3-9]", &again).ok());
  ASSERT_EQ(again.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << again.reason();
  v1::Run run = WaitFor(kRequeueRun, v1::RUN_STATE_SUBMITTED);
  ASSERT_EQ(run.attempts_size(), 1);
  EXPECT_EQ(absl::StrJoin(run.attempts(0).nodes(), ","), "node[3-4]");
  EXPECT_NE(run.summary().state_reason().find("gated again on node[3-4]"), std::string::npos)
      << run.summary().state_reason();
}

// The requeued job lands on a node short of memory: the gate refuses it as it
// would a first launch, the job is cancelled and the run queued again, and the
// job's CANCELLED end (the controller's own scancel) costs no restart.
TEST_F(RequeueTest, ARequeuedJobTheGateRefusesIsQueuedAgainWithoutARestart) {
  StartRun();
  Terminated(1, 143);
  SetJob("PENDING", "");
  WaitFor(kRequeueRun, v1::RUN_STATE_SUBMITTED);
  SetJob("RUNNING", "node[3-4]");
  v1::NextLaunchResponse again;
  ASSERT_TRUE(AskAfterRequeue(1, "node[3-4]", &again).ok());
  ASSERT_EQ(again.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << again.reason();
  auto decisions = Register(kRequeueRun, 2, {"node3", "node4"}, /*short_nodes=*/{"node4"});
  EXPECT_EQ(decisions["node4"].decision(), v1::GateDecision::DECISION_ABORT)
      << decisions["node4"].reason();
  // The fake's scancel leaves job 100 CANCELLED, as Slurm would: the
  // reconciler sees it end, and the next attempt is submitted without node4.
  // The run may pass through QUEUED faster than a poll sees it: its events
  // say it did, and why.
  v1::Run run = WaitUntil(
      kRequeueRun,
      [](const v1::Run& r) {
        return r.attempts_size() == 2 && r.summary().state() == v1::RUN_STATE_SUBMITTED;
      },
      "submitted attempt 2");
  ASSERT_EQ(run.attempts_size(), 2) << v1::RunState_Name(run.summary().state());
  ASSERT_EQ(run.summary().state(), v1::RUN_STATE_SUBMITTED);
  bool queued_by_the_gate = false;
  for (const auto& e : run.events())
    queued_by_the_gate |= e.to() == v1::RUN_STATE_QUEUED &&
                          e.reason().find("gate aborted attempt 1") != std::string::npos;
  EXPECT_TRUE(queued_by_the_gate) << run.DebugString();
  EXPECT_EQ(slurm_->Cancelled(), std::vector<std::string>{"100"});
  EXPECT_EQ(run.summary().restarts(), 0) << "max_restarts = 0, and the run went on";
  const auto submissions = slurm_->Submissions();
  ASSERT_EQ(submissions.size(), 2u);
  const std::string args = absl::StrJoin(submissions[1].args, " ");
  EXPECT_NE(args.find("node4"), std::string::npos) << "node4 is excluded: " << args;
  EXPECT_EQ(args.find("node3"), std::string::npos) << "node3 passed: " << args;
}

TEST_F(RequeueTest, AJobCancelledOutsideTheControllerIsDecidedBySlurmsState) {
  StartRun();
  v1::NextLaunchResponse next = Terminated(1, 143);
  EXPECT_EQ(next.action(), v1::NextLaunchResponse::ACTION_EXIT);
  SetJob("CANCELLED");
  // max_restarts = 0: an outside scancel ends the run, and says so.
  v1::Run run = WaitFor(kRequeueRun, v1::RUN_STATE_FAILED);
  EXPECT_EQ(run.attempts_size(), 1);
}

TEST_F(RequeueTest, APreemptedJobContinuesWithoutARestart) {
  StartRun();
  Terminated(1, 143);
  SetJob("PREEMPTED");
  v1::Run run = WaitFor(kRequeueRun, v1::RUN_STATE_SUBMITTED);
  EXPECT_EQ(run.attempts_size(), 2) << "a continuation, at once";
  EXPECT_EQ(run.summary().restarts(), 0);
}

TEST_F(RequeueTest, BadRequeueQuestionsAreRefusedNamingTheField) {
  StartRun();
  v1::NextLaunchResponse resp;
  grpc::Status st = AskAfterRequeue(1, "node[1-2]", &resp, /*launch=*/1);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("id.launch"), std::string::npos) << st.error_message();
  st = AskAfterRequeue(1001, "node[1-2]", &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("requeue_count"), std::string::npos) << st.error_message();
  EXPECT_EQ(Get(kRequeueRun).summary().state(), v1::RUN_STATE_RUNNING) << "nothing changed";
}

}  // namespace
}  // namespace trellis::controller
