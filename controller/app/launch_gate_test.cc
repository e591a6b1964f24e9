// Registration and the gate alone: GO, NO-GO, the timeout, and the answers
// the workers get.
#include "common/exit_codes.h"
#include "controller/app/launch_test_util.h"

namespace trellis::controller {
namespace {

class LaunchGateTest : public LaunchTest {};

TEST_F(LaunchGateTest, TheFirstNodeStartsTheGateAndItsTimer) {
  Effects fx = Register("node1", 1);
  EXPECT_EQ(Only<Transition>(fx).to, RunState::kGating);
  StartTimer t = Only<StartTimer>(fx);
  EXPECT_EQ(t.key.kind, TimerKey::kGateTimeout);
  EXPECT_EQ(t.after, std::chrono::seconds(120));
  EXPECT_TRUE(fx.All<SendReply>().empty()) << "the worker waits for the decision";
}

TEST_F(LaunchGateTest, EveryNodePassingIsAGoStoredBeforeAnyNodeHearsIt) {
  Effects fx = Go();
  std::vector<const Transition*> ts = fx.All<Transition>();
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_EQ(ts[1]->to, RunState::kRunning);
  EXPECT_EQ(std::get<RecordAttemptNodes>(ts[1]->also.at(0)).nodes, "node1,node2");
  EXPECT_EQ(Only<RecordGate>(fx).row.decision, "GO");
  EXPECT_TRUE(Only<CountGateDecided>(fx).go);
  EXPECT_EQ(Only<CancelTimer>(fx).key.kind, TimerKey::kGateTimeout);
  EXPECT_EQ(Only<RecordLaunch>(fx).row.nodes, "node1,node2");
  WatchLaunch w = Only<WatchLaunch>(fx);
  EXPECT_EQ(w.rank_nodes, (std::vector<std::string>{"node1", "node1", "node2", "node2"}));
  std::vector<const SendReply*> replies = fx.All<SendReply>();
  ASSERT_EQ(replies.size(), 2u);
  for (const SendReply* r : replies) {
    GateAnswer a = Replied<GateAnswer>(*r);
    EXPECT_EQ(a.kind, GateAnswer::kGo);
    EXPECT_EQ(a.world_size, 4);
    EXPECT_EQ(a.master_addr, "host-node1");
    EXPECT_EQ(a.node_index, static_cast<int>(r->to) - 1);
  }
  EXPECT_EQ(launches_.gate.WorldSize(Worker("node1")), 4);
}

TEST_F(LaunchGateTest, ANodeShortOfMemoryIsANoGoThatStrikesItAndEndsTheAttempt) {
  Register("node1", 1);
  Effects fx = Register("node2", 2, /*free_gib=*/72.7);
  EXPECT_EQ(Only<RecordGate>(fx).row.decision, "ABORT");
  EXPECT_FALSE(Only<CountGateDecided>(fx).go);
  EXPECT_EQ(Only<StrikeNode>(fx).node, "node2");
  EXPECT_EQ(Only<CancelJob>(fx).job_id, "42");
  Transition t = Only<Transition>(fx);
  EXPECT_EQ(t.to, RunState::kQueued);
  EXPECT_EQ(std::get<RecordAttemptEnd>(t.also.at(0)).exit_code, kExitGateAbort);
  std::vector<const SendReply*> replies = fx.All<SendReply>();
  ASSERT_EQ(replies.size(), 2u);
  for (const SendReply* r : replies) EXPECT_EQ(Replied<GateAnswer>(*r).kind, GateAnswer::kAbort);
}

TEST_F(LaunchGateTest, TheTimeoutDecidesWithTheNodesThatCame) {
  Register("node1", 1);
  EXPECT_TRUE(launches_.gate.GateTimedOut({"hello-2", 1, 1}).empty()) << "no such launch";
  Effects fx = launches_.gate.GateTimedOut({"hello-1", 1, 1});
  EXPECT_EQ(Only<Transition>(fx).to, RunState::kQueued);
  EXPECT_NE(Only<RecordGate>(fx).row.reason.find("1 of 2"), std::string::npos)
      << Only<RecordGate>(fx).row.reason;
  EXPECT_EQ(Replied<GateAnswer>(Only<SendReply>(fx)).kind, GateAnswer::kAbort);
  EXPECT_TRUE(launches_.gate.GateTimedOut({"hello-1", 1, 1}).empty()) << "decided once";
}

TEST_F(LaunchGateTest, AWorkerThatRegistersAgainAfterTheGoGetsItsGoAgain) {
  Go();
  Effects fx = Register("node2", 9);
  GateAnswer a = Replied<GateAnswer>(Only<SendReply>(fx));
  EXPECT_EQ(a.kind, GateAnswer::kGo);
  EXPECT_EQ(a.node_index, 1);
  EXPECT_TRUE(fx.All<Transition>().empty());
}

TEST_F(LaunchGateTest, ARetriedRegistrationSupersedesTheWaitingOne) {
  Register("node1", 1);
  Effects fx = Register("node1", 2);
  SendReply r = Only<SendReply>(fx);
  EXPECT_EQ(r.to, 1u);
  EXPECT_EQ(RepliedError(r).code(), absl::StatusCode::kAborted);
}

TEST_F(LaunchGateTest, AWrongVersionOrSecretIsRefused) {
  Effects old = launches_.gate.Register(Worker("node1"), "0.0.1-old", "h", Probe(), {}, "", {1});
  absl::Status refused = RepliedError(Only<SendReply>(old));
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("worker version 0.0.1-old"), std::string::npos);
  EXPECT_NE(refused.message().find(std::string("controller version ") + kVersion),
            std::string::npos);
  WorkerId intruder = Worker("node1");
  intruder.secret = "guess";
  Effects denied = launches_.gate.Register(intruder, kVersion, "h", Probe(), {}, "", {2});
  EXPECT_EQ(RepliedError(Only<SendReply>(denied)).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(launches_.gate.AuthenticatedJob(intruder).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(*launches_.gate.AuthenticatedJob(Worker("node1")), "42");
}

TEST_F(LaunchGateTest, AnEndedAttemptsWorkersAreToldToAbort) {
  store_.attempts["hello-1"][0].ended = clock_.Now();
  Effects fx = Register("node1", 1);
  EXPECT_EQ(Replied<GateAnswer>(Only<SendReply>(fx)).kind, GateAnswer::kAbort);
  EXPECT_TRUE(fx.All<Transition>().empty());
}

TEST_F(LaunchGateTest, AbortingTheRunAnswersTheWaitingWorkersAndStopsTheTimer) {
  Register("node1", 1);
  Effects fx = launches_.gate.AbortRun("hello-1", "cancelled by tester");
  EXPECT_EQ(Replied<GateAnswer>(Only<SendReply>(fx)).reason, "cancelled by tester");
  EXPECT_EQ(Only<CancelTimer>(fx).key.kind, TimerKey::kGateTimeout);
  Effects late = Register("node2", 2);
  EXPECT_EQ(Replied<GateAnswer>(Only<SendReply>(late)).kind, GateAnswer::kAbort);
}

TEST_F(LaunchGateTest, AtShutdownWaitingWorkersAreToldToRegisterAgain) {
  Register("node1", 1);
  EXPECT_EQ(RepliedError(Only<SendReply>(launches_.gate.Shutdown())).code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace trellis::controller
