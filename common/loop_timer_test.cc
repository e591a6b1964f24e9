#include "common/loop_timer.h"

#include <gtest/gtest.h>

#include <deque>

namespace trellis {
namespace {

using std::chrono::seconds;

// The owner's loop: what the timer posts, run when the test says.
class LoopTimerTest : public ::testing::Test {
 protected:
  LoopTimer::Post Post() {
    return [this](std::function<void()> fn) { posted_.push_back(std::move(fn)); };
  }
  void RunLoop() {
    while (!posted_.empty()) {
      auto fn = std::move(posted_.front());
      posted_.pop_front();
      fn();
    }
  }

  FakeClock clock_;
  std::deque<std::function<void()>> posted_;
};

TEST_F(LoopTimerTest, RunsOnTheLoopOnceTheClockPassedItsTime) {
  LoopTimer timer(clock_, Post());
  int fired = 0;
  timer.Arm(seconds(10), [&] { ++fired; });
  clock_.Advance(seconds(9));
  RunLoop();
  EXPECT_EQ(fired, 0);
  EXPECT_TRUE(timer.armed());
  clock_.Advance(seconds(1));
  EXPECT_EQ(fired, 0);  // posted, not run inline on the clock's thread
  RunLoop();
  EXPECT_EQ(fired, 1);
  EXPECT_FALSE(timer.armed());
}

TEST_F(LoopTimerTest, ACallPostedBeforeCancelDoesNotRun) {
  LoopTimer timer(clock_, Post());
  bool fired = false;
  timer.Arm(seconds(1), [&] { fired = true; });
  clock_.Advance(seconds(1));
  ASSERT_EQ(posted_.size(), 1u);
  timer.Cancel();
  RunLoop();
  EXPECT_FALSE(fired);
}

TEST_F(LoopTimerTest, ArmingAgainReplacesTheEarlierTimer) {
  LoopTimer timer(clock_, Post());
  std::vector<int> fired;
  timer.Arm(seconds(1), [&] { fired.push_back(1); });
  clock_.Advance(seconds(1));  // the first is posted already
  timer.Arm(seconds(5), [&] { fired.push_back(2); });
  clock_.Advance(seconds(4));
  RunLoop();
  EXPECT_TRUE(fired.empty());
  clock_.Advance(seconds(1));
  RunLoop();
  EXPECT_EQ(fired, std::vector<int>{2});
}

TEST_F(LoopTimerTest, ACallbackMayArmItsTimerAgain) {
  LoopTimer timer(clock_, Post());
  int beats = 0;
  std::function<void()> beat = [&] {
    ++beats;
    timer.Arm(seconds(2), beat);
  };
  timer.Arm(seconds(2), beat);
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(seconds(2));
    RunLoop();
  }
  EXPECT_EQ(beats, 3);
  EXPECT_EQ(clock_.PendingTimers(), 1);
}

TEST_F(LoopTimerTest, ACallPostedBeforeTheTimerWasDestroyedDoesNothing) {
  bool fired = false;
  {
    LoopTimer timer(clock_, Post());
    timer.Arm(seconds(1), [&] { fired = true; });
    clock_.Advance(seconds(1));
  }
  RunLoop();
  EXPECT_FALSE(fired);
}

TEST_F(LoopTimerTest, DestroyingAnArmedTimerCancelsIt) {
  {
    LoopTimer timer(clock_, Post());
    timer.Arm(seconds(1), [] {});
  }
  EXPECT_EQ(clock_.PendingTimers(), 0);
}

}  // namespace
}  // namespace trellis
