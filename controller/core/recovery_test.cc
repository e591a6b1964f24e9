#include "controller/core/recovery.h"

#include <gtest/gtest.h>

#include "controller/core/decisions.h"

namespace trellis::controller {
namespace {

using std::chrono::seconds;
using Kind = RecoveryDecision::Kind;

LaunchVerdict Failed(FailureClass cls, std::string reason, std::string blamed = "") {
  LaunchVerdict v;
  v.cls = cls;
  v.exit_code = 1;
  v.reason = std::move(reason);
  v.blamed_node = std::move(blamed);
  v.retryable = cls != FailureClass::kUserError && cls != FailureClass::kCancel;
  return v;
}

struct Case {
  const char* name;
  LaunchVerdict verdict;
  std::vector<std::string> allocation;
  std::set<std::string> unhealthy;
  int restarts_so_far;
  bool relaunch_in_allocation;
  Kind kind;
  std::vector<std::string> nodes;
  int backoff_s;  // not_before - now
  bool uses_restart;
  std::string reason;
};

TEST(DecideRecoveryTest, Table) {
  LaunchVerdict ok;
  ok.succeeded = true;
  ok.cls = FailureClass::kSucceeded;
  ok.reason = "all 4 ranks exited 0";
  const std::vector<std::string> alloc = {"node10", "node2", "node1", "node3"};
  const auto exit3 = Failed(FailureClass::kRankExit, "rank 1 on node2 exited with 3");
  // clang-format off
  const Case cases[] = {
      {"success", ok, alloc, {}, 0, true, Kind::kSucceed, {}, 0, false, "all 4 ranks exited 0"},
      {"user error is not retried",
       Failed(FailureClass::kUserError, "rank 0 on node1 exited with 79"), alloc, {}, 0, true,
       Kind::kFail, {}, 0, false, "rank 0 on node1 exited with 79 (user_error: not retried)"},
      {"cancel is not retried", Failed(FailureClass::kCancel, "cancelled"), alloc, {}, 0, true,
       Kind::kFail, {}, 0, false, "cancelled (cancel: not retried)"},
      {"gate abort: new attempt, no restart used, even with the budget used",
       Failed(FailureClass::kGate, "the launch gate aborted"), alloc, {}, 3, true,
       Kind::kNewAttempt, {}, 0, false, "the launch gate aborted; new attempt"},
      {"time limit: new attempt",
       Failed(FailureClass::kTimeLimit, "reached the Slurm time limit"), alloc, {}, 0, true,
       Kind::kNewAttempt, {}, 0, false, "reached the Slurm time limit; new attempt"},
      {"handoff: new attempt, no restart used, even with the budget used",
       Failed(FailureClass::kHandoff, "stopped for the next attempt"), alloc, {}, 3, true,
       Kind::kNewAttempt, {}, 0, false, "stopped for the next attempt; new attempt"},
      {"preemption: new attempt", Failed(FailureClass::kPreemption, "preempted"), {}, {}, 0, true,
       Kind::kNewAttempt, {}, 0, false, "preempted; new attempt"},
      {"budget used", exit3, alloc, {}, 3, true, Kind::kFail, {}, 0, false,
       "rank 1 on node2 exited with 3 (3 of 3 restarts used)"},
      {"relaunch on every healthy node, spares included, in name order", exit3, alloc, {}, 0,
       true, Kind::kRelaunch, {"node1", "node2", "node3", "node10"}, 0, true,
       "rank 1 on node2 exited with 3; relaunch 1 of 3 in the allocation on node1, node2, "
       "node3, node10"},
      {"relaunch without the blamed and unhealthy nodes",
       Failed(FailureClass::kNodeLost, "node node3 lost: worker silent for 31 s", "node3"),
       alloc, {"node10"}, 1, true, Kind::kRelaunch, {"node1", "node2"}, 0, true,
       "node node3 lost: worker silent for 31 s; relaunch 2 of 3 in the allocation on node1, "
       "node2"},
      {"too few healthy nodes: new attempt with backoff",
       Failed(FailureClass::kDeviceError, "rank 4 on node3 exited with 1: device error", "node3"),
       alloc, {"node1", "node2"}, 1, true, Kind::kNewAttempt, {}, 20, true,
       "rank 4 on node3 exited with 1: device error; new attempt (restart 2 of 3) in 20 s: 1 of "
       "4 allocation nodes healthy, 2 needed"},
      {"relaunch turned off", exit3, alloc, {}, 0, false, Kind::kNewAttempt, {}, 10, true,
       "rank 1 on node2 exited with 3; new attempt (restart 1 of 3) in 10 s: "
       "relaunch_in_allocation is off"},
      {"allocation unknown", exit3, {}, {}, 2, true, Kind::kNewAttempt, {}, 40, true,
       "rank 1 on node2 exited with 3; new attempt (restart 3 of 3) in 40 s: the allocation's "
       "nodes are unknown"},
  };
  // clang-format on
  WallTime now = FakeClock().Now();
  for (const auto& c : cases) {
    RecoveryInput in;
    in.verdict = c.verdict;
    in.allocation_nodes = c.allocation;
    in.unhealthy = c.unhealthy;
    in.nodes_needed = 2;
    in.restarts_so_far = c.restarts_so_far;
    in.policy.max_restarts = 3;
    in.policy.backoff_s = 10;
    in.policy.relaunch_in_allocation = c.relaunch_in_allocation;
    in.now = now;
    RecoveryDecision d = DecideRecovery(in);
    EXPECT_EQ(d.kind, c.kind) << c.name;
    EXPECT_EQ(d.nodes, c.nodes) << c.name;
    EXPECT_EQ(d.not_before, now + seconds(c.backoff_s)) << c.name;
    EXPECT_EQ(d.uses_restart, c.uses_restart) << c.name;
    EXPECT_EQ(d.reason, c.reason) << c.name;
  }
}

// Out of memory: the same program on the same data runs out again, so the
// run fails with what to change, unless the spec asks for restarts.
TEST(DecideRecoveryTest, OutOfMemoryFailsTheRunUnlessRetryOom) {
  RecoveryInput in;
  in.allocation_nodes = {"node1", "node2"};
  in.nodes_needed = 2;
  in.policy.max_restarts = 3;
  in.now = FakeClock().Now();
  in.verdict =
      Failed(FailureClass::kDeviceOom, "rank 1 on node2 exited with 1: out of device memory");
  RecoveryDecision d = DecideRecovery(in);
  EXPECT_EQ(d.kind, Kind::kFail);
  EXPECT_FALSE(d.uses_restart);
  EXPECT_EQ(d.reason,
            "rank 1 on node2 exited with 1: out of device memory (device_oom: not retried, it "
            "would run out of memory again; use less (training.micro_batch, "
            "parallel.activation_checkpointing, parallel.offload_fraction) or set "
            "restart.retry_oom = true)");
  in.verdict = Failed(FailureClass::kHostOom, "rank 0 on node1 was killed by signal 9");
  d = DecideRecovery(in);
  EXPECT_EQ(d.kind, Kind::kFail);
  EXPECT_NE(d.reason.find("(host_oom: not retried"), std::string::npos) << d.reason;

  in.policy.retry_oom = true;
  d = DecideRecovery(in);
  EXPECT_EQ(d.kind, Kind::kRelaunch) << d.reason;
  EXPECT_TRUE(d.uses_restart);
}

// Rule 5 with the spare pool: too few healthy nodes in the allocation, enough
// with the standing pool job's: a relaunch (a restart used, no new attempt)
// on the healthy nodes and the whole pool, its job named. Not when the
// allocation's own nodes suffice, not when the pool's are struck too, and not
// with relaunch_in_allocation off.
TEST(DecideRecoveryTest, TooFewHealthyNodesDrawOnTheStandingSparePool) {
  RecoveryInput in;
  in.verdict = Failed(FailureClass::kNodeLost, "node node1 lost: worker silent for 31 s", "node1");
  in.allocation_nodes = {"node1", "node2"};
  in.pool = StandingPool{"77", {"node9", "node10"}};
  in.nodes_needed = 2;
  in.policy.max_restarts = 3;
  in.policy.backoff_s = 10;
  in.now = FakeClock().Now();
  RecoveryDecision d = DecideRecovery(in);
  EXPECT_EQ(d.kind, Kind::kRelaunch);
  EXPECT_EQ(d.nodes, (std::vector<std::string>{"node2", "node9", "node10"}));
  EXPECT_EQ(d.draws_pool, "77");
  EXPECT_TRUE(d.uses_restart);
  EXPECT_EQ(d.reason,
            "node node1 lost: worker silent for 31 s; relaunch 1 of 3 in the allocation on "
            "node2, node9, node10 (the spare pool's Slurm job 77 joins)");

  RecoveryInput enough = in;
  enough.allocation_nodes = {"node1", "node2", "node3"};
  d = DecideRecovery(enough);
  EXPECT_EQ(d.kind, Kind::kRelaunch);
  EXPECT_EQ(d.nodes, (std::vector<std::string>{"node2", "node3"}));
  EXPECT_EQ(d.draws_pool, "");

  RecoveryInput struck = in;
  struck.unhealthy = {"node9", "node10"};
  d = DecideRecovery(struck);
  EXPECT_EQ(d.kind, Kind::kNewAttempt);
  EXPECT_EQ(d.draws_pool, "");
  EXPECT_EQ(d.reason,
            "node node1 lost: worker silent for 31 s; new attempt (restart 1 of 3) in 10 s: 1 of "
            "2 allocation nodes healthy, 2 needed, with the spare pool's too");

  RecoveryInput off = in;
  off.policy.relaunch_in_allocation = false;
  EXPECT_EQ(DecideRecovery(off).kind, Kind::kNewAttempt);

  RecoveryInput damaged = in;
  damaged.verdict = Failed(FailureClass::kDamagedCheckpoint, "rank 0 found step 40 damaged");
  damaged.unhealthy = {"node1"};
  damaged.progress = Progress{40, 40};
  d = DecideRecovery(damaged);
  EXPECT_EQ(d.kind, Kind::kRelaunch);
  EXPECT_EQ(d.draws_pool, "77");
  EXPECT_FALSE(d.uses_restart);
}

// A time limit that left no checkpoint newer than the step its launch resumed
// from: the continuation would redo the same steps, so it uses a restart (and
// ends the run once the budget is spent); never a relaunch in the allocation.
// With progress, or unknown progress, a continuation as before; a preemption
// is never charged.
TEST(DecideRecoveryTest, ATimeLimitWithoutProgressUsesARestart) {
  const auto limit = Failed(FailureClass::kTimeLimit, "reached the Slurm time limit");
  WallTime now = FakeClock().Now();
  auto decide = [&](LaunchVerdict v, std::optional<Progress> progress, int restarts) {
    RecoveryInput in;
    in.verdict = std::move(v);
    in.allocation_nodes = {"node1", "node2"};
    in.nodes_needed = 1;
    in.restarts_so_far = restarts;
    in.policy.max_restarts = 2;
    in.policy.backoff_s = 10;
    in.progress = progress;
    in.now = now;
    return DecideRecovery(in);
  };
  RecoveryDecision d = decide(limit, Progress{-1, -1}, 0);
  EXPECT_EQ(d.kind, Kind::kNewAttempt);
  EXPECT_TRUE(d.uses_restart);
  EXPECT_EQ(d.not_before, now + seconds(10));
  EXPECT_EQ(d.reason,
            "reached the Slurm time limit, with no checkpoint newer than the start it resumed "
            "from (a continuation would redo the same steps); new attempt (restart 1 of 2) in "
            "10 s: a time limit without progress counts as a restart");
  d = decide(limit, Progress{40, 40}, 2);
  EXPECT_EQ(d.kind, Kind::kFail);
  EXPECT_EQ(d.reason,
            "reached the Slurm time limit, with no checkpoint newer than step 40 it resumed from "
            "(a continuation would redo the same steps) (2 of 2 restarts used)");
  for (std::optional<Progress> moved : {std::optional<Progress>(Progress{40, 60}),
                                        std::optional<Progress>(Progress{-1, 20}),
                                        std::optional<Progress>()}) {
    d = decide(limit, moved, 2);
    EXPECT_EQ(d.kind, Kind::kNewAttempt);
    EXPECT_FALSE(d.uses_restart);
    EXPECT_EQ(d.reason, "reached the Slurm time limit; new attempt");
  }
  d = decide(Failed(FailureClass::kPreemption, "preempted"), Progress{40, 40}, 2);
  EXPECT_EQ(d.kind, Kind::kNewAttempt);
  EXPECT_FALSE(d.uses_restart);
  // A handoff is a time limit that came early: the same rule.
  d = decide(Failed(FailureClass::kHandoff, "stopped for the next attempt"), Progress{40, 40}, 0);
  EXPECT_EQ(d.kind, Kind::kNewAttempt);
  EXPECT_TRUE(d.uses_restart);
  d = decide(Failed(FailureClass::kHandoff, "stopped for the next attempt"), Progress{40, 60}, 0);
  EXPECT_FALSE(d.uses_restart);
}

// A damaged checkpoint: the step the launch resumed from is set aside and the
// run goes on from an older one, using no restart (a relaunch on the same
// nodes where it can); a step set aside before and met again (the rename
// failed), or an unknown resume step, is a failure like any other.
TEST(DecideRecoveryTest, ADamagedCheckpointIsSetAsideWithoutARestart) {
  LaunchVerdict damaged = Failed(FailureClass::kDamagedCheckpoint, "rank 1 on node2 exited 74");
  WallTime now = FakeClock().Now();
  auto decide = [&](std::optional<Progress> progress, std::vector<int64_t> before,
                    bool relaunch, int restarts) {
    RecoveryInput in;
    in.verdict = damaged;
    in.allocation_nodes = {"node2", "node1"};
    in.nodes_needed = 2;
    in.restarts_so_far = restarts;
    in.policy.max_restarts = 1;
    in.policy.backoff_s = 10;
    in.policy.relaunch_in_allocation = relaunch;
    in.progress = progress;
    in.set_aside_before = std::move(before);
    in.now = now;
    return DecideRecovery(in);
  };
  RecoveryDecision d = decide(Progress{40, 40}, {}, true, 1);
  EXPECT_EQ(d.kind, Kind::kRelaunch);
  EXPECT_FALSE(d.uses_restart);
  EXPECT_EQ(d.set_aside_step, 40);
  EXPECT_EQ(d.nodes, (std::vector<std::string>{"node1", "node2"}));
  EXPECT_EQ(d.reason,
            "rank 1 on node2 exited 74; checkpoint step 40 set aside, resuming from the newest "
            "intact one; relaunch in the allocation on node1, node2");
  d = decide(Progress{40, 40}, {20}, false, 1);
  EXPECT_EQ(d.kind, Kind::kNewAttempt);
  EXPECT_FALSE(d.uses_restart);
  EXPECT_EQ(d.set_aside_step, 40);
  EXPECT_EQ(d.not_before, now);
  d = decide(Progress{40, 40}, {40}, true, 0);
  EXPECT_EQ(d.kind, Kind::kRelaunch);
  EXPECT_TRUE(d.uses_restart);
  EXPECT_EQ(d.set_aside_step, std::nullopt);
  EXPECT_EQ(d.reason,
            "rank 1 on node2 exited 74 (step 40 was set aside before and is still there); "
            "relaunch 1 of 1 in the allocation on node1, node2");
  d = decide(std::nullopt, {}, true, 1);
  EXPECT_EQ(d.kind, Kind::kFail);
  EXPECT_EQ(d.set_aside_step, std::nullopt);
  d = decide(Progress{-1, -1}, {}, true, 1);
  EXPECT_EQ(d.kind, Kind::kFail) << "no step to set aside";
}

TEST(RestartBackoffTest, DoublesAndCapsAtAnHour) {
  spec::RestartSection p;
  p.backoff_s = 30;
  EXPECT_EQ(RestartBackoff(0, p), seconds(30));
  EXPECT_EQ(RestartBackoff(1, p), seconds(60));
  EXPECT_EQ(RestartBackoff(5, p), seconds(960));
  EXPECT_EQ(RestartBackoff(7, p), seconds(1920));  // the doubling stops at 2^6
  EXPECT_EQ(RestartBackoff(500, p), seconds(1920));
  p.backoff_s = 86400;
  EXPECT_EQ(RestartBackoff(0, p), seconds(3600));
  p.backoff_s = 0;
  EXPECT_EQ(RestartBackoff(3, p), seconds(0));
}

// The backoff's exponent resets after a healthy stretch; max_restarts still
// counts every restart.
class BackoffResetTest : public ::testing::Test {
 protected:
  BackoffResetTest() {
    policy.max_restarts = 100;
    policy.backoff_s = 30;
    policy.backoff_reset_s = 3600;
  }
  // A launch that trained `minutes` and ended as `cls`, right after the last.
  void Add(int minutes, std::optional<FailureClass> cls, bool settled = true) {
    WallTime started = t + seconds(60);
    t = started + seconds(60 * minutes);
    history.push_back({started, settled ? std::optional<WallTime>(t) : std::nullopt,
                       settled ? cls : std::nullopt});
  }
  // DecideRecovery for a launch that started now and failed `minutes` later,
  // with no allocation to relaunch in: a new attempt after the backoff.
  RecoveryDecision Decide(int restarts_so_far, int minutes) {
    RecoveryInput in;
    in.verdict = Failed(FailureClass::kRankExit, "rank 0 on node1 exited with 1");
    in.restarts_so_far = restarts_so_far;
    in.earlier_launches = history;
    in.launch_started = t + seconds(60);
    in.now = *in.launch_started + seconds(60 * minutes);
    in.policy = policy;
    RecoveryDecision d = DecideRecovery(in);
    EXPECT_EQ(d.kind, Kind::kNewAttempt);
    EXPECT_TRUE(d.uses_restart);
    return d;
  }
  seconds Wait(const RecoveryDecision& d, int minutes) {
    return std::chrono::duration_cast<seconds>(d.not_before - t - seconds(60 + 60 * minutes));
  }

  spec::RestartSection policy;
  WallTime t = FakeClock().Now();
  std::vector<PastLaunch> history;
};

TEST_F(BackoffResetTest, OnlyRestartsSinceAHealthyStretchDouble) {
  for (int i = 0; i < 6; ++i) Add(10, FailureClass::kDeviceError);  // a bad first day
  Add(120, FailureClass::kNodeLost);  // two healthy hours, then a failure: restart 7
  Add(10, FailureClass::kHang);       // restart 8
  // Before: 2^min(8, 6) x 30 s = 1920 s. Now: the two restarts since the stretch.
  EXPECT_EQ(BackoffRestarts(history, 8, policy), 2);
  RecoveryDecision d = Decide(8, 5);
  EXPECT_EQ(Wait(d, 5), seconds(120));
  EXPECT_NE(d.reason.find("(restart 9 of 100) in 120 s"), std::string::npos) << d.reason;
}

TEST_F(BackoffResetTest, ALongLaunchBeforeTheFailureStartsAgainAtBackoffS) {
  for (int i = 0; i < 8; ++i) Add(10, FailureClass::kNccl);
  EXPECT_EQ(Wait(Decide(8, 59), 59), seconds(1920));  // not quite an hour
  EXPECT_EQ(Wait(Decide(8, 60), 60), seconds(30));
}

TEST_F(BackoffResetTest, TimeLimitsCountAsTrainingButNotAsRestarts) {
  for (int i = 0; i < 4; ++i) Add(10, FailureClass::kSignal);
  Add(24 * 60, FailureClass::kTimeLimit);  // a whole day, continued without a restart
  Add(5, FailureClass::kTimeLimit);        // a short continuation: no restart either
  Add(10, FailureClass::kHostOom);
  EXPECT_EQ(BackoffRestarts(history, 5, policy), 1);
  EXPECT_EQ(Wait(Decide(5, 10), 10), seconds(60));
}

TEST_F(BackoffResetTest, NoHealthyStretchOnRecordDoublesAsBefore) {
  for (int i = 0; i < 3; ++i) Add(30, FailureClass::kRankExit);
  EXPECT_EQ(BackoffRestarts(history, 3, policy), 3);
  EXPECT_EQ(BackoffRestarts({}, 7, policy), 7);
  EXPECT_EQ(Wait(Decide(7, 10), 10), seconds(1920));
}

TEST_F(BackoffResetTest, AnUnsettledLaunchIsNotHealthyAndCountsAsARestart) {
  Add(180, FailureClass::kDeviceError);
  Add(600, std::nullopt, /*settled=*/false);  // the controller restarted during it
  Add(10, FailureClass::kNccl);
  EXPECT_EQ(BackoffRestarts(history, 9, policy), 3);
  // Never more than the run's restarts.
  EXPECT_EQ(BackoffRestarts(history, 1, policy), 1);
}

TEST_F(BackoffResetTest, ZeroNeverDoubles) {
  policy.backoff_reset_s = 0;
  for (int i = 0; i < 8; ++i) Add(1, FailureClass::kHang);
  EXPECT_EQ(BackoffRestarts(history, 8, policy), 0);
  EXPECT_EQ(Wait(Decide(8, 1), 1), seconds(30));
}

TEST_F(BackoffResetTest, TheBudgetStillCountsEveryRestart) {
  policy.max_restarts = 8;
  Add(600, FailureClass::kDeviceError);
  RecoveryInput in;
  in.verdict = Failed(FailureClass::kRankExit, "rank 0 on node1 exited with 1");
  in.restarts_so_far = 8;
  in.earlier_launches = history;
  in.launch_started = t;
  in.now = t + seconds(7200);
  in.policy = policy;
  RecoveryDecision d = DecideRecovery(in);
  EXPECT_EQ(d.kind, Kind::kFail);
  EXPECT_EQ(d.reason, "rank 0 on node1 exited with 1 (8 of 8 restarts used)");
}

TEST_F(BackoffResetTest, DecideRestartTakesTheHistoryToo) {
  for (int i = 0; i < 6; ++i) Add(10, FailureClass::kDeviceError);
  Add(90, FailureClass::kNodeLost);
  RestartDecision r = DecideRestart(7, policy, "job vanished", t, history);
  EXPECT_TRUE(r.requeue);
  EXPECT_EQ(r.not_before, t + seconds(60));  // the 90-minute launch's own restart counts
  EXPECT_EQ(DecideRestart(7, policy, "job vanished", t).not_before, t + seconds(1920));
}

TEST(UsesRestartTest, FailuresDoContinuationsAndEndsDoNot) {
  for (FailureClass c : {FailureClass::kRankExit, FailureClass::kSignal, FailureClass::kDeviceOom,
                         FailureClass::kHostOom, FailureClass::kDeviceError, FailureClass::kNccl,
                         FailureClass::kNodeLost, FailureClass::kHang})
    EXPECT_TRUE(UsesRestart(c)) << FailureClassName(c);
  for (FailureClass c : {FailureClass::kSucceeded, FailureClass::kUserError, FailureClass::kGate,
                         FailureClass::kTimeLimit, FailureClass::kPreemption,
                         FailureClass::kCancel})
    EXPECT_FALSE(UsesRestart(c)) << FailureClassName(c);
}

}  // namespace
}  // namespace trellis::controller
