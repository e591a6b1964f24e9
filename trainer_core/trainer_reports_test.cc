// What the trainer reports beside the loss, in process at world 1: each
// forward's expert load (TrainerOptions::on_expert_load, and the record's
// expert_load_max_over_mean), the activation-offload arena
// (host_arena_bytes), NCCL's channel count from its log (nccl_max_ctas) and
// how long a resume spent reading its checkpoint. Part of trainer_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/step_record.h"
#include "trainer_core/memory/activation_offload.h"
#include "trainer_core/trainer.h"
#include "trainer_core/trainer_test_util.h"

namespace trellis::train {
namespace {

// The expert-load hook (TrainerOptions::on_expert_load) sees every slot of
// each forward: micro-batch rows x seq_len x experts_per_token per layer.
// With group-limited routing each group gets exactly its share, every time.
TEST_F(TrainerTest, ExpertLoadCountsEverySlotAndGroupsShareItEvenly) {
  spec::TrainerSpec spec =
      ParseSpec(ResumeSpec(BuildCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}), 32));
  spec.training.micro_batch = 4;  // of 8 rows: two forwards a step
  for (int groups : {1, 2}) {
    SCOPED_TRACE("expert_groups " + std::to_string(groups));
    spec.model.expert_groups = groups;
    std::vector<std::vector<std::vector<std::vector<int64_t>>>> loads;  // [step][forward]...
    std::vector<StepRecord> records;
    TrainerOptions o;
    o.on_expert_load = [&](int64_t step,
                           const std::vector<std::vector<std::vector<int64_t>>>& forwards) {
      EXPECT_EQ(step, static_cast<int64_t>(loads.size()) + 1);
      loads.push_back(forwards);
    };
    o.on_step = [&](const StepRecord& r) { records.push_back(r); };
    Trainer trainer(spec, o);
    trainer.Run(3);
    ASSERT_EQ(loads.size(), 3u);
    ASSERT_EQ(records.size(), 3u);
    // The record's figure, from the same counts: per layer its busiest
    // expert summed over the two forwards over its mean summed likewise, the
    // worst layer. It is at least what the step's summed counts give (a
    // forward's busiest expert may not be the step's). No EP figure at
    // world 1 (one EP rank).
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_EQ(loads[i].size(), 2u);  // forwards
      double worst = 0, worst_summed = 0;
      for (size_t l = 0; l < 2; ++l) {
        double most = 0, mean = 0;
        std::vector<int64_t> summed(4, 0);
        for (const auto& forward : loads[i]) {
          const auto& layer = forward[l];
          most += static_cast<double>(*std::max_element(layer.begin(), layer.end()));
          mean += static_cast<double>(layer[0] + layer[1] + layer[2] + layer[3]) / 4;
          for (size_t e = 0; e < 4; ++e) summed[e] += layer[e];
        }
        worst = std::max(worst, most / mean);
        worst_summed = std::max(
            worst_summed, static_cast<double>(*std::max_element(summed.begin(), summed.end())) /
                              (static_cast<double>(summed[0] + summed[1] + summed[2] + summed[3]) / 4));
      }
      ASSERT_TRUE(records[i].expert_load_max_over_mean.has_value());
      EXPECT_NEAR(*records[i].expert_load_max_over_mean, worst, 1e-12);
      EXPECT_GE(*records[i].expert_load_max_over_mean, worst_summed - 1e-12);
      EXPECT_FALSE(records[i].ep_load_max_over_mean.has_value());
    }
    const int64_t slots = int64_t{4} * 64 * 2;  // micro_batch x seq_len x experts_per_token
    bool uneven_pair = false;  // plain top-k: some layer's two halves differ
    for (const auto& step : loads) {
      for (const auto& forward : step) {
        ASSERT_EQ(forward.size(), 2u);  // layers
        for (const auto& layer : forward) {
          ASSERT_EQ(layer.size(), 4u);
          EXPECT_EQ(layer[0] + layer[1] + layer[2] + layer[3], slots);
          if (groups == 2) {
            EXPECT_EQ(layer[0] + layer[1], slots / 2);
            EXPECT_EQ(layer[2] + layer[3], slots / 2);
          }
          uneven_pair |= layer[0] + layer[1] != slots / 2;
        }
      }
    }
    if (groups == 1) {
      EXPECT_TRUE(uneven_pair) << "plain top-k split the slots evenly anyway";
    }
  }
}

// parallel.offload_fraction 0.5 of 2 layers: the first layer's input goes to
// the host arena, whose size every record carries (8 rows x 64 positions x
// hidden 32, fp32: 64 KiB); the losses are those of the run without offload,
// whose records carry no arena.
TEST_F(TrainerTest, OffloadKeepsTheLossesAndRecordsTheArena) {
  spec::TrainerSpec spec =
      ParseSpec(ResumeSpec(BuildCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}), 32));
  std::vector<std::vector<StepRecord>> runs;
  for (double fraction : {0.0, 0.5}) {
    spec.parallel.offload_fraction = fraction;
    TrainerOptions o;
    runs.emplace_back();
    o.on_step = [&](const StepRecord& r) { runs.back().push_back(r); };
    Trainer trainer(spec, o);
    trainer.Run(3);
  }
  ASSERT_EQ(runs[0].size(), 3u);
  ASSERT_EQ(runs[1].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(runs[1][i].loss, runs[0][i].loss) << "step " << i + 1;
    EXPECT_FALSE(runs[0][i].host_arena_bytes.has_value());
    EXPECT_EQ(runs[1][i].host_arena_bytes, std::optional<int64_t>(8 * 64 * 32 * 4));
  }
  // What checkpoint.async counts for the arena before it is made, from the spec.
  const auto& t = spec.training;
  EXPECT_EQ(OffloadArenaBytes(OffloadedLayers(0.5, spec.model.layers),
                              t.global_batch * t.seq_len * spec.model.hidden * 4),
            runs[1][0].host_arena_bytes.value_or(-1));
}

// NCCL's log as a rank over NCCL sees it, emulated on the CPU: the
// communicator's INIT line appears during step 2 (as if its first collective
// were then); from that step on every record carries the channel count, and
// the rank's log says so once.
TEST_F(TrainerTest, NcclChannelCountFromItsLogGoesInTheRecords) {
  spec::TrainerSpec spec =
      ParseSpec(ResumeSpec(BuildCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}), 32));
  spec.training.device = "cpu";
  const std::string log = JoinPath(dir_, "nccl-rank0.log");
  std::ofstream(log) << "h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n";
  std::vector<StepRecord> records;
  std::vector<std::string> notes;
  TrainerOptions options;
  options.nccl_log = log;
  options.on_note = [&](const std::string& line) { notes.push_back(line); };
  options.on_step = [&](const StepRecord& r) {
    records.push_back(r);
    if (r.step == 1)
      std::ofstream(log, std::ios::app)
          << "h:1:2 [0] NCCL INFO 16 coll channels, 16 collnet channels, 0 nvls channels, "
             "32 p2p channels, 32 p2p channels per peer\n";
  };
  Trainer trainer(spec, options);
  EXPECT_EQ(trainer.DescribeDevice(), "rank 0 of 1 on the CPU (training.device \"cpu\")");
  trainer.Run(4);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_EQ(records[0].nccl_max_ctas, std::nullopt);
  for (size_t i = 1; i < records.size(); ++i) EXPECT_EQ(records[i].nccl_max_ctas, 16) << i;
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("NCCL: 16 CTAs per collective"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find(log), std::string::npos) << notes[0];
  // The record's line carries it for the worker and the CLI.
  EXPECT_NE(EncodeStepRecord(records[3]).find("\"nccl_max_ctas\":16"), std::string::npos);
  // World 1 has no collectives to time.
  for (const StepRecord& r : records) EXPECT_FALSE(r.comm_seconds || r.exposed_comm_seconds);
}

// A resume says, once, how long its checkpoint took to read and how much it
// read: a restart's cost beside the steps it redoes. A fresh start says nothing.
TEST_F(TrainerTest, ACheckpointSaysHowLongItTookToWriteAndToRead) {
  spec::TrainerSpec spec =
      ParseSpec(ResumeSpec(BuildCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}), 32));
  spec.training.device = "cpu";
  std::vector<std::string> notes;
  TrainerOptions options;
  options.checkpoint_dir = dir_;
  options.on_note = [&](const std::string& line) { notes.push_back(line); };
  Trainer(spec, options).Run(5);
  ASSERT_FALSE(notes.empty());
  for (const std::string& note : notes)
    EXPECT_EQ(note.rfind("checkpoint step ", 0), 0u) << note;
  EXPECT_EQ(notes.back().rfind("checkpoint step 5 written in ", 0), 0u) << notes.back();
  EXPECT_NE(notes.back().find(" GiB ("), std::string::npos) << notes.back();
  notes.clear();
  options.resume_step = 5;
  Trainer resumed(spec, options);
  EXPECT_EQ(resumed.step(), 5);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0].rfind("checkpoint step 5 read in ", 0), 0u) << notes[0];
  EXPECT_NE(notes[0].find(" GiB from 1 shard file ("), std::string::npos) << notes[0];
}

}  // namespace
}  // namespace trellis::train
