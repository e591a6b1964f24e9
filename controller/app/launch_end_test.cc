// How a launch ends, alone: final reports, run health's faults, and what the
// batch script is told next (success, relaunch, new attempt, continuation).
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/exit_codes.h"
#include "controller/app/launch_test_util.h"

namespace trellis::controller {
namespace {

using std::chrono::seconds;

class LaunchEndTest : public LaunchTest {};

TEST_F(LaunchEndTest, AFinalReportIsStoredBeforeTheWorkerHearsBack) {
  Go();
  Effects fx = Report("node1");
  EXPECT_EQ(Only<RecordWorkerReport>(fx).row.node, "node1");
  EXPECT_TRUE(Replied<bool>(Only<SendReply>(fx)));
}

// Records the worker could not get stored are in its spool: stored from there.
TEST_F(LaunchEndTest, AReportOfUnstoredRecordsStoresTheWorkersSpool) {
  Go();
  WorkerReport r;
  r.unstored_step_records = 12;
  Effects fx = launches_.ends.ReportExit(Worker("node2"), r, ReplyTo<bool>{100});
  StoreStepSpool spool = Only<StoreStepSpool>(fx);
  EXPECT_EQ(spool.node, "node2");
  EXPECT_EQ(spool.launch, 1);
  EXPECT_TRUE(Report("node1").All<StoreStepSpool>().empty()) << "none unstored";
}

TEST_F(LaunchEndTest, EveryRankExitingZeroSucceedsTheRun) {
  Go();
  Report("node1");
  Report("node2");
  Effects fx = Next(0);
  Transition t = Only<Transition>(fx);
  EXPECT_EQ(t.to, RunState::kSucceeded);
  EXPECT_EQ(std::get<RecordAttemptEnd>(t.also.at(0)).exit_code, 0);
  EXPECT_EQ(Only<RecordLaunch>(fx).row.recovery, "succeed");
  EXPECT_EQ(Only<UnwatchLaunch>(fx).ref.launch, 1);
  NextLaunchAnswer a = Answered(fx);
  EXPECT_FALSE(a.relaunch);
  EXPECT_EQ(a.exit_code, 0);
}

TEST_F(LaunchEndTest, ALostNodeWithASpareLeftIsARelaunchInTheAllocation) {
  spec_ = std::string(kSpec) + "spare_nodes = 1\n[restart]\nmax_restarts = 1\n";
  store_.runs["hello-1"].spec_toml = spec_;
  store_.attempts["hello-1"][0].nodelist = "node[1-3]";
  Go(3);
  Report("node1");
  launches_.ends.Fault({{"hello-1", 1, 1}, {"node2"}, {{"node2", 31.0}}, std::nullopt});
  Effects fx = Next(1);
  Transition t = Only<Transition>(fx);
  EXPECT_EQ(t.to, RunState::kRestarting);
  EXPECT_TRUE(Only<CountRestart>(fx).relaunch);
  LaunchRecord row = Only<RecordLaunch>(fx).row;
  EXPECT_EQ(row.recovery, "relaunch");
  EXPECT_EQ(row.next_nodes, "node1,node3");
  EXPECT_EQ(Only<StrikeNode>(fx).node, "node2");
  NextLaunchAnswer a = Answered(fx);
  EXPECT_TRUE(a.relaunch);
  EXPECT_EQ(a.next_launch, 2);
  EXPECT_EQ(a.nodes, (std::vector<std::string>{"node1", "node3"}));
}

// restart.spare_pool_nodes: a lost node leaves one healthy node of two; the
// run's standing pool job joins the relaunch (no new attempt), its node named
// apart for the batch script (one more srun step, in that job), and the pool
// job is stored as drawn. Its worker's step, in the pool job, is stopped with
// the launch's own; the answer asked again is the same.
TEST_F(LaunchEndTest, TooFewHealthyNodesDrawTheStandingSparePoolIntoTheRelaunch) {
  spec_ = std::string(kSpec) + "[restart]\nmax_restarts = 1\nspare_pool_nodes = 1\n";
  store_.runs["hello-1"].spec_toml = spec_;
  PoolJobRecord pool;
  pool.run_id = "hello-1";
  pool.pool = 1;
  pool.job_id = "77";
  pool.nodes_asked = 1;
  pool.nodelist = "node9";
  pool.standing_since = clock_.Now();
  store_.pools.push_back(pool);
  Go();
  Report("node1");
  launches_.ends.Fault({{"hello-1", 1, 1}, {"node2"}, {{"node2", 31.0}}, std::nullopt});
  Effects fx = Next(1);
  EXPECT_EQ(Only<Transition>(fx).to, RunState::kRestarting);
  EXPECT_TRUE(fx.All<AttemptEnded>().empty()) << "no new attempt";
  EXPECT_EQ(Only<RecordLaunch>(fx).row.next_nodes, "node1,node9");
  PoolJobRecord drawn = Only<RecordPoolJob>(fx).row;
  EXPECT_EQ(drawn.drawn_attempt, 1);
  EXPECT_EQ(drawn.drawn_launch, 2);
  NextLaunchAnswer a = Answered(fx);
  EXPECT_TRUE(a.relaunch);
  EXPECT_EQ(a.nodes, (std::vector<std::string>{"node1"}));
  ASSERT_EQ(a.other_jobs.size(), 1u);
  EXPECT_EQ(a.other_jobs[0].job_id, "77");
  EXPECT_EQ(a.other_jobs[0].nodes, (std::vector<std::string>{"node9"}));
  store_.pools[0] = drawn;

  // The answer lost and asked again: the same, from the store.
  store_.launches["hello-1"].push_back(Only<RecordLaunch>(fx).row);
  store_.runs["hello-1"].state = RunState::kRestarting;
  NextLaunchAnswer again = Answered(Next(1));
  EXPECT_EQ(again.nodes, a.nodes);
  ASSERT_EQ(again.other_jobs.size(), 1u);
  EXPECT_EQ(again.other_jobs[0].job_id, "77");

  // Relaunch 2: node9's worker runs in the pool job, and a stop reaches both steps.
  store_.runs["hello-1"].state = RunState::kRestarting;
  Register("node1", 11, 106, 2);
  launches_.gate.Register({"hello-1", 1, 2, "node9", "s3cret"}, kVersion, "host-node9", Probe(),
                          {"77", "0"}, "", ReplyTo<GateAnswer>{12});
  store_.runs["hello-1"].state = RunState::kRunning;
  Effects stop = launches_.ends.Fault({{"hello-1", 1, 2}, {"node1"}, {{"node1", 31.0}}, std::nullopt});
  std::vector<std::string> signalled;
  for (const SignalStep* sig : stop.All<SignalStep>())
    signalled.push_back(sig->job_id + "." + sig->step_id + " " + sig->signal);
  EXPECT_EQ(signalled, (std::vector<std::string>{"42.1 TERM", "77.0 TERM"}));
}

TEST_F(LaunchEndTest, ALostNodeWithoutASpareIsANewAttempt) {
  spec_ = std::string(kSpec) + "[restart]\nmax_restarts = 1\n";
  store_.runs["hello-1"].spec_toml = spec_;
  Go();
  Report("node1");
  launches_.ends.Fault({{"hello-1", 1, 1}, {"node2"}, {{"node2", 31.0}}, std::nullopt});
  Effects fx = Next(1);
  AttemptEnded end = Only<AttemptEnded>(fx);
  ASSERT_TRUE(end.decided);
  EXPECT_EQ(end.decided->kind, RecoveryDecision::kNewAttempt);
  EXPECT_TRUE(end.decided->uses_restart);
  EXPECT_TRUE(fx.All<Transition>().empty()) << "the scheduler carries it out";
  EXPECT_EQ(Only<RecordLaunch>(fx).row.recovery, "new_attempt");
}

// The time limit, judged on the run's checkpoints (recovery.h): one written
// during the launch makes the new attempt a continuation using no restart;
// none newer than the step the launch resumed from (none at all) makes it a
// restart.
class TimeLimitProgressTest : public LaunchEndTest {
 protected:
  void SetUp() override {
    LaunchEndTest::SetUp();
    std::filesystem::remove_all(run_dir_);
    std::filesystem::create_directories(run_dir_ / "checkpoints");
    store_.runs["hello-1"].run_dir = run_dir_.string();
  }
  void TearDown() override { std::filesystem::remove_all(run_dir_); }
  AttemptEnded EndAtTheLimit() {
    Report("node1", 143, /*time_limit=*/true);
    Report("node2", 143, /*time_limit=*/true);
    return Only<AttemptEnded>(Next(143));
  }
  const std::filesystem::path run_dir_ =
      std::filesystem::temp_directory_path() / ("launch_end_test_" + std::to_string(::getpid()));
};

TEST_F(TimeLimitProgressTest, NoNewCheckpointUsesARestart) {
  Go();
  AttemptEnded end = EndAtTheLimit();
  ASSERT_TRUE(end.decided);
  EXPECT_EQ(end.decided->kind, RecoveryDecision::kFail) << "hello's budget is 0 restarts";
  EXPECT_NE(end.decided->reason.find("with no checkpoint newer than the start it resumed from"),
            std::string::npos)
      << end.decided->reason;
}

TEST_F(TimeLimitProgressTest, ACheckpointWrittenDuringTheLaunchKeepsTheContinuationFree) {
  Go();  // resumes fresh: no checkpoint yet
  const auto step = run_dir_ / "checkpoints" / "step-00000030";
  std::filesystem::create_directories(step);
  std::ofstream(step / "manifest.json") << "{}";
  AttemptEnded end = EndAtTheLimit();
  ASSERT_TRUE(end.decided);
  EXPECT_EQ(end.decided->kind, RecoveryDecision::kNewAttempt);
  EXPECT_FALSE(end.decided->uses_restart) << end.decided->reason;
  EXPECT_EQ(end.failure_class, FailureClass::kTimeLimit);
}

TEST_F(LaunchEndTest, AFailedRankWithoutABudgetFailsTheRun) {
  Go();
  Report("node1", 1);
  Report("node2");
  AttemptEnded end = Only<AttemptEnded>(Next(1));
  ASSERT_TRUE(end.decided);
  EXPECT_EQ(end.decided->kind, RecoveryDecision::kFail);
}

TEST_F(LaunchEndTest, AHangStopsTheStepWithTermThenKillAfterTheGrace) {
  Go();
  HangEvidence hang;
  hang.rank = 3;
  hang.node = "node2";
  hang.last_step = 7;
  Effects fx = launches_.ends.Fault({{"hello-1", 1, 1}, {}, {}, hang});
  SignalStep term = Only<SignalStep>(fx);
  EXPECT_EQ(term.signal, "TERM");
  EXPECT_EQ(term.job_id, "42");
  StartTimer grace = Only<StartTimer>(fx);
  EXPECT_EQ(grace.key.kind, TimerKey::kStopGrace);
  EXPECT_EQ(grace.after, seconds(20));
  EXPECT_TRUE(launches_.ends.Fault({{"hello-1", 1, 1}, {"node1"}, {}, std::nullopt}).empty())
      << "stopping already";
  EXPECT_EQ(Only<SignalStep>(launches_.ends.StopGraceOver({"hello-1", 1, 1})).signal, "KILL");
}

TEST_F(LaunchEndTest, AFaultOfALaunchWhoseStepIsUnknownCancelsTheJob) {
  for (int i = 1; i <= 2; ++i)  // no srun step said (a worker outside Slurm)
    launches_.gate.Register(Worker("node" + std::to_string(i)), kVersion, "h", Probe(), {}, "",
                       ReplyTo<GateAnswer>{static_cast<uint64_t>(i)});
  EXPECT_TRUE(launches_.ends.Fault({{"hello-1", 1, 9}, {"node1"}, {}, std::nullopt}).empty())
      << "no such launch";
  Effects fx = launches_.ends.Fault({{"hello-1", 1, 1}, {"node1"}, {}, std::nullopt});
  EXPECT_EQ(Only<CancelJob>(fx).job_id, "42");
  EXPECT_TRUE(fx.All<SignalStep>().empty());
}

TEST_F(LaunchEndTest, ALaunchSettledBeforeIsAnsweredTheSameAgain) {
  Go();
  Report("node1");
  Report("node2");
  Effects first = Next(0);
  store_.launches["hello-1"].push_back(Only<RecordLaunch>(first).row);
  store_.runs["hello-1"].state = RunState::kSucceeded;
  Effects again = Next(0);
  EXPECT_TRUE(again.All<Transition>().empty());
  EXPECT_EQ(Answered(again).exit_code, 0);
}

TEST_F(LaunchEndTest, AfterAControllerRestartSrunsStatusDecides) {
  store_.runs["hello-1"].state = RunState::kRunning;  // no launch known here
  Effects ok = Next(0);
  EXPECT_EQ(Only<Transition>(ok).to, RunState::kSucceeded);
  Effects failed = Next(3);
  AttemptEnded end = Only<AttemptEnded>(failed);
  EXPECT_FALSE(end.decided) << "the restart budget decides";
  EXPECT_EQ(end.exit_code, 3);
}

// A handoff told the launch to stop (its event names the launch), and the
// controller restarted before the launch ended: resumed from its stored GO,
// the launch still ends as a handoff, not as a time limit; without the event,
// the same end is a time limit's.
TEST_F(LaunchEndTest, ALaunchHandedOverBeforeARestartStillEndsAsAHandoff) {
  for (bool handed_over : {true, false}) {
    SCOPED_TRACE(handed_over ? "handed over" : "no handoff event");
    Launches launches(ctx_);
    StoreRunningLaunch();
    store_.events["hello-1"].clear();
    if (handed_over) {
      HealthEventRecord e;
      e.run_id = "hello-1";
      e.attempt = 2;  // the held attempt's event, naming the launch it stopped
      e.launch = 1;
      e.kind = kContinuationEvent;
      e.detail_json = R"({"event":"handoff","from_attempt":1,"from_launch":1})";
      store_.events["hello-1"].push_back(e);
    }
    launches.resume.ResumeAtStartup();
    for (const std::string node : {"node1", "node2"}) {
      WorkerReport r;
      for (int rank = node == "node1" ? 0 : 2, end = rank + 2; rank < end; ++rank) {
        RankEnd re;
        re.node = node;
        re.rank = rank;
        r.ranks.push_back(re);
      }
      r.time_limit_warned = true;  // the workers passed the signal on
      launches.ends.ReportExit(Worker(node), r, ReplyTo<bool>{100});
    }
    NextLaunchQuestion q;
    q.time_limit_warned = true;
    Effects fx = launches.ends.NextLaunch(Worker("node1"), q, ReplyTo<NextLaunchAnswer>{200});
    EXPECT_EQ(Only<RecordLaunch>(fx).row.failure_class, handed_over ? "handoff" : "time_limit");
  }
}

}  // namespace
}  // namespace trellis::controller
