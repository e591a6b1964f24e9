#include "common/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <vector>

#include "common/eventually_test_util.h"

namespace trellis {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(FakeClockTest, AdvanceFiresDueTimersInOrderAtTheirTimes) {
  FakeClock clock;
  SteadyTime start = clock.SteadyNow();
  std::vector<std::pair<int, SteadyTime>> fired;
  clock.ScheduleAfter(seconds(30), [&] { fired.push_back({30, clock.SteadyNow()}); });
  clock.ScheduleAfter(seconds(10), [&] { fired.push_back({10, clock.SteadyNow()}); });
  clock.ScheduleAfter(seconds(90), [&] { fired.push_back({90, clock.SteadyNow()}); });
  clock.Advance(seconds(5));
  EXPECT_TRUE(fired.empty());
  clock.Advance(seconds(40));
  ASSERT_EQ(fired.size(), 2u);
  EXPECT_EQ(fired[0].first, 10);
  EXPECT_EQ(fired[0].second, start + seconds(10));
  EXPECT_EQ(fired[1].first, 30);
  EXPECT_EQ(clock.SteadyNow(), start + seconds(45));
  EXPECT_EQ(clock.PendingTimers(), 1);
}

TEST(FakeClockTest, ATimerScheduledByATimerFiresInTheSameAdvanceWhenDue) {
  FakeClock clock;
  int fired = 0;
  std::function<void()> again = [&] {
    if (++fired < 3) clock.ScheduleAfter(seconds(1), again);
  };
  clock.ScheduleAfter(seconds(1), again);
  clock.Advance(seconds(10));
  EXPECT_EQ(fired, 3);
}

TEST(FakeClockTest, CancelledTimersNeverFire) {
  FakeClock clock;
  bool fired = false;
  TimerId id = clock.ScheduleAfter(seconds(1), [&] { fired = true; });
  clock.Cancel(id);
  clock.Advance(seconds(2));
  EXPECT_FALSE(fired);
  clock.Cancel(id);  // unknown ids are ignored
}

TEST(FakeClockTest, WallTimeMovesWithSteadyTime) {
  FakeClock clock;
  WallTime w = clock.Now();
  clock.Advance(milliseconds(1500));
  EXPECT_EQ(clock.Now() - w, milliseconds(1500));
}

TEST(WaitForTest, EndsWhenTheFakeClockPassesTheWait) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  auto waited = std::async(std::launch::async, [&] {
    std::unique_lock<std::mutex> lock(mu);
    return WaitFor(clock, lock, cv, seconds(30), [] { return false; });
  });
  ASSERT_TRUE(Eventually([&] { return clock.PendingTimers() == 1; }));
  clock.Advance(seconds(29));
  EXPECT_EQ(waited.wait_for(milliseconds(0)), std::future_status::timeout);
  clock.Advance(seconds(1));
  ASSERT_EQ(waited.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_FALSE(waited.get());
}

TEST(WaitForTest, EndsWhenTheConditionHoldsAndDropsItsTimer) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool ready = false;
  auto waited = std::async(std::launch::async, [&] {
    std::unique_lock<std::mutex> lock(mu);
    return WaitFor(clock, lock, cv, seconds(30), [&] { return ready; });
  });
  ASSERT_TRUE(Eventually([&] { return clock.PendingTimers() == 1; }));
  {
    std::lock_guard<std::mutex> l(mu);
    ready = true;
    cv.notify_all();
  }
  ASSERT_EQ(waited.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_TRUE(waited.get());
  EXPECT_EQ(clock.PendingTimers(), 0);
}

TEST(WaitForTest, ANonPositiveWaitDoesNotBlockOnAFakeClock) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  EXPECT_FALSE(WaitFor(clock, lock, cv, seconds(0), [] { return false; }));
  EXPECT_TRUE(lock.owns_lock());
  EXPECT_EQ(clock.PendingTimers(), 0);
}

TEST(WaitForTest, SleepForReturnsOnlyOnceTheFakeClockPassedIt) {
  FakeClock clock;
  auto slept = std::async(std::launch::async, [&] { SleepFor(clock, seconds(5)); });
  ASSERT_TRUE(Eventually([&] { return clock.PendingTimers() == 1; }));
  clock.Advance(seconds(4));
  EXPECT_EQ(slept.wait_for(milliseconds(0)), std::future_status::timeout);
  clock.Advance(seconds(1));
  EXPECT_EQ(slept.wait_for(seconds(10)), std::future_status::ready);
}

TEST(SystemClockTest, WaitForTimesOutInRealTime) {
  SystemClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  SteadyTime start = clock.SteadyNow();
  EXPECT_FALSE(WaitFor(clock, lock, cv, milliseconds(20), [] { return false; }));
  EXPECT_GE(clock.SteadyNow() - start, milliseconds(20));
}

TEST(SystemClockTest, FiresOnItsOwnThreadAfterTheDelay) {
  SystemClock clock;
  std::promise<std::thread::id> fired;
  SteadyTime start = clock.SteadyNow();
  clock.ScheduleAfter(milliseconds(20), [&] { fired.set_value(std::this_thread::get_id()); });
  auto f = fired.get_future();
  ASSERT_EQ(f.wait_for(seconds(5)), std::future_status::ready);
  EXPECT_NE(f.get(), std::this_thread::get_id());
  EXPECT_GE(clock.SteadyNow() - start, milliseconds(20));
}

TEST(SystemClockTest, ALaterTimerScheduledFirstDoesNotDelayAnEarlierOne) {
  SystemClock clock;
  std::promise<void> early;
  clock.ScheduleAfter(seconds(60), [] {});
  clock.ScheduleAfter(milliseconds(10), [&] { early.set_value(); });
  EXPECT_EQ(early.get_future().wait_for(seconds(5)), std::future_status::ready);
}

TEST(SystemClockTest, CancelWaitsForARunningCallback) {
  SystemClock clock;
  std::promise<void> entered;
  std::atomic<bool> finished{false};
  TimerId id = clock.ScheduleAfter(milliseconds(1), [&] {
    entered.set_value();
    std::this_thread::sleep_for(milliseconds(50));
    finished = true;
  });
  entered.get_future().wait();
  clock.Cancel(id);
  EXPECT_TRUE(finished);
}

}  // namespace
}  // namespace trellis
