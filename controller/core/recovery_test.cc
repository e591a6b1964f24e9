#include "controller/core/recovery.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace trellis::controller
