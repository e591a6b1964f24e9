#include "worker/rpc/agent_client.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "common/eventually_test_util.h"
#include "worker/testing/fake_agent_service.h"

namespace trellis::worker {
namespace {

using namespace std::chrono_literals;
using testing::FakeAgentService;

v1::WorkerIdentity Id() { return testing::TestIdentity(); }

// A backoff far longer than any window here: a call can only succeed by
// waiting for the channel, never after a backoff sleep.
constexpr BackoffPolicy kNoSecondTry{60000ms, 60000ms, 2.0, 0.0};

// A free port, left closed: the controller is "restarting".
std::string ClosedAddress() {
  FakeAgentService first;
  int port = 0;
  testing::Serve(&first, &port)->Shutdown();
  return "127.0.0.1:" + std::to_string(port);
}

TEST(AgentClientRestart, AFinalReportGoesOutWhenTheControllerComesBack) {
  const std::string address = ClosedAddress();
  SystemClock clock;
  std::shared_ptr<grpc::Channel> channel = ControllerChannel(address);
  AgentClient client(std::make_shared<ControllerLink>(channel), Id(), clock, kNoSecondTry);
  auto report = std::async(std::launch::async, [&] {
    return client.ReportExit(client.FinalReport({}, WorkerOutcome{0, "ranks exited 0"}, 0, ""),
                             Seconds(60));
  });
  // The first try to connect has failed.
  ASSERT_TRUE(
      Eventually([&] { return channel->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE; }));

  FakeAgentService service;
  int port = 0;
  auto server = testing::Serve(&service, &port, address);
  ASSERT_EQ(report.wait_for(30s), std::future_status::ready);
  EXPECT_TRUE(report.get().ok());
  std::lock_guard<std::mutex> l(service.mu);
  ASSERT_EQ(service.exits.size(), 1u);
  EXPECT_EQ(service.exits[0].reason(), "ranks exited 0");
  server->Shutdown();
}

TEST(AgentClientRestart, NextLaunchSaysHowLongTheControllerWasUnreachable) {
  SystemClock clock;
  AgentClient client(
      std::make_shared<ControllerLink>(ClosedAddress(), "", grpc::InsecureChannelCredentials()),
      Id(), clock, kNoSecondTry);
  absl::StatusOr<NextLaunchChoice> choice = client.NextLaunch({}, Seconds(1));
  ASSERT_FALSE(choice.ok());
  EXPECT_EQ(choice.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(choice.status().message().find("controller unreachable for 1 s"), std::string::npos)
      << choice.status();
}

TEST(AgentClientRestart, RefusalsAreNotRetried) {
  FakeAgentService service;
  service.register_status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "version 0.0");
  int port = 0;
  auto server = testing::Serve(&service, &port);
  SystemClock clock;
  AgentClient client(std::make_shared<ControllerLink>("127.0.0.1:" + std::to_string(port), "",
                                                      grpc::InsecureChannelCredentials()),
                     Id(), clock, kNoSecondTry);
  auto gate = client.Register(NodeFacts{}, Seconds(30), Seconds(10));
  ASSERT_FALSE(gate.ok());
  EXPECT_EQ(gate.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(gate.status().message().find("version 0.0"), std::string::npos);
  std::lock_guard<std::mutex> l(service.mu);
  EXPECT_EQ(service.registers.size(), 1u);
  server->Shutdown();
}

}  // namespace
}  // namespace trellis::worker
