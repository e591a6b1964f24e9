#include "worker/rpc/call_retry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "common/eventually_test_util.h"

namespace trellis::worker {
namespace {

using namespace std::chrono_literals;

// No jitter: the delays are exactly the policy's.
constexpr BackoffPolicy kPolicy{100ms, 1000ms, 2.0, 0.0};

// The controller's answers, one per try, and when each try came.
class CallsOnAFakeClock {
 public:
  explicit CallsOnAFakeClock(std::vector<grpc::StatusCode> answers)
      : answers_(std::move(answers)) {}

  std::future<grpc::Status> Start(RetryLimits limits) {
    return std::async(std::launch::async, [this, limits] {
      return CallWithRetries(
          "Test", clock_, kPolicy, limits, [](Seconds) {},
          [this](Seconds budget) {
            std::lock_guard<std::mutex> l(mu_);
            tries_.push_back(clock_.SteadyNow() - start_);
            budgets_.push_back(budget);
            grpc::StatusCode code = answers_[std::min(tries_.size(), answers_.size()) - 1];
            return grpc::Status(code, "answer " + std::to_string(tries_.size()));
          },
          [] { return 0.5; });
    });
  }
  size_t tries() {
    std::lock_guard<std::mutex> l(mu_);
    return tries_.size();
  }
  std::vector<SteadyTime::duration> try_times() {
    std::lock_guard<std::mutex> l(mu_);
    return tries_;
  }
  std::vector<Seconds> budgets() {
    std::lock_guard<std::mutex> l(mu_);
    return budgets_;
  }

  FakeClock clock_;

 private:
  const SteadyTime start_ = clock_.SteadyNow();
  std::vector<grpc::StatusCode> answers_;
  std::mutex mu_;
  std::vector<SteadyTime::duration> tries_;
  std::vector<Seconds> budgets_;
};

TEST(CallWithRetriesTest, RetriesFollowTheBackoffOnTheClock) {
  CallsOnAFakeClock calls({grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::UNAVAILABLE,
                           grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::OK});
  auto result = calls.Start({60s, 10s, false});
  // 100, 200, 400 ms between the tries: each comes only once the clock passed it.
  for (auto delay : {100ms, 200ms, 400ms}) {
    // Sleeping: no try comes until the clock moves.
    ASSERT_TRUE(Eventually([&] { return calls.clock_.PendingTimers() == 1; }));
    const size_t before = calls.tries();
    calls.clock_.Advance(delay - 1ms);
    EXPECT_EQ(calls.clock_.PendingTimers(), 1) << "backoff over too early at " << delay.count();
    EXPECT_EQ(calls.tries(), before);
    calls.clock_.Advance(1ms);
    ASSERT_TRUE(Eventually([&] { return calls.tries() == before + 1; }));
  }
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(result.get().ok());
  EXPECT_EQ(calls.try_times(),
            (std::vector<SteadyTime::duration>{0ms, 100ms, 300ms, 700ms}));
}

TEST(CallWithRetriesTest, GivesUpWhenTheNextTryWouldFallAfterTheWindow) {
  CallsOnAFakeClock calls({grpc::StatusCode::UNAVAILABLE});
  // Tries at 0, 100, 300 ms; the next would come at 700 ms, past the window.
  auto result = calls.Start({Seconds(0.5), 10s, false});
  for (auto delay : {100ms, 200ms}) {
    ASSERT_TRUE(Eventually([&] { return calls.clock_.PendingTimers() == 1; }));
    calls.clock_.Advance(delay);
  }
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  grpc::Status st = result.get();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(st.error_message(), "controller unreachable for 0 s: answer 3");
  EXPECT_EQ(calls.tries(), 3u);
}

TEST(CallWithRetriesTest, AnAnswerOtherThanUnavailableIsNotRetried) {
  CallsOnAFakeClock calls({grpc::StatusCode::FAILED_PRECONDITION});
  auto result = calls.Start({60s, 10s, false});
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(result.get().error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(calls.tries(), 1u);
  EXPECT_EQ(calls.clock_.PendingTimers(), 0);
}

TEST(CallWithRetriesTest, ATryGetsWhatIsLeftOfTheWindowUnlessItsBudgetIsFixed) {
  CallsOnAFakeClock shrinking({grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::OK});
  auto result = shrinking.Start({Seconds(8), Seconds(30), false});
  ASSERT_TRUE(Eventually([&] { return shrinking.clock_.PendingTimers() == 1; }));
  shrinking.clock_.Advance(100ms);
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  // 8 s, then 7.9 s left: still above the last try's 5 s.
  ASSERT_EQ(shrinking.budgets().size(), 2u);
  EXPECT_DOUBLE_EQ(shrinking.budgets()[0].count(), 8.0);
  EXPECT_NEAR(shrinking.budgets()[1].count(), 7.9, 1e-9);

  CallsOnAFakeClock fixed({grpc::StatusCode::OK});
  auto gate = fixed.Start({Seconds(8), Seconds(30), true});
  ASSERT_EQ(gate.wait_for(10s), std::future_status::ready);
  EXPECT_DOUBLE_EQ(fixed.budgets()[0].count(), 30.0);
}

}  // namespace
}  // namespace trellis::worker
