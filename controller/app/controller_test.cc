#include "controller/app/controller_fixture.h"
#include "controller/app/corpus_file_test_util.h"
#include "common/exit_codes.h"
#include "common/model_layout/rank_host_memory.h"
#include "controller/core/gate_policy.h"
#include "controller/rpc/app_proto.h"

namespace trellis::controller {
namespace {

TEST_F(ControllerTest, ARunGoesFromSubmitToSucceeded) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp).ok());
  EXPECT_EQ(resp.run_id(), "hello-1");
  v1::Run run = WaitFor("hello-1", v1::RUN_STATE_SUBMITTED);
  ASSERT_EQ(slurm_->Submissions().size(), 1u);
  EXPECT_EQ(slurm_->Submissions()[0].args[1], "--nodes=2");
  EXPECT_EQ(run.attempts(0).slurm_job_id(), "100");

  // Both workers register; each gets GO with its own contiguous rank range
  // and the data roots its ranks check the corpus against as they open it.
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
    ASSERT_EQ(d.data_roots_size(), 1);
    EXPECT_EQ(d.data_roots(0), dir_.string());
  }
  EXPECT_EQ(offsets, (std::set<int>{0, 2}));
  WaitFor("hello-1", v1::RUN_STATE_RUNNING);

  // A step record from each rank of node1, then the exits and the batch script's question.
  {
    std::vector<v1::AgentReport> reports;
    for (int rank : {0, 1}) {
      v1::StepRecord rec;
      rec.set_step(1);
      rec.set_loss(2.0 + rank);
      rec.set_tokens(100);
      rec.set_step_seconds(0.5);
      reports.push_back(StepBatchOf(rank, rec));
    }
    for (const v1::ReportAck& a : SendReports(Identity("hello-1", "node1"), reports))
      EXPECT_EQ(a.result(), v1::ReportAck::RESULT_STORED) << a.error();
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

TEST_F(ControllerTest, ANodelistThatDoesNotExpandIsRefused) {
  v1::SubmitRunResponse resp;
  for (const char* pin : {"node[01-", "node[04-01]", "node[]"}) {
    grpc::Status st = Submit(std::string(kSpec) + "nodelist='" + pin + "'\n", &resp);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << pin;
    EXPECT_NE(st.error_message().find(std::string("slurm.nodelist: '") + pin +
                                      "' is not a Slurm hostlist"),
              std::string::npos)
        << st.error_message();
  }
  EXPECT_TRUE(slurm_->Submissions().empty());
  ASSERT_TRUE(Submit(std::string(kSpec) + "nodelist='node[01-02]'\n", &resp).ok());
}

TEST_F(ControllerTest, ModelRunNeedsAReadableCorpusUnderADataRoot) {
  const std::string model = "[job]\nname='m'\n[model]\nlayers=1\n[training]\n";
  v1::SubmitRunResponse resp;
  grpc::Status st = Submit(model + "data='licenses.corpus'\n", &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("training.data: \"licenses.corpus\" is in no data root of "
                                    "this controller (looked for " + dir_.string() +
                                    "/licenses.corpus"),
            std::string::npos)
      << st.error_message();
  st = Submit(model + "data='" + dir_.string() + "/absent.corpus'\n", &resp);
  EXPECT_NE(st.error_message().find("absent.corpus is not a readable file"), std::string::npos)
      << st.error_message();
  test_files::WriteCorpusShapedFile(dir_ / "tiny.corpus");
  ASSERT_TRUE(Submit(model + "data='" + dir_.string() + "/tiny.corpus'\n", &resp).ok());
  EXPECT_EQ(resp.run_id(), "m-1");
  // Named relative to the data root: stored as the path found.
  ASSERT_TRUE(Submit(model + "data='tiny.corpus'\n", &resp).ok());
  const std::string stored = Get("m-2").spec_toml();
  EXPECT_NE(stored.find("data = '" + dir_.string() + "/tiny.corpus'"), std::string::npos)
      << stored;
}

// The ranks read the corpus as the controller's owner, whoever submitted:
// only under a data root (--data-root; here the test's directory).
TEST_F(ControllerTest, ACorpusOutsideTheDataRootsIsRefusedLinksResolved) {
  const std::string model = "[job]\nname='m'\n[model]\nlayers=1\n[training]\n";
  fs::path outside = fs::temp_directory_path() / ("outside_" + std::to_string(getpid()));
  fs::create_directories(outside);
  std::ofstream(outside / "private.corpus") << "bytes";
  v1::SubmitRunResponse resp;
  for (const std::string& path : {(outside / "private.corpus").string(),
                                  (dir_ / "link.corpus").string(),
                                  (dir_ / ".." / outside.filename() / "private.corpus").string()}) {
    if (path == (dir_ / "link.corpus").string())
      fs::create_symlink(outside / "private.corpus", dir_ / "link.corpus");
    grpc::Status st = Submit(model + "data='" + path + "'\n", &resp, /*dry=*/true);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << path;
    EXPECT_EQ(st.error_message().rfind("training.data: " + path, 0), 0u) << st.error_message();
    EXPECT_NE(st.error_message().find("is not under a data root of this controller "
                                      "(--data-root) (" + dir_.string() + ")"),
              std::string::npos)
        << st.error_message();
  }
  fs::remove_all(outside);
  EXPECT_TRUE(slurm_->Submissions().empty());
}

TEST_F(ControllerTest, DryRunShowsTheScriptAndStoresNothing) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp, /*dry=*/true).ok());
  EXPECT_TRUE(resp.run_id().empty());
  EXPECT_NE(resp.batch_script().find("RUN_ID='hello-1'"), std::string::npos);
  EXPECT_EQ(resp.sbatch_args(1), "--nodes=2");
  // The policy the gate will judge the nodes by, as gate-report shows it.
  EXPECT_NE(resp.gate_policy_json().find("\"min_free_gib_per_socket\":"), std::string::npos)
      << resp.gate_policy_json();
  grpc::ClientContext ctx;
  v1::ListRunsResponse list;
  ASSERT_TRUE(user_stub_->ListRuns(&ctx, v1::ListRunsRequest(), &list).ok());
  EXPECT_EQ(list.runs_size(), 0);
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
  const v1::GateReportResponse report = GateReport("hello-1");
  ASSERT_EQ(report.gates_size(), 1);
  EXPECT_EQ(report.gates(0).decision(), "GO");
  ASSERT_EQ(report.gates(0).nodes_size(), 3);
  for (const auto& n : report.gates(0).nodes()) {
    EXPECT_EQ(n.probe().sockets_size(), 2);
    EXPECT_EQ(n.probe().probed_unix_ms(), kProbedUnixMs);  // kept through the store
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
  EXPECT_TRUE(Eventually([&] { return !slurm_->Cancelled().empty(); }));
  EXPECT_EQ(slurm_->Cancelled(), std::vector<std::string>{"100"});
  // Back in the queue, waiting for a third eligible node rather than looping.
  v1::Run run = WaitUntil(
      "all-1",
      [](const v1::Run& r) { return r.summary().state_reason() == "needs 3 nodes, 2 eligible"; },
      "waited for a third node");
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


// A link inside a data root pointed out of it after submit: the gate's GO
// turns into an abort that ends the run, and no node is blamed.
TEST_F(GateTest, ACorpusLinkSwappedAfterSubmitEndsTheRunAtTheGate) {
  fs::path outside = fs::temp_directory_path() / ("outside_" + std::to_string(getpid()));
  fs::create_directories(outside);
  std::ofstream(outside / "private.corpus") << "bytes";
  test_files::WriteCorpusShapedFile(dir_ / "tiny.corpus");
  fs::create_symlink(dir_ / "tiny.corpus", dir_ / "link.corpus");
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit("[job]\nname='m'\n[model]\nlayers=1\n[training]\ndata='" +
                         (dir_ / "link.corpus").string() + "'\n",
                     &resp)
                  .ok());
  WaitFor("m-1", v1::RUN_STATE_SUBMITTED);
  fs::remove(dir_ / "link.corpus");
  fs::create_symlink(outside / "private.corpus", dir_ / "link.corpus");

  auto d = RegisterAll("m-1", {"node1"});
  EXPECT_EQ(d["node1"].decision(), v1::GateDecision::DECISION_ABORT);
  const std::string why = "training.data: " + (dir_ / "link.corpus").string() +
                          " (resolves to " + (outside / "private.corpus").string() +
                          ") is not under a data root of this controller (--data-root) (" +
                          dir_.string() + ") (checked again at launch)";
  EXPECT_EQ(d["node1"].reason(), why);
  v1::Run run = WaitFor("m-1", v1::RUN_STATE_FAILED);
  EXPECT_EQ(run.summary().state_reason(), why);
  ASSERT_EQ(run.attempts_size(), 1);
  EXPECT_EQ(run.attempts(0).exit_code(), kExitDoNotRetry);
  EXPECT_EQ(Nodes().nodes_size(), 0);  // the node did nothing wrong
  EXPECT_TRUE(Eventually([&] { return !slurm_->Cancelled().empty(); }));
  EXPECT_EQ(slurm_->Cancelled().size(), 1u);
  fs::remove_all(outside);
}

// A [model] run writing checkpoints behind the steps: each rank's host copy
// of its state (about 7 GiB here) counts on the socket it is bound to. Both
// nodes' socket 1 (106 GiB free) is short of 100 GiB plus it: they still go
// (the copy falls back to writing in place), named in the gate's reason and
// report, and nobody is quarantined for it.
TEST_F(GateTest, NodesShortOfTheRanksHostMemoryGoNamedAndUnstruck) {
  test_files::WriteCorpusShapedFile(dir_ / "tiny.corpus");
  const std::string spec =
      "[job]\nname='big'\n[slurm]\nnodes=2\nranks_per_node=2\n"
      "[model]\nlayers=4\nhidden=4096\nexperts=8\nexpert_hidden=8192\nvocab=32000\n"
      "[training]\ndata='" + (dir_ / "tiny.corpus").string() + "'\n"
      "[checkpoint]\nevery_steps=100\nasync=true\n";
  spec::FieldErrors errors;
  const auto parsed = spec::ParseRunSpec(spec, &errors);
  ASSERT_TRUE(parsed) << spec::JoinErrors(errors);
  const double copy = static_cast<double>(spec::CheckpointStateBytes(parsed->trainer.model, 4));
  ASSERT_GT(copy, 6.0 * kGiB);  // socket 1 has 106 GiB free: short
  ASSERT_LT(copy, 8.0 * kGiB);  // socket 0 has 108: room

  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(spec, &resp).ok());
  WaitFor("big-1", v1::RUN_STATE_SUBMITTED);
  auto d = RegisterAll("big-1", {"node1", "node2"});
  EXPECT_EQ(d["node1"].decision(), v1::GateDecision::DECISION_GO);
  EXPECT_EQ(d["node2"].decision(), v1::GateDecision::DECISION_GO);
  WaitFor("big-1", v1::RUN_STATE_RUNNING);
  EXPECT_EQ(Nodes().nodes_size(), 0);

  const v1::GateReportResponse report = GateReport("big-1");
  ASSERT_EQ(report.gates_size(), 1);
  const std::string note = "socket 1: 106.0 GiB free < " + FormatGiB(100 * kGiB + copy) +
                           " with the ranks' host memory (100.0 GiB + 1 rank x " +
                           FormatGiB(copy) + ": checkpoint.async's copy of the state ";
  EXPECT_NE(report.gates(0).reason().find("node1 short of the ranks' host memory: " + note),
            std::string::npos)
      << report.gates(0).reason();
  ASSERT_EQ(report.gates(0).nodes_size(), 2);
  for (const auto& node : report.gates(0).nodes()) {
    EXPECT_EQ(node.decision(), "go");
    ASSERT_EQ(node.reasons_size(), 1) << node.node();
    EXPECT_EQ(node.reasons(0).rfind(note, 0), 0u) << node.reasons(0);
  }
  EXPECT_NE(report.gates(0).policy_json().find("\"ranks_per_node\":2"), std::string::npos)
      << report.gates(0).policy_json();
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
  EXPECT_TRUE(Eventually([&] { return !slurm_->Drained().empty(); }));
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
  EXPECT_EQ(status.actor(), "user:tester");  // the socket's owner
  grpc::ClientContext bad_ctx;
  q.set_node("node2; rm -rf /");
  EXPECT_EQ(user_stub_->QuarantineNode(&bad_ctx, q, &status).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // A name Slurm does not list (node1..node3 here) is refused, naming those it does.
  grpc::ClientContext unknown_ctx;
  q.set_node("node9");
  grpc::Status unknown = user_stub_->QuarantineNode(&unknown_ctx, q, &status);
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(unknown.error_message(),
            "node: 'node9' is not a node of this cluster (sinfo: node1, node2, node3)");
  grpc::ClientContext missing_ctx;
  v1::ReleaseNodeRequest rel;
  rel.set_node("node9");
  EXPECT_EQ(user_stub_->ReleaseNode(&missing_ctx, rel, &status).error_code(),
            grpc::StatusCode::NOT_FOUND);
  // --forget: the entry goes, strikes and all.
  grpc::ClientContext forget_ctx;
  rel.set_node("node2");
  rel.set_forget(true);
  ASSERT_TRUE(user_stub_->ReleaseNode(&forget_ctx, rel, &status).ok());
  EXPECT_EQ(status.state(), "ok");
  EXPECT_EQ(status.strikes(), 0);
  grpc::ClientContext list_ctx;
  v1::ListNodesResponse listed;
  ASSERT_TRUE(user_stub_->ListNodes(&list_ctx, v1::ListNodesRequest(), &listed).ok());
  for (const auto& n : listed.nodes()) EXPECT_NE(n.name(), "node2") << "forgotten";
}

TEST(ProbeFromWorkerTest, BoundsTheErrorAndKeepsTheFigures) {
  v1::NodeProbe p;
  AddSocket(&p, 108.0, 8.0);
  p.set_error(std::string(5000, 'x'));
  p.set_probed_unix_ms(kProbedUnixMs);
  NodeProbe got = ProbeFromWorker(p);
  EXPECT_EQ(got.error, std::string(1024, 'x'));
  ASSERT_EQ(got.sockets.size(), 1u);
  EXPECT_EQ(got.sockets[0].free_bytes, static_cast<int64_t>(108.0 * kGiB));
  EXPECT_EQ(got.probed_unix_ms, kProbedUnixMs);
}

}  // namespace
}  // namespace trellis::controller