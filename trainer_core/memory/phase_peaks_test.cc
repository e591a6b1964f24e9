// PeaksByPhase: a step's laps (forward and backward per micro-batch, then the
// optimizer) folded into the three phases' peaks.
#include "trainer_core/memory/phase_peaks.h"

#include <gtest/gtest.h>

namespace trellis::train {
namespace {

TEST(PhasePeaksTest, OneForwardPerStep) {
  const auto p = PeaksByPhase({30, 50, 20}, 1);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->forward, 30);
  EXPECT_EQ(p->backward, 50);
  EXPECT_EQ(p->optimizer, 20);
}

TEST(PhasePeaksTest, MicroBatchesTakeTheLargestOfEachPhase) {
  // fwd 10, bwd 40, fwd 25 (gradients of the first micro-batch held), bwd 45, optim 30.
  const auto p = PeaksByPhase({10, 40, 25, 45, 30}, 2);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->forward, 25);
  EXPECT_EQ(p->backward, 45);
  EXPECT_EQ(p->optimizer, 30);
}

TEST(PhasePeaksTest, NoneWithoutOneLapPerPhase) {
  EXPECT_FALSE(PeaksByPhase({}, 1));          // the CPU: no peaks read
  EXPECT_FALSE(PeaksByPhase({1, 2, 3}, 2));   // laps missing
  EXPECT_FALSE(PeaksByPhase({1, 2, 3, 4}, 1));
  EXPECT_FALSE(PeaksByPhase({1}, 0));
}

}  // namespace
}  // namespace trellis::train
