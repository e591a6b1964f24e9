// The trellis-worker binary against an in-test AgentService on 127.0.0.1:0:
// launches, rank failures, signals, refusals, [model] ranks, next-launch.
#include "worker/app/agent_e2e_fixture.h"

namespace trellis::worker {
namespace {

TEST_F(AgentE2eTest, GoRunsTwoRanksAndStreamsTheirSteps) {
  WriteSpec("NCCL_MAX_CTAS = '8'\n");
  CommandResult r = RunAgent({}, {{"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "3"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.registers.size(), 1u);
  const v1::RegisterRequest& reg = service_.registers[0];
  EXPECT_EQ(reg.version(), kVersion);
  EXPECT_EQ(reg.id().secret(), "s3cret");
  EXPECT_EQ(reg.id().node(), "node2");
  EXPECT_EQ(reg.id().launch(), 2);
  EXPECT_GE(reg.cpus(), 1);
  EXPECT_EQ(reg.slurm_job_id(), "4242");
  EXPECT_EQ(reg.slurm_step_id(), "3");

  std::multiset<std::pair<int, int64_t>> steps;
  int heartbeats = 0;
  std::set<int> exited;
  for (const v1::AgentReport& rep : service_.reports) {
    EXPECT_EQ(rep.id().secret(), "s3cret");
    if (rep.has_heartbeat()) ++heartbeats;
    if (rep.has_rank_exit()) exited.insert(rep.rank_exit().rank());
  }
  for (const v1::RankStep& s : service_.steps) {  // stored, each once
    steps.insert({s.rank(), s.record().step()});
    EXPECT_EQ(s.record().tokens(), 1000 + s.rank());
  }
  EXPECT_EQ(steps, (std::multiset<std::pair<int, int64_t>>{
                       {2, 1}, {2, 2}, {2, 3}, {3, 1}, {3, 2}, {3, 3}}));
  EXPECT_GE(heartbeats, 1);
  EXPECT_EQ(exited, (std::set<int>{2, 3}));

  ASSERT_EQ(service_.exits.size(), 1u);
  EXPECT_EQ(service_.exits[0].exit_code(), 0);
  EXPECT_EQ(service_.exits[0].reason(), "all 2 ranks exited 0");
  EXPECT_EQ(service_.exits[0].ranks_size(), 2);
  for (const v1::RankExit& x : service_.exits[0].ranks()) EXPECT_EQ(x.evidence(), "");
  // 0 where the job's cgroup counter is readable, else -1.
  EXPECT_TRUE(service_.exits[0].oom_kills() == 0 || service_.exits[0].oom_kills() == -1)
      << service_.exits[0].oom_kills();

  for (int rank : {2, 3}) {
    std::string log = RankLog(rank);
    for (const std::string& want :
         {"RANK=" + std::to_string(rank), "LOCAL_RANK=" + std::to_string(rank - 2),
          std::string("WORLD_SIZE=4"), std::string("LOCAL_WORLD_SIZE=2"),
          std::string("MASTER_ADDR=127.0.0.1"), std::string("MASTER_PORT=29555"),
          std::string("TRELLIS_RUN=r1"), std::string("TRELLIS_ATTEMPT=1"),
          std::string("TRELLIS_LAUNCH=2"), std::string("TRELLIS_RESUME_STEP=-1"),
          "TRELLIS_CHECKPOINT_DIR=" + run_dir_ + "/checkpoints", std::string("OMP_NUM_THREADS=1"),
          std::string("NCCL_MAX_CTAS=8"), std::string("MIMALLOC_ALLOW_THP=0")})
      EXPECT_NE(log.find("\n" + want + "\n"), std::string::npos) << want << " in\n" << log;
    EXPECT_EQ(log.find("CUDA_VISIBLE_DEVICES="), std::string::npos);
    // The socket directory is gone once the worker exits.
    size_t at = log.find("TRELLIS_STEP_SOCKET=");
    ASSERT_NE(at, std::string::npos);
    std::string socket = log.substr(at + 20, log.find('\n', at) - at - 20);
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(socket).parent_path())) << socket;
  }
  EXPECT_NE(r.err.find("bad step record"), std::string::npos) << r.err;
}

TEST_F(AgentE2eTest, FailingRankStopsTheOtherAndSetsTheExitCode) {
  WriteSpec("FAIL_RANK = '3'\nFAIL_CODE = '3'\n");
  CommandResult r = RunAgent();
  EXPECT_EQ(r.exit_code, 3) << r.err;
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.exits.size(), 1u);
  const v1::ReportExitRequest& e = service_.exits[0];
  EXPECT_EQ(e.exit_code(), 3);
  EXPECT_EQ(e.reason(), "rank 3 exited with 3");
  ASSERT_EQ(e.ranks_size(), 2);
  EXPECT_EQ(e.ranks(0).rank(), 3);
  // The failed rank's log tail, in ReportExit and in the stream's rank_exit.
  ASSERT_EQ(e.ranks(0).markers_size(), 1);
  EXPECT_EQ(e.ranks(0).markers(0), "nccl_error");
  EXPECT_EQ(e.ranks(0).evidence(),
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
            "unhandled system error");
  bool streamed = false;
  for (const v1::AgentReport& rep : service_.reports)
    if (rep.has_rank_exit() && rep.rank_exit().rank() == 3) {
      streamed = true;
      EXPECT_EQ(rep.rank_exit().evidence(), e.ranks(0).evidence());
      EXPECT_EQ(rep.rank_exit().markers_size(), 1);
    }
  EXPECT_TRUE(streamed);
  EXPECT_EQ(e.ranks(1).rank(), 2);
  EXPECT_EQ(e.ranks(1).signal(), SIGTERM);
  EXPECT_EQ(e.ranks(1).exit_code(), 143);
}

TEST_F(AgentE2eTest, SigtermToTheWorkerStopsTheRanks) {
  WriteSpec("STOP_WORKER_FROM = '2'\n");
  CommandResult r = RunAgent();
  EXPECT_EQ(r.exit_code, 143) << r.err;
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.exits.size(), 1u);
  const v1::ReportExitRequest& e = service_.exits[0];
  EXPECT_EQ(e.exit_code(), 143);
  EXPECT_NE(e.reason().find("(worker received SIGTERM)"), std::string::npos) << e.reason();
  ASSERT_EQ(e.ranks_size(), 2);
  for (const v1::RankExit& x : e.ranks()) EXPECT_EQ(x.signal(), SIGTERM);
}

TEST_F(AgentE2eTest, VersionRefusalExitsWithTheControllersMessage) {
  WriteSpec("");
  service_.register_status = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                          "worker version 0.0.1 does not match controller 9.9");
  CommandResult r = RunAgent();
  EXPECT_EQ(r.exit_code, 78);
  EXPECT_NE(r.err.find("worker version 0.0.1 does not match controller 9.9"), std::string::npos)
      << r.err;
  std::lock_guard<std::mutex> l(service_.mu);
  EXPECT_TRUE(service_.exits.empty());
}

TEST_F(AgentE2eTest, AbortAndStandby) {
  WriteSpec("");
  service_.decision.set_decision(v1::GateDecision::DECISION_ABORT);
  service_.decision.set_reason("socket 2: 72.7 GiB free < 100.0 GiB required");
  CommandResult abort = RunAgent();
  EXPECT_EQ(abort.exit_code, 75);
  EXPECT_NE(abort.err.find("72.7 GiB free"), std::string::npos) << abort.err;
  service_.decision.set_decision(v1::GateDecision::DECISION_STANDBY);
  EXPECT_EQ(RunAgent().exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(run_dir_ + "/attempt-1/launch-2"));
}

#ifdef TRELLIS_WORKER_HOSTS_TRAINER
// A [model] run: the agent starts trellis-rank for its 2 ranks, which
// rendezvous, train a tiny MoE for 3 steps, stream their step records and
// checkpoint at the end.
TEST_F(AgentE2eTest, ModelRunTrainsInTheRanksAndStreamsSteps) {
  std::filesystem::create_directories(dir_ + "/text");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox jumps over the lazy dog " + std::to_string(i) + "\n";
  std::ofstream(dir_ + "/text/a.txt") << text;
  train::BuildStats stats;
  train::WriteCorpus(dir_ + "/tiny.corpus", train::BuildByteCorpus({dir_ + "/text"}, &stats));
  std::ofstream(run_dir_ + "/spec.toml")
      << "[job]\nname = 'm'\n[slurm]\nnodes = 1\nranks_per_node = 2\n"
      << "[model]\nlayers = 1\nhidden = 32\nheads = 2\nkv_heads = 1\nexperts = 2\n"
      << "experts_per_token = 1\nexpert_hidden = 32\nvocab = 256\n"
      << "[training]\nsteps = 3\nseq_len = 16\nglobal_batch = 4\nwarmup_steps = 1\n"
      << "data = '" << dir_ << "/tiny.corpus'\n";
  v1::GateDecision& d = service_.decision;
  d.set_node_index(0);
  d.set_rank_offset(0);
  d.set_world_size(2);
  d.set_master_port(20000 + getpid() % 20000);

  CommandResult r = RunAgent();
  ASSERT_EQ(r.exit_code, 0) << r.err << RankLog(0);
  std::lock_guard<std::mutex> l(service_.mu);
  std::set<std::pair<int, int64_t>> steps;
  for (const v1::RankStep& s : service_.steps) {
    steps.insert({s.rank(), s.record().step()});
    EXPECT_GT(s.record().loss(), 0);
    EXPECT_GT(s.record().tokens(), 0);
  }
  EXPECT_EQ(steps, (std::set<std::pair<int, int64_t>>{{0, 1}, {0, 2}, {0, 3}, {1, 1}, {1, 2},
                                                      {1, 3}}));
  ASSERT_EQ(service_.exits.size(), 1u);
  EXPECT_EQ(service_.exits[0].exit_code(), 0);
  EXPECT_TRUE(std::filesystem::exists(run_dir_ + "/checkpoints/step-00000003/manifest.json"));
}

TEST_F(AgentE2eTest, ModelRankNamesAMissingCorpus) {
  std::ofstream(run_dir_ + "/spec.toml")
      << "[job]\nname = 'm'\n[model]\nlayers = 1\n[training]\ndata = '/nonexistent.corpus'\n";
  auto r = RunCommand({TRELLIS_RANK_BINARY, "--run-dir", run_dir_}, CommandOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_NE(r->err.find("/nonexistent.corpus"), std::string::npos) << r->err;
}

TEST_F(AgentE2eTest, RankRefusesAGenericSpec) {
  WriteSpec("");
  auto r = RunCommand({TRELLIS_RANK_BINARY, "--run-dir", run_dir_}, CommandOptions{});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_NE(r->err.find("has no [model] section"), std::string::npos) << r->err;
}
#endif

// A [model] run on a worker without trellis-rank (built without LibTorch, or
// not installed beside it) is refused before it registers.
TEST_F(AgentE2eTest, ModelSpecIsRefusedWithoutTheRankBinary) {
  WriteSpec("", /*model=*/true);
  CommandResult r = RunAgent({"--rank-binary", dir_ + "/no-such/trellis-rank"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no-such/trellis-rank is missing or not executable"), std::string::npos)
      << r.err;
  std::lock_guard<std::mutex> l(service_.mu);
  EXPECT_TRUE(service_.registers.empty());
}

CommandResult RunNext(std::vector<std::string> argv, const std::string& code,
                      const std::string& timeout = "10") {
  argv.insert(argv.end(), {"--step-exit-code", code, "--timeout", timeout});
  CommandOptions o;
  o.timeout = 30s;
  auto r = RunCommand(argv, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

TEST_F(AgentE2eTest, NextLaunchPrintsOneLine) {
  service_.next.set_action(v1::NextLaunchResponse::ACTION_RELAUNCH);
  service_.next.set_next_launch(3);
  service_.next.add_nodes("node1");
  service_.next.add_nodes("node2");
  service_.next.add_exclude_nodes("node3");  // unused
  CommandResult r = RunNext(Identity("next-launch"), "137");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "relaunch 3 node1,node2\n");

  service_.next.Clear();
  service_.next.set_action(v1::NextLaunchResponse::ACTION_EXIT);
  service_.next.set_exit_code(0);
  r = RunNext(Identity("next-launch"), "0");
  EXPECT_EQ(r.out, "exit 0\n");
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.next_requests.size(), 2u);
  EXPECT_EQ(service_.next_requests[0].step_exit_code(), 137);
  EXPECT_EQ(service_.next_requests[0].id().secret(), "s3cret");
}

TEST_F(AgentE2eTest, NextLaunchFallsBackToTheStepsStatus) {
  std::vector<std::string> argv = Identity("next-launch");
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  auto start = std::chrono::steady_clock::now();
  CommandResult r = RunNext(argv, "7", "1");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "exit 7\n");
  EXPECT_NE(r.err.find("answering exit 7"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace trellis::worker
