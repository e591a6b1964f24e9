// The controller's shell over its real gRPC API, a real SQLite file and a
// FakeSlurmClient (Slurm itself is exercised by the tests under tests/e2e).
#include "controller/app/controller.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <map>
#include <mutex>
#include <thread>

#include "common/version.h"
#include "controller/core/gate_policy.h"
#include "controller/app/sbatch_template.h"
#include "controller/rpc/agent_service.h"
#include "controller/rpc/controller_service.h"
#include "controller/slurm/fake_slurm_client.h"

namespace trellis::controller {
namespace {

namespace fs = std::filesystem;

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("controller_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    slurm_ = std::make_shared<FakeSlurmClient>();
    for (int i = 1; i <= 3; ++i) slurm_->nodes.push_back({"node" + std::to_string(i), "idle"});
    ControllerConfig config;
    config.output_root = (dir_ / "out").string();
    config.worker_bin = "/opt/trellis/bin/trellis-worker";
    config.sbatch_template = kSbatchTemplate;
    config.schedule_interval = std::chrono::milliseconds(20);
    config.reconcile_interval = std::chrono::milliseconds(50);
    config.can_drain = can_drain_;
    auto store = Store::Open((dir_ / "t.db").string());
    ASSERT_TRUE(store.ok());
    controller_ = std::make_unique<Controller>(config, std::move(*store), slurm_, &clock_);
    users_ = std::make_unique<ControllerServiceImpl>(controller_.get());
    agents_ = std::make_unique<AgentServiceImpl>(controller_.get());
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(users_.get());
    b.RegisterService(agents_.get());
    server_ = b.BuildAndStart();
    controller_->SetAdvertiseAddress("127.0.0.1:" + std::to_string(port));
    controller_->Start();
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                       grpc::InsecureChannelCredentials());
    user_stub_ = v1::ControllerService::NewStub(channel);
    agent_stub_ = v1::AgentService::NewStub(channel);
  }
  void TearDown() override {
    controller_->BeginShutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    controller_->Stop();
    fs::remove_all(dir_);
  }

  grpc::Status Submit(const std::string& spec, v1::SubmitRunResponse* resp, bool dry = false) {
    grpc::ClientContext ctx;
    v1::SubmitRunRequest req;
    req.set_spec_toml(spec);
    req.set_dry_run(dry);
    return user_stub_->SubmitRun(&ctx, req, resp);
  }
  v1::Run Get(const std::string& id) {
    grpc::ClientContext ctx;
    v1::GetRunRequest req;
    req.set_run_id(id);
    v1::Run run;
    EXPECT_TRUE(user_stub_->GetRun(&ctx, req, &run).ok());
    return run;
  }
  // Waits (bounded) until the run reaches `state`.
  v1::Run WaitFor(const std::string& id, v1::RunState state) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    v1::Run run;
    while (std::chrono::steady_clock::now() < deadline) {
      run = Get(id);
      if (run.summary().state() == state) return run;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "run " << id << " never reached " << v1::RunState_Name(state) << "; it is "
                  << v1::RunState_Name(run.summary().state()) << ": "
                  << run.summary().state_reason();
    return run;
  }
  v1::WorkerIdentity Identity(const std::string& run_id, const std::string& node) {
    v1::WorkerIdentity id;
    id.set_run_id(run_id);
    id.set_attempt(1);
    id.set_launch(1);
    id.set_node(node);
    std::ifstream in(Get(run_id).run_dir() + "/attempt-1/secret");
    std::string secret;
    in >> secret;
    id.set_secret(secret);
    return id;
  }

  bool can_drain_ = false;  // set by a subclass's constructor
  fs::path dir_;
  FakeClock clock_;
  std::shared_ptr<FakeSlurmClient> slurm_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<ControllerServiceImpl> users_;
  std::unique_ptr<AgentServiceImpl> agents_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ControllerService::Stub> user_stub_;
  std::unique_ptr<v1::AgentService::Stub> agent_stub_;
};

void AddSocket(v1::NodeProbe* probe, double free_gib, double unattributed_gib) {
  auto* s = probe->add_sockets();
  s->set_numa_node(probe->sockets_size() - 1);
  s->set_cpulist("0-71");
  s->set_total_bytes(static_cast<int64_t>(119.7 * kGiB));
  s->set_free_bytes(static_cast<int64_t>(free_gib * kGiB));
  s->set_unattributed_bytes(static_cast<int64_t>(unattributed_gib * kGiB));
}

const char* kSpec = R"(
[job]
name = "hello"
command = "echo hi"
[slurm]
nodes = 2
ranks_per_node = 2
)";

TEST_F(ControllerTest, ARunGoesFromSubmitToSucceeded) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp).ok());
  EXPECT_EQ(resp.run_id(), "hello-1");
  v1::Run run = WaitFor("hello-1", v1::RUN_STATE_SUBMITTED);
  ASSERT_EQ(slurm_->Submissions().size(), 1u);
  EXPECT_EQ(slurm_->Submissions()[0].args[1], "--nodes=2");
  EXPECT_EQ(run.attempts(0).slurm_job_id(), "100");

  // Both workers register; each gets GO with its own contiguous rank range.
  std::vector<v1::GateDecision> decisions(2);
  std::vector<std::thread> workers;
  for (int i = 0; i < 2; ++i) {
    workers.emplace_back([&, i] {
      grpc::ClientContext ctx;
      v1::RegisterRequest req;
      *req.mutable_id() = Identity("hello-1", "node" + std::to_string(i + 1));
      req.set_version(kVersion);
      AddSocket(req.mutable_probe(), 108.0, 8.0);
      EXPECT_TRUE(agent_stub_->Register(&ctx, req, &decisions[i]).ok());
    });
  }
  for (auto& t : workers) t.join();
  std::set<int> offsets;
  for (const auto& d : decisions) {
    EXPECT_EQ(d.decision(), v1::GateDecision::DECISION_GO) << d.reason();
    EXPECT_EQ(d.world_size(), 4);
    offsets.insert(d.rank_offset());
  }
  EXPECT_EQ(offsets, (std::set<int>{0, 2}));
  WaitFor("hello-1", v1::RUN_STATE_RUNNING);

  // A step record from each rank of node1, then the exits and the batch script's question.
  {
    grpc::ClientContext ctx;
    v1::StreamStepsResponse r;
    auto stream = agent_stub_->StreamSteps(&ctx, &r);
    for (int rank : {0, 1}) {
      v1::AgentReport rep;
      *rep.mutable_id() = Identity("hello-1", "node1");
      rep.mutable_step()->set_rank(rank);
      rep.mutable_step()->mutable_record()->set_step(1);
      rep.mutable_step()->mutable_record()->set_loss(2.0 + rank);
      rep.mutable_step()->mutable_record()->set_tokens(100);
      rep.mutable_step()->mutable_record()->set_step_seconds(0.5);
      ASSERT_TRUE(stream->Write(rep));
    }
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  for (const char* node : {"node1", "node2"}) {
    grpc::ClientContext ctx;
    v1::ReportExitRequest req;
    *req.mutable_id() = Identity("hello-1", node);
    int base = std::string(node) == "node1" ? 0 : 2;
    for (int r = base; r < base + 2; ++r) req.add_ranks()->set_rank(r);
    v1::ReportExitResponse resp2;
    EXPECT_TRUE(agent_stub_->ReportExit(&ctx, req, &resp2).ok());
  }
  grpc::ClientContext ctx;
  v1::NextLaunchRequest nl;
  *nl.mutable_id() = Identity("hello-1", "node1");
  v1::NextLaunchResponse answer;
  ASSERT_TRUE(agent_stub_->NextLaunch(&ctx, nl, &answer).ok());
  EXPECT_EQ(answer.action(), v1::NextLaunchResponse::ACTION_EXIT);
  EXPECT_EQ(answer.exit_code(), 0);
  run = WaitFor("hello-1", v1::RUN_STATE_SUCCEEDED);
  ASSERT_EQ(run.recent_steps_size(), 1);
  EXPECT_EQ(run.recent_steps(0).ranks(), 2);
  EXPECT_DOUBLE_EQ(run.recent_steps(0).loss(), 2.5);
  std::vector<std::string> path;
  for (const auto& e : run.events()) path.push_back(v1::RunState_Name(e.to()));
  EXPECT_EQ(path, (std::vector<std::string>{"RUN_STATE_QUEUED", "RUN_STATE_SUBMITTED",
                                            "RUN_STATE_GATING", "RUN_STATE_RUNNING",
                                            "RUN_STATE_SUCCEEDED"}));
}

TEST_F(ControllerTest, BadSpecIsRefusedAndNothingIsStored) {
  v1::SubmitRunResponse resp;
  grpc::Status st = Submit("[job]\nname='Bad/Name'\ncommand=''\n[slurm]\nnodes=0\n", &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("job.name: must match"), std::string::npos);
  EXPECT_NE(st.error_message().find("slurm.nodes: must be an integer in [1, 16384], got 0"),
            std::string::npos);
  grpc::ClientContext ctx;
  v1::ListRunsResponse list;
  ASSERT_TRUE(user_stub_->ListRuns(&ctx, v1::ListRunsRequest(), &list).ok());
  EXPECT_EQ(list.runs_size(), 0);
  EXPECT_TRUE(slurm_->Submissions().empty());
}

TEST_F(ControllerTest, ModelRunNeedsAnAbsoluteReadableCorpus) {
  const std::string model = "[job]\nname='m'\n[model]\nlayers=1\n[training]\n";
  v1::SubmitRunResponse resp;
  grpc::Status st = Submit(model + "data='licenses.corpus'\n", &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("training.data: must be an absolute path"), std::string::npos)
      << st.error_message();
  st = Submit(model + "data='" + dir_.string() + "/absent.corpus'\n", &resp);
  EXPECT_NE(st.error_message().find("absent.corpus is not a readable file"), std::string::npos)
      << st.error_message();
  std::ofstream(dir_ / "tiny.corpus") << "bytes";
  ASSERT_TRUE(Submit(model + "data='" + dir_.string() + "/tiny.corpus'\n", &resp).ok());
  EXPECT_EQ(resp.run_id(), "m-1");
}

TEST_F(ControllerTest, DryRunShowsTheScriptAndStoresNothing) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp, /*dry=*/true).ok());
  EXPECT_TRUE(resp.run_id().empty());
  EXPECT_NE(resp.batch_script().find("RUN_ID='hello-1'"), std::string::npos);
  EXPECT_EQ(resp.sbatch_args(1), "--nodes=2");
  grpc::ClientContext ctx;
  v1::ListRunsResponse list;
  ASSERT_TRUE(user_stub_->ListRuns(&ctx, v1::ListRunsRequest(), &list).ok());
  EXPECT_EQ(list.runs_size(), 0);
}

TEST_F(ControllerTest, WorkerOfAnotherVersionIsRefusedNamingBoth) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp).ok());
  WaitFor("hello-1", v1::RUN_STATE_SUBMITTED);
  grpc::ClientContext ctx;
  v1::RegisterRequest req;
  *req.mutable_id() = Identity("hello-1", "node1");
  req.set_version("0.0.1-old");
  v1::GateDecision d;
  grpc::Status st = agent_stub_->Register(&ctx, req, &d);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("worker version 0.0.1-old"), std::string::npos);
  EXPECT_NE(st.error_message().find(std::string("controller version ") + kVersion),
            std::string::npos);
}

TEST_F(ControllerTest, WrongSecretIsRefused) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp).ok());
  WaitFor("hello-1", v1::RUN_STATE_SUBMITTED);
  grpc::ClientContext ctx;
  v1::RegisterRequest req;
  *req.mutable_id() = Identity("hello-1", "node1");
  req.mutable_id()->set_secret("guess");
  req.set_version(kVersion);
  v1::GateDecision d;
  EXPECT_EQ(agent_stub_->Register(&ctx, req, &d).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST_F(ControllerTest, WaitsQueuedWhenTooFewNodesAreEligible) {
  slurm_->nodes[2].state = "drained";
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit("[job]\nname='big'\ncommand='true'\n[slurm]\nnodes=3\n", &resp).ok());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Get(resp.run_id()).summary().state_reason() != "needs 3 nodes, 2 eligible" &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  v1::Run run = Get(resp.run_id());
  EXPECT_EQ(run.summary().state(), v1::RUN_STATE_QUEUED);
  EXPECT_EQ(run.summary().state_reason(), "needs 3 nodes, 2 eligible");
  EXPECT_TRUE(slurm_->Submissions().empty());
}

TEST_F(ControllerTest, CancelWhileSubmittedCancelsTheSlurmJob) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp).ok());
  WaitFor("hello-1", v1::RUN_STATE_SUBMITTED);
  grpc::ClientContext ctx;
  v1::CancelRunRequest req;
  req.set_run_id("hello-1");
  v1::CancelRunResponse cresp;
  ASSERT_TRUE(user_stub_->CancelRun(&ctx, req, &cresp).ok());
  EXPECT_EQ(cresp.state(), v1::RUN_STATE_CANCELLED);
  EXPECT_EQ(slurm_->Cancelled(), std::vector<std::string>{"100"});
  grpc::ClientContext ctx2;
  v1::GetRunRequest g;
  g.set_run_id("nope-9");
  v1::Run r;
  EXPECT_EQ(user_stub_->GetRun(&ctx2, g, &r).error_code(), grpc::StatusCode::NOT_FOUND);
}

class GateTest : public ControllerTest {
 protected:
  // Registers every node of hello-1's attempt 1 at once; node3 is short.
  std::map<std::string, v1::GateDecision> RegisterAll(const std::string& run_id,
                                                      std::vector<std::string> nodes) {
    std::map<std::string, v1::GateDecision> out;
    std::mutex mu;
    std::vector<std::thread> workers;
    for (const auto& node : nodes) {
      workers.emplace_back([&, node] {
        grpc::ClientContext ctx;
        v1::RegisterRequest req;
        *req.mutable_id() = Identity(run_id, node);
        req.set_version(kVersion);
        req.set_hostname("host-" + node);
        AddSocket(req.mutable_probe(), 108.0, 8.0);
        AddSocket(req.mutable_probe(), node == "node3" ? 72.7 : 106.0, node == "node3" ? 39.9 : 9.0);
        v1::GateDecision d;
        EXPECT_TRUE(agent_stub_->Register(&ctx, req, &d).ok());
        std::lock_guard<std::mutex> l(mu);
        out[node] = d;
      });
    }
    for (auto& t : workers) t.join();
    return out;
  }
  v1::ListNodesResponse Nodes() {
    grpc::ClientContext ctx;
    v1::ListNodesResponse resp;
    EXPECT_TRUE(user_stub_->ListNodes(&ctx, v1::ListNodesRequest(), &resp).ok());
    return resp;
  }
};

TEST_F(GateTest, AShortNodeIsReplacedByTheSpareAndQuarantined) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(std::string(kSpec) + "spare_nodes = 1\n", &resp).ok());
  WaitFor("hello-1", v1::RUN_STATE_SUBMITTED);
  auto d = RegisterAll("hello-1", {"node1", "node2", "node3"});
  EXPECT_EQ(d["node1"].decision(), v1::GateDecision::DECISION_GO);
  EXPECT_EQ(d["node1"].rank_offset(), 0);
  EXPECT_EQ(d["node2"].rank_offset(), 2);
  EXPECT_EQ(d["node1"].master_addr(), "host-node1");
  EXPECT_EQ(d["node3"].decision(), v1::GateDecision::DECISION_STANDBY);
  EXPECT_EQ(d["node3"].reason(), "failed the gate: socket 1: 72.7 GiB free < 100.0 GiB required");
  WaitFor("hello-1", v1::RUN_STATE_RUNNING);

  auto nodes = Nodes();
  ASSERT_EQ(nodes.nodes_size(), 1);
  EXPECT_EQ(nodes.nodes(0).name(), "node3");
  EXPECT_EQ(nodes.nodes(0).state(), "quarantined");
  EXPECT_EQ(nodes.nodes(0).reason(),
            "socket 1: 72.7 GiB free < 100.0 GiB required; "
            "socket 1: 39.9 GiB unattributed > 24.0 GiB allowed");
  EXPECT_NE(nodes.nodes(0).evidence_json().find("free_bytes"), std::string::npos);

  // The gate report has every node's figures and decision.
  grpc::ClientContext ctx;
  v1::GateReportRequest greq;
  greq.set_run_id("hello-1");
  v1::GateReportResponse report;
  ASSERT_TRUE(user_stub_->GateReport(&ctx, greq, &report).ok());
  ASSERT_EQ(report.gates_size(), 1);
  EXPECT_EQ(report.gates(0).decision(), "GO");
  ASSERT_EQ(report.gates(0).nodes_size(), 3);
  for (const auto& n : report.gates(0).nodes()) {
    EXPECT_EQ(n.probe().sockets_size(), 2);
    EXPECT_EQ(n.decision(), n.node() == "node3" ? "fail" : "go");
  }

  EXPECT_TRUE(slurm_->Drained().empty());  // not without --slurm-can-drain

  // The next submission excludes node3.
  ASSERT_TRUE(Submit("[job]\nname='next'\ncommand='true'\n", &resp).ok());
  WaitFor(resp.run_id(), v1::RUN_STATE_SUBMITTED);
  const auto args = slurm_->Submissions().back().args;
  EXPECT_NE(std::find(args.begin(), args.end(), "--exclude=node3"), args.end());
}

TEST_F(GateTest, AbortQuarantinesWaitsForNodesAndReleaseLetsItProceed) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit("[job]\nname='all'\ncommand='true'\n[slurm]\nnodes=3\n", &resp).ok());
  WaitFor("all-1", v1::RUN_STATE_SUBMITTED);
  auto d = RegisterAll("all-1", {"node1", "node2", "node3"});
  for (const auto& [node, decision] : d)
    EXPECT_EQ(decision.decision(), v1::GateDecision::DECISION_ABORT) << node;
  // The abort cancels the Slurm job (on the controller's Slurm thread).
  auto cancel_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (slurm_->Cancelled().empty() && std::chrono::steady_clock::now() < cancel_deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(slurm_->Cancelled(), std::vector<std::string>{"100"});
  // Back in the queue, waiting for a third eligible node rather than looping.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Get("all-1").summary().state_reason() != "needs 3 nodes, 2 eligible" &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  v1::Run run = Get("all-1");
  EXPECT_EQ(run.summary().state(), v1::RUN_STATE_QUEUED);
  EXPECT_EQ(run.summary().state_reason(), "needs 3 nodes, 2 eligible");
  EXPECT_EQ(slurm_->Submissions().size(), 1u);
  EXPECT_EQ(run.attempts(0).exit_code(), 75);

  grpc::ClientContext ctx;
  v1::ReleaseNodeRequest rel;
  rel.set_node("node3");
  v1::NodeStatus status;
  ASSERT_TRUE(user_stub_->ReleaseNode(&ctx, rel, &status).ok());
  EXPECT_EQ(status.state(), "probation");
  EXPECT_EQ(status.strikes(), 1);
  run = WaitFor("all-1", v1::RUN_STATE_SUBMITTED);
  EXPECT_EQ(run.attempts_size(), 2);
  EXPECT_EQ(slurm_->Submissions().size(), 2u);
}

class RanksTest : public GateTest {
 protected:
  // One worker stream carrying step records: (rank, record) in order.
  void SendSteps(const std::string& run_id, const std::string& node, int launch,
                 const std::vector<std::pair<int, v1::StepRecord>>& steps) {
    grpc::ClientContext ctx;
    v1::StreamStepsResponse r;
    auto stream = agent_stub_->StreamSteps(&ctx, &r);
    v1::WorkerIdentity id = Identity(run_id, node);
    id.set_launch(launch);
    for (const auto& [rank, record] : steps) {
      v1::AgentReport rep;
      *rep.mutable_id() = id;
      rep.mutable_step()->set_rank(rank);
      *rep.mutable_step()->mutable_record() = record;
      ASSERT_TRUE(stream->Write(rep));
    }
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
  }
  v1::Run GetRanks(const std::string& id, int from = 0, int limit = 0) {
    grpc::ClientContext ctx;
    v1::GetRunRequest req;
    req.set_run_id(id);
    req.set_include_ranks(true);
    req.set_ranks_from(from);
    req.set_ranks_limit(limit);
    v1::Run run;
    EXPECT_TRUE(user_stub_->GetRun(&ctx, req, &run).ok());
    return run;
  }
};

v1::StepRecord Record(int64_t step, double loss = 2.0) {
  v1::StepRecord r;
  r.set_step(step);
  r.set_loss(loss);
  r.set_tokens(100);
  r.set_step_seconds(0.5);
  return r;
}

std::vector<int> RanksOf(const v1::Run& run) {
  std::vector<int> out;
  for (const auto& r : run.ranks()) out.push_back(r.rank());
  return out;
}

TEST_F(RanksTest, GetRunHasTheLatestRecordOfEveryRankWhenAsked) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp).ok());
  WaitFor("hello-1", v1::RUN_STATE_SUBMITTED);
  RegisterAll("hello-1", {"node1", "node2"});
  WaitFor("hello-1", v1::RUN_STATE_RUNNING);

  v1::StepRecord busy = Record(1);
  busy.set_alloc_retries(2);
  busy.set_mem_reserved_peak_bytes(3 * kGiB);
  busy.set_nccl_max_ctas(16);
  SendSteps("hello-1", "node1", 1, {{0, Record(1)}, {1, busy}, {0, Record(2, 1.5)}});
  SendSteps("hello-1", "node2", 1, {{2, Record(1)}, {3, Record(1)}, {4, Record(1)}});

  // Not unless asked.
  v1::Run plain = Get("hello-1");
  EXPECT_EQ(plain.ranks_size(), 0);
  EXPECT_EQ(plain.ranks_world(), 0);

  v1::Run run = GetRanks("hello-1");
  EXPECT_EQ(run.ranks_world(), 4);
  EXPECT_EQ(run.ranks_reported(), 4);  // rank 4 is outside the world: not kept
  EXPECT_EQ(run.ranks_next(), 0);
  ASSERT_EQ(RanksOf(run), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(run.ranks(0).record().step(), 2);
  EXPECT_DOUBLE_EQ(run.ranks(0).record().loss(), 1.5);
  EXPECT_EQ(run.ranks(0).node(), "node1");
  EXPECT_EQ(run.ranks(1).record().alloc_retries(), 2);
  EXPECT_EQ(run.ranks(1).record().mem_reserved_peak_bytes(), 3 * kGiB);
  EXPECT_EQ(run.ranks(1).record().nccl_max_ctas(), 16);
  EXPECT_FALSE(run.ranks(0).record().has_alloc_retries());
  EXPECT_EQ(run.ranks(2).node(), "node2");
  EXPECT_EQ(run.ranks(3).attempt(), 1);
  EXPECT_EQ(run.ranks(3).launch(), 1);
  EXPECT_EQ(run.ranks(3).received_unix_ms(), ToUnixMillis(clock_.Now()));
  // The step summaries are unchanged: rank 0 and 1 at step 1, rank 0 at 2.
  EXPECT_EQ(run.recent_steps_size(), 2);

  // Paged by rank.
  run = GetRanks("hello-1", 0, 3);
  EXPECT_EQ(RanksOf(run), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(run.ranks_next(), 3);
  run = GetRanks("hello-1", run.ranks_next(), 3);
  EXPECT_EQ(RanksOf(run), std::vector<int>{3});
  EXPECT_EQ(run.ranks_next(), 0);
  EXPECT_EQ(run.ranks_reported(), 4);

  // A newer launch replaces the set; a late record of the old one is ignored.
  SendSteps("hello-1", "node2", 2, {{3, Record(7)}});
  SendSteps("hello-1", "node1", 1, {{0, Record(3)}});
  run = GetRanks("hello-1");
  EXPECT_EQ(run.ranks_reported(), 1);
  ASSERT_EQ(RanksOf(run), std::vector<int>{3});
  EXPECT_EQ(run.ranks(0).launch(), 2);
  EXPECT_EQ(run.ranks(0).record().step(), 7);

  // A run that just ended keeps its set.
  grpc::ClientContext ctx;
  v1::CancelRunRequest cancel;
  cancel.set_run_id("hello-1");
  v1::CancelRunResponse cresp;
  ASSERT_TRUE(user_stub_->CancelRun(&ctx, cancel, &cresp).ok());
  run = GetRanks("hello-1");
  EXPECT_EQ(run.summary().state(), v1::RUN_STATE_CANCELLED);
  EXPECT_EQ(RanksOf(run), std::vector<int>{3});
}

TEST_F(RanksTest, ARunWithoutStepsHasNoRanks) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp).ok());
  v1::Run run = GetRanks(WaitFor("hello-1", v1::RUN_STATE_SUBMITTED).summary().run_id());
  EXPECT_EQ(run.ranks_size(), 0);
  EXPECT_EQ(run.ranks_world(), 0);
  EXPECT_EQ(run.ranks_reported(), 0);
}

class DrainingGateTest : public GateTest {
 protected:
  DrainingGateTest() { can_drain_ = true; }
};

TEST_F(DrainingGateTest, QuarantinedNodesAreDrainedWhenAllowed) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(std::string(kSpec) + "spare_nodes = 1\n", &resp).ok());
  WaitFor("hello-1", v1::RUN_STATE_SUBMITTED);
  RegisterAll("hello-1", {"node1", "node2", "node3"});
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (slurm_->Drained().empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(slurm_->Drained().size(), 1u);
  EXPECT_EQ(slurm_->Drained()[0].rfind("node3: socket 1: 72.7 GiB free", 0), 0u);
}

TEST_F(GateTest, UsersQuarantineAndReleaseByName) {
  grpc::ClientContext ctx;
  v1::QuarantineNodeRequest q;
  q.set_node("node2");
  q.set_reason("flaky InfiniBand link");
  v1::NodeStatus status;
  ASSERT_TRUE(user_stub_->QuarantineNode(&ctx, q, &status).ok());
  EXPECT_EQ(status.state(), "quarantined");
  EXPECT_EQ(status.expiry_unix_ms(), 0);
  EXPECT_EQ(status.actor(), "user:anonymous");
  grpc::ClientContext bad_ctx;
  q.set_node("node2; rm -rf /");
  EXPECT_EQ(user_stub_->QuarantineNode(&bad_ctx, q, &status).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  grpc::ClientContext missing_ctx;
  v1::ReleaseNodeRequest rel;
  rel.set_node("node9");
  EXPECT_EQ(user_stub_->ReleaseNode(&missing_ctx, rel, &status).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

}  // namespace
}  // namespace trellis::controller
