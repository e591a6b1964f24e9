// checkpoint.async through the trellis-train binary at world 1: checkpoints
// written behind the steps hold the bytes of those written in place, no copy
// is made without every_steps, and a copy that would not fit is not taken.
// Part of trainer_test.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/model_layout/rank_host_memory.h"
#include "trainer_core/checkpoint/checkpoint.h"
#include "trainer_core/checkpoint/shard_file.h"
#include "trainer_core/files.h"
#include "trainer_core/trainer_test_util.h"

namespace trellis::train {
namespace {

// checkpoint.async: the every_steps checkpoints are written behind the
// steps, and hold the same bytes as those written in place; training is the
// same; a record names a checkpoint only once it is complete (the step-2
// one by step 4, whose own is then still in flight); the last one is
// written in place before the run ends.
TEST_F(TrainerTest, CheckpointsWrittenBehindTheStepsHoldTheSameBytes) {
  std::string base = ResumeSpec(BuildCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}));
  base.replace(base.find("every_steps = 5"), 15, "every_steps = 2");
  const std::string in_place_dir = JoinPath(dir_, "in-place"), behind_dir = JoinPath(dir_, "behind");
  ChildResult in_place = RunTrain(
      {WriteSpec(base), "--json", "--steps", "7", "--checkpoint-dir", in_place_dir}, dir_);
  ASSERT_EQ(in_place.status, 0) << in_place.err;
  ChildResult behind = RunTrain({WriteSpec(base + "async = true\n"), "--json", "--steps", "7",
                                 "--checkpoint-dir", behind_dir},
                                dir_);
  ASSERT_EQ(behind.status, 0) << behind.err;
  ASSERT_EQ(behind.records.size(), 7u);
  ASSERT_EQ(in_place.records.size(), 7u);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(behind.records[i].loss, in_place.records[i].loss) << "step " << i + 1;
    const bool saves = (i + 1) % 2 == 0;
    EXPECT_EQ(in_place.records[i].checkpoint_seconds.has_value(), saves) << "step " << i + 1;
    if (saves) {
      EXPECT_TRUE(behind.records[i].checkpoint_seconds) << "step " << i + 1;
    }
  }
  EXPECT_FALSE(behind.records[0].checkpoint_seconds);
  // next_checkpoint_step (the controller's hang timeout): the next periodic one, then the
  // end's, which the last record names while it is still to come after it.
  const std::vector<int64_t> next{2, 4, 4, 6, 6, 7, 7};
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(in_place.records[i].next_checkpoint_step, next[i]) << "step " << i + 1;
    EXPECT_EQ(behind.records[i].next_checkpoint_step, next[i]) << "step " << i + 1;
  }
  // The host copy is in the records' pinned host memory once the first save
  // has made it (by step 3), the same after; none in place.
  const auto copy = behind.records[2].host_arena_bytes;
  ASSERT_TRUE(copy.has_value());
  const int64_t shard = FileSize(JoinPath(StepDir(in_place_dir, 7), "shard-00000-of-00001.bin"));
  EXPECT_GT(*copy, shard / 2);
  EXPECT_LT(*copy, shard * 2);
  for (size_t i = 2; i < 7; ++i) EXPECT_EQ(behind.records[i].host_arena_bytes, copy) << i + 1;
  for (const auto& r : in_place.records) EXPECT_FALSE(r.host_arena_bytes) << r.step;
  // The shard holds the state the launch gate counts per rank for this copy
  // (common/model_layout/rank_host_memory.h).
  ShardReader written(JoinPath(StepDir(in_place_dir, 7), "shard-00000-of-00001.bin"));
  uint64_t state = 0;
  for (const ShardEntry& e : written.entries()) state += e.bytes;
  EXPECT_EQ(static_cast<int64_t>(state), spec::CheckpointStateBytes(ParseSpec(base).model, 1));
  EXPECT_EQ(in_place.records[1].checkpoint_step, 2);
  EXPECT_FALSE(behind.records[1].checkpoint_step) << "reported before it was complete";
  EXPECT_EQ(behind.records[3].checkpoint_step, 2);
  EXPECT_NE(behind.err.find("checkpoint step 7 written in "), std::string::npos) << behind.err;
  // Step 6's save, begun behind the steps, either completed at step 7's
  // boundary or was still being written when the run ended: then it gave way
  // to step 7's, written in place (the timing is the machine's).
  const bool six_abandoned =
      behind.err.find("checkpoint step 6 written behind the steps: abandoned for step 7's, "
                      "written in place now") != std::string::npos;
  EXPECT_NE(six_abandoned,
            behind.err.find("checkpoint step 6 written behind the steps in ") != std::string::npos)
      << behind.err;
  // keep = 2: steps 6 and 7 remain in both, the same files (7 only where
  // 6 was abandoned); nothing else, once the trainer is gone.
  ASSERT_EQ(LatestCompleteStep(behind_dir), 7);
  for (int64_t step : {6, 7}) {
    if (step == 6 && six_abandoned) continue;
    for (const char* file : {"shard-00000-of-00001.bin", "manifest.json"}) {
      const std::string a = JoinPath(StepDir(in_place_dir, step), file),
                        b = JoinPath(StepDir(behind_dir, step), file);
      ASSERT_TRUE(PathExists(a) && PathExists(b)) << a << " / " << b;
      EXPECT_EQ(testing::ReadFileBytes(a), testing::ReadFileBytes(b)) << file << " of step " << step;
    }
  }
  EXPECT_EQ(ListDir(in_place_dir), (std::vector<std::string>{"step-00000006", "step-00000007"}));
  const std::vector<std::string> kept = {six_abandoned ? "step-00000004" : "step-00000006",
                                         "step-00000007"};
  EXPECT_EQ(ListDir(behind_dir), kept);
}

// checkpoint.async without every_steps: no checkpoint goes behind the steps
// (the last is written in place), so no host copy is made.
TEST_F(TrainerTest, AsyncWithoutEveryStepsTakesNoHostCopy) {
  std::string base = ResumeSpec(BuildCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}));
  base.replace(base.find("every_steps = 5"), 15, "every_steps = 0");
  const std::string dir = JoinPath(dir_, "ckpt");
  ChildResult r = RunTrain(
      {WriteSpec(base + "async = true\n"), "--json", "--steps", "2", "--checkpoint-dir", dir},
      dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(r.records.size(), 2u);
  for (const auto& record : r.records) EXPECT_FALSE(record.host_arena_bytes) << record.step;
  EXPECT_EQ(LatestCompleteStep(dir), 2);
}

TEST_F(TrainerTest, AHostCopyThatWouldNotFitIsNotTakenAndCheckpointsAreWrittenInPlace) {
  std::string base = ResumeSpec(BuildCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}));
  base.replace(base.find("every_steps = 5"), 15, "every_steps = 2");
  // No machine has 64 TiB left over.
  const std::string dir = JoinPath(dir_, "ckpt");
  ChildResult r = RunTrain({WriteSpec(base + "async = true\nasync_keep_free_gib = 65536\n"),
                            "--json", "--steps", "4", "--checkpoint-dir", dir},
                           dir_);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("checkpoint.async: the host copy of the state does not fit this rank's "
                       "memory: "),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("would leave less than 65536.00 GiB free (checkpoint."
                       "async_keep_free_gib); every rank writes its checkpoints in place"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("checkpoint step 2 written in "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("behind the steps"), std::string::npos) << r.err;
  ASSERT_EQ(r.records.size(), 4u);
  EXPECT_EQ(r.records[1].checkpoint_step, 2) << "in place: complete within its step";
  EXPECT_EQ(LatestCompleteStep(dir), 4);
}

}  // namespace
}  // namespace trellis::train
