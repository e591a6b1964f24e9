// Continuations ahead (docs/architecture.md, "Continuations ahead"): while an
// attempt trains in a job with a time limit, the next attempt waits in
// Slurm's queue (--begin a lead before the limit). When it starts, its
// workers are gated and held; the current launch is told to stop at a step
// boundary (SIGUSR1 to its step), ends as a `handoff`, and the waiting
// attempt takes over without a new sbatch. tests/e2e/continuation_ahead.sh
// runs it on Slurm.

#include <thread>

#include "controller/app/controller_health_fixture.h"

namespace trellis::controller {
namespace {

constexpr char kRun[] = "ahead-1";
// A 3-minute limit: the lead is at most half of it (no queue waits seen yet:
// the prior, 600 s, cut to 90 s), so the next attempt is eligible in 90 s.
constexpr char kSpec[] =
    "[job]\nname = \"ahead\"\ncommand = \"train\"\n"
    "[slurm]\nnodes = 2\nranks_per_node = 2\ntime_limit = 3\nsignal_grace_s = 30\n"
    "[restart]\nmax_restarts = 0\n";

class ContinuationTest : public HealthTest {
 protected:
  // The run trains in attempt 1, and attempt 2 waits ahead as job 101.
  void RunWithAWaitingAttempt() {
    SubmitAndRun(kSpec, kRun);
    Tick();  // the reconcile tick's squeue snapshot
    WaitUntil(
        kRun,
        [](const v1::Run& r) {
          return r.attempts_size() == 2 && !r.attempts(1).slurm_job_id().empty();
        },
        "attempt 2 waiting ahead");
  }

  v1::WorkerIdentity AttemptId(int attempt, const std::string& node) {
    v1::WorkerIdentity id = Id(kRun, node, 1);
    id.set_attempt(attempt);
    std::ifstream in(Get(kRun).run_dir() + "/attempt-" + std::to_string(attempt) + "/secret");
    std::string secret;
    in >> secret;
    id.set_secret(secret);
    return id;
  }

  // The waiting job started: its workers register (and are held) on threads.
  void RegisterAttempt2(const std::vector<std::string>& nodes) {
    for (const auto& node : nodes) {
      v1::RegisterRequest req;
      *req.mutable_id() = AttemptId(2, node);
      req.set_version(kVersion);
      req.set_hostname("host-" + node);
      req.set_slurm_job_id("101");
      req.set_slurm_step_id("0");
      AddSocket(req.mutable_probe(), 108.0, 8.0);
      AddSocket(req.mutable_probe(), 106.0, 9.0);
      held_.emplace_back([this, node, req] {
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
        v1::GateDecision d;
        grpc::Status st = agent_stub_->Register(&ctx, req, &d);
        EXPECT_TRUE(st.ok()) << node << ": " << st.error_message();
        std::lock_guard<std::mutex> l(mu_);
        decisions_[node] = d;
      });
    }
  }
  std::map<std::string, v1::GateDecision> JoinHeld() {
    for (auto& t : held_) t.join();
    held_.clear();
    std::lock_guard<std::mutex> l(mu_);
    return decisions_;
  }
  bool Answered() {
    std::lock_guard<std::mutex> l(mu_);
    return !decisions_.empty();
  }
  // The current launch stops as the time limit's path does: checkpoint, exit 0.
  void CurrentLaunchStopsAtStep(int64_t step) {
    Send(Id(kRun, "node1", 1), {StepReport(0, step, 0.5), StepReport(1, step, 0.5)});
    WriteCheckpoint(kRun, step);
    ReportExit(kRun, "node1", 1, {RankEnded(0, 0, 0, true), RankEnded(1, 0, 0, true)}, 0,
               "time_limit");
    ReportExit(kRun, "node2", 1, {RankEnded(2, 0, 0, true), RankEnded(3, 0, 0, true)}, 0,
               "time_limit");
  }
  // Whether one of the run's continuation events says `text`.
  bool SaidInAnEvent(const std::string& text) {
    for (const auto& e : HealthEvents(kRun, "continuation"))
      if (e.detail().find(text) != std::string::npos) return true;
    return false;
  }
  void TearDown() override {
    for (auto& t : held_) t.join();
    HealthTest::TearDown();
  }

  std::vector<std::thread> held_;
  std::mutex mu_;
  std::map<std::string, v1::GateDecision> decisions_;
};

TEST_F(ContinuationTest, TheNextAttemptWaitsAheadEligibleALeadBeforeTheLimit) {
  RunWithAWaitingAttempt();
  const v1::Run run = Get(kRun);
  EXPECT_EQ(run.summary().state(), v1::RUN_STATE_RUNNING) << "the run's state is attempt 1's";
  EXPECT_TRUE(run.attempts(1).waiting());
  EXPECT_FALSE(run.attempts(0).waiting());
  const auto submissions = slurm_->Submissions();
  ASSERT_EQ(submissions.size(), 2u);
  const auto& args = submissions[1].args;
  EXPECT_NE(std::find(args.begin(), args.end(), "--begin=now+90"), args.end())
      << "180 s left, a lead of 90 s";
  const auto events = HealthEvents(kRun, "continuation");
  ASSERT_FALSE(events.empty());
  EXPECT_NE(events.back().detail().find("attempt 2 waits ahead as Slurm job 101"),
            std::string::npos)
      << events.back().detail();
  EXPECT_NE(events.back().detail().find("at most half the job's time limit"), std::string::npos)
      << events.back().detail();
  // Another snapshot submits nothing more.
  Tick();
  Sync();
  EXPECT_EQ(slurm_->Submissions().size(), 2u);
}

TEST_F(ContinuationTest, TheWaitingAttemptTakesOverAtAStepBoundary) {
  RunWithAWaitingAttempt();
  RegisterAttempt2({"node1", "node2"});  // the fake gives every job node[1-2]
  // Its nodes passed the gate: the current launch's step gets the time limit's signal.
  ASSERT_TRUE(WaitSignalled("100.0 USR1"));
  Sync();
  EXPECT_FALSE(Answered()) << "held: attempt 1 still trains";
  EXPECT_EQ(Get(kRun).summary().state(), v1::RUN_STATE_RUNNING);
  CurrentLaunchStopsAtStep(7);
  v1::NextLaunchResponse next = NextLaunch(kRun, 1, 0);
  EXPECT_EQ(next.action(), v1::NextLaunchResponse::ACTION_EXIT);
  auto decisions = JoinHeld();
  ASSERT_EQ(decisions.size(), 2u);
  for (const auto& [node, d] : decisions)
    EXPECT_EQ(d.decision(), v1::GateDecision::DECISION_GO) << node << ": " << d.reason();
  v1::Run run = WaitFor(kRun, v1::RUN_STATE_RUNNING);
  ASSERT_EQ(run.launches_size(), 2);
  EXPECT_EQ(run.launches(0).failure_class(), "handoff");
  EXPECT_EQ(run.launches(0).recovery(), "new_attempt");
  EXPECT_EQ(run.launches(1).attempt(), 2);
  ASSERT_EQ(run.attempts_size(), 2);
  EXPECT_FALSE(run.attempts(1).waiting()) << "taken up";
  EXPECT_EQ(run.attempts(1).slurm_job_id(), "101");
  EXPECT_EQ(run.summary().restarts(), 0);
  EXPECT_EQ(slurm_->Submissions().size(), 2u) << "no sbatch: the waiting job took over";
  EXPECT_TRUE(slurm_->Released().empty()) << "it was eligible and running already";
  EXPECT_TRUE(SaidInAnEvent("handoff: attempt 2 passed the gate"));
}

// The time limit's own warning came first (the waiting job had not started):
// the continuation takes the waiting job, made eligible now, instead of
// submitting another.
TEST_F(ContinuationTest, AContinuationNeededSoonerTakesTheWaitingJob) {
  RunWithAWaitingAttempt();
  CurrentLaunchStopsAtStep(5);
  NextLaunch(kRun, 1, 0, "node1", /*time_limit_warned=*/true);
  v1::Run run = WaitFor(kRun, v1::RUN_STATE_SUBMITTED);
  EXPECT_EQ(run.launches(0).failure_class(), "time_limit");
  ASSERT_EQ(run.attempts_size(), 2);
  EXPECT_FALSE(run.attempts(1).waiting());
  EXPECT_EQ(slurm_->Submissions().size(), 2u);
  EXPECT_EQ(slurm_->Released(), (std::vector<std::string>{"101 in 0 s"}));
  EXPECT_EQ(run.attempts(1).begin_unix_ms(), run.attempts(0).ended_unix_ms())
      << "released now: its queue wait counts from now, not from its --begin";
  EXPECT_NE(run.summary().state_reason().find("attempt 2 (Slurm job 101), waiting ahead, takes over"),
            std::string::npos)
      << run.summary().state_reason();
}

// The ranks finished their work as the waiting job started: they had ended
// before the handoff's signal (no worker passed it on), so the run succeeds,
// and the waiting attempt's held workers are told to go.
TEST_F(ContinuationTest, TheWaitingJobIsCancelledWhenTheRunEnds) {
  RunWithAWaitingAttempt();
  RegisterAttempt2({"node1", "node2"});
  ASSERT_TRUE(WaitSignalled("100.0 USR1"));
  Send(Id(kRun, "node1", 1), {StepReport(0, 3, 0.5), StepReport(1, 3, 0.5)});
  ReportExit(kRun, "node1", 1, {RankEnded(0, 0, 0, false), RankEnded(1, 0, 0, false)}, 0);
  ReportExit(kRun, "node2", 1, {RankEnded(2, 0, 0, false), RankEnded(3, 0, 0, false)}, 0);
  NextLaunch(kRun, 1, 0);
  v1::Run run = WaitFor(kRun, v1::RUN_STATE_SUCCEEDED);
  WaitUntil(
      kRun, [](const v1::Run& r) { return r.attempts(1).ended_unix_ms() != 0; },
      "the waiting attempt ended");
  EXPECT_EQ(run.launches(0).failure_class(), "succeeded");
  const auto cancelled = slurm_->Cancelled();
  EXPECT_NE(std::find(cancelled.begin(), cancelled.end(), "101"), cancelled.end());
  EXPECT_NE(Get(kRun).attempts(1).end_reason().find("not needed"), std::string::npos);
  for (const auto& [node, d] : JoinHeld())
    EXPECT_EQ(d.decision(), v1::GateDecision::DECISION_ABORT) << node << ": " << d.reason();
}

// The waiting job started and one of its workers died before the handoff
// (its srun step ended): only the waiting attempt ends, said in an event; the
// run trains on in attempt 1 and uses no restart (max_restarts is 0 here).
TEST_F(ContinuationTest, AWaitingAttemptWhoseStepEndsIsGivenUpAndTheRunTrainsOn) {
  RunWithAWaitingAttempt();
  RegisterAttempt2({"node1"});  // held; node2's worker was killed
  grpc::ClientContext ctx;
  v1::NextLaunchRequest req;
  *req.mutable_id() = AttemptId(2, "node1");
  req.set_step_exit_code(143);
  v1::NextLaunchResponse resp;
  ASSERT_TRUE(agent_stub_->NextLaunch(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.action(), v1::NextLaunchResponse::ACTION_EXIT);
  EXPECT_EQ(resp.exit_code(), 143);
  for (const auto& [node, d] : JoinHeld())
    EXPECT_EQ(d.decision(), v1::GateDecision::DECISION_ABORT) << node << ": " << d.reason();
  const v1::Run run = WaitUntil(
      kRun, [](const v1::Run& r) { return r.attempts(1).ended_unix_ms() != 0; },
      "the waiting attempt ended");
  EXPECT_EQ(run.summary().state(), v1::RUN_STATE_RUNNING) << run.summary().state_reason();
  EXPECT_EQ(run.attempts(0).ended_unix_ms(), 0) << "attempt 1 trains on";
  EXPECT_EQ(run.summary().restarts(), 0);
  EXPECT_NE(run.attempts(1).end_reason().find("waiting ahead, lost its srun step (exit 143)"),
            std::string::npos)
      << run.attempts(1).end_reason();
  EXPECT_TRUE(SaidInAnEvent("lost its srun step"));
}

// A node struck while the waiting job is still pending: the job was submitted
// off the quarantine of its time, so it is kept off the node now (its
// StartTime unchanged), once per change; else it could start there and fail
// its gate.
TEST_F(ContinuationTest, APendingWaitingJobIsKeptOffANodeStruckSinceItsSubmission) {
  RunWithAWaitingAttempt();
  {
    std::lock_guard<std::mutex> lock(slurm_->mu);
    slurm_->jobs["101"].state = "PENDING";
  }
  Tick();
  Sync();
  EXPECT_TRUE(slurm_->Released().empty()) << "nothing struck since";
  grpc::ClientContext ctx;
  v1::QuarantineNodeRequest q;
  q.set_node("node3");
  q.set_reason("flaky link");
  v1::NodeStatus status;
  ASSERT_TRUE(user_stub_->QuarantineNode(&ctx, q, &status).ok());
  // The next snapshot's squeue and the update run on the Slurm thread.
  ASSERT_TRUE(Eventually([&] {
    Tick();
    return !slurm_->Released().empty();
  }));
  const auto released = slurm_->Released();
  ASSERT_EQ(released.size(), 1u);
  EXPECT_NE(released[0].find("101 in "), std::string::npos) << released[0];
  EXPECT_NE(released[0].find(" s exclude node3"), std::string::npos) << released[0];
  EXPECT_NE(released[0], "101 in 0 s exclude node3") << "its --begin is still ahead";
  for (int i = 0; i < 3; ++i) {  // three more snapshots, their calls given time to land
    Tick();
    Sync();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(slurm_->Released().size(), 1u) << "once per change";
}

// Cancelled by someone (or refused by Slurm) before it was needed: the
// attempt is ended, said in an event, and another waits in its place.
TEST_F(ContinuationTest, AWaitingJobThatEndsIsReplaced) {
  RunWithAWaitingAttempt();
  {
    std::lock_guard<std::mutex> l(slurm_->mu);
    slurm_->jobs["101"].state = "CANCELLED";
  }
  Tick();
  v1::Run run = WaitUntil(
      kRun,
      [](const v1::Run& r) {
        return r.attempts_size() == 3 && !r.attempts(2).slurm_job_id().empty();
      },
      "attempt 3 waiting in place of 2");
  EXPECT_NE(run.attempts(1).end_reason().find("ended before it was needed (CANCELLED)"),
            std::string::npos)
      << run.attempts(1).end_reason();
  EXPECT_TRUE(run.attempts(2).waiting());
  EXPECT_EQ(run.summary().state(), v1::RUN_STATE_RUNNING);
}

// A site's job limit refuses the waiting job: said in an event, and no other
// is queued for this attempt (its continuation follows its end).
TEST_F(ContinuationTest, ARefusedWaitingJobIsNotSubmittedAgain) {
  SubmitAndRun(kSpec, kRun);
  {
    std::lock_guard<std::mutex> l(slurm_->mu);
    slurm_->submit_error = absl::InternalError(
        "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy");
  }
  Tick();
  WaitUntil(
      kRun, [](const v1::Run& r) { return r.attempts_size() == 2 && r.attempts(1).ended_unix_ms(); },
      "the waiting attempt refused");
  for (int i = 0; i < 3; ++i) {
    Tick();
    Sync();
  }
  v1::Run run = Get(kRun);
  EXPECT_EQ(run.attempts_size(), 2) << "no other waiting attempt";
  EXPECT_NE(run.attempts(1).end_reason().find("sbatch refused attempt 2"), std::string::npos)
      << run.attempts(1).end_reason();
  EXPECT_EQ(run.summary().state(), v1::RUN_STATE_RUNNING);
  EXPECT_FALSE(HealthEvents(kRun, "continuation").empty());
}

// A run that asks for continuations after the attempt ends gets none ahead.
TEST_F(ContinuationTest, ContinuationAfterQueuesNothingAhead) {
  SubmitAndRun(std::string(kSpec) + "continuation = \"after\"\n", kRun);
  Tick();
  Sync();
  Tick();
  Sync();
  EXPECT_EQ(Get(kRun).attempts_size(), 1);
  EXPECT_EQ(slurm_->Submissions().size(), 1u);
}

}  // namespace
}  // namespace trellis::controller
