#include "common/checkpoint_interval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace trellis {
namespace {

TEST(ChooseCheckpointInterval, FollowsYoungsRuleOnFreshFigures) {
  std::mt19937 gen(20261207);
  std::uniform_real_distribution<double> log_cost(-3, 2), log_mtbf(3, 7), log_step(-2, 1);
  for (int i = 0; i < 200; ++i) {
    CheckpointIntervalInput in;
    in.cost_s = std::pow(10.0, log_cost(gen));
    in.mtbf_s = std::pow(10.0, log_mtbf(gen));
    in.step_s = std::pow(10.0, log_step(gen));
    in.min_s = 1;
    in.max_s = 1e9;
    const CheckpointInterval out = ChooseCheckpointInterval(in);
    const double young = std::sqrt(2 * in.cost_s * in.mtbf_s);
    EXPECT_NEAR(out.young_s, young, young * 1e-12);
    EXPECT_EQ(out.bound, CheckpointInterval::Bound::kNone);
    // Whole steps, the nearest to Young's period, at least one.
    if (young >= in.step_s)
      EXPECT_LE(std::abs(static_cast<double>(out.steps) * in.step_s - young),
                in.step_s / 2 * (1 + 1e-9));
    else
      EXPECT_EQ(out.steps, 1);
  }
}

TEST(ChooseCheckpointInterval, BoundsAndNamesTheBound) {
  CheckpointIntervalInput in{0.02, 0.1, 900, 10, 100};  // Young: 6 s
  CheckpointInterval out = ChooseCheckpointInterval(in);
  EXPECT_EQ(out.bound, CheckpointInterval::Bound::kMin);
  EXPECT_DOUBLE_EQ(out.period_s, 10);
  EXPECT_EQ(out.steps, 100);
  EXPECT_NE(DescribeCheckpointInterval(in, out).find("raised to checkpoint.auto_min_s (10.0 s)"),
            std::string::npos);

  in = {50, 2, 3600 * 1000, 60, 14400};  // Young: 18,974 s
  out = ChooseCheckpointInterval(in);
  EXPECT_EQ(out.bound, CheckpointInterval::Bound::kMax);
  EXPECT_EQ(out.steps, 7200);
  EXPECT_NE(DescribeCheckpointInterval(in, out).find("lowered to checkpoint.auto_max_s (4.0 h)"),
            std::string::npos);
}

TEST(ChooseCheckpointInterval, SaysItsFigures) {
  CheckpointIntervalInput in{0.02, 0.1, 900, 1, 100};
  const CheckpointInterval out = ChooseCheckpointInterval(in);
  EXPECT_EQ(out.steps, 60);
  EXPECT_EQ(DescribeCheckpointInterval(in, out),
            "every 60 steps (6.0 s at 0.1 s a step): sqrt(2 x 0.02 s a checkpoint x 15 min "
            "between failures) = 6.0 s");
}

TEST(ChooseCheckpointInterval, DegenerateFiguresStillGiveAStep) {
  // A free checkpoint, a step of no time, no failure figure: the bound
  // decides, and there is always at least one step.
  const CheckpointInterval out = ChooseCheckpointInterval({0, 0, 0, 60, 120});
  EXPECT_EQ(out.bound, CheckpointInterval::Bound::kMin);
  EXPECT_GE(out.steps, 1);
  EXPECT_EQ(ChooseCheckpointInterval({5, 1000, 1e6, 1, 1e9}).steps, 3);  // 3,162 s at 1,000 s
  EXPECT_EQ(ChooseCheckpointInterval({1e-6, 1000, 1, 1, 1e9}).steps, 1);
}

TEST(FirstAutoCheckpointSteps, TheShortestPeriodInWholeSteps) {
  EXPECT_EQ(FirstAutoCheckpointSteps(0.1, 60), 600);
  EXPECT_EQ(FirstAutoCheckpointSteps(0.7, 60), 86);  // rounded up: never sooner
  EXPECT_EQ(FirstAutoCheckpointSteps(120, 60), 1);
  EXPECT_EQ(FirstAutoCheckpointSteps(0, 60), 60000000);
}

}  // namespace
}  // namespace trellis
