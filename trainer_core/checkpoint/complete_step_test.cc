// Completing a checkpoint step on several ranks (over gloo, between real
// processes): rank 0's failure to complete it reaches every rank at the
// step's last collective, at once, naming where to look.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "trainer_core/checkpoint/checkpoint.h"
#include "trainer_core/checkpoint/pruner.h"
#include "trainer_core/error.h"
#include "trainer_core/file_test_util.h"
#include "trainer_core/files.h"
#include "trainer_core/parallel/local_ranks_test_util.h"
#include "trainer_core/parallel/multiprocess.h"
#include "trainer_core/torch_api.h"

namespace trellis::train {
namespace {

using testing::FreePort;
using testing::RunRanks;
using namespace std::chrono_literals;

// Rank 0 cannot remove an old checkpoint (its pruner's removals fail): the
// save where that surfaces fails on both ranks within seconds, rank 1 naming
// rank 0's log. Thrown on rank 0 alone before the last collective, it left
// rank 1 failing there with "a peer exited" and no reason (or, where the
// exit is not seen, waiting for the collective timeout).
TEST(CompleteStepTest, RankZerosFailureReachesEveryRankAtOnce) {
  const int world = 2, port = FreePort();
  const std::string dir = MakeTempDir("trellis-complete-step-test");
  auto outcomes = RunRanks(world, 90s, [&](int rank) -> std::string {
    auto comm = testing::ConnectLocalRank(rank, world, port, 30s);
    std::atomic<bool> tried{false};
    CheckpointPruner pruner([&tried](const std::string& path) {
      tried = true;
      throw std::runtime_error("cannot remove " + path);
    });
    spec::TrainerSpec spec;
    spec.training.seq_len = 8;
    const NamedTensors state = {{"w", torch::full({4}, static_cast<float>(rank))}};
    const Sharding sharding{comm.get(), {}, {}};
    for (int64_t step = 1; step <= 20; ++step) {
      // Step 2 queues step 1's removal; it fails on rank 0's pruner thread.
      while (rank == 0 && step > 2 && !tried) std::this_thread::sleep_for(1ms);
      const auto start = std::chrono::steady_clock::now();
      try {
        SaveCheckpoint(dir, spec, {step, 8 * step, 1}, state, 1, sharding, &pruner);
      } catch (const TrainError& e) {
        const double took =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const std::string why = e.what();
        const std::string want = rank == 0 ? "cannot remove" : "rank 0 could not complete it";
        if (step < 3) return "failed at step " + std::to_string(step) + ": " + why;
        if (why.find(want) == std::string::npos) return "says: " + why;
        if (took > 10) return "failed after " + std::to_string(took) + " s: " + why;
        return "";
      }
    }
    return "no save failed";
  });
  EXPECT_EQ(testing::Failures(outcomes), "");
  RemoveTree(dir);
}

}  // namespace
}  // namespace trellis::train
