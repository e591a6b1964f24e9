// Questions asked again, most often because the controller was killed before
// its answer arrived, get the answer given before (launch_answers.h): a worker
// whose GO was lost registers again and gets the same GO, the node the GO left
// out stands by, a worker of a launch that ended is turned away (no second
// gate, so no rank starts twice); a batch script asking again what follows a
// launch gets the same relaunch, whose gate still waits for the nodes named.
// A launch that runs across the restart is known again from its stored GO
// and its workers' stored final reports: watched, stopped by its own srun
// step, settled and relaunched as any.

#include <google/protobuf/util/json_util.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/run_layout.h"

#include "controller/app/controller_health_fixture.h"

namespace trellis::controller {
namespace {

constexpr char kRestartRun[] = "again-1";

class ControllerRestartTest : public HealthTest {
 protected:
  // `more`: sections after [restart].
  void StartRun(const std::string& more = "") {
    v1::SubmitRunResponse resp;
    ASSERT_TRUE(Submit("[job]\nname = \"again\"\ncommand = \"train\"\n"
                       "[slurm]\nnodes = 2\nranks_per_node = 2\nspare_nodes = 1\n"
                       "[restart]\nmax_restarts = 2\nbackoff_s = 0\nheartbeat_timeout_s = 8\n" +
                           more,
                       &resp)
                    .ok());
    ASSERT_EQ(resp.run_id(), kRestartRun);
    WaitFor(kRestartRun, v1::RUN_STATE_SUBMITTED);
  }
  // node1 and node2 GO for launch 1 (node3 stands by): the run is RUNNING.
  void RunOnNode1AndNode2() {
    StartRun();
    Register(kRestartRun, 1, {"node1", "node2", "node3"});
    WaitFor(kRestartRun, v1::RUN_STATE_RUNNING);
  }
  static std::vector<std::string> NodesOf(const v1::NextLaunchResponse& next) {
    return {next.nodes().begin(), next.nodes().end()};
  }
  // node1's worker reports its ranks stopped and the batch script asks what
  // follows: node2 is lost and blamed, the relaunch takes node1 and the spare.
  v1::Run Node2LostAndRelaunchedOnTheSpare(int step_exit_code) {
    ReportExit(kRestartRun, "node1", 1, {RankEnded(0, 143, 15, true), RankEnded(1, 143, 15, true)},
               143);
    v1::NextLaunchResponse next = NextLaunch(kRestartRun, 1, step_exit_code);
    EXPECT_EQ(next.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << next.reason();
    EXPECT_EQ(NodesOf(next), (std::vector<std::string>{"node1", "node3"}));
    v1::Run run = WaitFor(kRestartRun, v1::RUN_STATE_RESTARTING);
    EXPECT_EQ(run.launches_size(), 1);
    if (run.launches_size() > 0) {
      EXPECT_EQ(run.launches(0).failure_class(), "node_lost");
      EXPECT_EQ(run.launches(0).blamed_node(), "node2");
    }
    return run;
  }
  static v1::RankExit Rank3DeviceError() {
    v1::RankExit failed = RankEnded(3, 1, 0, false);
    failed.add_markers("device_error");
    failed.set_evidence("Xid 79: GPU has fallen off the bus");
    return failed;
  }
  // node2 reported rank 3's device error before the restart: after it,
  // node2 is finished (silent, not lost), node1 beats and then reports its
  // ranks stopped; node2 is blamed for the device error, the spare takes over.
  void Node2FinishedAndBlamedAfterTheRestart() {
    Pass(20, [&] { Send(Id(kRestartRun, "node1", 1), {HeartbeatReport(2)}); });  // timeout 8 s
    EXPECT_TRUE(HealthEvents(kRestartRun, "node_lost").empty());
    ReportExit(kRestartRun, "node1", 1, {RankEnded(0, 143, 15, true), RankEnded(1, 143, 15, true)},
               143);
    v1::NextLaunchResponse next = NextLaunch(kRestartRun, 1, 1);
    ASSERT_EQ(next.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << next.reason();
    EXPECT_EQ(NodesOf(next), (std::vector<std::string>{"node1", "node3"}));
    v1::Run run = WaitFor(kRestartRun, v1::RUN_STATE_RESTARTING);
    ASSERT_EQ(run.launches_size(), 1);
    EXPECT_EQ(run.launches(0).failure_class(), "device_error");
    EXPECT_EQ(run.launches(0).blamed_node(), "node2");
    EXPECT_NE(run.launches(0).reason().find("fallen off the bus"), std::string::npos)
        << run.launches(0).reason();
  }
  // Slurm's wall-time warning: the ranks checkpoint and exit 0, and the
  // workers' reports say so before the controller restarts. Not a finished
  // run: continued in a new attempt, no restart used.
  void ContinuedAfterATimeLimitStopAndARestart(bool batch_script_warned) {
    RunOnNode1AndNode2();
    // The ranks checkpoint at the warning: the continuation resumes further on.
    WriteCheckpoint(kRestartRun, 5);
    ReportExit(kRestartRun, "node1", 1, {RankEnded(0, 0, 0, true), RankEnded(1, 0, 0, true)}, 0,
               "time_limit");
    ReportExit(kRestartRun, "node2", 1, {RankEnded(2, 0, 0, true), RankEnded(3, 0, 0, true)}, 0,
               "time_limit");
    Restart();
    v1::NextLaunchResponse next = NextLaunch(kRestartRun, 1, 0, "node1", batch_script_warned);
    EXPECT_EQ(next.action(), v1::NextLaunchResponse::ACTION_EXIT);
    v1::Run run = WaitFor(kRestartRun, v1::RUN_STATE_SUBMITTED);
    ASSERT_EQ(run.launches_size(), 1);
    EXPECT_EQ(run.launches(0).failure_class(), "time_limit");
    EXPECT_EQ(run.summary().restarts(), 0);
    EXPECT_EQ(run.attempts_size(), 2);
  }
  void Restart() {
    StopController();
    StartController();
  }
  int GateRecords() {
    grpc::ClientContext ctx;
    v1::GateReportRequest req;
    req.set_run_id(kRestartRun);
    v1::GateReportResponse report;
    EXPECT_TRUE(user_stub_->GateReport(&ctx, req, &report).ok());
    return report.gates_size();
  }
};

TEST_F(ControllerRestartTest, AWorkerRegisteringAgainGetsTheGoDecidedBeforeTheRestart) {
  StartRun();
  auto first = Register(kRestartRun, 1, {"node1", "node2", "node3"});
  ASSERT_EQ(first["node2"].decision(), v1::GateDecision::DECISION_GO) << first["node2"].reason();
  ASSERT_EQ(first["node3"].decision(), v1::GateDecision::DECISION_STANDBY);
  WaitFor(kRestartRun, v1::RUN_STATE_RUNNING);

  // node1 heard GO and runs ranks 0 and 1; node2's and node3's answers were
  // lost on their way, then with the controller.
  for (bool restarted : {false, true}) {
    if (restarted) Restart();
    auto again = Register(kRestartRun, 1, {"node2", "node3"});
    const v1::GateDecision& go = again["node2"];
    ASSERT_EQ(go.decision(), v1::GateDecision::DECISION_GO) << go.reason();
    EXPECT_EQ(go.node_index(), first["node2"].node_index());
    EXPECT_EQ(go.rank_offset(), 2);
    EXPECT_EQ(go.ranks_per_node(), 2);
    EXPECT_EQ(go.world_size(), 4);
    EXPECT_EQ(go.master_addr(), "host-node1");
    EXPECT_EQ(go.master_port(), first["node2"].master_port());
    EXPECT_EQ(go.resume_step(), first["node2"].resume_step());
    EXPECT_EQ(go.checkpoint_dir(), first["node2"].checkpoint_dir());
    EXPECT_EQ(go.data_roots_size(), first["node2"].data_roots_size());
    EXPECT_EQ(again["node3"].decision(), v1::GateDecision::DECISION_STANDBY);
    EXPECT_EQ(again["node3"].reason(), "the gate of launch 1.1 already decided: node1, node2 go");
    // Nothing was gated a second time.
    EXPECT_EQ(GateRecords(), 1);
    EXPECT_EQ(WaitFor(kRestartRun, v1::RUN_STATE_RUNNING).launches_size(), 1);
  }

  // The launch, resumed after the restart, ends as any.
  ReportExit(kRestartRun, "node1", 1, {RankEnded(0, 0, 0, false), RankEnded(1, 0, 0, false)}, 0);
  ReportExit(kRestartRun, "node2", 1, {RankEnded(2, 0, 0, false), RankEnded(3, 0, 0, false)}, 0);
  EXPECT_EQ(NextLaunch(kRestartRun, 1, 0).action(), v1::NextLaunchResponse::ACTION_EXIT);
  v1::Run run = WaitFor(kRestartRun, v1::RUN_STATE_SUCCEEDED);
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_EQ(run.launches(0).recovery(), "succeed");
}

TEST_F(ControllerRestartTest, AWorkerOfALaunchThatEndedIsTurnedAwayNotGated) {
  RunOnNode1AndNode2();
  ReportExit(kRestartRun, "node1", 1, {RankEnded(0, 3, 0, false), RankEnded(1, 143, 15, true)}, 3);
  ReportExit(kRestartRun, "node2", 1, {RankEnded(2, 143, 15, true), RankEnded(3, 143, 15, true)},
             143);
  v1::NextLaunchResponse next = NextLaunch(kRestartRun, 1, 3);
  ASSERT_EQ(next.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << next.reason();
  WaitFor(kRestartRun, v1::RUN_STATE_RESTARTING);

  for (bool restarted : {false, true}) {
    if (restarted) Restart();
    auto late = Register(kRestartRun, 1, {"node2"});
    EXPECT_EQ(late["node2"].decision(), v1::GateDecision::DECISION_ABORT);
    EXPECT_NE(late["node2"].reason().find("launch 1.1 already ended"), std::string::npos)
        << late["node2"].reason();
    // The run waits for its relaunch, not for a gate of the old launch.
    EXPECT_EQ(WaitFor(kRestartRun, v1::RUN_STATE_RESTARTING).summary().state_reason(),
              next.reason());
  }
  EXPECT_EQ(GateRecords(), 1);
}

TEST_F(ControllerRestartTest, ARelaunchAnnouncedBeforeARestartIsAnsweredAndGatedAfterIt) {
  RunOnNode1AndNode2();
  // node2's worker never reports: node2 is lost, the relaunch leaves it out.
  ReportExit(kRestartRun, "node1", 1, {RankEnded(0, 143, 15, true), RankEnded(1, 143, 15, true)},
             143);
  v1::NextLaunchResponse next = NextLaunch(kRestartRun, 1, 137);
  ASSERT_EQ(next.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << next.reason();
  const std::vector<std::string> named = NodesOf(next);
  ASSERT_EQ(named, (std::vector<std::string>{"node1", "node3"}));
  WaitFor(kRestartRun, v1::RUN_STATE_RESTARTING);

  // The batch script asks again (its answer lost), before and after a restart.
  for (bool restarted : {false, true}) {
    if (restarted) Restart();
    v1::NextLaunchResponse again = NextLaunch(kRestartRun, 1, 137);
    EXPECT_EQ(again.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << again.reason();
    EXPECT_EQ(again.next_launch(), 2);
    EXPECT_EQ(NodesOf(again), named);
    EXPECT_EQ(WaitFor(kRestartRun, v1::RUN_STATE_RESTARTING).summary().restarts(), 1);
  }
  // The gate of launch 2 waits for the two nodes named, not for node2.
  auto d = Register(kRestartRun, 2, {"node1", "node3"});
  EXPECT_EQ(d["node1"].decision(), v1::GateDecision::DECISION_GO) << d["node1"].reason();
  EXPECT_EQ(d["node3"].decision(), v1::GateDecision::DECISION_GO) << d["node3"].reason();
  EXPECT_EQ(d["node3"].rank_offset(), 2);
  v1::Run run = WaitFor(kRestartRun, v1::RUN_STATE_RUNNING);
  EXPECT_EQ(run.summary().restarts(), 1);
  EXPECT_EQ(run.attempts_size(), 1);
  EXPECT_EQ(slurm_->Submissions().size(), 1u);
}

TEST_F(ControllerRestartTest, ALaunchRunningAcrossARestartIsWatchedStoppedAndRelaunched) {
  metrics_addrs_ = {{"node1", "host-node1:9400"}, {"node2", "host-node2:9400"}};
  RunOnNode1AndNode2();
  Restart();
  // Prometheus scrapes the launch's workers again.
  Sync();
  std::ifstream in(dir_ / "targets.json");
  const std::string targets{std::istreambuf_iterator<char>(in), {}};
  EXPECT_NE(targets.find("host-node2:9400"), std::string::npos) << targets;

  // Both workers reconnect and beat past the reconnect grace; then node1's
  // beats on, node2's falls silent.
  auto both = [&] {
    Send(Id(kRestartRun, "node1", 1), {HeartbeatReport(2)});
    Send(Id(kRestartRun, "node2", 1), {HeartbeatReport(2)});
  };
  Pass(20, both);
  both();
  auto beat = [&] { Send(Id(kRestartRun, "node1", 1), {HeartbeatReport(2)}); };
  Pass(7, beat);  // heartbeat_timeout_s = 8
  EXPECT_TRUE(HealthEvents(kRestartRun, "node_lost").empty());
  EXPECT_TRUE(slurm_->Signalled().empty());
  Pass(3, beat);
  std::vector<v1::HealthEvent> lost = HealthEvents(kRestartRun, "node_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].node(), "node2");
  // The launch's own srun step (its GO record kept it) is stopped, not the job.
  ASSERT_TRUE(WaitSignalled("100.0 TERM"));
  EXPECT_TRUE(slurm_->Cancelled().empty());

  // node1 reported its ranks' ends after the restart; the relaunch takes
  // the spare the allocation still has.
  v1::Run run = Node2LostAndRelaunchedOnTheSpare(143);
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_NE(run.launches(0).evidence_json().find("\"controller_restarted\":true"),
            std::string::npos)
      << run.launches(0).evidence_json();
  EXPECT_EQ(run.attempts_size(), 1);
  auto d = Register(kRestartRun, 2, {"node1", "node3"});
  EXPECT_EQ(d["node3"].decision(), v1::GateDecision::DECISION_GO) << d["node3"].reason();
}

TEST_F(ControllerRestartTest, AStragglerAcrossARestartIsOneEventAndOneStrike) {
  StartRun("[health]\nstraggler_window = 5\nstraggler_min_slow = 3\nstraggler_strike = true\n");
  Register(kRestartRun, 1, {"node1", "node2", "node3"});
  WaitFor(kRestartRun, v1::RUN_STATE_RUNNING);
  int64_t step = 1;
  auto steps = [&](int n, double rank3_s) {  // rank 2 on node2 takes three times as long
    for (int i = 0; i < n; ++i, ++step) {
      Send(Id(kRestartRun, "node1", 1), {StepReport(0, step, 0.5), StepReport(1, step, 0.5)});
      Send(Id(kRestartRun, "node2", 1), {StepReport(2, step, 1.5), StepReport(3, step, rank3_s)});
    }
    Sync();
  };
  steps(4, 0.5);
  ASSERT_EQ(HealthEvents(kRestartRun, "straggler").size(), 1u);
  auto strikes = [&](const std::string& node) {
    const v1::ListNodesResponse nodes = Nodes();
    for (const auto& n : nodes.nodes())
      if (n.name() == node) return n.strikes();
    return 0;
  };
  EXPECT_EQ(strikes("node2"), 1);

  // The same slow spell after the restart: the window starts empty, and its
  // third slow step would raise the episode again.
  Restart();
  steps(8, 0.5);
  std::vector<v1::HealthEvent> events = HealthEvents(kRestartRun, "straggler");
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rank(), 2);
  EXPECT_EQ(strikes("node2"), 1);
  // Another rank's episode is its own: rank 3, as slow as rank 2.
  steps(3, 1.5);
  events = HealthEvents(kRestartRun, "straggler");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].rank(), 3);
}

// An episode that ended before the restart (its end stored as an event) is
// not held after it: the rank's next slow spell is a new episode, raised as
// soon as the window counts it, not a whole window later.
TEST_F(ControllerRestartTest, AStragglerWhoseEpisodeEndedBeforeTheRestartIsRaisedAgain) {
  StartRun("[health]\nstraggler_window = 5\nstraggler_min_slow = 3\n");
  Register(kRestartRun, 1, {"node1", "node2", "node3"});
  WaitFor(kRestartRun, v1::RUN_STATE_RUNNING);
  int64_t step = 1;
  auto steps = [&](int n, double rank2_s) {
    for (int i = 0; i < n; ++i, ++step) {
      Send(Id(kRestartRun, "node1", 1), {StepReport(0, step, 0.5), StepReport(1, step, 0.5)});
      Send(Id(kRestartRun, "node2", 1), {StepReport(2, step, rank2_s), StepReport(3, step, 0.5)});
    }
    Sync();
  };
  steps(4, 1.5);  // slow in steps 1-4: raised at step 3
  ASSERT_EQ(HealthEvents(kRestartRun, "straggler").size(), 1u);
  steps(2, 0.5);
  EXPECT_TRUE(HealthEvents(kRestartRun, "straggler_ended").empty()) << "steps 2-6 hold 3 slow ones";
  steps(2, 0.5);  // at step 7, 2 of steps 3-7 were slow: over
  std::vector<v1::HealthEvent> ended = HealthEvents(kRestartRun, "straggler_ended");
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].rank(), 2);
  EXPECT_NE(ended[0].detail().find("rank 2 on node2 is no longer a straggler: slow in 2 of the "
                                   "last 5 steps (at step 7; an event takes 3)"),
            std::string::npos)
      << ended[0].detail();

  Restart();
  steps(3, 1.5);
  std::vector<v1::HealthEvent> events = HealthEvents(kRestartRun, "straggler");
  ASSERT_EQ(events.size(), 2u) << "the new spell, raised at its third slow step";
  EXPECT_EQ(events[1].rank(), 2);
}

TEST_F(ControllerRestartTest, WorkersThatEndedBeforeTheRestartAreNotTakenForLost) {
  RunOnNode1AndNode2();
  // The ranks ended and both workers reported (their reports were stored);
  // the controller restarts before the batch script asks what follows.
  ReportExit(kRestartRun, "node1", 1, {RankEnded(0, 0, 0, false), RankEnded(1, 0, 0, false)}, 0);
  ReportExit(kRestartRun, "node2", 1, {RankEnded(2, 0, 0, false), RankEnded(3, 0, 0, false)}, 0);
  Restart();
  Pass(60);  // far past heartbeat_timeout_s = 8
  EXPECT_TRUE(HealthEvents(kRestartRun, "node_lost").empty());
  EXPECT_TRUE(slurm_->Signalled().empty());
  EXPECT_EQ(NextLaunch(kRestartRun, 1, 0).action(), v1::NextLaunchResponse::ACTION_EXIT);
  v1::Run run = WaitFor(kRestartRun, v1::RUN_STATE_SUCCEEDED);
  EXPECT_EQ(run.summary().restarts(), 0);
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_EQ(run.launches(0).failure_class(), "succeeded");
}

TEST_F(ControllerRestartTest, ALaunchStoppedForTheTimeLimitBeforeTheRestartIsContinued) {
  // The batch script got the warning too, and says so.
  ContinuedAfterATimeLimitStopAndARestart(/*batch_script_warned=*/true);
}

TEST_F(ControllerRestartTest, TheTimeLimitStopIsKnownFromReportsStoredBeforeTheRestart) {
  // A batch script that missed the warning (it came to the ranks only).
  ContinuedAfterATimeLimitStopAndARestart(/*batch_script_warned=*/false);
}

TEST_F(ControllerRestartTest, AFinalReportSentBeforeTheRestartIsEvidenceAfterIt) {
  RunOnNode1AndNode2();
  // Rank 3 fails on a device error: node2's worker reports before the
  // restart, node1's (its ranks stopped) after.
  ReportExit(kRestartRun, "node2", 1, {RankEnded(2, 143, 15, true), Rank3DeviceError()}, 1);
  Restart();
  Node2FinishedAndBlamedAfterTheRestart();
}

TEST_F(ControllerRestartTest, AFinalReportLeftInTheLaunchDirectoryIsReadAtTheRestart) {
  RunOnNode1AndNode2();
  // node2's worker could not reach the controller: its report is only in
  // the file it wrote first (as the worker writes it: no secret).
  v1::ReportExitRequest report;
  *report.mutable_id() = Id(kRestartRun, "node2", 1);
  report.mutable_id()->clear_secret();
  *report.add_ranks() = RankEnded(2, 143, 15, true);
  *report.add_ranks() = Rank3DeviceError();
  report.set_exit_code(1);
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(report, &json).ok());
  const std::string path = FinalReportPath(Get(kRestartRun).run_dir(), 1, 1, "node2");
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << json;
  Restart();
  Node2FinishedAndBlamedAfterTheRestart();
}

TEST_F(ControllerRestartTest, AWorkerNeverHeardAfterTheRestartIsLost) {
  RunOnNode1AndNode2();
  // node2 died while the controller was down: its worker never comes back.
  Restart();
  auto beat = [&] { Send(Id(kRestartRun, "node1", 1), {HeartbeatReport(2)}); };
  // heartbeat_timeout_s = 8 from the restart, but not before the workers'
  // reconnect grace (RunHealth::kReconnectGrace, 15 s) has passed.
  Pass(14, beat);
  EXPECT_TRUE(HealthEvents(kRestartRun, "node_lost").empty());
  Pass(3, beat);
  std::vector<v1::HealthEvent> lost = HealthEvents(kRestartRun, "node_lost");
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].node(), "node2");
  ASSERT_TRUE(WaitSignalled("100.0 TERM"));
  Node2LostAndRelaunchedOnTheSpare(143);
}

TEST_F(ControllerRestartTest, AWorkerHeardSinceTheRestartThatNeverReportsIsLost) {
  RunOnNode1AndNode2();
  Restart();
  // Both workers are back; node2's is killed before its final report and
  // srun ends before its silence reaches heartbeat_timeout_s.
  Send(Id(kRestartRun, "node1", 1), {HeartbeatReport(2)});
  Send(Id(kRestartRun, "node2", 1), {HeartbeatReport(2)});
  Node2LostAndRelaunchedOnTheSpare(137);
}

}  // namespace
}  // namespace trellis::controller
