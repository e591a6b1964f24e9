#include "worker/rpc/step_stream.h"

#include <gtest/gtest.h>

#include <thread>

#include "worker/rpc/agent_client.h"
#include "worker/testing/fake_agent_service.h"

namespace trellis::worker {
namespace {

using namespace std::chrono_literals;
using testing::FakeAgentService;

v1::WorkerIdentity Id() {
  v1::WorkerIdentity id;
  id.set_run_id("r1");
  id.set_attempt(1);
  id.set_launch(1);
  id.set_node("n1");
  id.set_secret("s");
  return id;
}

StepRecord Step(int64_t step) {
  StepRecord r;
  r.step = step;
  r.grad_norm = 0.5;
  return r;
}

// Waits for a condition that another thread makes true, with a deadline.
bool Eventually(const std::function<bool()>& done, std::chrono::seconds limit = 15s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);  // poll interval, bounded by the deadline
  }
  return true;
}

TEST(StepStreamTest, FullQueueDropsTheOldestStepsAndKeepsExits) {
  FakeAgentService service;
  int port = 0;
  auto server = testing::Serve(&service, &port);
  auto stub = v1::AgentService::NewStub(ControllerChannel("127.0.0.1:" + std::to_string(port)));
  StepStream stream(stub.get(), Id(), 16);
  stream.SendRankExit({0, 3, 0});
  for (int i = 0; i < 30; ++i) stream.SendStep(1, Step(i));
  stream.Start();
  stream.Close(10s);
  StepStream::Stats st = stream.stats();
  EXPECT_EQ(st.dropped, 15u);
  EXPECT_EQ(st.sent, 16u);
  EXPECT_EQ(st.undelivered, 0u);

  std::lock_guard<std::mutex> l(service.mu);
  ASSERT_EQ(service.reports.size(), 16u);
  EXPECT_TRUE(service.reports[0].has_rank_exit());
  EXPECT_EQ(service.reports[0].rank_exit().exit_code(), 3);
  for (int i = 1; i < 16; ++i) {
    EXPECT_EQ(service.reports[i].step().record().step(), 14 + i);
    EXPECT_EQ(service.reports[i].step().rank(), 1);
    EXPECT_TRUE(service.reports[i].step().record().has_grad_norm());
    EXPECT_FALSE(service.reports[i].step().record().has_fwd_seconds());
    EXPECT_EQ(service.reports[i].id().secret(), "s");
  }
  server->Shutdown();
}

TEST(StepStreamTest, ReconnectsWhenTheControllerComesBack) {
  // Find a free port, then leave it closed: the controller is "restarting".
  FakeAgentService first;
  int port = 0;
  testing::Serve(&first, &port)->Shutdown();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  auto stub = v1::AgentService::NewStub(ControllerChannel(address));
  StepStream stream(stub.get(), Id(), 100, BackoffPolicy{20ms, 200ms, 2.0, 0.0});
  stream.Start();
  stream.SendHeartbeat(2);
  ASSERT_TRUE(Eventually([&] { return stream.stats().reconnects >= 1; }));

  FakeAgentService service;
  int same_port = 0;
  auto server = testing::Serve(&service, &same_port, address);
  ASSERT_EQ(same_port, port);
  stream.SendStep(0, Step(1));
  ASSERT_TRUE(Eventually([&] { return service.report_count() >= 2; }));
  stream.Close(5s);
  std::lock_guard<std::mutex> l(service.mu);
  EXPECT_TRUE(service.reports[0].has_heartbeat());
  EXPECT_EQ(service.reports[0].heartbeat().ranks_alive(), 2);
  EXPECT_TRUE(service.reports[1].has_step());
  server->Shutdown();
}

TEST(StepStreamTest, CloseIsBoundedWhenTheControllerIsGone) {
  FakeAgentService first;
  int port = 0;
  testing::Serve(&first, &port)->Shutdown();
  auto stub = v1::AgentService::NewStub(ControllerChannel("127.0.0.1:" + std::to_string(port)));
  StepStream stream(stub.get(), Id(), 100);
  stream.Start();
  stream.SendStep(0, Step(1));
  auto start = std::chrono::steady_clock::now();
  stream.Close(300ms);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(stream.stats().undelivered, 1u);
}

}  // namespace
}  // namespace trellis::worker
