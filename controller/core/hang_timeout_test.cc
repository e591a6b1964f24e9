#include "controller/core/hang_timeout.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

StepGaps Steady(double gap_s, int n) {
  StepGaps g;
  for (int i = 0; i < n; ++i) g.Add(gap_s);
  return g;
}

TEST(StepGapsTest, P99NeedsEnoughStepsAndIgnoresCheckpointGaps) {
  StepGaps g = Steady(0.3, StepGaps::kMinSeen - 1);
  g.Add(40, 12);  // a checkpoint's gap is kept apart
  EXPECT_FALSE(g.P99().has_value());
  EXPECT_EQ(g.LongestCheckpoint(), 40);
  g.Add(0.5, 45);  // the rank's own figure when the gap says less
  EXPECT_EQ(g.LongestCheckpoint(), 45);
  g.Add(0.3);
  ASSERT_TRUE(g.P99().has_value());
  EXPECT_DOUBLE_EQ(*g.P99(), 0.3);
  g.Add(-1);  // nonsense is dropped
  EXPECT_EQ(g.steps_seen(), StepGaps::kMinSeen);
}

TEST(StepGapsTest, P99IsTheNearestRankOverTheNewestKept) {
  StepGaps g;
  for (int i = 1; i <= 200; ++i) g.Add(i * 0.01);  // 0.01 .. 2.00
  EXPECT_NEAR(*g.P99(), 1.98, 1e-12);                      // the 198th of 200
  // 256 more slow ones push every fast one out of the ring.
  for (int i = 0; i < 256; ++i) g.Add(5);
  EXPECT_DOUBLE_EQ(*g.P99(), 5);
}

TEST(HangTimeoutTest, StepsOfAFractionOfASecondAreHeldToSeconds) {
  HangTimeoutPolicy p;  // floor 5 s, factor 10, bound 600 s
  StepGaps g = Steady(0.4, 50);
  TimeoutInForce t = HangTimeout(p, g, false, false);
  EXPECT_TRUE(t.learned);
  EXPECT_DOUBLE_EQ(t.seconds, 5);  // the floor: 10 x 0.4 s is less
  EXPECT_EQ(t.basis, "learned: max(floor 5.00 s, 10 x p99 step 0.40 s) = 5.00 s");
  g = Steady(0.8, 50);
  EXPECT_DOUBLE_EQ(HangTimeout(p, g, false, false).seconds, 8);
}

TEST(HangTimeoutTest, ACheckpointNextAddsTwiceTheLongestTimedOne) {
  HangTimeoutPolicy p;
  StepGaps g = Steady(0.4, 50);
  TimeoutInForce t = HangTimeout(p, g, true, false);
  EXPECT_FALSE(t.learned) << "no checkpoint timed yet: the spec's bound";
  EXPECT_DOUBLE_EQ(t.seconds, 600);
  EXPECT_EQ(t.basis,
            "restart.hang_timeout_s = 600 s (a checkpoint is next and none was timed yet)");
  g.Add(0.01, 12);  // arrived in the same batch as the step before: the rank's figure
  t = HangTimeout(p, g, true, false);
  EXPECT_TRUE(t.learned);
  EXPECT_DOUBLE_EQ(t.seconds, 29);
  EXPECT_EQ(t.basis, "learned: max(floor 5.00 s, 10 x p99 step 0.40 s) + 2 x longest "
                     "checkpoint 12 s = 29 s");
  // A rank that does not say when it checkpoints may checkpoint any step.
  EXPECT_DOUBLE_EQ(HangTimeout(p, g, std::nullopt, false).seconds, 29);
  EXPECT_DOUBLE_EQ(HangTimeout(p, g, false, false).seconds, 5);
  EXPECT_EQ(HangTimeout(p, Steady(0.4, 50), std::nullopt, false).basis,
            "restart.hang_timeout_s = 600 s (the ranks do not say when they checkpoint)");
}

TEST(HangTimeoutTest, TheSpecBoundsItAndHoldsWhenStoppingUnlearnedOrOff) {
  HangTimeoutPolicy p;
  p.bound_s = 30;
  StepGaps slow = Steady(20, 50);  // 10 x 20 s would be 200 s
  TimeoutInForce t = HangTimeout(p, slow, false, false);
  EXPECT_DOUBLE_EQ(t.seconds, 30);
  EXPECT_FALSE(t.learned);
  EXPECT_EQ(t.basis, "restart.hang_timeout_s = 30 s (shorter than learned 200 s)");
  StepGaps g = Steady(0.4, 50);
  t = HangTimeout(p, g, false, true);
  EXPECT_DOUBLE_EQ(t.seconds, 30);
  EXPECT_EQ(t.basis, "restart.hang_timeout_s = 30 s (the ranks are stopping, maybe checkpointing)");
  EXPECT_EQ(HangTimeout(p, Steady(0.4, 3), false, false).basis,
            "restart.hang_timeout_s = 30 s (not learned yet: 3 of 20 steps seen)");
  p.learned = false;
  EXPECT_EQ(HangTimeout(p, g, false, false).basis, "restart.hang_timeout_s = 30 s");
}

TEST(StartupTimeoutTest, LearnedFromTheLongestEarlierStart) {
  HangTimeoutPolicy p;  // floor 60 s, factor 3, bound 900 s
  EXPECT_EQ(StartupTimeout(p, {}).basis,
            "restart.startup_timeout_s = 900 s (no earlier launch of the run to learn from)");
  TimeoutInForce t = StartupTimeout(p, {12, 45, 30});
  EXPECT_TRUE(t.learned);
  EXPECT_DOUBLE_EQ(t.seconds, 135);
  EXPECT_EQ(t.basis, "learned: max(floor 60 s, 3 x longest earlier start 45 s) = 135 s");
  EXPECT_DOUBLE_EQ(StartupTimeout(p, {4}).seconds, 60);
  EXPECT_DOUBLE_EQ(StartupTimeout(p, {400}).seconds, 900);
  p.learned = false;
  EXPECT_DOUBLE_EQ(StartupTimeout(p, {4}).seconds, 900);
}

}  // namespace
}  // namespace trellis::controller
