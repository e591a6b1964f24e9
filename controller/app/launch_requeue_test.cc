// Slurm ending or requeuing a launch's job, and a launch resumed after a
// controller restart, alone.
#include "controller/app/launch_answers.h"
#include "controller/app/launch_test_util.h"

namespace trellis::controller {
namespace {

class LaunchRequeueTest : public LaunchTest {};

TEST_F(LaunchRequeueTest, ARequeuedJobsBatchScriptIsGivenTheNextLaunchAndGatedAgain) {
  Go();
  NextLaunchQuestion q;
  q.requeue_count = 1;
  q.allocation_nodelist = "node[4-5]";
  Effects fx = Next(143, q);
  Transition t = Only<Transition>(fx);
  EXPECT_EQ(t.to, RunState::kSubmitted);
  EXPECT_EQ(std::get<RecordAttemptNodes>(t.also.at(0)).nodes, "node[4-5]");
  EXPECT_EQ(Only<EndLaunchesOfRun>(fx).why, "Slurm requeued the job");
  LaunchRecord killed = Only<RecordLaunch>(fx).row;
  EXPECT_EQ(killed.recovery, "slurm_decides");
  EXPECT_EQ(killed.failure_class, "terminated");
  EXPECT_EQ(Only<UnwatchLaunch>(fx).ref.launch, 1);
  NextLaunchAnswer a = Answered(fx);
  EXPECT_TRUE(a.relaunch);
  EXPECT_EQ(a.next_launch, 2);
  EXPECT_TRUE(fx.All<CountRestart>().empty()) << "a requeue uses no restart";
}

TEST_F(LaunchRequeueTest, ARequeueBeforeAnyLaunchOnlyRecordsTheNewNodes) {
  NextLaunchQuestion q;
  q.requeue_count = 2;
  q.allocation_nodelist = "node[4-5]";
  Effects fx = Next(0, q);  // the run is still SUBMITTED
  EXPECT_TRUE(fx.All<Transition>().empty());
  EXPECT_EQ(Only<RecordAttemptNodes>(fx).nodes, "node[4-5]");
  EXPECT_NE(Only<SetWaitReason>(fx).reason.find("restart 2"), std::string::npos);
  EXPECT_EQ(Answered(fx).next_launch, 1);
}

TEST_F(LaunchRequeueTest, ALaunchSlurmSignalledIsRecordedAndTheJobsEndDecides) {
  Go();
  NextLaunchQuestion q;
  q.terminated_by_slurm = true;
  Effects fx = Next(143, q);
  EXPECT_TRUE(fx.All<Transition>().empty());
  EXPECT_TRUE(fx.All<AttemptEnded>().empty());
  EXPECT_EQ(Only<RecordLaunch>(fx).row.recovery, "slurm_decides");
  EXPECT_EQ(Only<UnwatchLaunch>(fx).ref.launch, 1);
  EXPECT_FALSE(Answered(fx).relaunch);
}

TEST_F(LaunchRequeueTest, ALaunchThatRanBeforeARestartIsWatchedAgain) {
  StoreRunningLaunch();
  WorkerReport done;
  for (int rank : {0, 1}) {
    RankEnd end;
    end.node = "node1";
    end.rank = rank;
    done.ranks.push_back(end);
  }
  store_.reports[{"hello-1", 1, 1}].push_back(
      WorkerReportRecordOf(Worker("node1"), clock_.Now(), done));
  store_.straggling[{"hello-1", 1, 1}] = {3};

  Effects fx = launches_.resume.ResumeAtStartup();
  WatchLaunch w = Only<WatchLaunch>(fx);
  EXPECT_TRUE(w.resumed);
  EXPECT_EQ(w.finished_nodes, std::set<std::string>{"node1"});
  EXPECT_EQ(w.ended_ranks, (std::set<int>{0, 1}));
  EXPECT_EQ(w.straggler_ranks, std::set<int>{3});
  EXPECT_TRUE(fx.All<Transition>().empty()) << "RUNNING already";
  EXPECT_EQ(launches_.gate.WorldSize(Worker("node2")), 4);
  // Its fault stops its own srun step, as before the restart.
  EXPECT_EQ(Only<SignalStep>(launches_.ends.Fault({{"hello-1", 1, 1}, {"node2"}, {}, std::nullopt}))
                .step_id,
            "0");
}

TEST_F(LaunchRequeueTest, ALaunchWhoseRowKeptNoGoIsNotResumed) {
  store_.runs["hello-1"].state = RunState::kRunning;
  LaunchRecord row;
  row.run_id = "hello-1";
  row.attempt = 1;
  row.launch = 1;
  store_.launches["hello-1"].push_back(row);
  EXPECT_TRUE(launches_.resume.ResumeAtStartup().empty());
}

}  // namespace
}  // namespace trellis::controller
