#pragma once
// Test fixtures of the controller over real gRPC with FakeSlurmClient:
// ControllerTest (a controller, its services and stubs) and GateTest (workers
// registering with memory probes). Shared by controller_test.cc and
// controller_ranks_test.cc.

#include "controller/app/controller.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <map>
#include <mutex>
#include <thread>
#include "common/eventually_test_util.h"
#include "common/version.h"
#include "controller/core/gate_policy.h"
#include "controller/app/hello_spec_test_util.h"
#include "controller/app/sbatch_template.h"
#include "controller/rpc/agent_service.h"
#include "controller/rpc/controller_service.h"
#include "controller/rpc/final_report_file.h"
#include "controller/rpc/step_spool_file.h"
#include "controller/slurm/fake_slurm_client.h"

namespace trellis::controller {

namespace fs = std::filesystem;

inline constexpr char kTestToken[] = "0123456789abcdef0123456789abcdef-test";

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("controller_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    slurm_ = std::make_shared<FakeSlurmClient>();
    for (int i = 1; i <= 3; ++i) slurm_->nodes.push_back({"node" + std::to_string(i), "idle"});
    StartController();
  }
  void TearDown() override {
    StopController();
    fs::remove_all(dir_);
    fs::remove(SocketPath());
  }
  // A controller on the fixture's database and fake Slurm, serving on a new port.
  void StartController() {
    ControllerConfig config;
    config.output_root = (dir_ / "out").string();
    config.data_roots = data_roots_.empty() ? std::vector<std::string>{dir_.string()} : data_roots_;
    config.worker_bin = "/opt/trellis/bin/trellis-worker";
    config.sbatch_template = kSbatchTemplate;
    config.schedule_interval = schedule_interval_;
    config.reconcile_interval = reconcile_interval_;
    config.can_drain = can_drain_;
    config.prometheus_sd_file = (dir_ / "targets.json").string();
    config.read_final_report = ReadFinalReportFile;
    config.read_step_spool = ReadStepSpoolFile;
    auto store = Store::Open((dir_ / "t.db").string());
    ASSERT_TRUE(store.ok());
    controller_ = std::make_unique<Controller>(config, std::move(*store), slurm_, &clock_);
    users_ = std::make_unique<ControllerServiceImpl>(
        controller_.get(), Authenticator("tester", kTestToken, "/nonexistent/token", team_));
    agents_ = std::make_unique<AgentServiceImpl>(controller_.get());
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    // Users on the unix socket (the owner), workers over TCP, as deployed.
    b.AddListeningPort("unix:" + SocketPath(), grpc::InsecureServerCredentials());
    b.RegisterService(users_.get());
    b.RegisterService(agents_.get());
    server_ = b.BuildAndStart();
    controller_->SetAdvertiseAddress("127.0.0.1:" + std::to_string(port));
    ASSERT_TRUE(controller_->Start().ok());
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                       grpc::InsecureChannelCredentials());
    user_stub_ = v1::ControllerService::NewStub(grpc::CreateChannel(
        "unix:" + SocketPath(), grpc::InsecureChannelCredentials()));
    tcp_user_stub_ = v1::ControllerService::NewStub(channel);
    agent_stub_ = v1::AgentService::NewStub(channel);
  }
  // Short: a unix socket path is at most 107 bytes, test names are long.
  std::string SocketPath() const {
    return "/tmp/trellis-test-" + std::to_string(getpid()) + "-" +
           std::to_string(std::hash<std::string>{}(dir_.string()) % 1000000) + ".sock";
  }
  void StopController() {
    if (!controller_) return;
    controller_->BeginShutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    controller_->Stop();
    server_.reset();
    controller_.reset();
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
  // Moves the clock on by the longer tick interval: the schedule and
  // reconcile ticks, which run on it, each fall due on the way.
  void Tick() { clock_.Advance(std::max(schedule_interval_, reconcile_interval_)); }

  // Waits (bounded) until `done` holds of the run; `what` names it for the
  // failure. Between polls, each of which waits for it a while in real time,
  // the clock moves on by a Tick, unless the test holds the clock still
  // (waits_tick_).
  v1::Run WaitUntil(const std::string& id, const std::function<bool(const v1::Run&)>& done,
                    const std::string& what) {
    v1::Run run;
    const auto holds = [&] {
      run = Get(id);
      return done(run);
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    do {
      if (Eventually(holds, waits_tick_ ? kPoll : std::chrono::seconds(10))) return run;
      if (waits_tick_) Tick();
    } while (std::chrono::steady_clock::now() < deadline);
    ADD_FAILURE() << "run " << id << " never " << what << "; it is "
                  << v1::RunState_Name(run.summary().state()) << ": "
                  << run.summary().state_reason();
    return run;
  }
  v1::Run WaitFor(const std::string& id, v1::RunState state) {
    return WaitUntil(
        id, [state](const v1::Run& run) { return run.summary().state() == state; },
        "reached " + v1::RunState_Name(state));
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

  // One Report stream of a worker: each report is written with `id`; a
  // batch gets the worker's next seq. Returns the acks, once every batch is
  // answered (by then the controller has posted what was stored to its
  // loop), after the stream ended.
  std::vector<v1::ReportAck> SendReports(const v1::WorkerIdentity& id,
                                         std::vector<v1::AgentReport> reports) {
    grpc::ClientContext ctx;
    auto stream = agent_stub_->Report(&ctx);
    size_t batches = 0;
    for (auto& rep : reports) {
      *rep.mutable_id() = id;
      if (rep.has_batch()) {
        rep.mutable_batch()->set_seq(++seqs_[id.run_id() + "/" + std::to_string(id.attempt()) +
                                             "/" + std::to_string(id.launch()) + "/" + id.node()]);
        ++batches;
      }
      EXPECT_TRUE(stream->Write(rep));
    }
    std::vector<v1::ReportAck> acks;
    v1::ReportAck ack;
    while (acks.size() < batches && stream->Read(&ack)) acks.push_back(ack);
    stream->WritesDone();
    EXPECT_TRUE(stream->Finish().ok());
    EXPECT_EQ(acks.size(), batches);
    return acks;
  }

  // How long a WaitFor poll waits in real time before the clock moves on.
  static constexpr std::chrono::milliseconds kPoll{20};

  bool can_drain_ = false;  // set by a subclass's constructor
  // The ticks' intervals on the fake clock, read at StartController.
  std::chrono::milliseconds schedule_interval_{20};
  std::chrono::milliseconds reconcile_interval_{50};
  // False: WaitFor leaves the clock where the test put it (a test that
  // measures durations on it moves it, and the ticks run on the way).
  bool waits_tick_ = true;
  std::vector<std::string> data_roots_;  // --data-root; empty: the test's directory
  std::map<std::string, uint64_t> seqs_;  // SendReports' next seq per worker
  fs::path dir_;
  FakeClock clock_;
  std::shared_ptr<FakeSlurmClient> slurm_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<ControllerServiceImpl> users_;
  std::unique_ptr<AgentServiceImpl> agents_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<auth::TeamMember> team_;  // --tokens-file, read at StartController
  std::unique_ptr<v1::ControllerService::Stub> user_stub_;      // unix socket: the owner
  std::unique_ptr<v1::ControllerService::Stub> tcp_user_stub_;  // TCP: needs kTestToken
  std::unique_ptr<v1::AgentService::Stub> agent_stub_;
};

// A batch of one step record.
inline v1::AgentReport StepBatchOf(int rank, const v1::StepRecord& record) {
  v1::AgentReport r;
  v1::RankStep* s = r.mutable_batch()->add_steps();
  s->set_rank(rank);
  *s->mutable_record() = record;
  return r;
}

inline void AddSocket(v1::NodeProbe* probe, double free_gib, double unattributed_gib) {
  auto* s = probe->add_sockets();
  s->set_numa_node(probe->sockets_size() - 1);
  s->set_cpulist("0-71");
  s->set_total_bytes(static_cast<int64_t>(119.7 * kGiB));
  s->set_free_bytes(static_cast<int64_t>(free_gib * kGiB));
  s->set_unattributed_bytes(static_cast<int64_t>(unattributed_gib * kGiB));
}

inline constexpr int64_t kProbedUnixMs = 1700000000123;

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
        req.mutable_probe()->set_probed_unix_ms(kProbedUnixMs);
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
  v1::GateReportResponse GateReport(const std::string& run_id) {
    grpc::ClientContext ctx;
    v1::GateReportRequest req;
    req.set_run_id(run_id);
    v1::GateReportResponse report;
    EXPECT_TRUE(user_stub_->GateReport(&ctx, req, &report).ok());
    return report;
  }
};

}  // namespace trellis::controller
