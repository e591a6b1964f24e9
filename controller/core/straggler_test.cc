#include "controller/core/straggler.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

PhaseTimes Times(double step_s) {
  return {step_s, 0.3 * step_s, 0.5 * step_s, 0.1 * step_s, 0.1 * step_s};
}

std::string Node(int rank) { return "n" + std::to_string(rank / 2 + 1); }

// Every rank reports `step`; step_s(rank) gives its time.
template <typename F>
void Step(StragglerWindow& w, int world, int64_t step, F step_s) {
  for (int r = 0; r < world; ++r) w.Add(r, Node(r), step, Times(step_s(r)));
}

TEST(StragglerWindowTest, OneRankThreeTimesSlowerRaisesOneEvent) {
  StragglerWindow w(4, 20, 10, 1.5);
  auto slow2 = [](int r) { return r == 2 ? 3.0 : 1.0 + 0.01 * r; };
  for (int64_t s = 0; s < 9; ++s) Step(w, 4, s, slow2);
  EXPECT_TRUE(w.TakeEvents().empty()) << "9 slow steps < M = 10";
  Step(w, 4, 9, slow2);
  auto events = w.TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  const StragglerEvent& e = events[0];
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.node, "n2");
  EXPECT_EQ(e.slow_steps, 10);
  EXPECT_EQ(e.window, 10);
  EXPECT_DOUBLE_EQ(e.rank_s, 3.0);
  EXPECT_DOUBLE_EQ(e.median_others_s, 1.01);  // of 1.00, 1.01, 1.03
  EXPECT_DOUBLE_EQ(e.rank_phases.bwd_s, 1.5);
  EXPECT_DOUBLE_EQ(e.others_phases.fwd_s, 0.3 * 1.01);
  // The episode goes on: no second event.
  for (int64_t s = 10; s < 40; ++s) Step(w, 4, s, slow2);
  EXPECT_TRUE(w.TakeEvents().empty());
  EXPECT_EQ(w.complete_steps(), 20);
}

TEST(StragglerWindowTest, NoiseBelowTheFactorRaisesNothing) {
  StragglerWindow w(4, 20, 10, 1.5);
  const double noise[] = {1.0, 1.2, 1.4, 0.95, 1.1};
  for (int64_t s = 0; s < 60; ++s) Step(w, 4, s, [&](int r) { return noise[(s + r) % 5]; });
  EXPECT_TRUE(w.TakeEvents().empty());
}

TEST(StragglerWindowTest, TwoRanksOnlyTheSlowOneIsNamed) {
  // With the others' median (not everyone's) the fast rank is not "slow" against the slow one.
  StragglerWindow w(2, 5, 3, 1.5);
  for (int64_t s = 0; s < 5; ++s) Step(w, 2, s, [](int r) { return r == 1 ? 3.0 : 1.0; });
  auto events = w.TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rank, 1);
}

TEST(StragglerWindowTest, ReArmsAfterTheEpisodeEnds) {
  StragglerWindow w(4, 20, 10, 1.5);
  auto slow0 = [](int r) { return r == 0 ? 2.0 : 1.0; };
  auto even = [](int) { return 1.0; };
  int64_t s = 0;
  for (; s < 15; ++s) Step(w, 4, s, slow0);
  EXPECT_EQ(w.TakeEvents().size(), 1u);
  EXPECT_TRUE(w.TakeEnds().empty());
  for (; s < 25; ++s) Step(w, 4, s, even);  // the window forgets the slow steps...
  EXPECT_TRUE(w.TakeEnds().empty()) << "steps 6-14: 9 slow steps, not yet below M = 10";
  Step(w, 4, s++, even);  // ... and at step 25 holds 9 of them: the episode is over
  std::vector<StragglerEnd> ends = w.TakeEnds();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].rank, 0);
  EXPECT_EQ(ends[0].node, "n1");
  EXPECT_EQ(ends[0].step, 25);
  EXPECT_EQ(ends[0].slow_steps, 9);
  EXPECT_EQ(ends[0].window, 20);
  for (; s < 35; ++s) Step(w, 4, s, even);
  EXPECT_TRUE(w.TakeEvents().empty());
  EXPECT_TRUE(w.TakeEnds().empty()) << "one end per episode";
  for (; s < 45; ++s) Step(w, 4, s, slow0);
  auto events = w.TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rank, 0);
  EXPECT_EQ(events[0].slow_steps, 10);
  EXPECT_EQ(events[0].window, 20);
}

TEST(StragglerWindowTest, AHeldRankRaisesNothingWhileItsEpisodeGoesOn) {
  StragglerWindow w(4, 20, 10, 1.5);
  w.HoldEpisode(0);
  w.HoldEpisode(4);  // outside the world: ignored
  auto slow0 = [](int r) { return r == 0 ? 2.0 : 1.0; };
  for (int64_t s = 0; s < 60; ++s) Step(w, 4, s, slow0);
  EXPECT_TRUE(w.TakeEvents().empty());
  EXPECT_TRUE(w.TakeEnds().empty());
  // Another rank's episode is its own.
  for (int64_t s = 60; s < 70; ++s) Step(w, 4, s, [](int r) { return r <= 1 ? 2.0 : 1.0; });
  auto events = w.TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rank, 1);
}

TEST(StragglerWindowTest, AHeldRankIsReArmedOnlyByAWholeWindowBelowTheMinimum) {
  StragglerWindow w(4, 20, 10, 1.5);
  w.HoldEpisode(0);
  auto slow0 = [](int r) { return r == 0 ? 2.0 : 1.0; };
  auto even = [](int) { return 1.0; };
  int64_t s = 0;
  // Ten slow steps by step 14 would raise an event, but the window is not yet
  // whole: the spell may be the one raised before.
  for (; s < 5; ++s) Step(w, 4, s, even);
  for (; s < 20; ++s) Step(w, 4, s, slow0);
  EXPECT_TRUE(w.TakeEvents().empty());
  EXPECT_TRUE(w.TakeEnds().empty()) << "below M in steps 0-4, but the window was not whole";
  // The slow steps leave the window: below M over a whole window (at step
  // 30, 9 of steps 11-30), the held episode is over and the rank re-armed.
  for (; s < 40; ++s) Step(w, 4, s, even);
  EXPECT_TRUE(w.TakeEvents().empty());
  std::vector<StragglerEnd> ends = w.TakeEnds();
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].rank, 0);
  EXPECT_EQ(ends[0].step, 30);
  EXPECT_EQ(ends[0].slow_steps, 9);
  for (; s < 50; ++s) Step(w, 4, s, slow0);
  auto events = w.TakeEvents();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rank, 0);
  EXPECT_EQ(events[0].slow_steps, 10);
}

TEST(StragglerWindowTest, LateDuplicateAndMissingRecords) {
  StragglerWindow w(4, 10, 3, 1.5);
  auto slow3 = [](int r) { return r == 3 ? 4.0 : 1.0; };
  // Rank 3 never reports step 1: it stays incomplete, then is dropped.
  for (int64_t s = 0; s < 3; ++s)
    for (int r = 0; r < 4; ++r)
      if (!(s == 1 && r == 3)) w.Add(r, Node(r), s, Times(slow3(r)));
  EXPECT_EQ(w.complete_steps(), 2);
  EXPECT_EQ(w.pending_steps(), 1);
  EXPECT_TRUE(w.TakeEvents().empty());  // 2 slow steps < M = 3
  // Steps arrive out of order across ranks; a duplicate does not complete a step.
  w.Add(0, "n1", 4, Times(1));
  w.Add(0, "n1", 4, Times(1));
  w.Add(1, "n1", 4, Times(1));
  w.Add(2, "n2", 4, Times(1));
  EXPECT_EQ(w.complete_steps(), 2);
  for (int r = 0; r < 4; ++r) w.Add(r, Node(r), 3, Times(slow3(r)));
  EXPECT_EQ(w.TakeEvents().size(), 1u);
  w.Add(3, "n2", 4, Times(4));
  EXPECT_EQ(w.complete_steps(), 4);
  for (int64_t s = 5; s < 30; ++s) Step(w, 4, s, slow3);
  EXPECT_EQ(w.complete_steps(), 10);
  EXPECT_EQ(w.pending_steps(), 0);  // step 1 was dropped
  // Older than the window: ignored, nothing pending.
  w.Add(3, "n2", 1, Times(1));
  w.Add(0, "n1", 12, Times(1));
  EXPECT_EQ(w.pending_steps(), 0);
  // Records outside the world or with negative steps are ignored.
  w.Add(4, "n9", 30, Times(1));
  w.Add(-1, "n9", 30, Times(1));
  w.Add(0, "n1", -5, Times(1));
  EXPECT_EQ(w.pending_steps(), 0);
}

TEST(StragglerWindowTest, ARankThatNeverReportsKeepsMemoryBounded) {
  StragglerWindow w(4, 8, 2, 1.5);
  for (int64_t s = 0; s < 1000; ++s)
    for (int r = 0; r < 3; ++r) w.Add(r, Node(r), s, Times(r == 0 ? 5.0 : 1.0));
  EXPECT_EQ(w.complete_steps(), 0);
  EXPECT_LE(w.pending_steps(), 8);
  EXPECT_TRUE(w.TakeEvents().empty());
}

TEST(StragglerWindowTest, UnreportedTimesAreNotSlow) {
  StragglerWindow w(3, 5, 1, 1.5);
  Step(w, 3, 0, [](int r) { return r == 0 ? 0.0 : 1.0; });  // rank 0 reported no time
  EXPECT_TRUE(w.TakeEvents().empty());
  StragglerWindow alone(1, 5, 1, 1.5);
  Step(alone, 1, 0, [](int) { return 9.0; });
  EXPECT_TRUE(alone.TakeEvents().empty());  // nobody to compare with
}

TEST(StepSpreadTest, SlowestRankAndMedianOfTheReportedTimes) {
  StepSpread s = SpreadOf(7, {Times(1.0), Times(0.0), Times(3.0), Times(1.2), Times(1.1)});
  EXPECT_EQ(s.step, 7);
  EXPECT_EQ(s.slowest_rank, 2);
  EXPECT_DOUBLE_EQ(s.slowest_s, 3.0);
  EXPECT_DOUBLE_EQ(s.median_s, 1.15);  // of 1.0, 1.1, 1.2, 3.0: rank 1 reported none
  EXPECT_EQ(SpreadOf(0, {Times(0.0)}).slowest_rank, -1);
}

TEST(StragglerWindowTest, TakeCompletedGivesEachNewerCompleteStepOnce) {
  StragglerWindow w(2, 4, 2, 1.5);
  EXPECT_FALSE(w.TakeCompleted());
  w.Add(0, "n1", 1, Times(1.0));
  EXPECT_FALSE(w.TakeCompleted()) << "step 1 is not complete yet";
  w.Add(1, "n1", 1, Times(2.0));
  auto s = w.TakeCompleted();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->step, 1);
  EXPECT_EQ(s->slowest_rank, 1);
  EXPECT_FALSE(w.TakeCompleted());
  // Steps 3 and 2 complete in that order: 3 is given, 2 (older) is not.
  w.Add(0, "n1", 2, Times(1.0));
  w.Add(0, "n1", 3, Times(1.0));
  w.Add(1, "n1", 3, Times(1.0));
  w.Add(1, "n1", 2, Times(1.0));
  s = w.TakeCompleted();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->step, 3);
  EXPECT_FALSE(w.TakeCompleted());
}

}  // namespace
}  // namespace trellis::controller
