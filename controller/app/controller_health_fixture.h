#pragma once
// The fixture of controller_health_test.cc: a run's workers driven through
// the agent service (registration naming their Slurm step, step records,
// heartbeats, rank exits, the batch script's NextLaunch) while the test moves
// the controller's FakeClock.

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "controller/app/controller_fixture.h"

namespace trellis::controller {

inline v1::AgentReport StepReport(int rank, int64_t step, double step_seconds) {
  v1::StepRecord rec;
  rec.set_step(step);
  rec.set_loss(2.0);
  rec.set_tokens(100);
  rec.set_step_seconds(step_seconds);
  return StepBatchOf(rank, rec);
}

inline v1::AgentReport HeartbeatReport(int ranks_alive) {
  v1::AgentReport r;
  r.mutable_heartbeat()->set_ranks_alive(ranks_alive);
  return r;
}

inline v1::RankExit RankEnded(int rank, int exit_code, int signal, bool after_stop) {
  v1::RankExit e;
  e.set_rank(rank);
  e.set_exit_code(exit_code);
  e.set_signal(signal);
  e.set_after_stop(after_stop);
  return e;
}

class HealthTest : public GateTest {
 protected:
  v1::WorkerIdentity Id(const std::string& run_id, const std::string& node, int launch) {
    v1::WorkerIdentity id = Identity(run_id, node);
    id.set_launch(launch);
    return id;
  }

  // Registers `nodes` for `launch` at once, all with the same probe (ties go
  // by name) but those of `short_nodes`, whose second socket is short of
  // memory, each naming the launch's srun step: <job>.<launch - 1>.
  std::map<std::string, v1::GateDecision> Register(const std::string& run_id, int launch,
                                                   const std::vector<std::string>& nodes,
                                                   const std::set<std::string>& short_nodes = {}) {
    const std::string job = Get(run_id).attempts(0).slurm_job_id();
    std::map<std::string, v1::GateDecision> out;
    std::mutex mu;
    std::vector<std::thread> workers;
    for (const auto& node : nodes) {
      v1::RegisterRequest req;
      *req.mutable_id() = Id(run_id, node, launch);
      req.set_version(kVersion);
      req.set_hostname("host-" + node);
      req.set_slurm_job_id(job);
      req.set_slurm_step_id(std::to_string(launch - 1));
      AddSocket(req.mutable_probe(), 108.0, 8.0);
      if (short_nodes.count(node))
        AddSocket(req.mutable_probe(), 72.7, 39.9);
      else
        AddSocket(req.mutable_probe(), 106.0, 9.0);
      if (auto addr = metrics_addrs_.find(node); addr != metrics_addrs_.end())
        req.set_metrics_addr(addr->second);
      workers.emplace_back([&, node, req] {
        grpc::ClientContext ctx;
        // Bounded: a gate that waits for more nodes fails the test, not hangs it.
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
        v1::GateDecision d;
        EXPECT_TRUE(agent_stub_->Register(&ctx, req, &d).ok()) << node;
        std::lock_guard<std::mutex> l(mu);
        out[node] = d;
      });
    }
    for (auto& t : workers) t.join();
    return out;
  }

  // One stream of a worker's reports, closed before this returns: by then
  // the controller has queued every report for its loop.
  void Send(const v1::WorkerIdentity& id, std::vector<v1::AgentReport> reports) {
    for (const v1::ReportAck& a : SendReports(id, std::move(reports)))
      EXPECT_EQ(a.result(), v1::ReportAck::RESULT_STORED) << a.error();
  }

  void ReportExit(const std::string& run_id, const std::string& node, int launch,
                  const std::vector<v1::RankExit>& ranks, int worker_exit_code,
                  const std::string& planned_stop = "") {
    grpc::ClientContext ctx;
    v1::ReportExitRequest req;
    *req.mutable_id() = Id(run_id, node, launch);
    for (const auto& r : ranks) *req.add_ranks() = r;
    req.set_exit_code(worker_exit_code);
    req.set_oom_kills(0);
    req.set_planned_stop(planned_stop);
    v1::ReportExitResponse resp;
    EXPECT_TRUE(agent_stub_->ReportExit(&ctx, req, &resp).ok()) << node;
  }

  // Submits `spec`, expects `run_id`, and has node1 and node2 register for
  // launch 1: the run is RUNNING when this returns.
  void SubmitAndRun(const std::string& spec, const std::string& run_id) {
    v1::SubmitRunResponse resp;
    ASSERT_TRUE(Submit(spec, &resp).ok());
    ASSERT_EQ(resp.run_id(), run_id);
    WaitFor(run_id, v1::RUN_STATE_SUBMITTED);
    Register(run_id, 1, {"node1", "node2"});
    WaitFor(run_id, v1::RUN_STATE_RUNNING);
  }

  // The batch script (on the allocation's first node) asks what follows the launch.
  v1::NextLaunchResponse NextLaunch(const std::string& run_id, int launch, int step_exit_code,
                                    const std::string& batch_host = "node1",
                                    bool time_limit_warned = false) {
    grpc::ClientContext ctx;
    v1::NextLaunchRequest req;
    *req.mutable_id() = Id(run_id, batch_host, launch);
    req.set_step_exit_code(step_exit_code);
    req.set_time_limit_warned(time_limit_warned);
    v1::NextLaunchResponse resp;
    EXPECT_TRUE(agent_stub_->NextLaunch(&ctx, req, &resp).ok());
    return resp;
  }

  // A complete checkpoint of `step` in the run's checkpoint directory, as a
  // rank leaves it at a planned stop (the manifest written last).
  void WriteCheckpoint(const std::string& run_id, int64_t step) {
    char name[32];
    std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
    const auto dir = std::filesystem::path(Get(run_id).run_dir()) / "checkpoints" / name;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "manifest.json") << "{}";
  }

  // A round trip through the controller's loop: what was posted to it
  // before (timers' work included) has run.
  void Sync() { Nodes(); }

  // Moves the fake clock `seconds`, one second at a time, letting the loop
  // run what each second's timers posted (run health checks every second).
  // `every_5s` runs first at 0, 5, 10, ... s: heartbeats, steps.
  void Pass(int seconds, const std::function<void()>& every_5s = nullptr) {
    for (int s = 0; s < seconds; ++s) {
      if (every_5s && s % 5 == 0) every_5s();
      clock_.Advance(std::chrono::seconds(1));
      Sync();
    }
  }

  bool Signalled(const std::string& entry) {
    auto all = slurm_->Signalled();
    return std::find(all.begin(), all.end(), entry) != all.end();
  }
  // Signals reach Slurm from the controller's Slurm thread: bounded poll.
  bool WaitSignalled(const std::string& entry) {
    return Eventually([&] { return Signalled(entry); });
  }

  std::vector<v1::HealthEvent> HealthEvents(const std::string& run_id, const std::string& kind) {
    std::vector<v1::HealthEvent> out;
    const v1::Run run = Get(run_id);
    for (const auto& e : run.health_events())
      if (e.kind() == kind) out.push_back(e);
    return out;
  }

  // node -> the metrics_addr its worker sends in Register (none when absent).
  std::map<std::string, std::string> metrics_addrs_;
};

}  // namespace trellis::controller
