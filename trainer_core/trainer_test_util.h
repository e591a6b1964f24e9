#pragma once
// What trainer_test's files share: a fixture with a temporary directory, a
// byte corpus, one LibTorch thread and a heap that keeps freed tensors, the
// small fp32 spec most of them train, running the binary at world 1
// (RunTrain), and spec parsing.

#include <gtest/gtest.h>
#include <malloc.h>
#include <signal.h>
#include <toml++/toml.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/spec/trainer_spec.h"
#include "trainer_core/data/corpus.h"
#include "trainer_core/file_test_util.h"
#include "trainer_core/files.h"
#include "trainer_core/parallel/rank_runs.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {

class TrainerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("trellis-trainer-test");
    // One thread for the trainers run in this process, as the binary's ranks
    // have (OMP_NUM_THREADS=1): ctest runs as many tests as there are cores,
    // and OpenMP workers spinning on a shared core slow both tests.
    torch::set_num_threads(1);
    // A freed step's tensors stay in the heap for the next step (below 32 MiB,
    // glibc's cap) instead of going back to the kernel to be faulted in again:
    // that churn was a third of TinyConfigLearnsRealText's time.
    ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
    ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
  void TearDown() override { RemoveTree(dir_); }

  std::string BuildCorpus(const std::vector<std::string>& inputs) {
    BuildStats stats;
    const std::string path = JoinPath(dir_, "corpus.bin");
    WriteCorpus(path, BuildByteCorpus(inputs, &stats));
    return path;
  }
  std::string WriteSpec(const std::string& toml) {
    const std::string path = JoinPath(dir_, "spec.toml");
    std::ofstream(path) << toml;
    return path;
  }
  std::string dir_;
};

// A small model in fp32 whose steps take long enough (~0.1 s here) that a
// SIGKILL sent on reading step 6's record lands well before step 10.
inline std::string ResumeSpec(const std::string& data, int hidden = 64) {
  return "[model]\nlayers = 2\nhidden = " + std::to_string(hidden) +
         "\nheads = 4\nkv_heads = 2\nexperts = 4\n"
         "experts_per_token = 2\nexpert_hidden = 128\nshared_expert = true\n"
         "[training]\nseq_len = 64\nglobal_batch = 8\nsteps = 10\nwarmup_steps = 3\n"
         "router_bias_rate = 0.001\ndtype = \"float32\"\ndata = \"" +
         data +
         "\"\n"
         "[checkpoint]\nevery_steps = 5\n";
}

using ChildResult = testing::RankRun;

// Runs trellis-train (world 1) with `args`, decoding its --json records as they
// come. With kill_after_step > 0, sends SIGKILL as soon as that step's record
// is read (records already in the pipe are kept).
inline ChildResult RunTrain(const std::vector<std::string>& args, const std::string& dir,
                            int64_t kill_after_step = -1) {
  testing::WorldOptions o;
  o.on_record = [kill_after_step](int, const StepRecord& rec, const std::vector<pid_t>& pids) {
    if (rec.step == kill_after_step) ::kill(pids[0], SIGKILL);
  };
  return testing::RunWorld(TRELLIS_TRAIN_BIN, 1, args, dir, o)[0];
}

inline spec::TrainerSpec ParseSpec(const std::string& toml) {
  spec::FieldErrors errors;
  auto s = spec::ParseTrainerSections(toml::parse(toml), &errors);
  EXPECT_TRUE(errors.empty()) << spec::JoinErrors(errors);
  return s;
}

}  // namespace trellis::train
