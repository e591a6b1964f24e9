// trellis-train on several ranks (processes over gloo on 127.0.0.1): resuming
// a world-4 checkpoint on world 2 follows the uninterrupted world-4 run, and
// bad input (a mismatched spec on resume, an unreachable store, a peer that
// stops answering) ends every rank with a clear message within a bounded
// time. Torch-free: it only spawns
// the binary and reads its JSON step records.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <functional>

#include <toml++/toml.h>

#include "common/model_layout/rank_host_memory.h"
#include "trainer_core/checkpoint/shard_file.h"
#include "trainer_core/data/corpus.h"
#include "trainer_core/parallel/rank_runs.h"

namespace trellis::train {
namespace {

using namespace std::chrono_literals;

using testing::AllExitedZero;
using testing::RankRun;

std::vector<RankRun> RunWorld(int world, const std::vector<std::string>& args,
                              const std::string& dir, std::chrono::seconds timeout,
                              std::vector<std::string> extra_env = {}) {
  testing::WorldOptions o;
  o.timeout = timeout;
  o.env = std::move(extra_env);
  return testing::RunWorld(TRELLIS_TRAIN_BIN, world, args, dir, o);
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
  // `training`, `parallel`: more lines for those sections; `experts`: the
  // model's expert lines.
  std::string Spec(const std::string& corpus, int hidden = 32,
                   const std::string& gather = "float32", const std::string& training = "",
                   const std::string& parallel = "",
                   const std::string& experts = "experts = 4\nexperts_per_token = 2\n") {
    const std::string path =
        JoinPath(dir_, "spec" + std::to_string(hidden) + gather +
                           std::to_string(
                               std::hash<std::string>{}(training + parallel + experts)) +
                           ".toml");
    std::ofstream(path) << "[model]\nlayers = 2\nhidden = " << hidden
                        << "\nheads = 4\nkv_heads = 2\n"
                        << experts << "expert_hidden = 32\nshared_expert = true\n"
                           "[parallel]\nnode_size = 2\nep = 2\ngrad_reduce_dtype = \"float32\"\n"
                           "expert_gather_dtype = \""
                        << gather << "\"\n"
                        << parallel
                        << "[training]\ndtype = \"float32\"\nseq_len = 32\nglobal_batch = 8\n"
                           "steps = 10\nwarmup_steps = 2\nrouter_bias_rate = 0.001\n"
                           "muon_ns_dtype = \"float32\"\ndata = \""
                        << corpus << "\"\n"
                        << training << "[checkpoint]\nevery_steps = 5\n";
    return path;
  }
  std::string dir_;
};

// The straight run's own step-5 checkpoint is the one resumed: a save does
// not move the run (CheckpointsBehindTheStepsCompleteOnEveryRankAndResume
// checks that), and each trellis-train process costs about a second of
// LibTorch's start-up here, far more than its steps.
TEST_F(MultiRankTest, ResumeOnAnotherWorldSizeFollowsTheStraightRun) {
  const std::string spec = Spec(Corpus());
  const std::string ckpt = JoinPath(dir_, "ckpt");
  std::string why;

  auto straight = RunWorld(4, {spec, "--json", "--checkpoint-dir", ckpt}, dir_, 180s);
  ASSERT_TRUE(AllExitedZero(straight, &why)) << why;
  ASSERT_EQ(straight[0].records.size(), 10u);
  for (const auto& run : straight)  // every rank reports the global loss
    for (size_t i = 0; i < 10; ++i) EXPECT_EQ(run.records[i].loss, straight[0].records[i].loss);

  std::ifstream manifest(JoinPath(ckpt, "step-00000005/manifest.json"));
  std::string text{std::istreambuf_iterator<char>(manifest), {}};
  EXPECT_NE(text.find("shard-00003-of-00004.bin"), std::string::npos) << text;
  // Every shard holds the state the launch gate counts per rank for
  // checkpoint.async's copy (common/model_layout/rank_host_memory.h).
  spec::FieldErrors errors;
  const spec::TrainerSpec parsed = spec::ParseTrainerSections(toml::parse_file(spec), &errors);
  ASSERT_TRUE(errors.empty()) << spec::JoinErrors(errors);
  for (int r = 0; r < 4; ++r) {
    ShardReader shard(
        JoinPath(ckpt, "step-00000005/shard-0000" + std::to_string(r) + "-of-00004.bin"));
    uint64_t bytes = 0;
    for (const ShardEntry& e : shard.entries()) bytes += e.bytes;
    EXPECT_EQ(static_cast<int64_t>(bytes), spec::CheckpointStateBytes(parsed.model, 4))
        << shard.path();
  }

  auto resumed =
      RunWorld(2, {spec, "--json", "--checkpoint-dir", ckpt, "--resume", "5"}, dir_, 180s);
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
  for (const auto& run : resumed)
    EXPECT_NE(run.err.find("checkpoint step 5 read in"), std::string::npos) << run.err;

  // On the mesh it was saved on, every rank reads its own shard only, the
  // replicated tensors included (every shard has them).
  auto same = RunWorld(4, {spec, "--json", "--checkpoint-dir", ckpt, "--resume", "5"}, dir_, 180s);
  ASSERT_TRUE(AllExitedZero(same, &why)) << why;
  ASSERT_EQ(same[0].records.size(), 5u);
  for (size_t i = 0; i < 5; ++i)
    EXPECT_NEAR(same[0].records[i].loss, straight[0].records[5 + i].loss,
                1e-6 * straight[0].records[5 + i].loss);
  for (const auto& run : same)
    EXPECT_NE(run.err.find(" from 1 shard file ("), std::string::npos) << run.err;
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
  // Checked before the ranks meet: a rank alone (its rank 0 never starts)
  // names the mismatch, not the store it cannot reach.
  auto alone = RunWorld(1, {Spec(corpus, 64), "--checkpoint-dir", ckpt, "--resume", "latest"},
                        dir_, 60s,
                        {"RANK=1", "WORLD_SIZE=2",
                         "MASTER_PORT=" + std::to_string(testing::FreePort()),
                         "TRELLIS_COMM_TIMEOUT_S=30"});
  EXPECT_TRUE(WIFEXITED(alone[0].status) && WEXITSTATUS(alone[0].status) == 1) << alone[0].status;
  EXPECT_NE(alone[0].err.find("model.hidden is 32 in the checkpoint, 64 in the spec"),
            std::string::npos)
      << alone[0].err;
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

TEST_F(MultiRankTest, AStoppedPeerIsNamedWithinTheCollectiveTimeout) {
  // Rank 1 is stopped (SIGSTOP) once both ranks have trained a step: its
  // connections stay open, so gloo alone would wait out its whole timeout
  // without naming anyone. The peer watch names it after half the timeout.
  std::string spec = Spec(Corpus());
  testing::WorldOptions o;
  o.timeout = 60s;
  o.env = {"TRELLIS_COMM_TIMEOUT_S=8"};
  o.rank0_ends_world = true;
  bool stopped = false;
  std::chrono::steady_clock::time_point stopped_at;
  o.on_record = [&](int rank, const StepRecord& rec, const std::vector<pid_t>& pids) {
    if (stopped || rank != 0 || rec.step < 2) return;
    ::kill(pids[1], SIGSTOP);
    stopped = true;
    stopped_at = std::chrono::steady_clock::now();
  };
  auto runs = testing::RunWorld(TRELLIS_TRAIN_BIN, 2, {spec, "--json", "--steps", "100000"},
                                dir_, o);
  ASSERT_TRUE(stopped) << runs[0].err;
  const auto waited = std::chrono::steady_clock::now() - stopped_at;
  EXPECT_TRUE(WIFEXITED(runs[0].status) && WEXITSTATUS(runs[0].status) == 1) << runs[0].status;
  EXPECT_NE(runs[0].err.find("comm: rank 0 of 2: rank 1 has not been heard from for"),
            std::string::npos)
      << runs[0].err;
  EXPECT_LT(waited, 8s) << "named only after the collective timeout";
}

// Slurm's wall-time warning reaches one rank only (SIGUSR1 to rank 1): both
// stop at the same step boundary (they agree on it), checkpoint there and
// exit 0, and a resume from that checkpoint goes on from the next step.
TEST_F(MultiRankTest, AStopSignalOnOneRankStopsAllAtOneStepWithACheckpoint) {
  const std::string spec = Spec(Corpus()), ckpt = JoinPath(dir_, "ckpt");
  testing::WorldOptions o;
  o.timeout = 180s;
  bool signalled = false;
  o.on_record = [&](int rank, const StepRecord& rec, const std::vector<pid_t>& pids) {
    if (signalled || rank != 0 || rec.step < 2) return;
    ::kill(pids[1], SIGUSR1);
    signalled = true;
  };
  auto runs = testing::RunWorld(TRELLIS_TRAIN_BIN, 2,
                                {spec, "--json", "--steps", "100000", "--checkpoint-dir", ckpt},
                                dir_, o);
  std::string why;
  ASSERT_TRUE(signalled);
  ASSERT_TRUE(AllExitedZero(runs, &why)) << why;
  const int64_t stopped = runs[0].records.back().step;
  EXPECT_EQ(runs[1].records.back().step, stopped) << "the ranks stopped at different steps";
  EXPECT_LT(stopped, 10) << "ran to the end: the signal did not stop it";
  EXPECT_NE(runs[1].err.find("stopped at step " + std::to_string(stopped)), std::string::npos)
      << runs[1].err;
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08ld/manifest.json", static_cast<long>(stopped));
  EXPECT_TRUE(std::ifstream(JoinPath(ckpt, name)).good()) << "no checkpoint at step " << stopped;
  auto resumed =
      RunWorld(2, {spec, "--json", "--checkpoint-dir", ckpt, "--resume", "latest"}, dir_, 180s);
  ASSERT_TRUE(AllExitedZero(resumed, &why)) << why;
  ASSERT_FALSE(resumed[0].records.empty());
  EXPECT_EQ(resumed[0].records.front().step, stopped + 1);
}

// checkpoint.async on two ranks: each writes its shard behind the steps and
// the step completes (rank 0's manifest) only once both are on disk; the
// training is that of a run without checkpoints, and a resume from such a
// checkpoint follows it. One rank's failed write fails both, each naming it.
TEST_F(MultiRankTest, CheckpointsBehindTheStepsCompleteOnEveryRankAndResume) {
  const std::string plain = Spec(Corpus());
  std::string text;
  {
    std::ifstream in(plain);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text.replace(text.find("every_steps = 5"), 15, "every_steps = 2\nasync = true");
  const std::string spec = JoinPath(dir_, "async.toml"), ckpt = JoinPath(dir_, "ckpt");
  std::ofstream(spec) << text;
  std::string why;

  auto straight = RunWorld(2, {plain, "--json", "--steps", "7"}, dir_, 180s);
  ASSERT_TRUE(AllExitedZero(straight, &why)) << why;
  auto behind =
      RunWorld(2, {spec, "--json", "--steps", "7", "--checkpoint-dir", ckpt}, dir_, 180s);
  ASSERT_TRUE(AllExitedZero(behind, &why)) << why;
  ASSERT_EQ(behind[0].records.size(), 7u);
  for (size_t i = 0; i < 7; ++i)
    EXPECT_EQ(behind[0].records[i].loss, straight[0].records[i].loss) << "step " << i + 1;
  // Step 6's save, begun behind the steps, completed at step 7's boundary,
  // or (on a loaded machine) was still being written when the run ended and
  // gave way to step 7's, written in place; the ranks agree on which.
  const std::string abandoned =
      "checkpoint step 6 written behind the steps: abandoned for step 7's, written in place now";
  const bool six_abandoned = behind[0].err.find(abandoned) != std::string::npos;
  for (const auto& run : behind)
    EXPECT_NE(run.err.find(six_abandoned ? abandoned
                                         : "checkpoint step 6 written behind the steps in "),
              std::string::npos)
        << run.err;
  const int resume_at = six_abandoned ? 4 : 6;  // keep = 2: that one and step 7
  for (int step : {resume_at, 7}) {
    char name[48];
    std::snprintf(name, sizeof(name), "step-%08d/manifest.json", step);
    std::ifstream manifest(JoinPath(ckpt, name));
    const std::string m{std::istreambuf_iterator<char>(manifest), {}};
    EXPECT_NE(m.find("shard-00001-of-00002.bin"), std::string::npos) << name << ": " << m;
  }
  auto resumed = RunWorld(2, {spec, "--json", "--steps", "7", "--checkpoint-dir", ckpt,
                              "--resume", std::to_string(resume_at)},
                          dir_, 180s);
  ASSERT_TRUE(AllExitedZero(resumed, &why)) << why;
  ASSERT_EQ(resumed[0].records.size(), static_cast<size_t>(7 - resume_at));
  EXPECT_NEAR(resumed[0].records.back().loss, straight[0].records[6].loss,
              1e-6 * straight[0].records[6].loss);

  // Rank 1 cannot create its step-2 shard: both ranks stop with an error.
  const std::string failing = JoinPath(dir_, "failing");
  ASSERT_EQ(std::system(("mkdir -p " + failing + "/step-00000002/shard-00001-of-00002.bin.tmp")
                            .c_str()),
            0);
  auto failed =
      RunWorld(2, {spec, "--json", "--steps", "7", "--checkpoint-dir", failing}, dir_, 180s);
  for (const auto& run : failed) {
    EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 1) << run.err;
    EXPECT_NE(run.err.find("checkpoint step 2 written behind the steps failed on 1 of 2 ranks"),
              std::string::npos)
        << run.err;
  }
  EXPECT_NE(failed[1].err.find("shard-00001-of-00002.bin.tmp: cannot create"), std::string::npos)
      << failed[1].err;
  EXPECT_NE(failed[0].err.find("(this rank's shard was written)"), std::string::npos)
      << failed[0].err;
  EXPECT_FALSE(std::ifstream(failing + "/step-00000002/manifest.json").good());

  // Both ranks run on this host: each counts the other's copy too, and no
  // host leaves 64 TiB after them, so both write in place, saying so.
  const std::string greedy = JoinPath(dir_, "greedy.toml");
  std::ofstream(greedy) << text << "async_keep_free_gib = 65536\n";
  auto in_place = RunWorld(2, {greedy, "--json", "--steps", "2", "--checkpoint-dir",
                               JoinPath(dir_, "in-place")},
                           dir_, 180s);
  ASSERT_TRUE(AllExitedZero(in_place, &why)) << why;
  for (const auto& run : in_place) {
    EXPECT_NE(run.err.find(" available of "), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("; 2 ranks x "), std::string::npos) << run.err;
    EXPECT_NE(run.err.find("every rank writes its checkpoints in place"), std::string::npos)
        << run.err;
  }
}

// Gradient accumulation on two ranks (one node of 2, EP 2: tokens cross
// ranks by all-to-all, gradients reach their owners per micro-batch): each
// rank's 4 rows in micro-batches of 1 and of 2 follow the unsplit forward
// over 6 steps, losses within 1e-5 relative and the parameters in the final
// checkpoints within 1e-5 (fp32 throughout, no balance loss).
TEST_F(MultiRankTest, MicroBatchesOnTwoRanksFollowTheUnsplitBatch) {
  const std::string corpus = Corpus();
  struct Run {
    std::vector<testing::RankRun> ranks;
    std::vector<std::vector<float>> params;  // per rank: its param.* entries, in order
  };
  auto train = [&](int micro) {
    const std::string ckpt = JoinPath(dir_, "ckpt" + std::to_string(micro));
    const std::string spec =
        Spec(corpus, 32, "float32",
             "aux_loss_coef = 0\nmicro_batch = " + std::to_string(micro) + "\n");
    Run run{RunWorld(2, {spec, "--json", "--steps", "6", "--checkpoint-dir", ckpt}, dir_, 180s),
            {}};
    std::string why;
    EXPECT_TRUE(AllExitedZero(run.ranks, &why)) << why;
    for (int r = 0; r < 2 && why.empty(); ++r) {
      ShardReader shard(JoinPath(ckpt, "step-00000006/shard-0000" + std::to_string(r) +
                                           "-of-00002.bin"));
      run.params.emplace_back();
      for (const ShardEntry& e : shard.entries()) {
        if (e.name.rfind("param.", 0) != 0) continue;
        const std::string bytes = shard.ReadBytes(e);
        const size_t at = run.params.back().size();
        run.params.back().resize(at + bytes.size() / sizeof(float));
        std::memcpy(run.params.back().data() + at, bytes.data(), bytes.size());
      }
    }
    return run;
  };
  const Run whole = train(0);
  ASSERT_EQ(whole.params.size(), 2u);
  ASSERT_EQ(whole.ranks[0].records.size(), 6u);
  for (int micro : {1, 2}) {
    const Run split = train(micro);
    ASSERT_EQ(split.params.size(), 2u);
    ASSERT_EQ(split.ranks[0].records.size(), 6u);
    double loss = 0, param = 0;
    for (size_t i = 0; i < 6; ++i) {
      const double want = whole.ranks[0].records[i].loss;
      for (const auto& rank : split.ranks)
        loss = std::max(loss, std::abs(rank.records[i].loss - want) / want);
    }
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(split.params[r].size(), whole.params[r].size());
      for (size_t i = 0; i < whole.params[r].size(); ++i)
        param = std::max(param, static_cast<double>(std::abs(split.params[r][i] -
                                                             whole.params[r][i])));
    }
    std::printf("world 2, micro_batch %d vs 4 rows per rank: max loss rel diff %.3g, param %.3g\n",
                micro, loss, param);
    EXPECT_LE(loss, 1e-5);
    EXPECT_LE(param, 1e-5);
  }
}

// Overlap moves collectives in time, not what they carry: world 2 (EP 2)
// trains to the same losses bit for bit with parallel.prefetch_layers 0, 1
// and 2, and every step record of both ranks carries the step's collective
// time and the part of it the rank stood waiting: 0 <= exposed <= total.
TEST_F(MultiRankTest, PrefetchDepthsGiveTheSameLossesAndRecordCommTime) {
  const std::string corpus = Corpus();
  std::vector<std::vector<RankRun>> runs;
  for (int prefetch : {0, 1, 2}) {
    const std::string spec =
        Spec(corpus, 32, "float32", "", "prefetch_layers = " + std::to_string(prefetch) + "\n");
    runs.push_back(RunWorld(2, {spec, "--json", "--steps", "4"}, dir_, 180s));
    std::string why;
    ASSERT_TRUE(AllExitedZero(runs.back(), &why)) << why;
    double comm = 0, exposed = 0;
    for (const RankRun& rank : runs.back()) {
      ASSERT_EQ(rank.records.size(), 4u);
      for (const StepRecord& r : rank.records) {
        ASSERT_TRUE(r.comm_seconds && r.exposed_comm_seconds) << "step " << r.step;
        EXPECT_GT(*r.comm_seconds, 0) << "step " << r.step;
        EXPECT_GE(*r.exposed_comm_seconds, 0) << "step " << r.step;
        EXPECT_LE(*r.exposed_comm_seconds, *r.comm_seconds) << "step " << r.step;
        comm += *r.comm_seconds;
        exposed += *r.exposed_comm_seconds;
      }
    }
    std::printf("world 2, prefetch_layers %d: collectives %.4fs per rank-step, exposed %.0f%%\n",
                prefetch, comm / 8, 100 * exposed / comm);
  }
  for (size_t p = 1; p < runs.size(); ++p)
    for (int r = 0; r < 2; ++r)
      for (size_t i = 0; i < 4; ++i)
        EXPECT_EQ(runs[p][r].records[i].loss, runs[0][r].records[i].loss)
            << "prefetch " << p << " rank " << r << " step " << i + 1;
}

// Group-limited routing in trellis-train at world 2 (EP 2, one group per
// rank): both ranks report the same losses, which differ from plain top-k's
// from the first step (the routing is in use). Groups that straddle the EP
// ranks are refused on every rank, naming the field and what is accepted.
TEST_F(MultiRankTest, GroupLimitedRoutingTrainsAndAStraddlingGroupIsRefused) {
  const std::string corpus = Corpus();
  std::string why;
  auto plain = RunWorld(2, {Spec(corpus), "--json", "--steps", "3"}, dir_, 180s);
  ASSERT_TRUE(AllExitedZero(plain, &why)) << why;
  const std::string grouped_spec = Spec(corpus, 32, "float32", "", "",
                                        "experts = 4\nexperts_per_token = 2\nexpert_groups = 2\n");
  auto grouped = RunWorld(2, {grouped_spec, "--json", "--steps", "3"}, dir_, 180s);
  ASSERT_TRUE(AllExitedZero(grouped, &why)) << why;
  ASSERT_EQ(grouped[0].records.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(grouped[1].records[i].loss, grouped[0].records[i].loss);
    EXPECT_TRUE(std::isfinite(grouped[0].records[i].loss));
  }
  EXPECT_NE(grouped[0].records[0].loss, plain[0].records[0].loss);
  // The records' routing figures are the step's, the same on both ranks; with
  // one group per EP rank every rank gets exactly its share: the EP figure is
  // 1 at every step (plain top-k only by chance).
  for (size_t i = 0; i < 3; ++i) {
    for (const auto* run : {&plain, &grouped}) {
      const StepRecord& r0 = (*run)[0].records[i];
      ASSERT_TRUE(r0.ep_load_max_over_mean && r0.expert_load_max_over_mean);
      EXPECT_EQ(r0.ep_load_max_over_mean, (*run)[1].records[i].ep_load_max_over_mean);
      EXPECT_EQ(r0.expert_load_max_over_mean, (*run)[1].records[i].expert_load_max_over_mean);
      EXPECT_GE(*r0.expert_load_max_over_mean, *r0.ep_load_max_over_mean);
    }
    EXPECT_EQ(grouped[0].records[i].ep_load_max_over_mean, 1.0);
    EXPECT_GE(*plain[0].records[i].ep_load_max_over_mean, 1.0);
  }

  const std::string straddling = Spec(corpus, 32, "float32", "", "",
                                      "experts = 6\nexperts_per_token = 3\nexpert_groups = 3\n");
  auto bad = RunWorld(2, {straddling, "--json"}, dir_, 120s);
  for (const auto& run : bad) {
    EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 1) << run.status;
    EXPECT_NE(run.err.find("model.expert_groups: 3 is not a multiple of the expert-parallel size 2 "
                           "(parallel.ep)"),
              std::string::npos)
        << run.err;
  }
}

}  // namespace
}  // namespace trellis::train
