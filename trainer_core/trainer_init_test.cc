// training.init_from and --set through the trellis-train binary: "all" continues
// another run's checkpoint bit for bit as that run would have; "weights"
// starts at step 0 from its weights (a lower first loss than fresh weights)
// and may change the training setup; a model of another shape is refused,
// naming the field; a missing step names the complete ones.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include "trainer_core/checkpoint/checkpoint.h"
#include "trainer_core/files.h"
#include "trainer_core/trainer_test_util.h"

namespace trellis::train {
namespace {

class TrainerInitTest : public TrainerTest {};

TEST_F(TrainerInitTest, AnotherRunsCheckpointContinuesOrSeedsARun) {
  const std::string spec =
      WriteSpec(ResumeSpec(BuildCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"})));
  const std::string source = JoinPath(dir_, "source");
  ChildResult straight = RunTrain({spec, "--json", "--checkpoint-dir", source}, dir_);
  ASSERT_EQ(straight.status, 0) << straight.err;
  ASSERT_EQ(straight.records.size(), 10u);
  ASSERT_EQ(LatestCompleteStep(source), 10);
  ChildResult fresh = RunTrain({spec, "--json", "--steps", "1"}, dir_);
  ASSERT_EQ(fresh.status, 0) << fresh.err;

  // "all" from step 5: steps 6..10 as the source trained them, bit for bit.
  // (Its keep = 2 left steps 5 and 10.)
  ChildResult all = RunTrain({spec, "--json", "--checkpoint-dir", JoinPath(dir_, "all"), "--set",
                              "training.init_from=" + source + "@5", "--set",
                              "training.init_state=all"},
                             dir_);
  ASSERT_EQ(all.status, 0) << all.err;
  ASSERT_EQ(all.records.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(all.records[i].step, straight.records[5 + i].step);
    EXPECT_EQ(all.records[i].loss, straight.records[5 + i].loss) << "step " << i + 6;
  }
  EXPECT_NE(all.err.find("training.init_from: all of " + StepDir(source, 5)), std::string::npos)
      << all.err;

  // "weights" of the newest, another learning rate: step 1 again, from trained weights.
  ChildResult weights = RunTrain({spec, "--json", "--steps", "1", "--set",
                                  "training.init_from=" + source, "--set", "training.lr=1e-3"},
                                 dir_);
  ASSERT_EQ(weights.status, 0) << weights.err;
  ASSERT_EQ(weights.records.size(), 1u);
  EXPECT_EQ(weights.records[0].step, 1);
  EXPECT_LT(weights.records[0].loss, fresh.records[0].loss - 0.2)
      << "trained weights start lower than fresh ones";
  EXPECT_NE(weights.err.find("training.init_from: weights of " + StepDir(source, 10)),
            std::string::npos)
      << weights.err;

  // Another model shape; a step that is not there.
  ChildResult other = RunTrain({spec, "--steps", "1", "--set", "model.hidden=32", "--set",
                                "training.init_from=" + source + "@10"},
                               dir_);
  EXPECT_NE(WEXITSTATUS(other.status), 0);
  EXPECT_NE(other.err.find("model.hidden is 64 in the checkpoint, 32 in the spec"),
            std::string::npos)
      << other.err;
  ChildResult missing =
      RunTrain({spec, "--steps", "1", "--set", "training.init_from=" + source + "@7"}, dir_);
  EXPECT_NE(WEXITSTATUS(missing.status), 0);
  EXPECT_NE(missing.err.find("training.init_from: checkpoint " + StepDir(source, 7) +
                             ": no such step; the complete steps in " + source),
            std::string::npos)
      << missing.err;
}

// --set's values over the file are checked as the file's are; one that is no
// assignment is named.
TEST_F(TrainerInitTest, SetValuesAreCheckedAsTheSpecs) {
  const std::string spec =
      WriteSpec(ResumeSpec(BuildCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"})));
  ChildResult bad_set = RunTrain({spec, "--set", "model.heads=5", "--steps", "1"}, dir_);
  EXPECT_EQ(WEXITSTATUS(bad_set.status), 2);
  EXPECT_NE(bad_set.err.find("model.heads: must divide model.hidden (64)"), std::string::npos)
      << bad_set.err;
  ChildResult not_set = RunTrain({spec, "--set", "heads"}, dir_);
  EXPECT_EQ(WEXITSTATUS(not_set.status), 2);
  EXPECT_NE(not_set.err.find("--set: heads: is not KEY=VALUE"), std::string::npos) << not_set.err;
}

}  // namespace
}  // namespace trellis::train
