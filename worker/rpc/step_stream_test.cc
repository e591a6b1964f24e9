#include "worker/rpc/step_stream.h"

#include <gtest/gtest.h>

#include <thread>

#include "common/eventually_test_util.h"
#include "worker/rpc/controller_link.h"
#include "worker/testing/fake_agent_service.h"

namespace trellis::worker {
namespace {

using namespace std::chrono_literals;
using testing::FakeAgentService;

v1::WorkerIdentity Id() { return testing::TestIdentity(); }

StepRecord Step(int64_t step) {
  StepRecord r;
  r.step = step;
  r.grad_norm = 0.5;
  return r;
}

StepStream::Options Small(size_t max_held, size_t batch) {
  StepStream::Options o;
  o.max_held = max_held;
  o.max_batch_records = batch;
  o.batch_interval = 20ms;
  o.backoff = BackoffPolicy{20ms, 200ms, 2.0, 0.0};
  return o;
}

class StepStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = testing::Serve(&service_, &port_);
    link_ = std::make_shared<ControllerLink>(
        ControllerChannel("127.0.0.1:" + std::to_string(port_)));
  }
  void TearDown() override { server_->Shutdown(); }
  // The stored steps' numbers, in order.
  std::vector<int64_t> StoredSteps() {
    std::lock_guard<std::mutex> l(service_.mu);
    std::vector<int64_t> out;
    for (const auto& s : service_.steps) out.push_back(s.record().step());
    return out;
  }

  // Real time: these streams talk to a real server through gRPC's threads.
  SystemClock clock_;
  FakeAgentService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<ControllerLink> link_;
};

std::vector<int64_t> Range(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

TEST_F(StepStreamTest, RecordsGoInNumberedBatchesAndAreStoredInOrder) {
  StepStream stream(link_, Id(), Small(1000, 8), clock_);
  stream.Start();
  for (int i = 0; i < 30; ++i) stream.SendStep(i % 4, Step(i));
  stream.Close(10s);
  StepStream::Stats st = stream.stats();
  EXPECT_EQ(st.stored, 30u);
  EXPECT_EQ(st.undelivered, 0u);
  EXPECT_EQ(StoredSteps(), Range(0, 30));
  std::lock_guard<std::mutex> l(service_.mu);
  uint64_t seq = 0;
  for (const auto& r : service_.reports) {
    ASSERT_TRUE(r.has_batch());
    EXPECT_EQ(r.batch().seq(), ++seq);
    EXPECT_LE(r.batch().steps_size(), 8);
    EXPECT_EQ(r.id().secret(), "s");
    EXPECT_TRUE(r.batch().steps(0).record().has_grad_norm());
    EXPECT_FALSE(r.batch().steps(0).record().has_fwd_seconds());
  }
}

TEST_F(StepStreamTest, HoldingTooManyDropsTheOldestBatchesAndKeepsExits) {
  StepStream stream(link_, Id(), Small(16, 4), clock_);
  stream.SendRankExit({0, 3, 0});
  for (int i = 0; i < 30; ++i) stream.SendStep(1, Step(i));
  stream.Start();
  stream.Close(10s);
  StepStream::Stats st = stream.stats();
  EXPECT_EQ(st.dropped + st.stored, 30u);
  EXPECT_EQ(st.dropped % 4, 0u);  // whole batches
  EXPECT_LE(st.stored, 16u);
  // The newest records were kept.
  EXPECT_EQ(StoredSteps(), Range(30 - static_cast<int64_t>(st.stored), 30));
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_FALSE(service_.reports.empty());
  EXPECT_TRUE(service_.reports[0].has_rank_exit());
  EXPECT_EQ(service_.reports[0].rank_exit().exit_code(), 3);
}

// The stream breaks after a batch was stored and before its answer: the
// worker sends every unanswered batch again on a new stream; the controller
// knows the stored one, and every record is stored exactly once.
TEST_F(StepStreamTest, UnansweredBatchesAreSentAgainAndStoredOnce) {
  service_.lose_ack_of_seq = 2;
  StepStream stream(link_, Id(), Small(1000, 5), clock_);
  stream.Start();
  for (int i = 0; i < 40; ++i) stream.SendStep(0, Step(i));
  stream.Close(10s);
  StepStream::Stats st = stream.stats();
  EXPECT_GE(st.reconnects, 1u);
  EXPECT_EQ(st.duplicate, 5u);
  EXPECT_EQ(st.stored, 35u);
  EXPECT_EQ(st.undelivered, 0u);
  EXPECT_EQ(StoredSteps(), Range(0, 40));
}

TEST_F(StepStreamTest, ARefusedBatchIsCountedAndNotSentAgain) {
  service_.refuse_seq = 1;
  StepStream stream(link_, Id(), Small(1000, 3), clock_);
  stream.Start();
  for (int i = 0; i < 6; ++i) stream.SendStep(0, Step(i));
  stream.Close(10s);
  EXPECT_EQ(stream.stats().refused, 3u);
  EXPECT_EQ(stream.stats().stored, 3u);
  EXPECT_EQ(StoredSteps(), Range(3, 6));
}

// On a FakeClock: what the stream waits for comes only when the clock moves.
TEST_F(StepStreamTest, AnOpenBatchIsSealedOnceTheClockPassesTheBatchInterval) {
  FakeClock clock;
  StepStream::Options options = Small(1000, 8);
  options.batch_interval = 200ms;
  StepStream stream(link_, Id(), options, clock);
  stream.Start();
  stream.SendStep(0, Step(1));
  // The stream waits for the interval (its only timer); time has not moved,
  // so the batch cannot have been sealed.
  ASSERT_TRUE(Eventually([&] { return clock.PendingTimers() == 1; }));
  clock.Advance(199ms);
  EXPECT_EQ(clock.PendingTimers(), 1);
  EXPECT_EQ(stream.stats().batches_sent, 0u);
  clock.Advance(1ms);
  ASSERT_TRUE(Eventually([&] { return service_.step_count() == 1; }));
  stream.Close(10s);  // ends on the controller's answer, not on the clock
  EXPECT_EQ(stream.stats().stored, 1u);
  EXPECT_EQ(stream.stats().batches_sent, 1u);
}

TEST_F(StepStreamTest, ABrokenStreamIsReopenedAfterTheBackoffOnTheClock) {
  FakeClock clock;
  service_.lose_ack_of_seq = 1;
  StepStream stream(link_, Id(), Small(1000, 1), clock);
  stream.Start();
  stream.SendStep(0, Step(1));  // a batch of its own, sealed at once
  // The stream broke before the answer; the backoff (20 ms, no jitter) waits.
  ASSERT_TRUE(Eventually([&] { return stream.stats().reconnects == 1; }));
  ASSERT_TRUE(Eventually([&] { return clock.PendingTimers() == 1; }));
  const size_t reports = service_.report_count();
  clock.Advance(19ms);
  EXPECT_EQ(clock.PendingTimers(), 1);
  EXPECT_EQ(service_.report_count(), reports);  // not sent again yet
  clock.Advance(1ms);
  ASSERT_TRUE(Eventually([&] { return stream.stats().duplicate == 1; }));
  stream.Close(10s);
  EXPECT_EQ(stream.stats().undelivered, 0u);
  EXPECT_EQ(StoredSteps(), Range(1, 2));
}

TEST(StepStreamRestart, ReconnectsWhenTheControllerComesBack) {
  // Find a free port, then leave it closed: the controller is "restarting".
  FakeAgentService first;
  int port = 0;
  testing::Serve(&first, &port)->Shutdown();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  std::shared_ptr<grpc::Channel> channel = ControllerChannel(address);
  SystemClock clock;
  StepStream stream(std::make_shared<ControllerLink>(channel), Id(), Small(100, 4), clock);
  stream.Start();
  stream.SendHeartbeat(2);
  stream.SendStep(0, Step(1));
  // It waits for the controller to connect rather than failing at once:
  // the channel's first try to connect failed, and the stream did not break.
  ASSERT_TRUE(
      Eventually([&] { return channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE; }));
  EXPECT_EQ(stream.stats().stored, 0u);
  EXPECT_EQ(stream.stats().reconnects, 0u);

  FakeAgentService service;
  int same_port = 0;
  auto server = testing::Serve(&service, &same_port, address);
  ASSERT_EQ(same_port, port);
  stream.SendStep(0, Step(2));
  ASSERT_TRUE(Eventually([&] { return service.step_count() >= 2; }));
  stream.Close(5s);
  EXPECT_EQ(stream.stats().stored, 2u);
  std::lock_guard<std::mutex> l(service.mu);
  EXPECT_TRUE(service.reports[0].has_heartbeat());
  EXPECT_EQ(service.reports[0].heartbeat().ranks_alive(), 2);
  server->Shutdown();
}

TEST(StepStreamRestart, CloseIsBoundedWhenTheControllerIsGone) {
  FakeAgentService first;
  int port = 0;
  testing::Serve(&first, &port)->Shutdown();
  auto link =
      std::make_shared<ControllerLink>(ControllerChannel("127.0.0.1:" + std::to_string(port)));
  SystemClock clock;
  StepStream stream(link, Id(), Small(100, 4), clock);
  stream.Start();
  stream.SendStep(0, Step(1));
  auto start = std::chrono::steady_clock::now();
  stream.Close(300ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(stream.stats().undelivered, 1u);
  // Kept for the spool file, with its number, and handed over once.
  std::vector<v1::StepBatch> unstored = stream.TakeUnstored();
  ASSERT_EQ(unstored.size(), 1u);
  EXPECT_EQ(unstored[0].seq(), 1u);
  ASSERT_EQ(unstored[0].steps_size(), 1);
  EXPECT_EQ(unstored[0].steps(0).record().step(), 1);
  EXPECT_TRUE(stream.TakeUnstored().empty());
}

}  // namespace
}  // namespace trellis::worker
