#include "trainer_core/checkpoint/pruner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>

#include "trainer_core/error.h"
#include "trainer_core/files.h"

namespace trellis::train {
namespace {

CheckpointDirEntry Step(int64_t step, bool complete) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return {name, step, complete};
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(ChoosePrunedTest, KeepsTheNewestCompleteStepsUpToTheOneJustCompleted) {
  const std::vector<CheckpointDirEntry> dir = {Step(10, true), Step(20, true), Step(30, true),
                                               Step(40, true), {"notes.txt", {}, false}};
  EXPECT_EQ(Sorted(ChoosePruned(dir, 40, 2)),
            (std::vector<std::string>{"step-00000010", "step-00000020"}));
  EXPECT_EQ(ChoosePruned(dir, 40, 4), std::vector<std::string>{});
  EXPECT_EQ(ChoosePruned(dir, 40, 9), std::vector<std::string>{});
}

TEST(ChoosePrunedTest, AbandonedStepsOlderThanTheCompletedOneGo) {
  // 25 was abandoned (no manifest) between kept steps; 5 before all of them.
  const std::vector<CheckpointDirEntry> dir = {Step(5, false), Step(20, true), Step(25, false),
                                               Step(30, true)};
  EXPECT_EQ(Sorted(ChoosePruned(dir, 30, 3)),
            (std::vector<std::string>{"step-00000005", "step-00000025"}));
}

TEST(ChoosePrunedTest, StepsNewerThanTheCompletedOneAreLeftAlone) {
  // A run resumed from step 20 of a directory that went to 50 before.
  const std::vector<CheckpointDirEntry> dir = {Step(10, true), Step(20, true), Step(30, true),
                                               Step(40, false), Step(50, true)};
  EXPECT_EQ(ChoosePruned(dir, 30, 1),
            (std::vector<std::string>{"step-00000010", "step-00000020"}));
}

TEST(ChoosePrunedTest, LeftoversOfAnEarlierPruneGo) {
  const std::vector<CheckpointDirEntry> dir = {
      {".pruned-step-00000010-4242-1", {}, false}, Step(20, true), {".hidden", {}, false}};
  EXPECT_EQ(ChoosePruned(dir, 20, 1), std::vector<std::string>{".pruned-step-00000010-4242-1"});
}

class CheckpointPrunerTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTempDir("trellis-pruner-test"); }
  void TearDown() override { RemoveTree(dir_); }

  // A step directory with a shard of `bytes` and, when complete, a manifest.
  void MakeStep(int64_t step, bool complete, size_t bytes = 1 << 16) {
    char name[32];
    std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
    MakeStepLike(name, complete, bytes);
  }
  void MakeStepLike(const std::string& name, bool complete, size_t bytes = 1 << 16) {
    const std::string d = JoinPath(dir_, name);
    MakeDirs(d);
    std::ofstream(JoinPath(d, "shard-00000-of-00001.bin")) << std::string(bytes, 'x');
    if (complete) std::ofstream(JoinPath(d, "manifest.json")) << "{}\n";
  }

  std::string dir_;
};

TEST_F(CheckpointPrunerTest, PrunedStepsLeaveTheNamespaceAtOnceAndTheDiskOnceRemoved) {
  for (int64_t s : {10, 20, 30}) MakeStep(s, true);
  MakeStep(25, false);  // an abandoned save
  std::atomic<bool> release{false};
  std::atomic<int> removed{0};
  {
    CheckpointPruner pruner([&](const std::string& path) {
      while (!release) std::this_thread::yield();  // held until the checks below
      RemoveTree(path);
      ++removed;
    });
    pruner.Prune(dir_, 30, 1);
    // Returned with the removals still held: only the kept step has a step name.
    std::vector<std::string> steps, pruned;
    for (const auto& name : ListDir(dir_))
      (name.rfind("step-", 0) == 0 ? steps : pruned).push_back(name);
    EXPECT_EQ(steps, std::vector<std::string>{"step-00000030"});
    EXPECT_EQ(pruned.size(), 3u);
    for (const auto& name : pruned) EXPECT_EQ(name.rfind(kPrunedPrefix, 0), 0u) << name;
    release = true;
    pruner.Wait();
    EXPECT_EQ(removed.load(), 3);
    EXPECT_EQ(ListDir(dir_), std::vector<std::string>{"step-00000030"});
    EXPECT_TRUE(PathExists(JoinPath(dir_, "step-00000030/manifest.json")));
  }
}

TEST_F(CheckpointPrunerTest, LeftoversOfADeadProcessAreRemovedByTheNextPrune) {
  MakeStepLike(".pruned-step-00000010-999999-1", false);
  MakeStep(20, true);
  MakeStep(30, true);
  CheckpointPruner pruner;
  pruner.Prune(dir_, 30, 2);
  pruner.Wait();
  EXPECT_EQ(ListDir(dir_), (std::vector<std::string>{"step-00000020", "step-00000030"}));
}

TEST_F(CheckpointPrunerTest, TheDestructorWaitsForTheQueuedRemovals) {
  for (int64_t s : {1, 2, 3, 4}) MakeStep(s, true, 1 << 20);
  {
    CheckpointPruner pruner;
    pruner.Prune(dir_, 4, 1);
  }
  EXPECT_EQ(ListDir(dir_), std::vector<std::string>{"step-00000004"});
}

TEST_F(CheckpointPrunerTest, AFailedRemovalIsReportedNamingThePathAndTriedAgain) {
  MakeStep(1, true);
  MakeStep(2, true);
  std::atomic<bool> fail{true};
  CheckpointPruner pruner([&](const std::string& path) {
    if (fail) throw TrainError(path + ": cannot remove: Device or resource busy");
    RemoveTree(path);
  });
  pruner.Prune(dir_, 2, 1);
  try {
    pruner.Wait();
    FAIL() << "the failed removal was not reported";
  } catch (const TrainError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("checkpoint prune: "), std::string::npos) << what;
    EXPECT_NE(what.find(".pruned-step-00000001"), std::string::npos) << what;
    EXPECT_NE(what.find("cannot remove"), std::string::npos) << what;
  }
  // Reported once; the next prune takes the leftover up again.
  fail = false;
  MakeStep(3, true);
  pruner.Prune(dir_, 3, 1);
  pruner.Wait();
  EXPECT_EQ(ListDir(dir_), std::vector<std::string>{"step-00000003"});
}

TEST_F(CheckpointPrunerTest, AnAbsentDirectoryPrunesNothing) {
  CheckpointPruner pruner;
  pruner.Prune(JoinPath(dir_, "absent"), 5, 1);
  pruner.Wait();
  EXPECT_TRUE(ListDir(dir_).empty());
}

}  // namespace
}  // namespace trellis::train
