// A controller that moved (docs/architecture.md, "A controller that outlives
// its login node"): two fake controllers, A where the worker started and B
// where the address file later says the controller now serves.
#include "worker/rpc/controller_link.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/controller_address.h"
#include "common/eventually_test_util.h"
#include "worker/rpc/agent_client.h"
#include "worker/rpc/step_stream.h"
#include "worker/testing/fake_agent_service.h"

namespace trellis::worker {
namespace {

using namespace std::chrono_literals;
using testing::FakeAgentService;

// Longer than any wait here: only the link's switching can make a call succeed.
constexpr BackoffPolicy kMovedNoSecondTry{60000ms, 60000ms, 2.0, 0.0};

// One fake controller on a port of its own.
struct FakeController {
  FakeController() { server = testing::Serve(&service, &port); }
  ~FakeController() { Stop(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  // At once, as a dead host would: calls in flight (the report stream) end.
  void Stop() {
    if (server) server->Shutdown(std::chrono::system_clock::now());
    server.reset();
  }
  FakeAgentService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

class ControllerLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/controller-link-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    file_ = ControllerAddressPath(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Announce(const std::string& address) {
    ASSERT_TRUE(WriteControllerAddress(file_, {address, "login2", 7, "v", 1, "", ""}).ok());
  }
  std::shared_ptr<ControllerLink> Link(const std::string& flag) {
    return std::make_shared<ControllerLink>(flag, file_, grpc::InsecureChannelCredentials());
  }
  // Until the link's channel has seen the controller go.
  static bool Disconnected(const ControllerLink& link) {
    return Eventually([&] { return link.channel()->GetState(false) != GRPC_CHANNEL_READY; });
  }

  std::string dir_;
  std::string file_;
  FakeController a_;
  FakeController b_;
};

TEST_F(ControllerLinkTest, WaitConnectedFollowsTheFileWhenTheControllerIsGone) {
  Announce(a_.address());
  std::shared_ptr<ControllerLink> link = Link(a_.address());
  ASSERT_TRUE(link->WaitConnected(10s));
  // A new address alone changes nothing while the controller answers.
  Announce(b_.address());
  EXPECT_TRUE(link->WaitConnected(2 * kLinkPoll));
  EXPECT_EQ(link->address(), a_.address());

  a_.Stop();
  ASSERT_TRUE(Disconnected(*link));
  ASSERT_TRUE(link->WaitConnected(30s));
  EXPECT_EQ(link->address(), b_.address());
  EXPECT_EQ(link->channel()->GetState(false), GRPC_CHANNEL_READY);
}

TEST_F(ControllerLinkTest, AValidFileWinsOverTheFlagFromTheStart) {
  Announce(b_.address());
  std::shared_ptr<ControllerLink> link = Link(a_.address());
  EXPECT_EQ(link->address(), b_.address());
  EXPECT_FALSE(link->Refresh());  // the same address: no new channel
}

// A missing file, then one of garbage: the flag's address stays. A valid
// file afterwards is still followed.
TEST_F(ControllerLinkTest, AMissingOrBadFileLeavesTheFlagsAddress) {
  const std::string gone = a_.address();
  a_.Stop();
  std::shared_ptr<ControllerLink> missing = Link(gone);
  EXPECT_EQ(missing->address(), gone);
  EXPECT_FALSE(missing->WaitConnected(1.5 * kLinkPoll));
  EXPECT_EQ(missing->address(), gone);

  std::ofstream(file_) << "{\"address\": \"no port\"}";
  std::shared_ptr<ControllerLink> garbage = Link(gone);
  EXPECT_EQ(garbage->address(), gone);
  std::ofstream(file_) << "not json";
  for (auto* link : {missing.get(), garbage.get()}) {
    EXPECT_FALSE(link->WaitConnected(1.5 * kLinkPoll));
    EXPECT_FALSE(link->Refresh());
    EXPECT_EQ(link->address(), gone);
  }

  Announce(b_.address());
  EXPECT_TRUE(missing->WaitConnected(30s));
  EXPECT_EQ(missing->address(), b_.address());
}

TEST_F(ControllerLinkTest, WithoutAFileTheAddressNeverChanges) {
  const std::string gone = a_.address();
  a_.Stop();
  Announce(b_.address());  // not the link's file: it has none
  auto link = std::make_shared<ControllerLink>(gone, "", grpc::InsecureChannelCredentials());
  EXPECT_FALSE(link->WaitConnected(2 * kLinkPoll));
  EXPECT_FALSE(link->Refresh());
  EXPECT_EQ(link->address(), gone);
}

TEST_F(ControllerLinkTest, AgentClientCallsReachTheControllerThatMoved) {
  b_.service.next.set_action(v1::NextLaunchResponse::ACTION_EXIT);
  b_.service.next.set_exit_code(7);
  Announce(a_.address());
  SystemClock clock;
  AgentClient client(Link(a_.address()), testing::TestIdentity(), clock, kMovedNoSecondTry);
  auto report = [&](const std::string& reason) {
    return client.ReportExit(client.FinalReport({}, WorkerOutcome{0, reason}, 0, ""), 10s);
  };
  ASSERT_TRUE(report("to A").ok());

  a_.Stop();
  ASSERT_TRUE(Disconnected(*client.link()));
  Announce(b_.address());
  absl::StatusOr<NextLaunchChoice> choice = client.NextLaunch({}, 30s);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->exit_code, 7);
  ASSERT_TRUE(report("to B").ok());
  std::lock_guard<std::mutex> l(b_.service.mu);
  EXPECT_EQ(b_.service.next_requests.size(), 1u);
  ASSERT_EQ(b_.service.exits.size(), 1u);
  EXPECT_EQ(b_.service.exits[0].reason(), "to B");
}

std::vector<int64_t> StoredStepsOf(FakeAgentService& service) {
  std::lock_guard<std::mutex> l(service.mu);
  std::vector<int64_t> out;
  for (const auto& s : service.steps) out.push_back(s.record().step());
  return out;
}

void SendMovedSteps(StepStream& stream, int64_t from, int64_t to) {
  for (int64_t i = from; i < to; ++i) {
    StepRecord r;
    r.step = i;
    stream.SendStep(0, r);
  }
}

// Records stored by A stay stored; those sent while no controller answers
// are held, and reach B once the file names it: none is lost.
TEST_F(ControllerLinkTest, StepRecordsReachTheControllerThatMoved) {
  Announce(a_.address());
  std::shared_ptr<ControllerLink> link = Link(a_.address());
  StepStream::Options options;
  options.max_batch_records = 4;
  options.batch_interval = 20ms;
  options.backoff = BackoffPolicy{20ms, 200ms, 2.0, 0.0};
  SystemClock clock;
  StepStream stream(link, testing::TestIdentity(), options, clock);
  stream.Start();
  SendMovedSteps(stream, 0, 10);
  ASSERT_TRUE(Eventually([&] { return stream.stats().stored == 10; }));

  a_.Stop();
  ASSERT_TRUE(Disconnected(*link));
  SendMovedSteps(stream, 10, 20);
  stream.SendRankExit({0, 0, 0});
  // Nowhere to go yet: the file still names A.
  ASSERT_TRUE(Eventually(
      [&] { return link->channel()->GetState(false) == GRPC_CHANNEL_TRANSIENT_FAILURE; }));
  EXPECT_EQ(stream.stats().stored, 10u);
  EXPECT_EQ(b_.service.report_count(), 0u);

  Announce(b_.address());
  ASSERT_TRUE(Eventually([&] { return stream.stats().stored == 20; }, 30s));
  stream.Close(10s);
  EXPECT_EQ(stream.stats().undelivered, 0u);
  EXPECT_EQ(stream.stats().dropped, 0u);
  std::vector<int64_t> all = StoredStepsOf(a_.service);
  for (int64_t step : StoredStepsOf(b_.service)) all.push_back(step);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 20; ++i) expected.push_back(i);
  EXPECT_EQ(all, expected);
  std::lock_guard<std::mutex> l(b_.service.mu);
  EXPECT_TRUE(std::any_of(b_.service.reports.begin(), b_.service.reports.end(),
                          [](const v1::AgentReport& r) { return r.has_rank_exit(); }));
}

}  // namespace
}  // namespace trellis::worker
