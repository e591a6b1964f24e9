#include "common/model_layout/rank_host_memory.h"

#include <gtest/gtest.h>

namespace trellis::spec {
namespace {

// The default model: 2 layers, hidden 64, 4 heads (2 kv), 4 experts of 128,
// vocab 256. Dense elements: embed 16384, each layer 12672 (norms 2 x 64,
// wq 4096, wk 2048, wv 2048, wo 4096, router 256), final 16448; each layer's
// experts 3 x 4 x 128 x 64.
TEST(CheckpointStateBytes, CountsWeightsMomentsExpertsAndBiases) {
  const ModelSpec m;
  const int64_t dense = 16384 + 2 * 12672 + 16448;
  const int64_t experts = 2 * 3 * 4 * 128 * 64;
  EXPECT_EQ(CheckpointStateBytes(m, 1), dense * 12 + experts * 8 + 2 * 4 * 4 + 8);
  EXPECT_EQ(CheckpointStateBytes(m, 2), dense / 2 * 12 + experts / 2 * 8 + 2 * 4 * 4 + 8);
}

TEST(CheckpointStateBytes, PadsDenseShardsToAMultipleOfTheWorld) {
  ModelSpec m;
  m.experts = 3;  // router 192: a layer's dense part is 12608
  // ceil(16384 / 3) + 2 x ceil(12608 / 3) + ceil(16448 / 3) per rank.
  const int64_t dense = 5462 + 2 * 4203 + 5483;
  EXPECT_EQ(CheckpointStateBytes(m, 3), dense * 12 + 2 * 3 * 1 * 128 * 64 * 8 + 2 * 3 * 4 + 8);
}

TEST(RankHostMemoryOf, NothingWithoutAsyncCheckpointsOrOffload) {
  TrainerSpec t;
  EXPECT_EQ(RankHostMemoryOf(t, 1, true).total(), 0);
  EXPECT_EQ(RankHostMemoryOf(t, 1, true).Describe(), "");
  t.checkpoint.async = true;  // but no every_steps: nothing goes behind the steps
  EXPECT_EQ(RankHostMemoryOf(t, 1, true).total(), 0);
}

TEST(RankHostMemoryOf, AsyncCheckpointsCopyTheRanksState) {
  TrainerSpec t;
  t.checkpoint.async = true;
  t.checkpoint.every_steps = 100;
  const RankHostMemory m = RankHostMemoryOf(t, 2, true);
  EXPECT_EQ(m.checkpoint_copy_bytes, CheckpointStateBytes(t.model, 2));
  EXPECT_EQ(m.offload_arena_bytes, 0);
  EXPECT_EQ(m.Describe(), "checkpoint.async's copy of the state 1.1 MiB");
}

TEST(RankHostMemoryOf, OffloadArenaFollowsRowsDtypeAndPages) {
  TrainerSpec t;
  t.parallel.offload_fraction = 0.5;  // 1 of 2 layers
  // 8 rows x 128 x 64 elements: bf16 on GPUs, fp32 (the larger) on CPUs.
  EXPECT_EQ(RankHostMemoryOf(t, 1, true).offload_arena_bytes, 8 * 128 * 64 * 2);
  EXPECT_EQ(RankHostMemoryOf(t, 1, false).offload_arena_bytes, 8 * 128 * 64 * 4);
  t.training.dtype = "float32";
  EXPECT_EQ(RankHostMemoryOf(t, 1, true).offload_arena_bytes, 8 * 128 * 64 * 4);
  t.training.dtype = "auto";
  t.training.device = "cpu";
  EXPECT_EQ(RankHostMemoryOf(t, 1, true).offload_arena_bytes, 8 * 128 * 64 * 4);
  // 2 rows per micro-batch: 32 KiB of input, one 64 KiB page.
  t.training.device = "auto";
  t.training.micro_batch = 2;
  EXPECT_EQ(RankHostMemoryOf(t, 1, true).offload_arena_bytes, 64 << 10);
  t.parallel.offload_fraction = 1;
  t.checkpoint.async = true;
  t.checkpoint.every_steps = 10;
  EXPECT_EQ(RankHostMemoryOf(t, 1, true).Describe(),
            "checkpoint.async's copy of the state 2.2 MiB + activation offload's arena 0.1 MiB");
}

TEST(OffloadedLayers, RoundDown) {
  EXPECT_EQ(OffloadedLayers(0.86, 74), 63);  // the production report's setting
  EXPECT_EQ(OffloadedLayers(0.5, 4), 2);
  EXPECT_EQ(OffloadedLayers(0.24, 4), 0);
}

}  // namespace
}  // namespace trellis::spec
