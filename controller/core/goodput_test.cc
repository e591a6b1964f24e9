#include "controller/core/goodput.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

using std::chrono::seconds;
using S = RunState;

const WallTime kT0 = WallTime(std::chrono::hours(24 * 365 * 56));
WallTime At(int s) { return kT0 + seconds(s); }

struct Expected {
  int queued, gating, running, redone, restarting;
};

LaunchSteps Launch(int attempt, int launch, std::vector<std::pair<int64_t, int>> marks,
                   int last_step_s = 0) {
  LaunchSteps l;
  l.attempt = attempt;
  l.launch = launch;
  for (auto [step, s] : marks) l.marks.push_back({step, At(s)});
  l.last_step_time = seconds(last_step_s);
  return l;
}

struct Case {
  const char* name;
  std::vector<std::pair<S, int>> changes;  // (to, second)
  std::vector<LaunchSteps> launches;
  int now;
  Expected want;
};

TEST(GoodputTest, Table) {
  // clang-format off
  const Case cases[] = {
      {"nothing yet", {}, {}, 0, {0, 0, 0, 0, 0}},
      {"a clean run: startup and the time after the last step are running",
       {{S::kQueued, 0}, {S::kSubmitted, 10}, {S::kGating, 20}, {S::kRunning, 25},
        {S::kSucceeded, 1030}},
       {Launch(1, 1, {{1, 35}, {100, 1025}}, 10)}, 5000, {20, 5, 1005, 0, 0}},
      {"still running: up to now",
       {{S::kQueued, 0}, {S::kSubmitted, 10}, {S::kGating, 20}, {S::kRunning, 25}},
       {Launch(1, 1, {{1, 35}, {50, 500}})}, 700, {20, 5, 675, 0, 0}},
      // Launch 1 checkpointed step 10 at 130 s, reached step 14 at 170 s and
      // failed in step 15 (10 s a step); launch 2 resumed from step 10.
      {"a relaunch after a failure past a checkpoint",
       {{S::kQueued, 0}, {S::kSubmitted, 10}, {S::kGating, 20}, {S::kRunning, 30},
        {S::kRestarting, 200}, {S::kGating, 230}, {S::kRunning, 240}, {S::kSucceeded, 455}},
       {Launch(1, 1, {{1, 40}, {10, 130}, {14, 170}}, 10), Launch(1, 2, {{11, 260}, {30, 450}})},
       455, {20, 20, 100 + 215, 40 + 10, 20 + 30}},
      {"the same relaunch before its first step: launch 1's steps still count as kept",
       {{S::kQueued, 0}, {S::kSubmitted, 10}, {S::kGating, 20}, {S::kRunning, 30},
        {S::kRestarting, 200}, {S::kGating, 230}, {S::kRunning, 240}},
       {Launch(1, 1, {{1, 40}, {10, 130}, {14, 170}}, 10)}, 250, {20, 20, 140 + 10, 10, 20 + 30}},
      // Attempt 1 hung after step 5 (no checkpoint) and was stopped at 200 s;
      // attempt 2 waited out the backoff in QUEUED and started afresh.
      {"a new attempt after a backoff",
       {{S::kQueued, 0}, {S::kSubmitted, 5}, {S::kGating, 10}, {S::kRunning, 15},
        {S::kRestarting, 200}, {S::kQueued, 201}, {S::kSubmitted, 260}, {S::kGating, 262},
        {S::kRunning, 270}},
       {Launch(1, 1, {{1, 20}, {5, 60}}, 10), Launch(2, 1, {{1, 280}, {10, 370}})}, 400,
       {5 + 5 + 59 + 2, 5 + 8, 130, 45 + 10, 130 + 1}},
      {"the in-flight step never runs past the failure",
       {{S::kQueued, 0}, {S::kGating, 10}, {S::kRunning, 20}, {S::kRestarting, 105},
        {S::kFailed, 106}},
       {Launch(1, 1, {{1, 30}, {8, 100}}, 30)}, 500, {10, 10, 80, 5, 1}},
      {"cancelled while running: nothing ran again; nothing counts after the cancel",
       {{S::kQueued, 0}, {S::kSubmitted, 10}, {S::kGating, 12}, {S::kRunning, 20},
        {S::kCancelled, 320}},
       {Launch(1, 1, {{1, 30}, {50, 300}}, 5)}, 1000, {12, 8, 300, 0, 0}},
      {"cancelled while queued", {{S::kQueued, 0}, {S::kCancelled, 60}}, {}, 1000,
       {60, 0, 0, 0, 0}},
      {"no step records at all: every RUNNING second is running, failed launches too",
       {{S::kQueued, 0}, {S::kSubmitted, 1}, {S::kGating, 2}, {S::kRunning, 4},
        {S::kRestarting, 100}, {S::kGating, 110}, {S::kRunning, 112}, {S::kSucceeded, 200}},
       {}, 200, {2, 4, 96 + 88, 0, 10}},
      {"a failed launch without a step, in a run with steps: restarting",
       {{S::kQueued, 0}, {S::kGating, 10}, {S::kRunning, 20}, {S::kRestarting, 50},
        {S::kGating, 60}, {S::kRunning, 70}, {S::kSucceeded, 170}},
       {Launch(1, 2, {{1, 80}, {10, 160}})}, 170, {10, 20, 100, 0, 30 + 10}},
      {"a clock that stepped back adds nothing",
       {{S::kQueued, 0}, {S::kGating, 10}, {S::kRunning, 8}}, {}, 5, {10, 0, 0, 0, 0}},
  };
  // clang-format on
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<StateChange> changes;
    for (auto [to, s] : c.changes) changes.push_back({At(s), to});
    Goodput g = ComputeGoodput(changes, c.launches, At(c.now));
    EXPECT_EQ(g.queued, seconds(c.want.queued));
    EXPECT_EQ(g.gating, seconds(c.want.gating));
    EXPECT_EQ(g.running, seconds(c.want.running));
    EXPECT_EQ(g.redone, seconds(c.want.redone));
    EXPECT_EQ(g.restarting, seconds(c.want.restarting));
    int total = c.want.queued + c.want.gating + c.want.running + c.want.redone + c.want.restarting;
    EXPECT_EQ(g.total(), seconds(total));
    EXPECT_DOUBLE_EQ(g.ratio(), total == 0 ? 0.0 : c.want.running / double(total));
  }
}

// Attempt 1 stops after step 18 for attempt 2, waiting ahead (a handoff at
// 200 s); attempt 2 resumes from step 18 at 206 s: its own cause, from the
// last step to the next RUNNING, not restarting, and nothing redone.
TEST(GoodputTest, AHandoffsGapIsItsOwnCause) {
  std::vector<StateChange> changes = {
      {At(0), S::kQueued},      {At(5), S::kSubmitted},       {At(10), S::kGating},
      {At(15), S::kRunning},    {At(200), S::kRestarting, true}, {At(202), S::kSubmitted},
      {At(204), S::kGating},    {At(206), S::kRunning},       {At(400), S::kSucceeded}};
  std::vector<LaunchSteps> launches = {Launch(1, 1, {{1, 20}, {18, 195}}, 10),
                                       Launch(2, 1, {{19, 210}, {38, 398}})};
  Goodput g = ComputeGoodput(changes, launches, At(500));
  EXPECT_EQ(g.queued, seconds(10));
  EXPECT_EQ(g.gating, seconds(5));
  EXPECT_EQ(g.running, seconds(180 + 194));
  EXPECT_EQ(g.redone, seconds(0));
  EXPECT_EQ(g.restarting, seconds(0));
  EXPECT_EQ(g.handoff, seconds(5 + 2 + 2 + 2));
  EXPECT_EQ(g.total(), seconds(400));
  // The same stop as a failure: the step in flight redone, the rest restarting.
  changes[4].handoff = false;
  g = ComputeGoodput(changes, launches, At(500));
  EXPECT_EQ(g.handoff, seconds(0));
  EXPECT_EQ(g.redone, seconds(5));
  EXPECT_EQ(g.restarting, seconds(2));
  EXPECT_EQ(g.queued, seconds(12));
  EXPECT_EQ(g.gating, seconds(7));
}

// The controller's counters rely on it: as the run goes on (time passes,
// transitions and steps arrive), only `running` ever falls.
TEST(GoodputTest, OnlyRunningFallsAsTheRunGoesOn) {
  const std::vector<std::pair<S, int>> all = {
      {S::kQueued, 0},       {S::kSubmitted, 10}, {S::kGating, 20},   {S::kRunning, 30},
      {S::kRestarting, 200}, {S::kGating, 230},   {S::kRunning, 240}, {S::kSucceeded, 455}};
  const std::vector<std::pair<int64_t, int>> steps1 = {{1, 40}, {10, 130}, {14, 170}};
  const std::vector<std::pair<int64_t, int>> steps2 = {{11, 260}, {30, 450}};
  Goodput before;
  bool fell = false;
  for (int now = 0; now <= 460; ++now) {
    std::vector<StateChange> changes;
    for (auto [to, s] : all)
      if (s <= now) changes.push_back({At(s), to});
    // What the store would hold at `now`: the marks seen so far.
    std::vector<LaunchSteps> launches;
    for (const auto* marks : {&steps1, &steps2}) {
      std::vector<std::pair<int64_t, int>> seen;
      for (auto m : *marks)
        if (m.second <= now) seen.push_back(m);
      if (!seen.empty()) launches.push_back(Launch(1, marks == &steps1 ? 1 : 2, seen, 10));
    }
    Goodput g = ComputeGoodput(changes, launches, At(now));
    SCOPED_TRACE(now);
    EXPECT_GE(g.queued, before.queued);
    EXPECT_GE(g.gating, before.gating);
    EXPECT_GE(g.redone, before.redone);
    EXPECT_GE(g.restarting, before.restarting);
    EXPECT_EQ(g.total(), seconds(std::min(now, 455)));
    fell = fell || g.running < before.running;
    before = g;
  }
  EXPECT_TRUE(fell) << "the restart and the relaunch's first step move time out of running";
}

}  // namespace
}  // namespace trellis::controller
