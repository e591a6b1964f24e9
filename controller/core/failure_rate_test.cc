#include "controller/core/failure_rate.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

TEST(FailureRate, CountsTheLaunchesThatLostWorkOverAllNodeHours) {
  const FailureHistory h = FailureHistoryOf({
      {4, 10, FailureClass::kNodeLost},   // 40 node-hours, a failure
      {4, 2.5, FailureClass::kTimeLimit},  // checkpointed first: no failure
      {2, 1, FailureClass::kHang},
      {2, 3, FailureClass::kSucceeded},
      {8, 0.5, std::nullopt},  // a class this controller does not know: time only
      {8, 0.5, FailureClass::kUserError},
  });
  EXPECT_EQ(h.failures, 2);
  EXPECT_DOUBLE_EQ(h.node_hours, 40 + 10 + 2 + 6 + 4 + 4);
}

TEST(FailureRate, OnlyFailuresOfTheRanksNodesOrDevicesLoseWork) {
  for (FailureClass c : {FailureClass::kRankExit, FailureClass::kSignal,
                         FailureClass::kDeviceError, FailureClass::kNccl,
                         FailureClass::kNodeLost, FailureClass::kHang, FailureClass::kHostOom})
    EXPECT_TRUE(LosesUnsavedWork(c)) << FailureClassName(c);
  for (FailureClass c : {FailureClass::kSucceeded, FailureClass::kUserError, FailureClass::kGate,
                         FailureClass::kTimeLimit, FailureClass::kHandoff, FailureClass::kCancel})
    EXPECT_FALSE(LosesUnsavedWork(c)) << FailureClassName(c);
}

TEST(FailureRate, ANewControllerStartsFromThePrior) {
  const RunMtbf m = RunMtbfFor({}, 4, 5000);
  EXPECT_DOUBLE_EQ(m.seconds, 5000.0 * 3600 / 4);
  EXPECT_EQ(m.basis,
            "a node fails every 5000 h (0 failures in 0 node-hours seen, with a prior of 1 in "
            "5000); 4 nodes: every 1250 h");
}

TEST(FailureRate, ALongHistoryOutweighsThePrior) {
  // 99 failures in 100,000 node-hours: with the prior, 100 in 105,000.
  const RunMtbf m = RunMtbfFor({99, 100000}, 1, 5000);
  EXPECT_DOUBLE_EQ(m.seconds, 1050.0 * 3600);
  // A short clean history moves it little; one failure early halves it.
  EXPECT_NEAR(RunMtbfFor({0, 100}, 1, 5000).seconds / 3600, 5100, 1e-9);
  EXPECT_NEAR(RunMtbfFor({1, 100}, 1, 5000).seconds / 3600, 2550, 1e-9);
  EXPECT_EQ(RunMtbfFor({1, 0.25}, 2, 0.5).basis,
            "a node fails every 0.375 h (1 failure in 0.25 node-hours seen, with a prior of 1 in "
            "0.5); 2 nodes: every 0.188 h");
}

}  // namespace
}  // namespace trellis::controller
