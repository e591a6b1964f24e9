// trellis-train on two GPUs, beyond the numbers of gpu_multirank_test.cc: an
// EP rank whose expert block gets no tokens, NCCL's CTA count in the step
// records and each rank on a GPU of its own, a killed peer named within the
// collective timeout. How they run: gpu_multirank_fixture.h.
#include <nlohmann/json.hpp>

#include "trainer_core/parallel/gpu_multirank_fixture.h"

namespace trellis::train {
namespace {

using namespace std::chrono_literals;

// Experts [first, E) of every layer starved in a world-1 checkpoint: their
// router bias set to -100, so the router (probabilities in [0, 1], the bias
// added before top-k) never picks them and 5 steps of balancing (rate 1e-3)
// cannot undo it. The shard is rewritten and the manifest takes its new
// index checksum.
void StarveExpertsInCheckpoint(const std::string& ckpt, int step, size_t first) {
  const std::string path = ShardPath(ckpt, step, 0, 1);
  std::vector<std::string> data;
  std::vector<ShardEntry> entries;
  {
    ShardReader reader(path);
    entries = reader.entries();
    for (const ShardEntry& e : entries) {
      data.push_back(reader.ReadBytes(e));
      if (e.name.rfind("router_bias.", 0) == 0) {
        ASSERT_EQ(e.dtype, DType::kF32) << e.name;
        float* bias = reinterpret_cast<float*>(data.back().data());
        for (size_t i = first; i < data.back().size() / sizeof(float); ++i) bias[i] = -100;
      }
    }
  }
  ShardWriter writer(path, entries);
  for (const std::string& d : data) writer.Append(d.data(), d.size());
  const uint64_t checksum = writer.Finish();
  const std::string manifest_path = JoinPath(ckpt, StepName(step) + "/manifest.json");
  nlohmann::json manifest = nlohmann::json::parse(std::ifstream(manifest_path));
  manifest["shards"][0]["index_xxh64"] = checksum;
  manifest["shards"][0]["bytes"] = writer.file_bytes();
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
  if (!SharingOneGpu()) {
    EXPECT_NE(bus0, bus1);
  }
}

// Rank 1 is killed mid-run. NCCL would leave rank 0 spinning in its
// collective until its watchdog takes the process down, naming nobody. With
// ranks sharing a GPU (NCCL's socket transport) NCCL sees the peer's sockets
// close, in PyTorch's watchdog thread; the peer watch polls the group's error
// (getError, LibTorch 2.8 on) and ends rank 0 within a few seconds, naming
// rank 1 as the peer that stopped beating. On two GPUs NCCL sees nothing and
// the watch names rank 1 after its silence threshold (half the timeout).
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
  const bool named = runs[0].err.find("comm: rank 0 of 2: rank 1 has not been heard from for") !=
                     std::string::npos;
  const bool by_backend =
      runs[0].err.find("comm: rank 0 of 2: NCCL reports") != std::string::npos &&
      runs[0].err.find("rank 1 has not beaten since") != std::string::npos;
  const bool failed_collective =
      runs[0].err.find("failed (a peer exited, timed out or lost its network)") !=
          std::string::npos &&
      runs[0].err.find("comm: rank 0 ends now: its NCCL work cannot complete") != std::string::npos;
  EXPECT_TRUE(named || failed_collective || by_backend) << runs[0].err;
  std::printf("%s: rank 0 ended by %s\n", Device(),
              by_backend ? "NCCL's error, seen by the peer watch"
              : named    ? "the peer watch (silence)"
                         : "its failed collective");
  EXPECT_LT(waited, 20s);
  if (SharingOneGpu()) {  // the socket transport: NCCL sees the peer go
    EXPECT_TRUE(by_backend || failed_collective) << runs[0].err;
    EXPECT_LT(waited, 6s);
  }
}

}  // namespace
}  // namespace trellis::train
