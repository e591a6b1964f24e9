// trellis-train on two GPUs against one GPU, the numbers: the same in fp32
// on both meshes a 2-GPU host can form (one node of 2; two nodes of 1), the
// step records' collective times, prefetch depths (parallel.prefetch_layers)
// that agree, bf16 gradients within bf16's noise, deterministic runs that
// repeat, the FP8 expert gather close to the fp32 one, a world-2 checkpoint
// (in place, and written behind the steps) resumed on one GPU. How they run
// (two GPUs, one shared GPU, CPU ranks): gpu_multirank_fixture.h.
#include "trainer_core/parallel/gpu_multirank_fixture.h"

namespace trellis::train {
namespace {

using namespace std::chrono_literals;

TEST_F(GpuMultiRankTest, TwoGpusEqualOneInFp32OnBothMeshes) {
  std::string why;
  const std::string one = JoinPath(dir_, "one");
  auto ref = Run(1, {Spec("one", {1, 1}), "--checkpoint-dir", one});
  ASSERT_TRUE(AllExitedZero(ref, &why)) << why;
  ASSERT_EQ(ref[0].records.size(), 10u);
  ExpectCommTimes(ref);
  for (Mesh mesh : TwoGpuMeshes()) {
    const std::string name = "two_node" + std::to_string(mesh.node_size);
    const std::string two = JoinPath(dir_, name);
    auto runs = Run(2, {Spec(name, mesh), "--checkpoint-dir", two});
    ASSERT_TRUE(AllExitedZero(runs, &why)) << why;
    for (const auto& run : runs) EXPECT_EQ(run.records.size(), 10u);
    ExpectCommTimes(runs);
    const double loss = MaxLossRel(runs[1].records, ref[0].records);
    const ParamDiff p = CompareParams(one, two, 10);
    std::printf("%s world 2 (node_size %d, ep %d) vs world 1, fp32, 10 steps: max loss rel diff "
                "%.3g, params max %.3g rms %.3g\n",
                Device(), mesh.node_size, mesh.ep, loss, p.max_abs, p.rms);
    EXPECT_LE(loss, 1e-5);
    EXPECT_LE(p.max_abs, 1e-5);
  }
}

// Prefetch off (every collective waited for at once), 1 and 2 layers ahead:
// the same kernels on the same values, so the losses agree within the fp32
// bound (1e-5 relative) on both meshes, with and without activation
// checkpointing; the records show how much of the collective time the
// compute waited for.
TEST_F(GpuMultiRankTest, PrefetchDepthsAgreeAndRecordExposedTime) {
  std::string why;
  for (Mesh mesh : TwoGpuMeshes())
    for (const char* checkpointing : CheckpointingValues()) {
      std::vector<std::vector<RankRun>> runs;
      for (int prefetch : {0, 1, 2}) {
        const std::string name = "prefetch" + std::to_string(prefetch) + "_" +
                                 std::to_string(mesh.node_size) + checkpointing;
        const std::string parallel = "prefetch_layers = " + std::to_string(prefetch) +
                                     "\nactivation_checkpointing = " + checkpointing + "\n";
        runs.push_back(Run(2, {Spec(name, mesh, "float32", "float32", "float32", parallel),
                               "--steps", "5"}));
        ASSERT_TRUE(AllExitedZero(runs.back(), &why)) << why;
        ExpectCommTimes(runs.back());
        double comm = 0, exposed = 0;
        for (const auto& rec : runs.back()[0].records) {
          comm += rec.comm_seconds.value_or(0);
          exposed += rec.exposed_comm_seconds.value_or(0);
        }
        std::printf("%s world 2 (node_size %d), checkpointing %s, prefetch_layers %d: "
                    "collectives %.4fs per step, exposed %.0f%%\n",
                    Device(), mesh.node_size, checkpointing, prefetch, comm / 5,
                    100 * exposed / std::max(comm, 1e-12));
      }
      for (size_t p = 1; p < runs.size(); ++p)
        EXPECT_LE(MaxLossRel(runs[p][0].records, runs[0][0].records), 1e-5)
            << "prefetch " << p << ", node_size " << mesh.node_size << ", checkpointing "
            << checkpointing;
    }
}

// bf16 compute and bf16 gradients on the wire against one GPU in bf16: within
// bf16's noise, the CPU test's bounds (losses 1e-3 relative, parameters
// 2.5e-3 RMS after 5 steps).
TEST_F(GpuMultiRankTest, Bf16GradientReductionStaysWithinBf16Noise) {
  std::string why;
  const std::string one = JoinPath(dir_, "one"), two = JoinPath(dir_, "two");
  auto ref = Run(1, {Spec("one", {1, 1}, "bfloat16"), "--steps", "5", "--checkpoint-dir", one});
  ASSERT_TRUE(AllExitedZero(ref, &why)) << why;
  auto runs = Run(2, {Spec("two", {2, 2}, "bfloat16", "bfloat16"), "--steps", "5",
                      "--checkpoint-dir", two});
  ASSERT_TRUE(AllExitedZero(runs, &why)) << why;
  const double loss = MaxLossRel(runs[0].records, ref[0].records);
  const ParamDiff p = CompareParams(one, two, 5);
  std::printf("%s world 2 bf16 wire vs world 1, bf16, 5 steps: max loss rel diff %.3g, params "
              "rms %.3g\n",
              Device(), loss, p.rms);
  EXPECT_LE(loss, 1e-3);
  EXPECT_LE(p.rms, 2.5e-3);
}

// training.deterministic at world 2 in bf16 with bf16 gradients on the wire
// (the production setting): two runs give the same losses bit for bit on
// both ranks, over the all-to-alls, reductions and all-reduces of both
// meshes. (One GPU: bench/gpu/determinism.sh.)
TEST_F(GpuMultiRankTest, DeterministicRunsRepeatBitForBit) {
  for (Mesh mesh : TwoGpuMeshes()) {
    const std::string path = Spec("det", mesh, "bfloat16", "bfloat16");
    std::string text;
    {
      std::ifstream in(path);
      text.assign(std::istreambuf_iterator<char>(in), {});
    }
    text.replace(text.find("[training]\n"), 11, "[training]\ndeterministic = true\n");
    std::ofstream(path) << text;
    std::string why;
    auto first = Run(2, {path, "--steps", "6"});
    ASSERT_TRUE(AllExitedZero(first, &why)) << why;
    auto again = Run(2, {path, "--steps", "6"});
    ASSERT_TRUE(AllExitedZero(again, &why)) << why;
    EXPECT_NE(first[0].err.find(", deterministic,"), std::string::npos) << first[0].err;
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(first[r].records.size(), 6u);
      ASSERT_EQ(again[r].records.size(), 6u);
      for (size_t i = 0; i < 6; ++i)
        EXPECT_EQ(again[r].records[i].loss, first[r].records[i].loss)
            << "node_size " << mesh.node_size << " rank " << r << " step " << i + 1;
    }
    std::printf("%s world 2 deterministic, node_size %d: 6 losses the same bits twice\n",
                Device(), mesh.node_size);
  }
}

// Two nodes of one GPU: each expert block is gathered from the other rank.
// FP8 (E4M3, blocks of 128, fp32 scales) follows fp32 closely but not exactly.
TEST_F(GpuMultiRankTest, Fp8ExpertGatherFollowsTheFp32Gather) {
  std::string why;
  auto fp32 = Run(2, {Spec("fp32", {1, 1})});
  ASSERT_TRUE(AllExitedZero(fp32, &why)) << why;
  auto fp8 = Run(2, {Spec("fp8", {1, 1}, "float32", "float32", "fp8")});
  ASSERT_TRUE(AllExitedZero(fp8, &why)) << why;
  ASSERT_EQ(fp8[0].records.size(), 10u);
  double worst = 0;
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(fp8[1].records[i].loss, fp8[0].records[i].loss);
    worst = std::max(worst, std::abs(fp8[0].records[i].loss - fp32[0].records[i].loss));
  }
  std::printf("%s fp8 vs fp32 expert gather, 2 nodes of 1: max |loss diff| over 10 steps %.3g\n",
              Device(), worst);
  EXPECT_GT(worst, 0);
  EXPECT_LT(worst, 0.01);
}

// The straight run's own step-5 checkpoint is the one resumed (a save does
// not move the run; one run fewer, each a LibTorch start-up per rank).
TEST_F(GpuMultiRankTest, AWorldTwoCheckpointResumesOnOneGpu) {
  std::string why;
  const std::string ckpt = JoinPath(dir_, "ckpt");
  auto straight = Run(2, {Spec("two", {2, 2}), "--checkpoint-dir", ckpt});
  ASSERT_TRUE(AllExitedZero(straight, &why)) << why;
  auto resumed = Run(1, {Spec("one", {1, 1}), "--checkpoint-dir", ckpt, "--resume", "5"});
  ASSERT_TRUE(AllExitedZero(resumed, &why)) << why;
  ASSERT_NE(resumed[0].err.find("starting at step 5"), std::string::npos) << resumed[0].err;
  const double loss = MaxLossRel(resumed[0].records, straight[0].records, 5);
  std::printf("%s world 2 -> 1 resume at step 5: max loss rel diff vs straight world 2: %.3g\n",
              Device(), loss);
  EXPECT_LE(loss, 1e-5);
}

// checkpoint.async at world 2: the step-5 save is written behind steps 6 and 7
// (each step sums the ranks' "still writing" flags; the step completes over the
// world's collectives) and the run's end waits for it; resumed on one GPU, the
// run goes on as the straight world-2 run did.
TEST_F(GpuMultiRankTest, AWorldTwoCheckpointWrittenBehindTheStepsResumesOnOneGpu) {
  std::string why;
  const std::string ckpt = JoinPath(dir_, "ckpt");
  auto straight = Run(2, {Spec("two", {2, 2})});
  ASSERT_TRUE(AllExitedZero(straight, &why)) << why;
  const std::string behind = Spec("behind", {2, 2});
  std::ofstream(behind, std::ios::app) << "async = true\nat_end = false\n";
  auto first = Run(2, {behind, "--steps", "7", "--checkpoint-dir", ckpt});
  ASSERT_TRUE(AllExitedZero(first, &why)) << why;
  for (const auto& rank : first)
    EXPECT_NE(rank.err.find("checkpoint step 5 written behind the steps"), std::string::npos)
        << rank.err;
  auto resumed = Run(1, {Spec("one", {1, 1}), "--checkpoint-dir", ckpt, "--resume", "latest"});
  ASSERT_TRUE(AllExitedZero(resumed, &why)) << why;
  ASSERT_NE(resumed[0].err.find("starting at step 5"), std::string::npos) << resumed[0].err;
  const double loss = MaxLossRel(resumed[0].records, straight[0].records, 5);
  std::printf("%s world 2 -> 1 resume of a save behind the steps at step 5: max loss rel diff "
              "vs straight world 2: %.3g\n",
              Device(), loss);
  EXPECT_LE(loss, 1e-5);
}

// checkpoint.every_steps = "auto" at world 2 (behind the steps): the ranks
// agree on the step time and each checkpoint's cost (a float64 all-gather,
// over NCCL on GPUs), so both choose the same intervals at the same steps, on
// the slower rank's figures.
TEST_F(GpuMultiRankTest, AutoCheckpointIntervalsAreAgreedByBothRanks) {
  std::string text;
  {
    std::ifstream in(Spec("auto", {2, 2}));
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text.replace(text.find("every_steps = 5"), 15,
               "every_steps = \"auto\"\nauto_min_s = 0\nasync = true");
  const std::string spec = JoinPath(dir_, "auto-agreed.toml");
  std::ofstream(spec) << text;
  std::string why;
  auto runs = Run(2, {spec, "--checkpoint-dir", JoinPath(dir_, "ckpt"), "--mtbf-s", "3"});
  ASSERT_TRUE(AllExitedZero(runs, &why)) << why;
  ASSERT_EQ(runs[0].records.size(), 10u);
  ASSERT_EQ(runs[1].records.size(), 10u);
  int choices = 0;
  for (size_t i = 0; i < 10; ++i) {
    const StepRecord &a = runs[0].records[i], &b = runs[1].records[i];
    EXPECT_EQ(a.checkpoint_every_steps, b.checkpoint_every_steps) << "step " << i + 1;
    EXPECT_EQ(a.checkpoint_choice_cost_seconds, b.checkpoint_choice_cost_seconds) << i + 1;
    EXPECT_EQ(a.checkpoint_choice_step_seconds, b.checkpoint_choice_step_seconds) << i + 1;
    if (!a.checkpoint_every_steps) continue;
    ++choices;
    EXPECT_GE(*a.checkpoint_choice_cost_seconds, *a.checkpoint_seconds) << "step " << i + 1;
    EXPECT_GE(*a.checkpoint_choice_cost_seconds, *b.checkpoint_seconds) << "step " << i + 1;
  }
  EXPECT_TRUE(runs[0].records[3].checkpoint_every_steps) << "the first auto checkpoint is step 4's";
  std::printf("%s auto checkpoints at world 2: %d choices, the same on both ranks\n", Device(),
              choices);
}

}  // namespace
}  // namespace trellis::train
