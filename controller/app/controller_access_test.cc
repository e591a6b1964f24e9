// Who may use the user API (controller/rpc/authenticator.h): the owner through the
// unix socket; over TCP only a caller with the owner's token. The name a
// client claims for itself is not believed.

#include "controller/app/controller_fixture.h"

namespace trellis::controller {
namespace {

class AccessTest : public ControllerTest {
 protected:
  grpc::Status ListOverTcp(const std::string& authorization) {
    grpc::ClientContext ctx;
    if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
    v1::ListRunsResponse resp;
    return tcp_user_stub_->ListRuns(&ctx, v1::ListRunsRequest(), &resp);
  }
};

TEST_F(AccessTest, TcpCallersNeedTheOwnersToken) {
  grpc::Status st = ListOverTcp("");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(st.error_message().find("only with a token"), std::string::npos) << st.error_message();
  EXPECT_NE(st.error_message().find("/nonexistent/token"), std::string::npos)
      << "names where the owner's token is kept: " << st.error_message();
  st = ListOverTcp("Bearer wrong-token-of-the-right-length-0123456789");
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(st.error_message().find("not one this controller knows"), std::string::npos);
  st = ListOverTcp(kTestToken);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "the Bearer scheme is needed";
  EXPECT_TRUE(ListOverTcp(std::string("Bearer ") + kTestToken).ok());
}

TEST_F(AccessTest, StreamsAreRefusedToo) {
  grpc::ClientContext ctx;
  v1::WatchRunRequest req;
  req.set_run_id("hello-1");
  auto reader = tcp_user_stub_->WatchRun(&ctx, req);
  v1::WatchRunEvent ev;
  EXPECT_FALSE(reader->Read(&ev));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AccessTest, TheClaimedUserNameIsNotBelieved) {
  grpc::ClientContext ctx;
  ctx.AddMetadata("trellis-user", "mallory");
  v1::SubmitRunRequest req;
  req.set_spec_toml(kSpec);
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(user_stub_->SubmitRun(&ctx, req, &resp).ok());
  EXPECT_EQ(Get(resp.run_id()).summary().user(), "tester") << "the socket's owner";
}

TEST_F(AccessTest, AgentCallsDoNotNeedTheToken) {
  // Workers authenticate with their attempt's secret, over TCP.
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp).ok());
  WaitFor(resp.run_id(), v1::RUN_STATE_SUBMITTED);
  grpc::ClientContext ctx;
  v1::ReportExitRequest req;
  *req.mutable_id() = Identity(resp.run_id(), "node1");
  v1::ReportExitResponse exit;
  grpc::Status st = agent_stub_->ReportExit(&ctx, req, &exit);
  EXPECT_TRUE(st.ok()) << st.error_message();
  *req.mutable_id()->mutable_secret() = "wrong";
  grpc::ClientContext wrong;
  EXPECT_EQ(agent_stub_->ReportExit(&wrong, req, &exit).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

// A worker acts for its attempt only with the attempt's secret, and only for
// a node of the allocation Slurm gave the attempt's job, on every agent call.
class WorkerAccessTest : public ControllerTest {
 protected:
  void SetUp() override {
    ControllerTest::SetUp();
    v1::SubmitRunResponse resp;
    ASSERT_TRUE(Submit(kSpec, &resp).ok());
    run_ = resp.run_id();
    WaitFor(run_, v1::RUN_STATE_SUBMITTED);  // job 100 on node[1-2]
  }
  // Refused calls answer at once; an accepted Register waits for the gate.
  grpc::Status Register(const v1::WorkerIdentity& id) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::RegisterRequest req;
    *req.mutable_id() = id;
    req.set_version(kVersion);
    AddSocket(req.mutable_probe(), 108.0, 8.0);
    v1::GateDecision d;
    return agent_stub_->Register(&ctx, req, &d);
  }
  grpc::Status Heartbeat(const v1::WorkerIdentity& id) {
    grpc::ClientContext ctx;
    auto stream = agent_stub_->Report(&ctx);
    v1::AgentReport r;
    *r.mutable_id() = id;
    r.mutable_heartbeat()->set_ranks_alive(2);
    stream->Write(r);
    stream->WritesDone();
    return stream->Finish();
  }
  grpc::Status ReportExit(const v1::WorkerIdentity& id) {
    grpc::ClientContext ctx;
    v1::ReportExitRequest req;
    *req.mutable_id() = id;
    v1::ReportExitResponse resp;
    return agent_stub_->ReportExit(&ctx, req, &resp);
  }
  grpc::Status NextLaunch(const v1::WorkerIdentity& id) {
    grpc::ClientContext ctx;
    v1::NextLaunchRequest req;
    *req.mutable_id() = id;
    v1::NextLaunchResponse resp;
    return agent_stub_->NextLaunch(&ctx, req, &resp);
  }
  // Every agent call with `id`: each status, in the order above.
  std::vector<grpc::Status> EveryCall(const v1::WorkerIdentity& id) {
    return {Register(id), Heartbeat(id), ReportExit(id), NextLaunch(id)};
  }
  std::string run_;
};

TEST_F(WorkerAccessTest, AWrongSecretCannotRegisterOrReport) {
  v1::WorkerIdentity id = Identity(run_, "node1");
  id.set_secret("guess");
  for (const grpc::Status& st : EveryCall(id)) {
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
    EXPECT_NE(st.error_message().find("wrong secret"), std::string::npos) << st.error_message();
  }
  EXPECT_EQ(Get(run_).summary().state(), v1::RUN_STATE_SUBMITTED) << "nothing happened";
}

TEST_F(WorkerAccessTest, ANodeOutsideTheAllocationIsRefusedNamingBoth) {
  for (const grpc::Status& st : EveryCall(Identity(run_, "node9"))) {
    EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
    EXPECT_NE(st.error_message().find("id.node: node9 is not in the allocation of Slurm job "
                                      "100 (node[1-2])"),
              std::string::npos)
        << st.error_message();
  }
  EXPECT_EQ(Get(run_).summary().state(), v1::RUN_STATE_SUBMITTED) << "no gate began";
  // The allocation's nodes pass; Slurm was asked once, whatever was claimed.
  std::vector<std::thread> workers;
  for (const char* node : {"node1", "node2"})
    workers.emplace_back([&, node] { EXPECT_TRUE(Register(Identity(run_, node)).ok()) << node; });
  for (auto& t : workers) t.join();
  WaitFor(run_, v1::RUN_STATE_RUNNING);
  std::lock_guard<std::mutex> lock(slurm_->mu);
  EXPECT_EQ(slurm_->show_job_calls, 1);
}

TEST_F(WorkerAccessTest, WhileSlurmCannotSayTheWorkerRetries) {
  {
    std::lock_guard<std::mutex> lock(slurm_->mu);
    slurm_->show_job_error = absl::UnavailableError("slurmctld is not answering");
  }
  grpc::Status st = ReportExit(Identity(run_, "node1"));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << "the worker retries on it";
  EXPECT_NE(st.error_message().find("allocation of Slurm job 100 is unknown"), std::string::npos)
      << st.error_message();
  {
    std::lock_guard<std::mutex> lock(slurm_->mu);
    slurm_->show_job_error = absl::OkStatus();
  }
  EXPECT_TRUE(ReportExit(Identity(run_, "node1")).ok());
}

// A team sharing one controller (--tokens-file): users see and act on their
// own runs only; admins on every run and on nodes.
class TeamTest : public AccessTest {
 protected:
  const std::string kAliceToken = std::string(32, 'a');  // a user
  const std::string kRootToken = std::string(32, 'r');   // an admin
  void SetUp() override {
    AccessTest::SetUp();
    StopController();
    team_ = {{kAliceToken, "alice", false}, {kRootToken, "root", true}};
    StartController();
  }
  template <typename Call>
  grpc::Status As(const std::string& token, Call call) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    return call(&ctx);
  }
  std::vector<std::string> Listed(const std::string& token) {
    v1::ListRunsResponse resp;
    EXPECT_TRUE(As(token, [&](grpc::ClientContext* c) {
                  return tcp_user_stub_->ListRuns(c, v1::ListRunsRequest(), &resp);
                }).ok());
    std::vector<std::string> ids;
    for (const auto& r : resp.runs()) ids.push_back(r.run_id() + ":" + r.user());
    return ids;
  }
};

TEST_F(TeamTest, UsersSeeTheirOwnRunsAndAdminsAll) {
  v1::SubmitRunResponse mine, theirs;
  v1::SubmitRunRequest req;
  req.set_spec_toml(kSpec);
  ASSERT_TRUE(As(kAliceToken, [&](grpc::ClientContext* c) {
                return tcp_user_stub_->SubmitRun(c, req, &mine);
              }).ok());
  ASSERT_TRUE(Submit(kSpec, &theirs).ok());  // the owner, on the socket
  EXPECT_EQ(Listed(kAliceToken), std::vector<std::string>{mine.run_id() + ":alice"});
  EXPECT_EQ(Listed(kRootToken).size(), 2u);
  {
    // Newer runs of others do not push a user's own off a short page.
    v1::SubmitRunResponse newer;
    ASSERT_TRUE(Submit(kSpec, &newer).ok());
    v1::ListRunsRequest one;
    one.set_limit(1);
    v1::ListRunsResponse page;
    ASSERT_TRUE(As(kAliceToken, [&](grpc::ClientContext* c) {
                  return tcp_user_stub_->ListRuns(c, one, &page);
                }).ok());
    ASSERT_EQ(page.runs_size(), 1);
    EXPECT_EQ(page.runs(0).run_id(), mine.run_id());
  }

  v1::Run run;
  v1::GetRunRequest get;
  get.set_run_id(theirs.run_id());
  grpc::Status st = As(kAliceToken, [&](grpc::ClientContext* c) {
    return tcp_user_stub_->GetRun(c, get, &run);
  });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("is not alice's"), std::string::npos) << st.error_message();
  v1::CancelRunRequest cancel;
  cancel.set_run_id(theirs.run_id());
  v1::CancelRunResponse cancelled;
  EXPECT_EQ(As(kAliceToken, [&](grpc::ClientContext* c) {
              return tcp_user_stub_->CancelRun(c, cancel, &cancelled);
            }).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(Get(theirs.run_id()).summary().state(), v1::RUN_STATE_CANCELLED) << "not touched";
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + kAliceToken);
    v1::WatchRunRequest watch;
    watch.set_run_id(theirs.run_id());
    auto reader = tcp_user_stub_->WatchRun(&ctx, watch);
    v1::WatchRunEvent ev;
    EXPECT_FALSE(reader->Read(&ev));
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  cancel.set_run_id(mine.run_id());
  EXPECT_TRUE(As(kAliceToken, [&](grpc::ClientContext* c) {
                return tcp_user_stub_->CancelRun(c, cancel, &cancelled);
              }).ok());
  cancel.set_run_id(theirs.run_id());
  EXPECT_TRUE(As(kRootToken, [&](grpc::ClientContext* c) {
                return tcp_user_stub_->CancelRun(c, cancel, &cancelled);
              }).ok());
}

TEST_F(TeamTest, QuarantineIsAnAdminActionAndAttributed) {
  v1::QuarantineNodeRequest q;
  q.set_node("node2");
  q.set_reason("flaky link");
  v1::NodeStatus status;
  grpc::Status st = As(kAliceToken, [&](grpc::ClientContext* c) {
    return tcp_user_stub_->QuarantineNode(c, q, &status);
  });
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(st.error_message().find("admin actions"), std::string::npos) << st.error_message();
  ASSERT_TRUE(As(kRootToken, [&](grpc::ClientContext* c) {
                return tcp_user_stub_->QuarantineNode(c, q, &status);
              }).ok());
  EXPECT_EQ(status.actor(), "user:root");
}

// Every field of the user API is bounded; a bad one is named.
TEST_F(AccessTest, BadRunIdsAndLogSelectorsAreRefusedNamingTheField) {
  for (const std::string& bad :
       std::vector<std::string>{"", "../../etc/passwd", "Hello-1", std::string(97, 'a')}) {
    grpc::ClientContext ctx;
    v1::GetRunRequest req;
    req.set_run_id(bad);
    v1::Run run;
    grpc::Status st = user_stub_->GetRun(&ctx, req, &run);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_EQ(st.error_message().rfind("run_id: ", 0), 0u) << st.error_message();
  }
  grpc::ClientContext ctx;
  v1::ReadLogsRequest req;
  req.set_run_id("hello-1");
  req.set_rank(-2);
  auto reader = user_stub_->ReadLogs(&ctx, req);
  v1::LogChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  grpc::Status st = reader->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().rfind("rank: ", 0), 0u) << st.error_message();
}

}  // namespace
}  // namespace trellis::controller
