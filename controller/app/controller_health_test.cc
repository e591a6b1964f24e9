// Healing end to end through the controller: hangs, lost and killed workers,
// user errors, stragglers and the gate's timeout, on the fake clock.

#include <future>

#include "common/exit_codes.h"
#include "controller/app/controller_health_fixture.h"

namespace trellis::controller {
namespace {

constexpr char kHealthRun[] = "heal-1";

std::string HealthSpec(const std::string& more) {
  return "[job]\nname = \"heal\"\ncommand = \"train\"\n"
         "[slurm]\nnodes = 2\nranks_per_node = 2\n" +
         more;
}

class HealingTest : public HealthTest {
 protected:
  // Submits the run and registers `nodes` for launch 1: node1 and node2 go
  // (ranks 0, 1 and 2, 3), any other node stands by.
  void StartRun(const std::string& spec, const std::vector<std::string>& nodes) {
    v1::SubmitRunResponse resp;
    ASSERT_TRUE(Submit(spec, &resp).ok());
    ASSERT_EQ(resp.run_id(), kHealthRun);
    WaitFor(kHealthRun, v1::RUN_STATE_SUBMITTED);
    for (const auto& [node, d] : Register(kHealthRun, 1, nodes))
      EXPECT_EQ(d.decision(), node == "node3" ? v1::GateDecision::DECISION_STANDBY
                                              : v1::GateDecision::DECISION_GO)
          << node << ": " << d.reason();
    WaitFor(kHealthRun, v1::RUN_STATE_RUNNING);
  }

  // Every rank reports step 1; then ranks 0..2 go on, both workers beating,
  // while rank 3 (node2) stays at step 1 until the controller stops the
  // launch (hang_timeout_s = 60): TERM to its srun step, 100.0.
  void HangRank3() {
    Send(Id(kHealthRun, "node1", 1), {StepReport(0, 1, 0.5), StepReport(1, 1, 0.5)});
    Send(Id(kHealthRun, "node2", 1), {StepReport(2, 1, 0.5), StepReport(3, 1, 0.5)});
    int64_t step = 1;
    auto work = [&] {
      ++step;
      Send(Id(kHealthRun, "node1", 1),
           {HeartbeatReport(2), StepReport(0, step, 0.5), StepReport(1, step, 0.5)});
      Send(Id(kHealthRun, "node2", 1), {HeartbeatReport(2), StepReport(2, step, 0.5)});
    };
    Pass(58, work);
    EXPECT_TRUE(slurm_->Signalled().empty());
    Pass(4, work);
    ASSERT_TRUE(WaitSignalled("100.0 TERM"));
    EXPECT_FALSE(Signalled("100.0 KILL"));
    EXPECT_TRUE(HealthEvents(kHealthRun, "node_lost").empty());
  }

  // The workers' final reports once their ranks were stopped.
  void StoppedExits() {
    ReportExit(kHealthRun, "node1", 1, {RankEnded(0, 143, 15, true), RankEnded(1, 143, 15, true)},
               143);
    ReportExit(kHealthRun, "node2", 1, {RankEnded(2, 143, 15, true), RankEnded(3, 137, 9, true)},
               137);
  }
};

TEST_F(HealingTest, AHungRankIsStoppedBlamedAndFailsTheRunWithoutBudget) {
  StartRun(HealthSpec("[restart]\nhang_timeout_s = 60\nmax_restarts = 0\n"), {"node1", "node2"});
  HangRank3();
  // The workers get kStopGrace (20 s) to stop their ranks, then the step is killed.
  Pass(16);  // TERM went out 1 to 3 s before HangRank3 returned
  EXPECT_FALSE(Signalled("100.0 KILL"));
  Pass(6);
  ASSERT_TRUE(WaitSignalled("100.0 KILL"));
  EXPECT_EQ(slurm_->Signalled(), (std::vector<std::string>{"100.0 TERM", "100.0 KILL"}));

  StoppedExits();
  v1::NextLaunchResponse next = NextLaunch(kHealthRun, 1, 143);
  EXPECT_EQ(next.action(), v1::NextLaunchResponse::ACTION_EXIT);
  EXPECT_NE(next.exit_code(), 0);
  v1::Run run = WaitFor(kHealthRun, v1::RUN_STATE_FAILED);
  ASSERT_EQ(run.launches_size(), 1);
  const v1::Launch& l = run.launches(0);
  EXPECT_EQ(l.failure_class(), "hang");
  EXPECT_EQ(l.blamed_node(), "node2");
  EXPECT_EQ(l.recovery(), "fail");
  EXPECT_NE(l.reason().find("rank 3 on node2 hung"), std::string::npos) << l.reason();
  EXPECT_NE(l.evidence_json().find("\"rank\":3"), std::string::npos) << l.evidence_json();
  auto hangs = HealthEvents(kHealthRun, "hang");
  ASSERT_EQ(hangs.size(), 1u);
  EXPECT_EQ(hangs[0].rank(), 3);
  EXPECT_EQ(hangs[0].node(), "node2");
  EXPECT_EQ(slurm_->Submissions().size(), 1u);

  auto nodes = Nodes();
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).name(), "node2");
  EXPECT_EQ(nodes.nodes(0).state(), "quarantined");
}

TEST_F(HealingTest, AHungRankIsRelaunchedOnTheSpareInTheAllocation) {
  StartRun(HealthSpec("spare_nodes = 1\n[restart]\nhang_timeout_s = 60\nmax_restarts = 2\n"),
           {"node1", "node2", "node3"});
  HangRank3();
  StoppedExits();  // node3 stood by: its worker exited at once
  v1::NextLaunchResponse next = NextLaunch(kHealthRun, 1, 143);
  ASSERT_EQ(next.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << next.reason();
  EXPECT_EQ(next.next_launch(), 2);
  EXPECT_EQ(std::vector<std::string>(next.nodes().begin(), next.nodes().end()),
            (std::vector<std::string>{"node1", "node3"}));
  v1::Run run = WaitFor(kHealthRun, v1::RUN_STATE_RESTARTING);
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_EQ(run.launches(0).failure_class(), "hang");
  EXPECT_EQ(run.launches(0).blamed_node(), "node2");
  EXPECT_EQ(run.launches(0).recovery(), "relaunch");

  // The gate of launch 2 waits for the named nodes only.
  auto d = Register(kHealthRun, 2, {"node1", "node3"});
  EXPECT_EQ(d["node1"].decision(), v1::GateDecision::DECISION_GO) << d["node1"].reason();
  EXPECT_EQ(d["node3"].decision(), v1::GateDecision::DECISION_GO) << d["node3"].reason();
  EXPECT_EQ(d["node1"].rank_offset(), 0);
  EXPECT_EQ(d["node3"].rank_offset(), 2);
  run = WaitFor(kHealthRun, v1::RUN_STATE_RUNNING);
  EXPECT_EQ(run.summary().restarts(), 1);
  EXPECT_EQ(run.summary().relaunches(), 1);
  EXPECT_EQ(run.attempts_size(), 1);
  EXPECT_EQ(slurm_->Submissions().size(), 1u);
}

TEST_F(HealingTest, ASilentWorkerIsALostNode) {
  StartRun(HealthSpec("[restart]\nheartbeat_timeout_s = 10\n"), {"node1", "node2"});
  Pass(12, [&] { Send(Id(kHealthRun, "node1", 1), {HeartbeatReport(2)}); });
  ASSERT_TRUE(WaitSignalled("100.0 TERM"));
  auto lost = HealthEvents(kHealthRun, "node_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].node(), "node2");
  EXPECT_EQ(lost[0].rank(), -1);

  ReportExit(kHealthRun, "node1", 1, {RankEnded(0, 143, 15, true), RankEnded(1, 143, 15, true)},
             143);
  v1::NextLaunchResponse next = NextLaunch(kHealthRun, 1, 143);
  EXPECT_EQ(next.action(), v1::NextLaunchResponse::ACTION_EXIT);
  v1::Run run = WaitFor(kHealthRun, v1::RUN_STATE_FAILED);
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_EQ(run.launches(0).failure_class(), "node_lost");
  EXPECT_EQ(run.launches(0).blamed_node(), "node2");
}

TEST_F(HealingTest, WorkersAndRanksThatFinishFirstAreNeitherLostNorHung) {
  StartRun(HealthSpec("[restart]\nheartbeat_timeout_s = 10\nhang_timeout_s = 30\n"),
           {"node1", "node2"});
  Send(Id(kHealthRun, "node1", 1), {StepReport(0, 1, 0.5), StepReport(1, 1, 0.5)});
  Send(Id(kHealthRun, "node2", 1), {StepReport(2, 1, 0.5), StepReport(3, 1, 0.5)});
  // node1's ranks are done first; its worker reports and falls silent.
  v1::AgentReport rank0_ended;
  *rank0_ended.mutable_rank_exit() = RankEnded(0, 0, 0, false);
  Send(Id(kHealthRun, "node1", 1), {rank0_ended});
  ReportExit(kHealthRun, "node1", 1, {RankEnded(0, 0, 0, false), RankEnded(1, 0, 0, false)}, 0);
  // On node2, rank 2 ends too, and rank 3 works on far past both timeouts.
  v1::AgentReport rank2_ended;
  *rank2_ended.mutable_rank_exit() = RankEnded(2, 0, 0, false);
  Send(Id(kHealthRun, "node2", 1), {rank2_ended});
  int64_t step = 1;
  Pass(90, [&] {
    Send(Id(kHealthRun, "node2", 1), {HeartbeatReport(1), StepReport(3, ++step, 0.5)});
  });
  EXPECT_TRUE(HealthEvents(kHealthRun, "node_lost").empty());
  EXPECT_TRUE(HealthEvents(kHealthRun, "hang").empty());
  EXPECT_TRUE(slurm_->Signalled().empty());

  ReportExit(kHealthRun, "node2", 1, {RankEnded(2, 0, 0, false), RankEnded(3, 0, 0, false)}, 0);
  EXPECT_EQ(NextLaunch(kHealthRun, 1, 0).action(), v1::NextLaunchResponse::ACTION_EXIT);
  v1::Run run = WaitFor(kHealthRun, v1::RUN_STATE_SUCCEEDED);
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_EQ(run.launches(0).failure_class(), "succeeded");
}

TEST_F(HealingTest, AWorkerWithoutAFinalReportIsALostNodeAndItsSpareTakesOver) {
  StartRun(HealthSpec("spare_nodes = 1\n[restart]\nmax_restarts = 1\n"),
           {"node1", "node2", "node3"});
  // node2's worker was killed: only node1 reports, its ranks stopped by srun.
  ReportExit(kHealthRun, "node1", 1, {RankEnded(0, 143, 15, true), RankEnded(1, 143, 15, true)},
             143);
  v1::NextLaunchResponse next = NextLaunch(kHealthRun, 1, 137);
  ASSERT_EQ(next.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << next.reason();
  EXPECT_EQ(next.next_launch(), 2);
  EXPECT_EQ(std::vector<std::string>(next.nodes().begin(), next.nodes().end()),
            (std::vector<std::string>{"node1", "node3"}));
  v1::Run run = WaitFor(kHealthRun, v1::RUN_STATE_RESTARTING);
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_EQ(run.launches(0).failure_class(), "node_lost");
  EXPECT_EQ(run.launches(0).blamed_node(), "node2");
  EXPECT_TRUE(slurm_->Signalled().empty());
}

TEST_F(HealingTest, ARelaunchWhoseStepNeverStartsEndsTheAttempt) {
  StartRun(HealthSpec("spare_nodes = 1\n[restart]\nmax_restarts = 2\nbackoff_s = 1\n"),
           {"node1", "node2", "node3"});
  ReportExit(kHealthRun, "node1", 1, {RankEnded(0, 143, 15, true), RankEnded(1, 143, 15, true)},
             143);
  ASSERT_EQ(NextLaunch(kHealthRun, 1, 137).action(), v1::NextLaunchResponse::ACTION_RELAUNCH);
  // Slurm refused launch 2's srun step: no worker ever registers.
  v1::NextLaunchResponse next = NextLaunch(kHealthRun, 2, 1);
  EXPECT_EQ(next.action(), v1::NextLaunchResponse::ACTION_EXIT);
  EXPECT_NE(next.reason().find("relaunch 2 did not start"), std::string::npos) << next.reason();
  v1::Run run = WaitFor(kHealthRun, v1::RUN_STATE_QUEUED);
  EXPECT_EQ(run.attempts(0).exit_code(), 1);
  EXPECT_NE(run.attempts(0).ended_unix_ms(), 0);
}

TEST_F(HealingTest, AUserErrorFailsAtOnceBlamingNoNode) {
  StartRun(HealthSpec("[restart]\nmax_restarts = 3\n"), {"node1", "node2"});
  ReportExit(kHealthRun, "node1", 1,
             {RankEnded(0, kExitDoNotRetry, 0, false), RankEnded(1, kExitDoNotRetry, 0, false)},
             kExitDoNotRetry);
  ReportExit(kHealthRun, "node2", 1,
             {RankEnded(2, kExitDoNotRetry, 0, false), RankEnded(3, kExitDoNotRetry, 0, false)},
             kExitDoNotRetry);
  v1::NextLaunchResponse next = NextLaunch(kHealthRun, 1, kExitDoNotRetry);
  EXPECT_EQ(next.action(), v1::NextLaunchResponse::ACTION_EXIT);
  EXPECT_EQ(next.exit_code(), kExitDoNotRetry);
  v1::Run run = WaitFor(kHealthRun, v1::RUN_STATE_FAILED);
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_EQ(run.launches(0).failure_class(), "user_error");
  EXPECT_EQ(run.launches(0).blamed_node(), "");
  EXPECT_EQ(run.launches(0).recovery(), "fail");
  EXPECT_EQ(run.summary().restarts(), 0);
  EXPECT_EQ(run.attempts_size(), 1);
  EXPECT_EQ(slurm_->Submissions().size(), 1u);
  EXPECT_EQ(Nodes().nodes_size(), 0);
}

TEST_F(HealingTest, ASlowRankIsOneStragglerEventAndNothingElse) {
  StartRun(HealthSpec("[health]\nstraggler_window = 5\nstraggler_min_slow = 3\n"),
           {"node1", "node2"});
  for (int64_t step = 1; step <= 8; ++step) {
    Send(Id(kHealthRun, "node1", 1), {StepReport(0, step, 0.5), StepReport(1, step, 0.5)});
    Send(Id(kHealthRun, "node2", 1), {StepReport(2, step, 1.5), StepReport(3, step, 0.5)});
  }
  Pass(5, [&] {
    Send(Id(kHealthRun, "node1", 1), {HeartbeatReport(2)});
    Send(Id(kHealthRun, "node2", 1), {HeartbeatReport(2)});
  });
  v1::Run run = Get(kHealthRun);
  std::vector<v1::HealthEvent> events;  // the launch's start is an event too: not counted
  for (const auto& e : run.health_events())
    if (e.kind() != kLaunchStartedEvent) events.push_back(e);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].kind(), "straggler");
  EXPECT_EQ(events[0].rank(), 2);
  EXPECT_EQ(events[0].node(), "node2");
  EXPECT_NE(events[0].detail().find("rank 2 on node2"), std::string::npos) << events[0].detail();
  EXPECT_EQ(run.summary().state(), v1::RUN_STATE_RUNNING);
  EXPECT_TRUE(slurm_->Signalled().empty());
  EXPECT_EQ(Nodes().nodes_size(), 0);  // straggler_strike is off
}

TEST_F(HealingTest, TheGateTimesOutOnTheClock) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(HealthSpec("[gate]\ntimeout_s = 120\n"), &resp).ok());
  WaitFor(kHealthRun, v1::RUN_STATE_SUBMITTED);
  auto registered =
      std::async(std::launch::async, [&] { return Register(kHealthRun, 1, {"node1"}); });
  WaitFor(kHealthRun, v1::RUN_STATE_GATING);
  clock_.Advance(std::chrono::seconds(119));
  Sync();
  EXPECT_EQ(registered.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  EXPECT_EQ(Get(kHealthRun).summary().state(), v1::RUN_STATE_GATING);
  clock_.Advance(std::chrono::seconds(2));
  ASSERT_EQ(registered.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  v1::GateDecision d = registered.get()["node1"];
  EXPECT_EQ(d.decision(), v1::GateDecision::DECISION_ABORT);
  EXPECT_NE(d.reason().find("1 of 2 nodes passed, 2 needed"), std::string::npos) << d.reason();

  // The attempt ended as a gate abort and the run went back to the queue.
  v1::Run run = Get(kHealthRun);
  EXPECT_EQ(run.attempts(0).exit_code(), kExitGateAbort);
  bool requeued = false;
  for (const auto& e : run.events())
    requeued = requeued || (e.from() == v1::RUN_STATE_GATING && e.to() == v1::RUN_STATE_QUEUED);
  EXPECT_TRUE(requeued);
  // node2 was never seen, so it is not struck: the next attempt goes at once.
  EXPECT_EQ(WaitFor(kHealthRun, v1::RUN_STATE_SUBMITTED).attempts_size(), 2);
}

// A rank SIGKILLed with no OOM kill on its node (a user's kill, a site's
// watchdog): no node is blamed, the launch is relaunched in place and its
// evidence marks the lone kill. The same on the same node again is the
// second signal: the node is blamed and quarantined, and with no spare the
// run goes on in a new attempt.
TEST_F(HealingTest, ALoneKillRelaunchesInPlaceAndASecondOneBlamesItsNode) {
  StartRun(HealthSpec("[restart]\nmax_restarts = 3\nbackoff_s = 1\n"), {"node1", "node2"});
  auto kill_rank2 = [&](int launch) {
    ReportExit(kHealthRun, "node2", launch,
               {RankEnded(2, 137, 9, false), RankEnded(3, 143, 15, true)}, 137);
    ReportExit(kHealthRun, "node1", launch,
               {RankEnded(0, 143, 15, true), RankEnded(1, 143, 15, true)}, 143);
    return NextLaunch(kHealthRun, launch, 137);
  };
  v1::NextLaunchResponse next = kill_rank2(1);
  ASSERT_EQ(next.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << next.reason();
  EXPECT_EQ(std::vector<std::string>(next.nodes().begin(), next.nodes().end()),
            (std::vector<std::string>{"node1", "node2"}));
  v1::Run run = WaitFor(kHealthRun, v1::RUN_STATE_RESTARTING);
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_EQ(run.launches(0).failure_class(), "signal");
  EXPECT_EQ(run.launches(0).blamed_node(), "");
  EXPECT_EQ(run.launches(0).recovery(), "relaunch");
  EXPECT_NE(run.launches(0).reason().find("node2 is not blamed"), std::string::npos)
      << run.launches(0).reason();
  EXPECT_NE(run.launches(0).evidence_json().find("\"lone_kill\":true"), std::string::npos)
      << run.launches(0).evidence_json();
  EXPECT_EQ(Nodes().nodes_size(), 0);

  auto d = Register(kHealthRun, 2, {"node1", "node2"});
  ASSERT_EQ(d["node2"].decision(), v1::GateDecision::DECISION_GO) << d["node2"].reason();
  WaitFor(kHealthRun, v1::RUN_STATE_RUNNING);
  next = kill_rank2(2);
  EXPECT_EQ(next.action(), v1::NextLaunchResponse::ACTION_EXIT) << next.reason();
  run = WaitFor(kHealthRun, v1::RUN_STATE_SUBMITTED);  // a new attempt, off node2
  ASSERT_EQ(run.launches_size(), 2);
  EXPECT_EQ(run.launches(1).blamed_node(), "node2");
  EXPECT_NE(run.launches(1).reason().find("second lone SIGKILL within 24 h (the first: run " +
                                          std::string(kHealthRun) + " launch 1.1)"),
            std::string::npos)
      << run.launches(1).reason();
  auto nodes = Nodes();
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).name(), "node2");
  EXPECT_EQ(nodes.nodes(0).state(), "quarantined");
}

}  // namespace
}  // namespace trellis::controller
