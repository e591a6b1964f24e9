// Run health alone: a launch watched on a FakeClock, and the faults and
// events its checks return (heartbeat loss, hang, straggler).
#include "controller/app/run_health.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "controller/app/part_test_util.h"

namespace trellis::controller {
namespace {

using std::chrono::seconds;

class RunHealthTest : public PartTest {
 protected:
  void SetUp() override { AddRun(RunState::kRunning); }
  // hello-1's launch 1.1: ranks 0-1 on node1, 2-3 on node2.
  WatchLaunch Launch() {
    WatchLaunch w;
    w.ref = {"hello-1", 1, 1};
    w.rank_nodes = {"node1", "node1", "node2", "node2"};
    w.restart.heartbeat_timeout_s = 30;
    w.restart.hang_timeout_s = 600;
    w.health.straggler_window = 4;
    w.health.straggler_min_slow = 2;
    w.health.straggler_factor = 1.5;
    return w;
  }
  static WorkerId Worker(const std::string& node) { return {"hello-1", 1, 1, node, ""}; }
  // Every rank reports `step`; rank `slow` takes `slow_s`, the others 1 s.
  Effects Step(int64_t step, int slow = -1, double slow_s = 3.0) {
    Effects fx;
    for (int r = 0; r < 4; ++r) {
      StepRecord rec;
      rec.step = step;
      rec.step_seconds = r == slow ? slow_s : 1.0;
      fx += health_.ObserveStep(Worker(r < 2 ? "node1" : "node2"), r, rec);
    }
    return fx;
  }
  RunHealth health_{ctx_};
};

TEST_F(RunHealthTest, TheCheckTimerRunsWhileALaunchIsWatched) {
  StartTimer t = Only<StartTimer>(health_.Start(Launch()));
  EXPECT_EQ(t.key.kind, TimerKey::kHealthCheck);
  EXPECT_EQ(t.after, RunHealth::kCheckEvery);
  WatchLaunch other = Launch();
  other.ref.launch = 2;
  EXPECT_TRUE(health_.Start(other).All<StartTimer>().empty()) << "one timer for all";
  EXPECT_EQ(health_.CheckDue().All<StartTimer>().size(), 1u);
  health_.StopWatching("hello-1");
  EXPECT_TRUE(health_.CheckDue().All<StartTimer>().empty()) << "nothing left to watch";
}

TEST_F(RunHealthTest, AWorkerSilentPastTheHeartbeatTimeoutIsALostNode) {
  health_.Start(Launch());
  clock_.Advance(seconds(20));
  health_.Heard(Worker("node1"));
  EXPECT_TRUE(health_.CheckDue().All<LaunchFault>().empty());
  clock_.Advance(seconds(11));
  Effects fx = health_.CheckDue();
  LaunchFault fault = Only<LaunchFault>(fx);
  EXPECT_EQ(fault.lost_nodes, std::vector<std::string>{"node2"});
  EXPECT_DOUBLE_EQ(fault.lost_silent_s.at("node2"), 31.0);
  EXPECT_EQ(Only<RecordHealthEvent>(fx).event.kind, "node_lost");
  clock_.Advance(seconds(60));
  EXPECT_TRUE(health_.CheckDue().All<LaunchFault>().empty()) << "reported once";
}

TEST_F(RunHealthTest, AWorkerThatFinishedIsSilentNotLost) {
  health_.Start(Launch());
  health_.Finished(Worker("node2"));
  clock_.Advance(seconds(29));
  health_.Heard(Worker("node1"));
  clock_.Advance(seconds(10));
  EXPECT_TRUE(health_.CheckDue().All<LaunchFault>().empty());
}

TEST_F(RunHealthTest, AResumedLaunchsWorkersGetTheReconnectGrace) {
  WatchLaunch w = Launch();
  w.resumed = true;
  w.restart.heartbeat_timeout_s = 5;
  health_.Start(w);
  clock_.Advance(seconds(10));
  EXPECT_TRUE(health_.CheckDue().All<LaunchFault>().empty());
  clock_.Advance(RunHealth::kReconnectGrace);
  EXPECT_EQ(Only<LaunchFault>(health_.CheckDue()).lost_nodes.size(), 2u);
}

TEST_F(RunHealthTest, ARankWithNoNewStepPastTheHangTimeoutHangs) {
  WatchLaunch w = Launch();
  w.restart.heartbeat_timeout_s = 100000;
  w.restart.hang_timeout_s = 60;
  health_.Start(w);
  Step(1);
  clock_.Advance(seconds(30));
  for (int r = 0; r < 3; ++r) {
    StepRecord rec;
    rec.step = 2;
    rec.step_seconds = 1;
    health_.ObserveStep(Worker(r < 2 ? "node1" : "node2"), r, rec);
  }
  EXPECT_TRUE(health_.CheckDue().All<LaunchFault>().empty());
  clock_.Advance(seconds(31));
  Effects fx = health_.CheckDue();
  LaunchFault fault = Only<LaunchFault>(fx);
  ASSERT_TRUE(fault.hang);
  EXPECT_EQ(fault.hang->rank, 3);
  EXPECT_EQ(fault.hang->last_step, 1);
  EXPECT_EQ(Only<RecordHealthEvent>(fx).event.kind, "hang");
}

TEST_F(RunHealthTest, AnEndedRankIsNotJudgedForAHang) {
  WatchLaunch w = Launch();
  w.restart.heartbeat_timeout_s = 100000;
  w.restart.hang_timeout_s = 60;
  health_.Start(w);
  Step(1);
  for (int r = 0; r < 4; ++r) health_.RankEnded(Worker(r < 2 ? "node1" : "node2"), r);
  clock_.Advance(seconds(120));
  EXPECT_TRUE(health_.CheckDue().All<LaunchFault>().empty());
}

TEST_F(RunHealthTest, AModelRankSilentPastTheStartupTimeoutHangsBeforeItsFirstStep) {
  WatchLaunch w = Launch();
  w.model = true;
  w.restart.heartbeat_timeout_s = 100000;
  w.restart.startup_timeout_s = 100;
  health_.Start(w);
  clock_.Advance(seconds(99));
  EXPECT_TRUE(health_.CheckDue().All<LaunchFault>().empty());
  clock_.Advance(seconds(2));
  LaunchFault fault = Only<LaunchFault>(health_.CheckDue());
  ASSERT_TRUE(fault.hang);
  EXPECT_TRUE(fault.hang->before_first_step);
}

TEST_F(RunHealthTest, ASlowRankIsAStragglerOncePerEpisode) {
  WatchLaunch w = Launch();
  w.health.straggler_strike = true;
  health_.Start(w);
  Effects fx;
  for (int64_t s = 1; s <= 4; ++s) fx += Step(s, /*slow=*/3);
  EXPECT_EQ(fx.All<CountStraggler>().size(), 1u);
  auto events = fx.All<RecordHealthEvent>();  // the launch's start, then the straggler
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]->event.kind, kLaunchStartedEvent);
  const RecordHealthEvent& ev = *events[1];
  EXPECT_EQ(ev.event.kind, kStragglerEvent);
  EXPECT_EQ(ev.event.rank, 3);
  EXPECT_EQ(Only<StrikeNode>(fx).node, "node2");
  Effects after;
  for (int64_t s = 5; s <= 8; ++s) after += Step(s);
  EXPECT_TRUE(after.All<CountStraggler>().empty());
  EXPECT_EQ(Only<RecordHealthEvent>(after).event.kind, kStragglerEndedEvent);
}

TEST_F(RunHealthTest, AStragglerStrikesItsNodeOnlyWhenTheSpecSaysSo) {
  health_.Start(Launch());
  Effects fx;
  for (int64_t s = 1; s <= 4; ++s) fx += Step(s, /*slow=*/0);
  EXPECT_EQ(fx.All<CountStraggler>().size(), 1u);
  EXPECT_TRUE(fx.All<StrikeNode>().empty());
}

TEST_F(RunHealthTest, AStepEveryRankReportedIsCountedWhenItsRowIsStored) {
  health_.Start(Launch());
  Step(1);
  StepRow row;
  row.attempt = 1;
  row.launch = 1;
  row.step = 1;
  row.tokens = 4096;
  CountStepComplete c = Only<CountStepComplete>(health_.StepStored("hello-1", row));
  EXPECT_EQ(c.tokens, 4096);
  EXPECT_TRUE(health_.StepStored("hello-1", row).empty()) << "counted once";
}

TEST_F(RunHealthTest, TheLatestRecordOfEachRankIsKeptForGetRun) {
  Step(7);  // not watched (e.g. after a restart): kept all the same
  auto page = health_.RanksPage("hello-1", 0, 10);
  ASSERT_TRUE(page);
  EXPECT_EQ(page->ranks.size(), 4u);
}

// checkpoint.every_steps = "auto": rank 0's record of a choice becomes a
// checkpoint_interval event with the figures, the formula and how GO's MTBF
// was found; a choice within a tenth of the last one said is not repeated.
TEST_F(RunHealthTest, AnAutoCheckpointIntervalIsAnEventWhenItMoves) {
  WatchLaunch w = Launch();
  w.mtbf_s = 3.6;
  w.mtbf_basis = "a node fails every 0.002 h (the prior)";
  health_.Start(w);
  // The events a record of a choice gives (copied out of the effects).
  auto choice = [&](int64_t step, int64_t every, int rank = 0) {
    StepRecord rec;
    rec.step = step;
    rec.step_seconds = 0.1;
    rec.checkpoint_every_steps = every;
    rec.checkpoint_choice_cost_seconds = 0.02;
    rec.checkpoint_choice_step_seconds = 0.12;
    const Effects fx = health_.ObserveStep(Worker(rank < 2 ? "node1" : "node2"), rank, rec);
    std::vector<HealthEventRecord> events;
    for (const RecordHealthEvent* e : fx.All<RecordHealthEvent>()) events.push_back(e->event);
    return events;
  };
  auto first = choice(4, 3);
  ASSERT_EQ(first.size(), 1u);
  const HealthEventRecord& e = first[0];
  EXPECT_EQ(e.kind, kCheckpointIntervalEvent);
  EXPECT_EQ(e.detail,
            "after step 4, a checkpoint every 3 steps (0.4 s at 0.12 s a step): sqrt(2 x 0.02 s "
            "a checkpoint x 3.6 s between failures) = 0.4 s; a node fails every 0.002 h (the "
            "prior)");
  const auto j = nlohmann::json::parse(e.detail_json);
  EXPECT_EQ(j["every_steps"], 3);
  EXPECT_DOUBLE_EQ(j["mtbf_s"].get<double>(), 3.6);
  EXPECT_DOUBLE_EQ(j["young_s"].get<double>(), std::sqrt(2 * 0.02 * 3.6));
  EXPECT_TRUE(choice(4, 3, 2).empty()) << "rank 2 chose the same: rank 0 speaks for all";
  EXPECT_TRUE(choice(7, 3).empty()) << "the same interval";
  EXPECT_EQ(choice(10, 4).size(), 1u) << "3 -> 4 moved by a third";
  auto bounded = choice(14, 40);
  ASSERT_EQ(bounded.size(), 1u);
  EXPECT_NE(bounded[0].detail.find("(bounded by checkpoint.auto_min_s / auto_max_s)"),
            std::string::npos)
      << bounded[0].detail;
}

// Learned hang timeouts (hang_timeout.h): a launch of 0.4 s steps.
class LearnedHangTest : public RunHealthTest {
 protected:
  WatchLaunch ModelLaunch() {
    WatchLaunch w = Launch();
    w.model = true;
    w.restart.heartbeat_timeout_s = 100000;
    return w;
  }
  // Every rank reports `step` 0.4 s after the last; `next_checkpoint` as the
  // trainer says it, `checkpoint_s` spent on one after the step.
  Effects Steps(int64_t from, int64_t to, int64_t next_checkpoint = 0, double checkpoint_s = 0) {
    Effects fx;
    for (int64_t s = from; s <= to; ++s) {
      clock_.Advance(std::chrono::milliseconds(400));
      for (int r = 0; r < 4; ++r) {
        StepRecord rec;
        rec.step = s;
        rec.step_seconds = 0.4;
        rec.next_checkpoint_step = next_checkpoint;
        if (checkpoint_s > 0 && s == to) rec.checkpoint_seconds = checkpoint_s;
        fx += health_.ObserveStep(Worker(r < 2 ? "node1" : "node2"), r, rec);
      }
    }
    return fx;
  }
  // Checks for `s` seconds (one check a second); the first fault, if any.
  std::optional<LaunchFault> CheckFor(int s) {
    for (int i = 0; i < s; ++i) {
      clock_.Advance(seconds(1));
      const Effects fx = health_.CheckDue();
      const auto faults = fx.All<LaunchFault>();
      if (!faults.empty()) return *faults[0];
    }
    return std::nullopt;
  }
};

TEST_F(LearnedHangTest, AHangInARunOfFractionOfASecondStepsIsFoundInSeconds) {
  health_.Start(ModelLaunch());
  Steps(1, 30);
  Effects fx = health_.CheckDue();
  EXPECT_DOUBLE_EQ(Only<CountHangTimeout>(fx).seconds, 5);  // the floor: 10 x 0.4 s is less
  auto in_force = health_.HangTimeoutOf("hello-1");
  ASSERT_TRUE(in_force);
  EXPECT_EQ(in_force->basis, "learned: max(floor 5.00 s, 10 x p99 step 0.40 s) = 5.00 s");
  EXPECT_FALSE(CheckFor(3).has_value());
  auto fault = CheckFor(3);
  ASSERT_TRUE(fault && fault->hang);
  EXPECT_DOUBLE_EQ(fault->hang->timeout_s, 5);
  EXPECT_EQ(fault->hang->timeout_basis, in_force->basis);
  EXPECT_NEAR(fault->hang->silent_s, 5, 1.0);
}

TEST_F(LearnedHangTest, TooFewStepsOrAStopHoldTheRankToTheSpec) {
  health_.Start(ModelLaunch());
  Steps(1, 10);
  EXPECT_FALSE(CheckFor(30).has_value()) << "10 steps teach nothing: 600 s";
  EXPECT_EQ(health_.HangTimeoutOf("hello-1")->basis,
            "restart.hang_timeout_s = 600 s (not learned yet: 9 of 20 steps seen)");
  Steps(11, 40);
  health_.Stopping(Worker("node2"));
  EXPECT_FALSE(CheckFor(30).has_value()) << "stopping: they may be checkpointing";
  EXPECT_EQ(health_.HangTimeoutOf("hello-1")->seconds, 600);
}

// The step before a checkpoint: the spec's bound until one was timed, then
// twice the longest timed one on top.
TEST_F(LearnedHangTest, ACheckpointNextHoldsTheRankToTheSpecUntilOneWasTimed) {
  health_.Start(ModelLaunch());
  Steps(1, 30, /*next_checkpoint=*/31);
  EXPECT_FALSE(CheckFor(20).has_value()) << "none timed yet: 600 s";
  Steps(31, 31, 40, /*checkpoint_s=*/20);  // the 20.4 s gap ending at 31 held its checkpoint
  Steps(32, 38, 40);
  EXPECT_TRUE(CheckFor(5).has_value()) << "no checkpoint next: 5 s";
}

TEST_F(LearnedHangTest, TheStepBeforeACheckpointGetsTwiceTheLongestTimedOne) {
  health_.Start(ModelLaunch());
  Steps(1, 30, /*next_checkpoint=*/31);
  EXPECT_FALSE(CheckFor(20).has_value()) << "none timed yet: 600 s";
  Steps(31, 31, 40, /*checkpoint_s=*/20);
  Steps(32, 39, 40);
  EXPECT_FALSE(CheckFor(40).has_value());  // 5 s + 2 x 20.4 s
  auto t = health_.HangTimeoutOf("hello-1");
  ASSERT_TRUE(t && t->learned);
  EXPECT_NEAR(t->seconds, 5 + 2 * 20.4, 1e-6) << t->basis;
  EXPECT_NE(t->basis.find("2 x longest checkpoint"), std::string::npos) << t->basis;
}

// A command's own pauses (an evaluation, a wait) cannot be foreseen: only
// [model] ranks learn.
TEST_F(LearnedHangTest, AGenericCommandKeepsTheSpecsTimeout) {
  WatchLaunch w = ModelLaunch();
  w.model = false;
  health_.Start(w);
  Steps(1, 30);
  EXPECT_FALSE(CheckFor(30).has_value());
  EXPECT_EQ(health_.HangTimeoutOf("hello-1")->basis,
            "restart.hang_timeout_s = 600 s (learned only for [model] ranks: a command's own "
            "pauses are unknown)");
}

// The last step's record names itself while the end's checkpoint is still to
// come: twice the longest checkpoint is allowed after it.
TEST_F(LearnedHangTest, TheEndsCheckpointAfterTheLastStepIsAllowedFor) {
  health_.Start(ModelLaunch());
  Steps(1, 30, /*next_checkpoint=*/31);
  Steps(31, 31, 40, /*checkpoint_s=*/3);
  Steps(32, 40, 40);
  EXPECT_FALSE(CheckFor(10).has_value()) << "5 s + 2 x 3 s";
  EXPECT_TRUE(CheckFor(2).has_value());
}

// The launch's start (GO to every rank's first step) is an event; a later
// launch of the run learns its start-up timeout from it.
TEST_F(LearnedHangTest, TheStartUpIsLearnedFromEarlierLaunches) {
  health_.Start(ModelLaunch());
  clock_.Advance(seconds(12));
  Effects fx = Steps(1, 1);
  RecordHealthEvent started = Only<RecordHealthEvent>(fx);
  EXPECT_EQ(started.event.kind, kLaunchStartedEvent);
  EXPECT_NEAR(nlohmann::json::parse(started.event.detail_json)["start_s"].get<double>(), 12.4,
              1e-6);
  store_.events["hello-1"].push_back(started.event);
  health_.StopWatching("hello-1");
  WatchLaunch second = ModelLaunch();
  second.ref.launch = 2;
  health_.Start(second);
  EXPECT_FALSE(CheckFor(59).has_value());  // max(60 s, 3 x 12.4 s)
  auto fault = CheckFor(2);
  ASSERT_TRUE(fault && fault->hang);
  EXPECT_TRUE(fault->hang->before_first_step);
  EXPECT_DOUBLE_EQ(fault->hang->timeout_s, 60);
  EXPECT_EQ(fault->hang->timeout_basis,
            "learned: max(floor 60 s, 3 x longest earlier start 12 s) = 60 s");
}

}  // namespace
}  // namespace trellis::controller
