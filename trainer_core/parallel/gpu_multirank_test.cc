// trellis-train on two GPUs (NCCL, one process per GPU, LOCAL_RANK choosing
// the device) against one GPU: the same numbers in fp32 on both meshes a
// 2-GPU host can form (one node of 2; two nodes of 1), bf16 gradients within
// bf16's noise, the FP8 expert gather close to the fp32 one, a world-2
// checkpoint resumed on one GPU, a killed peer named within the
// collective timeout, the step records' collective times, prefetch depths
// (parallel.prefetch_layers) that agree, deterministic runs that repeat, and
// an EP rank whose expert block gets no tokens.
// Skips where fewer than 2 GPUs are visible (label gpu), unless
// TRELLIS_RANKS_SHARE_ONE_GPU=1 puts both ranks on a machine's one GPU
// (SharingOneGpu below; bench/gpu/gpu_tests.sh sets it there).
// With TRELLIS_REHEARSE_ON_CPU=1 the same tests train on CPU ranks over gloo
// instead (ctest's "on_cpu." copies, label trainer): that checks the tests'
// own logic on every CI run, so the rare two-GPU session spends its time on
// the GPUs' results. The two NCCL-only tests skip there.
// Torch-free: it spawns the binary and reads its step records and its
// checkpoint shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "trainer_core/checkpoint/shard_file.h"
#include "trainer_core/data/corpus.h"
#include "trainer_core/parallel/rank_runs.h"

namespace trellis::train {
namespace {

using namespace std::chrono_literals;
using testing::AllExitedZero;
using testing::RankRun;

// GPUs this host shows (nvidia-smi -L), 0 without a driver.
int VisibleGpus() {
  FILE* p = ::popen("nvidia-smi -L 2>/dev/null", "r");
  if (!p) return 0;
  int n = 0;
  char line[512];
  while (std::fgets(line, sizeof(line), p))
    if (std::string(line).rfind("GPU ", 0) == 0) ++n;
  ::pclose(p);
  return n;
}

struct Mesh {
  int node_size, ep;
};

bool RehearsingOnCpu() {
  const char* v = std::getenv("TRELLIS_REHEARSE_ON_CPU");
  return v && std::string(v) == "1";
}

// Both ranks on the one GPU of a one-GPU machine (TRELLIS_RANKS_SHARE_ONE_GPU=1).
// NCCL refuses two ranks of one host on one GPU ("Duplicate GPU detected"),
// so each rank names a host of its own (NCCL_HOSTID) and the two meet over
// NCCL's socket transport on the loopback interface. Every NCCL code path of
// the trainer runs as on two GPUs; only the speed and the transport differ.
bool SharingOneGpu() {
  const char* v = std::getenv("TRELLIS_RANKS_SHARE_ONE_GPU");
  return v && std::string(v) == "1" && !RehearsingOnCpu();
}

// The device the ranks train on, as the tests' printed lines name it.
const char* Device() {
  return RehearsingOnCpu() ? "cpu" : SharingOneGpu() ? "cuda (2 ranks on 1 GPU)" : "cuda";
}

class GpuMultiRankTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int visible = RehearsingOnCpu() ? 0 : VisibleGpus();
    const int gpus = RehearsingOnCpu() ? 2 : SharingOneGpu() && visible == 1 ? 2 : visible;
    if (gpus < 2)
      GTEST_SKIP() << "needs 2 CUDA GPUs, " << gpus
                   << " visible (nvidia-smi -L; with 1, TRELLIS_RANKS_SHARE_ONE_GPU=1 shares it)";
    dir_ = MakeTempDir("trellis-gpu-multirank-test");
    BuildStats stats;
    corpus_ = JoinPath(dir_, "corpus.bin");
    WriteCorpus(corpus_, BuildByteCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}, &stats));
  }
  void TearDown() override {
    if (!dir_.empty()) RemoveTree(dir_);
  }

  // The tiny MoE of the CPU multi-rank tests, on CUDA (rehearsal: CPU).
  // `parallel`: more lines for that section.
  std::string Spec(const std::string& name, Mesh mesh, const std::string& dtype = "float32",
                   const std::string& wire = "float32", const std::string& gather = "float32",
                   const std::string& parallel = "") {
    const std::string path = JoinPath(dir_, name + ".toml");
    std::ofstream(path) << "[model]\nlayers = 2\nhidden = 32\nheads = 4\nkv_heads = 2\n"
                           "experts = 4\nexperts_per_token = 2\nexpert_hidden = 32\n"
                           "shared_expert = true\n[parallel]\nnode_size = "
                        << mesh.node_size << "\nep = " << mesh.ep << "\ngrad_reduce_dtype = \""
                        << wire << "\"\nexpert_gather_dtype = \"" << gather << "\"\n"
                        << parallel << "[training]\ndevice = \""
                        << (RehearsingOnCpu() ? "cpu" : "cuda") << "\"\ndtype = \"" << dtype
                        << "\"\nseq_len = 32\nglobal_batch = 8\nsteps = 10\nwarmup_steps = 2\n"
                           "router_bias_rate = 0.001\nmuon_ns_dtype = \"float32\"\ndata = \""
                        << corpus_ << "\"\n[checkpoint]\nevery_steps = 5\n";
    return path;
  }

  // Ranks on GPUs 0..world-1 (LOCAL_RANK), as one launcher on one host does.
  std::vector<RankRun> Run(int world, std::vector<std::string> args,
                           testing::WorldOptions o = {}) {
    o.rank_env = [](int r) {
      std::vector<std::string> env{"LOCAL_RANK=" + std::to_string(r), "NCCL_NVLS_ENABLE=0"};
      if (SharingOneGpu())
        for (const std::string& kv : {"NCCL_HOSTID=trellis-test-rank" + std::to_string(r),
                                      std::string("NCCL_SOCKET_IFNAME=lo"),
                                      std::string("NCCL_IB_DISABLE=1")})
          env.push_back(kv);
      return env;
    };
    // NCCL's log files of runs without a checkpoint directory: removed with dir_.
    o.env.push_back("TMPDIR=" + dir_);
    args.push_back("--json");
    auto runs = testing::RunWorld(TRELLIS_TRAIN_BIN, world, args, dir_, o);
    return runs;
  }

  std::string dir_, corpus_;
};

double MaxLossRel(const std::vector<StepRecord>& got, const std::vector<StepRecord>& want,
                  size_t offset = 0) {
  double worst = 0;
  EXPECT_EQ(got.size() + offset, want.size());
  for (size_t i = 0; i < got.size() && i + offset < want.size(); ++i) {
    EXPECT_EQ(got[i].step, want[i + offset].step);
    worst = std::max(worst, std::abs(got[i].loss - want[i + offset].loss) / want[i + offset].loss);
  }
  return worst;
}

std::string StepName(int step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08d", step);
  return name;
}

std::string ShardPath(const std::string& ckpt, int step, int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof(name), "shard-%05d-of-%05d.bin", rank, world);
  return JoinPath(JoinPath(ckpt, StepName(step)), name);
}

std::vector<float> Floats(const ShardReader& r, const ShardEntry& e) {
  auto d = r.Data(e);
  std::vector<float> v(d.size() / sizeof(float));
  std::memcpy(v.data(), d.data(), d.size());
  return v;
}

struct ParamDiff {
  double max_abs = 0, rms = 0;
};

// A world-2 checkpoint against a world-1 one of the same step. Dense state is
// flat-sharded (rank 0's half, then rank 1's, padding at the end); at world 2
// on either mesh rank r owns experts [r E/2, (r+1) E/2) of every layer,
// stored [gate, up, down][experts][F H].
ParamDiff CompareParams(const std::string& one, const std::string& two, int step) {
  ShardReader ref(ShardPath(one, step, 0, 1));
  std::vector<std::unique_ptr<ShardReader>> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.push_back(std::make_unique<ShardReader>(ShardPath(two, step, r, 2)));
  ParamDiff d;
  int64_t n = 0;
  auto add = [&](float a, float b) {
    const double x = std::abs(double{a} - b);
    d.max_abs = std::max(d.max_abs, x);
    d.rms += x * x;
    ++n;
  };
  for (const ShardEntry& e : ref.entries()) {
    if (e.name.rfind("param.", 0) != 0) continue;
    const auto want = Floats(ref, e);
    std::vector<std::vector<float>> got;
    for (auto& r : ranks) {
      const ShardEntry* g = r->Find(e.name);
      EXPECT_NE(g, nullptr) << e.name;
      if (!g) return {1e9, 1e9};
      got.push_back(Floats(*r, *g));
    }
    if (e.name.rfind("param.experts.", 0) == 0) {
      const size_t part = want.size() / 3, half = got[0].size() / 3;
      EXPECT_EQ(2 * half, part) << e.name;
      for (int r = 0; r < 2; ++r)
        for (size_t p = 0; p < 3; ++p)
          for (size_t i = 0; i < half; ++i)
            add(got[r][p * half + i], want[p * part + r * half + i]);
    } else {
      std::vector<float> all = got[0];
      all.insert(all.end(), got[1].begin(), got[1].end());
      EXPECT_GE(all.size(), want.size()) << e.name;
      for (size_t i = 0; i < want.size() && i < all.size(); ++i) add(all[i], want[i]);
    }
  }
  d.rms = std::sqrt(d.rms / std::max<int64_t>(1, n));
  return d;
}

// Every record of a world-2 rank carries the step's collective time and the
// part of it the compute stream stood waiting; world 1 has none.
void ExpectCommTimes(const std::vector<RankRun>& runs) {
  for (size_t r = 0; r < runs.size(); ++r)
    for (const StepRecord& rec : runs[r].records) {
      if (runs.size() == 1) {
        EXPECT_FALSE(rec.comm_seconds || rec.exposed_comm_seconds) << "world 1, step " << rec.step;
        continue;
      }
      ASSERT_TRUE(rec.comm_seconds && rec.exposed_comm_seconds)
          << "rank " << r << " step " << rec.step;
      EXPECT_GT(*rec.comm_seconds, 0) << "rank " << r << " step " << rec.step;
      EXPECT_GE(*rec.exposed_comm_seconds, 0) << "rank " << r << " step " << rec.step;
      EXPECT_LE(*rec.exposed_comm_seconds, *rec.comm_seconds)
          << "rank " << r << " step " << rec.step;
    }
}

// fp32 compute and fp32 gradients: the worlds differ only in summation order.
// Bounds are the CPU tests' (losses 1e-5 relative, parameters 1e-5).
TEST_F(GpuMultiRankTest, TwoGpusEqualOneInFp32OnBothMeshes) {
  std::string why;
  const std::string one = JoinPath(dir_, "one");
  auto ref = Run(1, {Spec("one", {1, 1}), "--checkpoint-dir", one});
  ASSERT_TRUE(AllExitedZero(ref, &why)) << why;
  ASSERT_EQ(ref[0].records.size(), 10u);
  ExpectCommTimes(ref);
  for (Mesh mesh : {Mesh{2, 2}, Mesh{1, 1}}) {
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
  for (Mesh mesh : {Mesh{2, 2}, Mesh{1, 1}})
    for (const char* checkpointing : {"true", "false"}) {
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
  for (Mesh mesh : {Mesh{2, 2}, Mesh{1, 1}}) {
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

TEST_F(GpuMultiRankTest, AWorldTwoCheckpointResumesOnOneGpu) {
  std::string why;
  const std::string ckpt = JoinPath(dir_, "ckpt");
  auto straight = Run(2, {Spec("two", {2, 2})});
  ASSERT_TRUE(AllExitedZero(straight, &why)) << why;
  auto first = Run(2, {Spec("two", {2, 2}), "--steps", "5", "--checkpoint-dir", ckpt});
  ASSERT_TRUE(AllExitedZero(first, &why)) << why;
  auto resumed = Run(1, {Spec("one", {1, 1}), "--checkpoint-dir", ckpt, "--resume", "latest"});
  ASSERT_TRUE(AllExitedZero(resumed, &why)) << why;
  ASSERT_NE(resumed[0].err.find("starting at step 5"), std::string::npos) << resumed[0].err;
  const double loss = MaxLossRel(resumed[0].records, straight[0].records, 5);
  std::printf("%s world 2 -> 1 resume at step 5: max loss rel diff vs straight world 2: %.3g\n",
              Device(), loss);
  EXPECT_LE(loss, 1e-5);
}

// Experts [first, E) of every layer starved in a world-1 checkpoint: their
// router bias set to -100, so the router (probabilities in [0, 1], the bias
// added before top-k) never picks them and 5 steps of balancing (rate 1e-3)
// cannot undo it. The shard is rewritten and the manifest takes its new
// checksum.
void StarveExpertsInCheckpoint(const std::string& ckpt, int step, size_t first) {
  const std::string path = ShardPath(ckpt, step, 0, 1);
  std::vector<std::string> data;
  ShardWriter writer;
  {
    ShardReader reader(path);
    data.reserve(reader.entries().size());  // the writer keeps pointers into them
    for (const ShardEntry& e : reader.entries()) {
      data.emplace_back(reader.Data(e));
      if (e.name.rfind("router_bias.", 0) == 0) {
        ASSERT_EQ(e.dtype, DType::kF32) << e.name;
        float* bias = reinterpret_cast<float*>(data.back().data());
        for (size_t i = first; i < data.back().size() / sizeof(float); ++i) bias[i] = -100;
      }
      writer.Add(e.name, e.dtype, e.dims, data.back().data(), data.back().size());
    }
  }
  const uint64_t checksum = writer.Write(path);
  const std::string manifest_path = JoinPath(ckpt, StepName(step) + "/manifest.json");
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(manifest_path));
  manifest["shards"][0]["fnv1a64"] = checksum;
  std::ofstream(manifest_path) << manifest.dump(2) << "\n";
}

// A copy of checkpoint step `step` of `from` in `to`.
void CopyCheckpoint(const std::string& from, const std::string& to, int step) {
  const std::string dir = JoinPath(to, StepName(step));
  MakeDirs(dir);
  for (const std::string& name : ListDir(JoinPath(from, StepName(step))))
    std::ofstream(JoinPath(dir, name), std::ios::binary)
        << std::ifstream(JoinPath(JoinPath(from, StepName(step)), name), std::ios::binary).rdbuf();
}

// One EP rank's expert block is never routed to (EP 2 on one node of 2):
// that rank sends its tokens to the other and gets no slots back, its
// experts run on nothing, and their zero gradients still go through the
// block's reduction. Resumed from the same starved checkpoint, world 2
// follows world 1 within the fp32 bounds (losses 1e-5 relative, parameters
// 1e-5 at step 10), and the records show the starving: every slot in one of
// the two blocks (EP load 2 = all over the mean of 2).
TEST_F(GpuMultiRankTest, ABlockThatGetsNoTokensFollowsOneGpu) {
  std::string why;
  const std::string one = JoinPath(dir_, "one"), two = JoinPath(dir_, "two");
  auto first = Run(1, {Spec("one", {1, 1}), "--steps", "5", "--checkpoint-dir", one});
  ASSERT_TRUE(AllExitedZero(first, &why)) << why;
  StarveExpertsInCheckpoint(one, 5, 2);
  CopyCheckpoint(one, two, 5);
  auto ref = Run(1, {Spec("one", {1, 1}), "--checkpoint-dir", one, "--resume", "latest"});
  ASSERT_TRUE(AllExitedZero(ref, &why)) << why;
  auto runs = Run(2, {Spec("two", {2, 2}), "--checkpoint-dir", two, "--resume", "latest"});
  ASSERT_TRUE(AllExitedZero(runs, &why)) << why;
  ASSERT_EQ(ref[0].records.size(), 5u);
  for (const auto& run : runs) {
    ASSERT_EQ(run.records.size(), 5u);
    for (const StepRecord& rec : run.records)
      EXPECT_EQ(rec.ep_load_max_over_mean.value_or(0), 2.0) << "step " << rec.step;
  }
  const double loss = MaxLossRel(runs[1].records, ref[0].records);
  const ParamDiff p = CompareParams(one, two, 10);
  std::printf("%s world 2 (EP 2) with one expert block starved vs world 1, fp32, steps 6-10: max "
              "loss rel diff %.3g, params max %.3g rms %.3g\n",
              Device(), loss, p.max_abs, p.rms);
  EXPECT_LE(loss, 1e-5);
  EXPECT_LE(p.max_abs, 1e-5);
}

// "PCI 0000:2a:00.0" from a rank's start-up line naming its GPU; empty if none.
std::string PciBusOf(const std::string& err) {
  const size_t on = err.find(" on GPU cuda:");
  if (on == std::string::npos) return "";
  const size_t pci = err.find(", PCI ", on);
  if (pci == std::string::npos) return "";
  return err.substr(pci + 6, err.find_first_of(" \n", pci + 6) - (pci + 6));
}

// The NCCL channel count (CTAs each collective launches), read from NCCL's
// INIT log, in every step record of both ranks: 16 under NCCL_MAX_CTAS=16
// (the workers' default), NCCL's own choice without it (24 on two NVLink
// H200s). NCCL's log goes to a file of each rank's: a line of it on standard
// output would break the --json records, which RunWorld decodes strictly.
// Also: each rank's start-up log names its own GPU.
TEST_F(GpuMultiRankTest, StepRecordsCarryNcclCtasAndRanksNameTheirGpus) {
  if (RehearsingOnCpu()) GTEST_SKIP() << "NCCL and GPUs only";
  std::string why;
  testing::WorldOptions o;
  o.unset = {"NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS", "NCCL_MAX_CTAS",
             "NCCL_MIN_CTAS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS"};
  auto ctas = [](const std::vector<RankRun>& runs, int64_t* value) {
    *value = -1;
    for (size_t r = 0; r < runs.size(); ++r) {
      EXPECT_EQ(runs[r].records.size(), 3u) << "rank " << r;
      for (const StepRecord& rec : runs[r].records) {
        EXPECT_TRUE(rec.nccl_max_ctas.has_value())
            << "rank " << r << " step " << rec.step << "\n" << runs[r].err;
        if (!rec.nccl_max_ctas) continue;
        if (*value < 0) *value = *rec.nccl_max_ctas;
        EXPECT_EQ(*rec.nccl_max_ctas, *value) << "rank " << r << " step " << rec.step;
      }
    }
  };

  // NCCL's own count; its log in TMPDIR (Run sets it to dir_).
  auto own = Run(2, {Spec("own", {2, 2}), "--steps", "3"}, o);
  ASSERT_TRUE(AllExitedZero(own, &why)) << why;
  int64_t own_ctas = 0;
  ctas(own, &own_ctas);
  EXPECT_GT(own_ctas, 0);
  for (int r = 0; r < 2; ++r) {
    bool found = false;
    for (const std::string& name : ListDir(dir_))
      found = found || name.rfind("trellis-nccl-rank" + std::to_string(r) + "-", 0) == 0;
    EXPECT_TRUE(found) << "no NCCL log of rank " << r << " in " << dir_;
    EXPECT_NE(own[r].err.find("CTAs per collective"), std::string::npos) << own[r].err;
  }

  // The workers' cap; its log in the checkpoint directory. Also a launcher's
  // blocking wait, which each rank turns off and says so.
  const std::string ckpt = JoinPath(dir_, "ckpt");
  o.env.push_back("NCCL_MAX_CTAS=16");
  o.env.push_back("TORCH_NCCL_BLOCKING_WAIT=1");
  auto capped = Run(2, {Spec("capped", {2, 2}), "--steps", "3", "--checkpoint-dir", ckpt}, o);
  o.env.pop_back();
  ASSERT_TRUE(AllExitedZero(capped, &why)) << why;
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(capped[r].err.find("TORCH_NCCL_BLOCKING_WAIT=1 turned off for this rank"),
              std::string::npos)
        << capped[r].err;
  // (Two ranks sharing one GPU meet over NCCL's socket transport, which
  // takes fewer channels than the cap: there the cap leaves NCCL's count.)
  const int64_t want_capped = SharingOneGpu() ? std::min<int64_t>(16, own_ctas) : 16;
  int64_t capped_ctas = 0;
  ctas(capped, &capped_ctas);
  EXPECT_EQ(capped_ctas, want_capped) << capped[0].err;
  for (int r = 0; r < 2; ++r)
    EXPECT_TRUE(IsRegularFile(JoinPath(ckpt, "nccl-rank" + std::to_string(r) + ".log"))) << r;

  // The user's own NCCL_DEBUG and file (NCCL's %h and %p in its name): read there.
  o.env.push_back("NCCL_DEBUG=INFO");
  o.env.push_back("NCCL_DEBUG_FILE=" + JoinPath(dir_, "user.%h.%p.nccl"));
  auto user = Run(2, {Spec("user", {2, 2}), "--steps", "3"}, o);
  ASSERT_TRUE(AllExitedZero(user, &why)) << why;
  int64_t user_ctas = 0;
  ctas(user, &user_ctas);
  EXPECT_EQ(user_ctas, want_capped) << user[0].err;
  std::vector<std::string> user_files;
  for (const std::string& name : ListDir(dir_))
    if (name.rfind("user.", 0) == 0 && name.size() > 5 && name.substr(name.size() - 5) == ".nccl")
      user_files.push_back(name);  // (not the spec, user.toml)
  EXPECT_EQ(user_files.size(), 2u)
      << "one NCCL log per rank process (%p): " << ::testing::PrintToString(user_files);

  std::printf(
      "cuda world 2: nccl_max_ctas %ld by NCCL's choice, %ld under NCCL_MAX_CTAS=16 (%ld "
      "from the user's NCCL_DEBUG_FILE)\n",
      static_cast<long>(own_ctas), static_cast<long>(capped_ctas), static_cast<long>(user_ctas));

  // Every rank on a GPU of its own, named in its start-up log.
  const std::string bus0 = PciBusOf(own[0].err), bus1 = PciBusOf(own[1].err);
  std::printf("rank 0: %s; rank 1: %s\n", bus0.c_str(), bus1.c_str());
  EXPECT_FALSE(bus0.empty()) << own[0].err;
  EXPECT_FALSE(bus1.empty()) << own[1].err;
  if (!SharingOneGpu()) EXPECT_NE(bus0, bus1);
}

// Rank 1 is killed mid-run. NCCL would leave rank 0 spinning in its
// collective until its watchdog takes the process down, naming nobody; the
// peer watch names rank 1 within the collective timeout.
TEST_F(GpuMultiRankTest, AKilledPeerIsNamedWithinTheCollectiveTimeout) {
  if (RehearsingOnCpu())  // (multirank_test stops a gloo peer with SIGSTOP instead)
    GTEST_SKIP() << "NCCL only: gloo sees a killed peer's sockets close and fails at once";
  testing::WorldOptions o;
  o.timeout = 120s;
  o.env = {"TRELLIS_COMM_TIMEOUT_S=20"};
  bool killed = false;
  std::chrono::steady_clock::time_point killed_at;
  o.on_record = [&](int rank, const StepRecord& rec, const std::vector<pid_t>& pids) {
    if (killed || rank != 0 || rec.step < 3) return;
    ::kill(pids[1], SIGKILL);
    killed = true;
    killed_at = std::chrono::steady_clock::now();
  };
  auto runs = Run(2, {Spec("two", {2, 2}), "--steps", "100000"}, o);
  ASSERT_TRUE(killed) << runs[0].err;
  const auto waited = std::chrono::steady_clock::now() - killed_at;
  std::printf("%s: rank 0 ended %.1fs after rank 1 was killed (collective timeout 20s)\n",
              Device(), std::chrono::duration<double>(waited).count());
  EXPECT_TRUE(WIFEXITED(runs[0].status) && WEXITSTATUS(runs[0].status) == 1)
      << runs[0].status << "\n" << runs[0].err;
  EXPECT_NE(runs[0].err.find("comm: rank 0 of 2: rank 1 has not been heard from for"),
            std::string::npos)
      << runs[0].err;
  EXPECT_LT(waited, 20s);
}

}  // namespace
}  // namespace trellis::train
