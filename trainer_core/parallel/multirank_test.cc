// trellis-train on several ranks (processes over gloo on 127.0.0.1): resuming
// a world-4 checkpoint on world 2 follows the uninterrupted world-4 run, and
// bad input (a mismatched spec on resume, an unreachable store) ends every
// rank with a clear message within a bounded time. Torch-free: it only spawns
// the binary and reads its JSON step records.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>

#include "common/step_record.h"
#include "trainer_core/data/corpus.h"
#include "trainer_core/files.h"
#include "trainer_core/parallel/multiprocess.h"

extern char** environ;

namespace trellis::train {
namespace {

using namespace std::chrono_literals;

struct RankRun {
  std::vector<StepRecord> records;
  int status = -1;
  std::string err;
};

// Starts `world` ranks of trellis-train with `args` and the launcher's
// environment; kills them all if any is still running after `timeout`.
std::vector<RankRun> RunWorld(int world, const std::vector<std::string>& args,
                              const std::string& dir, std::chrono::seconds timeout,
                              std::vector<std::string> extra_env = {}) {
  const int port = testing::FreePort();
  std::vector<pid_t> pids(world);
  std::vector<int> fds(world);
  std::vector<RankRun> runs(world);
  for (int r = 0; r < world; ++r) {
    // getenv takes the first match: the test's overrides, then the launcher
    // variables, then this process's environment.
    std::vector<std::string> env_s = extra_env;
    for (const std::string& kv : std::vector<std::string>{
             "RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(world),
             "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
             "OMP_NUM_THREADS=1", "TRELLIS_COMM_TIMEOUT_S=60"})
      env_s.push_back(kv);
    for (char** e = environ; *e; ++e) env_s.push_back(*e);
    std::vector<char*> envp;
    for (auto& kv : env_s) envp.push_back(kv.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_s{TRELLIS_TRAIN_BIN};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    EXPECT_EQ(::pipe(out), 0);
    const std::string err_path = JoinPath(dir, "rank" + std::to_string(r) + ".err");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    EXPECT_EQ(posix_spawn(&pids[r], argv[0], &actions, nullptr, argv.data(), envp.data()), 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    fds[r] = out[0];
  }
  std::vector<bool> closed;
  std::vector<std::string> text = testing::ReadUntilClosed(fds, timeout, &closed);
  for (int r = 0; r < world; ++r) {
    if (!closed[r]) {
      ::kill(pids[r], SIGKILL);
      ADD_FAILURE() << "rank " << r << " still running after " << timeout.count() << "s; killed";
    }
    ::waitpid(pids[r], &runs[r].status, 0);
    ::close(fds[r]);
    std::ifstream e(JoinPath(dir, "rank" + std::to_string(r) + ".err"));
    runs[r].err.assign(std::istreambuf_iterator<char>(e), {});
    size_t at = 0;
    for (size_t nl; (nl = text[r].find('\n', at)) != std::string::npos; at = nl + 1) {
      std::string error;
      auto rec = DecodeStepRecord(std::string_view(text[r]).substr(at, nl - at), &error);
      EXPECT_TRUE(rec) << error;
      if (rec) runs[r].records.push_back(*rec);
    }
  }
  return runs;
}

bool AllExitedZero(const std::vector<RankRun>& runs, std::string* why) {
  for (size_t r = 0; r < runs.size(); ++r)
    if (!WIFEXITED(runs[r].status) || WEXITSTATUS(runs[r].status) != 0) {
      *why = "rank " + std::to_string(r) + " status " + std::to_string(runs[r].status) + ": " +
             runs[r].err;
      return false;
    }
  return true;
}

class MultiRankTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("trellis-multirank-test"); }
  void TearDown() override { RemoveTree(dir_); }

  std::string Corpus() {
    BuildStats stats;
    const std::string path = JoinPath(dir_, "corpus.bin");
    WriteCorpus(path, BuildByteCorpus({std::string(TRELLIS_TESTDATA) + "/golden.txt"}, &stats));
    return path;
  }
  // 2 nodes of 2 ranks at world 4, one node at world 2; fp32 everywhere
  // (gradients too), so worlds differ only in summation order.
  std::string Spec(const std::string& corpus, int hidden = 32,
                   const std::string& gather = "float32") {
    const std::string path = JoinPath(dir_, "spec" + std::to_string(hidden) + gather + ".toml");
    std::ofstream(path) << "[model]\nlayers = 2\nhidden = " << hidden
                        << "\nheads = 4\nkv_heads = 2\nexperts = 4\nexperts_per_token = 2\n"
                           "expert_hidden = 32\nshared_expert = true\n"
                           "[parallel]\nnode_size = 2\nep = 2\ngrad_reduce_dtype = \"float32\"\n"
                           "expert_gather_dtype = \""
                        << gather
                        << "\"\n"
                           "[training]\nseq_len = 32\nglobal_batch = 8\nsteps = 10\n"
                           "warmup_steps = 2\nrouter_bias_rate = 0.001\nmuon_ns_dtype = "
                           "\"float32\"\ndata = \""
                        << corpus << "\"\n[checkpoint]\nevery_steps = 5\n";
    return path;
  }
  std::string dir_;
};

TEST_F(MultiRankTest, ResumeOnAnotherWorldSizeFollowsTheStraightRun) {
  const std::string spec = Spec(Corpus());
  const std::string straight_dir = JoinPath(dir_, "straight"), ckpt = JoinPath(dir_, "ckpt");
  std::string why;

  auto straight = RunWorld(4, {spec, "--json"}, dir_, 180s);
  ASSERT_TRUE(AllExitedZero(straight, &why)) << why;
  ASSERT_EQ(straight[0].records.size(), 10u);
  for (const auto& run : straight)  // every rank reports the global loss
    for (size_t i = 0; i < 10; ++i) EXPECT_EQ(run.records[i].loss, straight[0].records[i].loss);

  auto first = RunWorld(4, {spec, "--json", "--steps", "5", "--checkpoint-dir", ckpt}, dir_, 180s);
  ASSERT_TRUE(AllExitedZero(first, &why)) << why;
  std::ifstream manifest(JoinPath(ckpt, "step-00000005/manifest.json"));
  std::string text{std::istreambuf_iterator<char>(manifest), {}};
  EXPECT_NE(text.find("shard-00003-of-00004.bin"), std::string::npos) << text;

  auto resumed =
      RunWorld(2, {spec, "--json", "--checkpoint-dir", ckpt, "--resume", "latest"}, dir_, 180s);
  ASSERT_TRUE(AllExitedZero(resumed, &why)) << why;
  ASSERT_EQ(resumed[0].records.size(), 5u);
  double worst = 0;
  for (size_t i = 0; i < 5; ++i) {
    const StepRecord& want = straight[0].records[5 + i];
    const StepRecord& got = resumed[0].records[i];
    EXPECT_EQ(got.step, want.step);
    worst = std::max(worst, std::abs(got.loss - want.loss) / want.loss);
  }
  std::printf("world 4 -> 2 resume: max loss rel diff vs straight world 4: %.3g\n", worst);
  EXPECT_LE(worst, 1e-5);
}

// World 4 as 2 nodes of 2: each expert block is gathered from the other
// node. In FP8 (E4M3 blocks of 128 with an fp32 scale) the losses follow the
// fp32 gather closely (the report: < 0.01 after 10 steps), but not exactly:
// the weights the experts run with really are FP8.
TEST_F(MultiRankTest, Fp8ExpertGatherFollowsTheFp32Run) {
  const std::string corpus = Corpus();
  std::string why;
  auto fp32 = RunWorld(4, {Spec(corpus), "--json"}, dir_, 180s);
  ASSERT_TRUE(AllExitedZero(fp32, &why)) << why;
  auto fp8 = RunWorld(4, {Spec(corpus, 32, "fp8"), "--json"}, dir_, 180s);
  ASSERT_TRUE(AllExitedZero(fp8, &why)) << why;
  ASSERT_EQ(fp8[0].records.size(), 10u);
  double worst = 0;
  for (size_t i = 0; i < 10; ++i) {
    for (const auto& run : fp8) EXPECT_EQ(run.records[i].loss, fp8[0].records[i].loss);
    worst = std::max(worst, std::abs(fp8[0].records[i].loss - fp32[0].records[i].loss));
  }
  std::printf("fp8 vs fp32 expert gather, world 4: max |loss diff| over 10 steps %.3g\n", worst);
  EXPECT_GT(worst, 0);
  EXPECT_LT(worst, 0.01);
}

TEST_F(MultiRankTest, MismatchedSpecOnResumeIsAClearErrorOnEveryRank) {
  const std::string corpus = Corpus(), ckpt = JoinPath(dir_, "ckpt");
  std::string why;
  auto first =
      RunWorld(2, {Spec(corpus), "--json", "--steps", "1", "--checkpoint-dir", ckpt}, dir_, 120s);
  ASSERT_TRUE(AllExitedZero(first, &why)) << why;
  auto bad =
      RunWorld(2, {Spec(corpus, 64), "--checkpoint-dir", ckpt, "--resume", "latest"}, dir_, 120s);
  for (const auto& run : bad) {
    EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 1) << run.status;
    EXPECT_NE(run.err.find("model.hidden is 32 in the checkpoint, 64 in the spec"),
              std::string::npos)
        << run.err;
  }
}

TEST_F(MultiRankTest, UnreachableStoreEndsTheRankWithinTheTimeout) {
  const int dead_port = testing::FreePort();
  const auto start = std::chrono::steady_clock::now();
  // One rank of a world of 2 whose rank 0 never starts: nothing serves the store.
  auto runs = RunWorld(1, {Spec(Corpus())}, dir_, 60s,
                       {"RANK=1", "WORLD_SIZE=2", "MASTER_PORT=" + std::to_string(dead_port),
                        "TRELLIS_COMM_TIMEOUT_S=2"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_TRUE(WIFEXITED(runs[0].status) && WEXITSTATUS(runs[0].status) == 1) << runs[0].status;
  EXPECT_NE(runs[0].err.find("cannot reach the rendezvous store at 127.0.0.1:" +
                             std::to_string(dead_port)),
            std::string::npos)
      << runs[0].err;
}

}  // namespace
}  // namespace trellis::train
