// The trellis-worker binary against an in-test AgentService on 127.0.0.1:0.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "common/exit_codes.h"
#include "common/subprocess.h"
#include "common/version.h"
#include "trellis/v1/agent.grpc.pb.h"
#include "worker/testing/fake_agent_service.h"
#include "worker/testing/http_get.h"
#ifdef TRELLIS_WORKER_HOSTS_TRAINER
#include "trainer_core/data/corpus.h"
#endif

namespace trellis::worker {
namespace {

using testing::FakeAgentService;

using namespace std::chrono_literals;

// Each rank prints its environment, writes 3 step records and a bad line to
// its socket, waits for the file HOLD_FILE names (if set), and exits 0; or
// with FAIL_CODE when it is FAIL_RANK (others then sleep until stopped); or
// STOP_WORKER_FROM sends SIGTERM to the worker (as scancel would) and every
// rank sleeps until stopped.
constexpr const char* kRankScript = R"(
import json, os, signal, socket, sys, time
for k in sorted(os.environ):
    print(k + "=" + os.environ[k])
sys.stdout.flush()
rank = int(os.environ["RANK"])
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["TRELLIS_STEP_SOCKET"])
for i in range(3):
    rec = {"v": 1, "step": i + 1, "loss": 2.0 - i, "tokens": 1000 + rank, "step_seconds": 0.5}
    s.sendall((json.dumps(rec) + "\n").encode())
s.sendall(b"garbage\n")
s.close()
if os.environ.get("HOLD_FILE"):
    deadline = time.time() + 20
    while not os.path.exists(os.environ["HOLD_FILE"]) and time.time() < deadline:
        time.sleep(0.02)
if os.environ.get("FAIL_RANK") == str(rank):
    print("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
          "unhandled system error", file=sys.stderr)
    print("exiting", flush=True)
    sys.exit(int(os.environ["FAIL_CODE"]))
if os.environ.get("STOP_WORKER_FROM") == str(rank):
    os.kill(os.getppid(), signal.SIGTERM)
if os.environ.get("FAIL_RANK") or os.environ.get("STOP_WORKER_FROM"):
    time.sleep(120)
)";

class AgentE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trellis-agent-e2e-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    run_dir_ = dir_ + "/runs/r1";
    std::filesystem::create_directories(run_dir_);
    std::ofstream(dir_ + "/secret") << "  s3cret\n";
    server_ = testing::Serve(&service_, &port_);
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    v1::GateDecision& d = service_.decision;
    d.set_decision(v1::GateDecision::DECISION_GO);
    d.set_reason("2 of 2 nodes passed");
    d.set_node_index(1);
    d.set_rank_offset(2);
    d.set_ranks_per_node(2);
    d.set_world_size(4);
    d.set_master_addr("127.0.0.1");
    d.set_master_port(29555);
    d.set_resume_step(-1);
    d.set_checkpoint_dir(run_dir_ + "/checkpoints");
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() + 1s);
    std::filesystem::remove_all(dir_);
  }

  void WriteSpec(const std::string& env_section, bool model = false) {
    std::ofstream spec(run_dir_ + "/spec.toml");
    if (model) {
      spec << "[job]\nname = 'm'\n[model]\nlayers = 2\n[training]\nsteps = 5\n";
      return;
    }
    spec << "[job]\nname = 'e2e'\ncommand = ['python3', '-c', '''" << kRankScript << "''']\n"
         << "[slurm]\nnodes = 2\nranks_per_node = 2\n[env]\n"
         << env_section;
  }

  std::vector<std::string> Identity(const std::string& subcommand) {
    return {TRELLIS_WORKER_BINARY,
            subcommand,
            "--controller",
            "127.0.0.1:" + std::to_string(port_),
            "--run",
            "r1",
            "--attempt",
            "1",
            "--launch",
            "2",
            "--secret-file",
            dir_ + "/secret",
            "--node",
            "node2"};
  }

  CommandResult RunAgent(const std::vector<std::string>& extra = {},
                         const std::map<std::string, std::string>& env = {}) {
    std::vector<std::string> argv = Identity("agent");
    for (const char* a : {"--run-dir", "", "--kill-grace", "5", "--heartbeat-interval", "0.2",
                          "--register-retry", "5"})
      argv.push_back(*a != '\0' ? a : run_dir_);
    argv.insert(argv.end(), extra.begin(), extra.end());
    CommandOptions o;
    o.extra_env = env;
    o.timeout = 30s;
    auto r = RunCommand(argv, o);
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->timed_out);
    return *r;
  }

  std::string RankLog(int rank) {
    std::ifstream in(run_dir_ + "/attempt-1/launch-2/rank-" + std::to_string(rank) + ".log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::string dir_, run_dir_;
  int port_ = 0;
  FakeAgentService service_;
  std::unique_ptr<grpc::Server> server_;
};

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
    if (rep.has_step()) {
      steps.insert({rep.step().rank(), rep.step().record().step()});
      EXPECT_EQ(rep.step().record().tokens(), 1000 + rep.step().rank());
    }
    if (rep.has_heartbeat()) ++heartbeats;
    if (rep.has_rank_exit()) exited.insert(rep.rank_exit().rank());
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

TEST_F(AgentE2eTest, MetricsAddressIsSentAndServesTheRanks) {
  WriteSpec("");
  const std::string hold = dir_ + "/hold";
  CommandResult r;
  // Default --metrics-listen: every interface, any free port.
  std::thread agent([&] { r = RunAgent({}, {{"HOLD_FILE", hold}}); });
  // The ranks hold until the file exists: their series are there meanwhile.
  const bool streamed = service_.WaitFor(
      [&] {
        int steps = 0;
        for (const v1::AgentReport& rep : service_.reports) steps += rep.has_step() ? 1 : 0;
        return steps == 6;
      },
      20s);
  std::string addr, hostname;
  {
    std::lock_guard<std::mutex> l(service_.mu);
    if (!service_.registers.empty()) {
      addr = service_.registers[0].metrics_addr();
      hostname = service_.registers[0].hostname();
    }
  }
  testing::HttpResponse scrape;
  const size_t colon = addr.rfind(':');
  if (streamed && colon != std::string::npos)
    scrape = testing::HttpGet("127.0.0.1", std::stoi(addr.substr(colon + 1)), "/metrics");
  std::ofstream(hold).close();
  agent.join();
  ASSERT_TRUE(streamed);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  EXPECT_EQ(addr.substr(0, colon), hostname) << addr;
  ASSERT_EQ(scrape.error, "") << addr;
  EXPECT_NE(scrape.status_line.find(" 200"), std::string::npos) << scrape.status_line;
  for (const char* want :
       {"trellis_rank_steps_total{node=\"node2\",rank=\"2\",run=\"r1\"} 3\n",
        "trellis_rank_tokens_total{node=\"node2\",rank=\"3\",run=\"r1\"} 3009\n",
        "trellis_rank_info{gpu=\"none\",node=\"node2\",rank=\"3\",run=\"r1\",socket=\"",
        "trellis_build_info{version=\""})
    EXPECT_NE(scrape.body.find(want), std::string::npos) << want << " in\n" << scrape.body;

  // Off: no server, an empty address.
  r = RunAgent({"--metrics-listen", "off"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.registers.size(), 2u);
  EXPECT_EQ(service_.registers[1].metrics_addr(), "");
}

TEST_F(AgentE2eTest, MetricsBindFailureFailsTheLaunchWithTheAddress) {
  WriteSpec("");
  // A port some other program holds.
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string taken = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));

  CommandResult r = RunAgent({"--metrics-listen", taken});
  ::close(fd);
  EXPECT_EQ(r.exit_code, kExitError) << r.err;
  std::lock_guard<std::mutex> l(service_.mu);
  // It still registers (empty address), so that a GO ends with the reason at the controller.
  ASSERT_EQ(service_.registers.size(), 1u);
  EXPECT_EQ(service_.registers[0].metrics_addr(), "");
  ASSERT_EQ(service_.exits.size(), 1u);
  EXPECT_NE(service_.exits[0].reason().find("cannot serve metrics on " + taken), std::string::npos)
      << service_.exits[0].reason();
  EXPECT_EQ(service_.reports.size(), 0u);  // no rank started
}

TEST_F(AgentE2eTest, RegisterCarriesTheMemoryProbe) {
  WriteSpec("");
  // %n: the node name, as the local cluster's env file writes it.
  CommandResult r = RunAgent(
      {}, {{"TRELLIS_SYSFS_ROOT", std::string(TRELLIS_SYSFS_FIXTURES) + "/report-worst%n"}});
  // "%n" -> node2: ".../report-worstnode2" does not exist, so this probe fails; the next
  // run names the tree with --sysfs-root, which wins over the environment.
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunAgent({"--sysfs-root", std::string(TRELLIS_SYSFS_FIXTURES) + "/report-worst"},
               {{"TRELLIS_SYSFS_ROOT", "/nonexistent/%n"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("socket 2 (CPUs 144-215): 119.7 GiB total, 72.7 GiB free, 39.9 GiB "
                       "unattributed"),
            std::string::npos)
      << r.err;

  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.registers.size(), 2u);
  const v1::NodeProbe& failed = service_.registers[0].probe();
  EXPECT_NE(failed.error().find("report-worstnode2/devices/system/node does not exist"),
            std::string::npos)
      << failed.error();
  const v1::NodeProbe& probe = service_.registers[1].probe();
  EXPECT_EQ(probe.error(), "");
  EXPECT_GT(probe.probed_unix_ms(), 0);
  ASSERT_EQ(probe.sockets_size(), 4);
  const v1::SocketProbe& s = probe.sockets(2);
  EXPECT_EQ(s.numa_node(), 2);
  EXPECT_EQ(s.cpulist(), "144-215");
  EXPECT_EQ(s.total_bytes(), int64_t{125514547} * 1024);
  EXPECT_EQ(s.free_bytes(), int64_t{76231475} * 1024);
  EXPECT_EQ(s.unattributed_bytes(), int64_t{41838182} * 1024);
  EXPECT_EQ(s.file_pages_bytes() + s.anon_pages_bytes() + s.slab_bytes() + s.kernel_stack_bytes() +
                s.page_tables_bytes() + s.hugepages_bytes() + s.unattributed_bytes(),
            s.total_bytes() - s.free_bytes());
  EXPECT_FALSE(s.has_touch_obtainable_bytes());
  ASSERT_EQ(probe.device_nodes_size(), 4);
  EXPECT_EQ(probe.device_nodes(3).numa_node(), 28);
  EXPECT_EQ(probe.device_nodes(3).total_bytes(), int64_t{100663296} * 1024);
}

TEST_F(AgentE2eTest, TouchProbeFromTheSpecReportsObtainableBytes) {
  std::ofstream(run_dir_ + "/spec.toml")
      << "[job]\nname = 't'\ncommand = ['true']\n[slurm]\nnodes = 2\nranks_per_node = 2\n"
      << "[gate]\ntouch_probe = true\n";
  if (!std::filesystem::exists("/sys/devices/system/node/node0"))
    GTEST_SKIP() << "no NUMA nodes in /sys";
  CommandResult r = RunAgent(
      {"--sysfs-root", "/sys", "--touch-probe-gib", "0.0625", "--touch-probe-seconds", "10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.registers.size(), 1u);
  const v1::NodeProbe& probe = service_.registers[0].probe();
  EXPECT_EQ(probe.error(), "");
  ASSERT_GE(probe.sockets_size(), 1);
  EXPECT_EQ(probe.sockets(0).touch_obtainable_bytes(), 64 << 20);
  EXPECT_NE(r.err.find("touch probe obtained 0.1 of 0.1 GiB"), std::string::npos) << r.err;
}

TEST_F(AgentE2eTest, TouchProbeOnASocketThisMachineLacksFailsTheProbeNotTheWorker) {
  std::ofstream(run_dir_ + "/spec.toml")
      << "[job]\nname = 't'\ncommand = ['true']\n[slurm]\nnodes = 2\nranks_per_node = 2\n"
      << "[gate]\ntouch_probe = true\n";
  // The fixture's sockets 1-3 are not on this machine (or libnuma is unavailable).
  CommandResult r = RunAgent({"--sysfs-root", std::string(TRELLIS_SYSFS_FIXTURES) + "/gh200-node",
                              "--touch-probe-gib", "0.0625", "--touch-probe-seconds", "10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::lock_guard<std::mutex> l(service_.mu);
  ASSERT_EQ(service_.registers.size(), 1u);
  const v1::NodeProbe& probe = service_.registers[0].probe();
  EXPECT_NE(probe.error().find("touch probe"), std::string::npos) << probe.error();
  EXPECT_EQ(probe.sockets_size(), 4);
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
  for (const v1::AgentReport& rep : service_.reports) {
    if (!rep.has_step()) continue;
    steps.insert({rep.step().rank(), rep.step().record().step()});
    EXPECT_GT(rep.step().record().loss(), 0);
    EXPECT_GT(rep.step().record().tokens(), 0);
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
