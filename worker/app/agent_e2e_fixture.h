#pragma once
// The trellis-worker binary against an in-test AgentService on 127.0.0.1:0:
// AgentE2eTest and its helpers, shared by agent_e2e_test.cc and
// agent_probe_e2e_test.cc.
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

}  // namespace trellis::worker
