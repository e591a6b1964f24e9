// checkpoint.every_steps = "auto" through the trellis-train binary at world 1:
// the first checkpoint once the steps are timed, then each interval as Young's
// rule gives it on the measured cost, said in the records and the log. Part of
// trainer_test.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/checkpoint_interval.h"
#include "trainer_core/trainer_test_util.h"

namespace trellis::train {
namespace {

TEST_F(TrainerTest, AutoCheckpointsFollowYoungsRuleOnTheMeasuredCost) {
  std::string spec = ResumeSpec(BuildCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}));
  spec.replace(spec.find("steps = 10"), 10, "steps = 24");
  spec.replace(spec.find("every_steps = 5"), 15, "every_steps = \"auto\"\nauto_min_s = 0");
  const double mtbf_s = 5;
  ChildResult r = RunTrain({WriteSpec(spec), "--json", "--checkpoint-dir", JoinPath(dir_, "ckpt"),
                            "--mtbf-s", "5"},
                           dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(r.records.size(), 24u);
  // auto_min_s = 0: the first checkpoint right after the two timed steps (2, 3).
  for (size_t i = 0; i < 3; ++i) EXPECT_FALSE(r.records[i].checkpoint_seconds) << i + 1;
  int choices = 0;
  int64_t next = 4;
  for (const StepRecord& rec : r.records) {
    if (rec.step == 24) break;  // the last checkpoint is the run's end, not the interval's
    EXPECT_EQ(rec.checkpoint_seconds.has_value(), rec.step == next) << "step " << rec.step;
    EXPECT_EQ(rec.checkpoint_every_steps.has_value(), rec.step == next) << "step " << rec.step;
    if (rec.step != next) continue;
    ++choices;
    ASSERT_TRUE(rec.checkpoint_choice_cost_seconds && rec.checkpoint_choice_step_seconds);
    // World 1: the cost is this checkpoint's, the step the mean since the last choice.
    EXPECT_EQ(*rec.checkpoint_choice_cost_seconds, *rec.checkpoint_seconds);
    const double young = std::sqrt(2 * *rec.checkpoint_choice_cost_seconds * mtbf_s);
    const int64_t expected = std::max<int64_t>(
        1, std::llround(young / std::max(*rec.checkpoint_choice_step_seconds, 1e-6)));
    EXPECT_EQ(*rec.checkpoint_every_steps, expected) << "step " << rec.step;
    next = rec.step + *rec.checkpoint_every_steps;
  }
  EXPECT_GE(choices, 1);
  EXPECT_NE(r.err.find("checkpoint.every_steps = \"auto\" after step 4: every "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(" s a checkpoint x 5.0 s between failures)"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace trellis::train
