#include "controller/core/decisions.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

using std::chrono::seconds;

TEST(DecideScheduleTest, WaitsWithTheReasonUsersSee) {
  WallTime now = FakeClock().Now();
  auto d = DecideSchedule(4, 3, now, now);
  EXPECT_FALSE(d.submit);
  EXPECT_EQ(d.wait_reason, "needs 4 nodes, 3 eligible");
  d = DecideSchedule(2, 3, now + seconds(30), now);
  EXPECT_FALSE(d.submit);
  EXPECT_EQ(d.wait_reason, "restart backoff, 30 s left");
  EXPECT_TRUE(DecideSchedule(3, 3, now, now).submit);
}

struct GateCase {
  const char* name;
  std::vector<std::string> registered;
  int expected, needed;
  bool timed_out;
  GateOutcome::Kind kind;
  int go_nodes;
  const char* reason_contains;
};

TEST(DecideGateTest, Table) {
  const GateCase cases[] = {
      {"waits for everyone", {"n1"}, 2, 2, false, GateOutcome::kWaiting, 0, ""},
      {"all registered", {"n2", "n1"}, 2, 2, false, GateOutcome::kGo, 2, "2 nodes go, 0 standing"},
      {"spare stands by", {"n1", "n2", "n3"}, 3, 2, false, GateOutcome::kGo, 2, "1 standing by"},
      {"timeout with enough", {"n1", "n2"}, 3, 2, true, GateOutcome::kGo, 2, "2 nodes go"},
      {"timeout short", {"n1"}, 2, 2, true, GateOutcome::kAbort, 0,
       "1 of 2 nodes registered within 120 s; 2 needed"},
      {"nobody", {}, 2, 2, true, GateOutcome::kAbort, 0, "0 of 2"},
  };
  for (const auto& c : cases) {
    auto out = DecideGate(c.registered, c.expected, c.needed, 4, c.timed_out, seconds(120));
    EXPECT_EQ(out.kind, c.kind) << c.name;
    int go = 0;
    for (const auto& a : out.assignments) go += a.go;
    EXPECT_EQ(go, c.go_nodes) << c.name;
    EXPECT_NE(out.reason.find(c.reason_contains), std::string::npos) << c.name << ": " << out.reason;
  }
}

TEST(DecideGateTest, RanksAreContiguousPerNodeInRegistrationOrder) {
  auto out = DecideGate({"b", "a", "c"}, 3, 2, 4, false, seconds(1));
  ASSERT_EQ(out.assignments.size(), 3u);
  EXPECT_EQ(out.assignments[0].node, "b");
  EXPECT_EQ(out.assignments[0].rank_offset, 0);
  EXPECT_EQ(out.assignments[1].rank_offset, 4);
  EXPECT_FALSE(out.assignments[2].go);
}

TEST(SettleLaunchTest, Table) {
  auto ok = SettleLaunch(0, {{"n1", 0, 0}, {"n2", 1, 0}}, 2, 2);
  EXPECT_TRUE(ok.succeeded);
  EXPECT_EQ(ok.reason, "all 2 ranks exited 0");
  auto bad = SettleLaunch(3, {{"n1", 0, 143}, {"n2", 1, 3}, {"n2", 2, 0}}, 2, 2);
  EXPECT_FALSE(bad.succeeded);
  // The rank that failed on its own is named, not the one killed in the cleanup.
  EXPECT_EQ(bad.reason, "rank 1 on n2 exited with 3");
  auto killed = SettleLaunch(137, {{"n1", 3, 137}, {"n1", 2, 143}}, 1, 1);
  EXPECT_EQ(killed.reason, "rank 2 on n1 was killed by signal 15");
  auto only = SettleLaunch(0, {{"n1", 1, 3}}, 1, 2);
  EXPECT_EQ(only.reason, "rank 1 on n1 exited with 3");
  EXPECT_EQ(only.exit_code, 3);
  auto lost = SettleLaunch(0, {{"n1", 0, 0}}, 1, 2);
  EXPECT_FALSE(lost.succeeded);
  EXPECT_EQ(lost.reason, "only 1 of 2 workers reported their exit");
  auto srun = SettleLaunch(137, {}, 0, 2);
  EXPECT_EQ(srun.reason, "srun step ended with 137");
}

TEST(DecideRestartTest, BacksOffExponentiallyThenGivesUp) {
  spec::RestartSection p;
  p.max_restarts = 2;
  p.backoff_s = 10;
  WallTime now = FakeClock().Now();
  auto first = DecideRestart(0, p, "rank 1 exited with 3", now);
  EXPECT_TRUE(first.requeue);
  EXPECT_EQ(first.not_before, now + seconds(10));
  auto second = DecideRestart(1, p, "x", now);
  EXPECT_EQ(second.not_before, now + seconds(20));
  auto third = DecideRestart(2, p, "rank 1 exited with 3", now);
  EXPECT_FALSE(third.requeue);
  EXPECT_EQ(third.reason, "rank 1 exited with 3 (2 of 2 restarts used)");
}

TEST(ReconcileTest, Table) {
  SlurmJob running{"7", "RUNNING", "None", "node[1-2]", std::nullopt};
  SlurmJob done{"7", "COMPLETED", "None", "node[1-2]", 0};
  SlurmJob failed{"7", "FAILED", "NonZeroExitCode", "node1", 3};
  SlurmJob cancelled{"7", "CANCELLED", "None", "node1", 143};
  ExitFile ok{0, 1, "launch 1 ended with 0"};
  ExitFile bad{3, 1, "launch 1 ended with 3"};

  EXPECT_EQ(Reconcile(running, std::nullopt).kind, Reconciliation::kAlive);
  auto r = Reconcile(done, ok);
  EXPECT_TRUE(r.succeeded);
  r = Reconcile(std::nullopt, ok);  // forgotten by Slurm, exit.json says 0
  EXPECT_TRUE(r.succeeded);
  r = Reconcile(failed, bad);
  EXPECT_FALSE(r.succeeded);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.reason, "launch 1 ended with 3 (Slurm: FAILED)");
  r = Reconcile(failed, std::nullopt);
  EXPECT_EQ(r.reason, "Slurm job 7 ended FAILED with exit code 3 and left no exit.json");
  r = Reconcile(cancelled, ok);  // killed after exit.json was written: not a success
  EXPECT_FALSE(r.succeeded);
  r = Reconcile(std::nullopt, std::nullopt);
  EXPECT_EQ(r.kind, Reconciliation::kEnded);
  EXPECT_FALSE(r.succeeded);
  EXPECT_EQ(r.reason, "Slurm job vanished and left no exit.json");
}

}  // namespace
}  // namespace trellis::controller
