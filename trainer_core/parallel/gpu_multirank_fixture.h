#pragma once
// The fixture and helpers of the two-rank GPU tests (gpu_multirank_test.cc,
// gpu_multirank_ops_test.cc): trellis-train on two GPUs (NCCL, one process
// per GPU, LOCAL_RANK choosing the device) against one GPU.
// Skips where fewer than 2 GPUs are visible (label gpu), unless
// TRELLIS_RANKS_SHARE_ONE_GPU=1 puts both ranks on a machine's one GPU
// (SharingOneGpu below; bench/gpu/gpu_tests.sh sets it there).
// With TRELLIS_REHEARSE_ON_CPU=1 the same tests train on CPU ranks over gloo
// instead (ctest's "on_cpu." copies, label trainer): that checks the tests'
// own logic on every CI run, so the rare two-GPU session spends its time on
// the GPUs' results. The two NCCL-only tests skip there.
// Torch-free: the tests spawn the binary and read its step records and its
// checkpoint shards.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "trainer_core/checkpoint/shard_file.h"
#include "trainer_core/data/corpus.h"
#include "trainer_core/parallel/rank_runs.h"

namespace trellis::train {

using testing::AllExitedZero;
using testing::RankRun;


// GPUs this host shows (nvidia-smi -L), 0 without a driver.
inline int VisibleGpus() {
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

inline bool RehearsingOnCpu() {
  const char* v = std::getenv("TRELLIS_REHEARSE_ON_CPU");
  return v && std::string(v) == "1";
}

// Both ranks on the one GPU of a one-GPU machine (TRELLIS_RANKS_SHARE_ONE_GPU=1).
// NCCL refuses two ranks of one host on one GPU ("Duplicate GPU detected"),
// so each rank names a host of its own (NCCL_HOSTID) and the two meet over
// NCCL's socket transport on the loopback interface. Every NCCL code path of
// the trainer runs as on two GPUs; only the speed and the transport differ.
inline bool SharingOneGpu() {
  const char* v = std::getenv("TRELLIS_RANKS_SHARE_ONE_GPU");
  return v && std::string(v) == "1" && !RehearsingOnCpu();
}

// Both meshes a 2-GPU host can form (one node of 2; two nodes of 1). A CPU
// rehearsal checks the tests' own logic, which is the same for each cell of a
// matrix, on the first mesh alone (the CPU tests, multirank_test.cc, cover the
// numbers on both).
inline std::vector<Mesh> TwoGpuMeshes() {
  if (RehearsingOnCpu()) return {Mesh{2, 2}};
  return {Mesh{2, 2}, Mesh{1, 1}};
}

// Activation checkpointing on and off (a matrix's other axis); on alone in a
// CPU rehearsal, for the reason above (fsdp_test covers both bit for bit).
inline std::vector<const char*> CheckpointingValues() {
  if (RehearsingOnCpu()) return {"true"};
  return {"true", "false"};
}

// The device the ranks train on, as the tests' printed lines name it.
inline const char* Device() {
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

inline double MaxLossRel(const std::vector<StepRecord>& got, const std::vector<StepRecord>& want,
                         size_t offset = 0) {
  double worst = 0;
  EXPECT_EQ(got.size() + offset, want.size());
  for (size_t i = 0; i < got.size() && i + offset < want.size(); ++i) {
    EXPECT_EQ(got[i].step, want[i + offset].step);
    worst = std::max(worst, std::abs(got[i].loss - want[i + offset].loss) / want[i + offset].loss);
  }
  return worst;
}

inline std::string StepName(int step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08d", step);
  return name;
}

inline std::string ShardPath(const std::string& ckpt, int step, int rank, int world) {
  char name[64];
  std::snprintf(name, sizeof(name), "shard-%05d-of-%05d.bin", rank, world);
  return JoinPath(JoinPath(ckpt, StepName(step)), name);
}

inline std::vector<float> Floats(const ShardReader& r, const ShardEntry& e) {
  const std::string d = r.ReadBytes(e);
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
inline ParamDiff CompareParams(const std::string& one, const std::string& two, int step) {
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
inline void ExpectCommTimes(const std::vector<RankRun>& runs) {
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
}  // namespace trellis::train
