#pragma once
// The launch parts' tests: hello-1's attempt 1 (Slurm job 42, secret
// "s3cret"), its workers registering with memory probes, and a launch taken
// through the gate.

#include "common/sha256.h"
#include "common/version.h"
#include "controller/app/launch_answers.h"
#include "controller/app/launches.h"
#include "controller/app/part_test_util.h"

namespace trellis::controller {

class LaunchTest : public PartTest {
 protected:
  void SetUp() override {
    AddRun(RunState::kSubmitted, 1, spec_);
    AttemptRecord& a = store_.AddAttempt("hello-1", 1, "42");
    a.secret_sha256 = Sha256Hex("s3cret");
    a.nodelist = "node[1-2]";
  }
  static WorkerId Worker(const std::string& node, int launch = 1) {
    return {"hello-1", 1, launch, node, "s3cret"};
  }
  // Two sockets of 119.7 GiB; the second has `free_gib` free.
  static NodeProbe Probe(double free_gib = 106) {
    constexpr double kGiB = 1024.0 * 1024 * 1024;
    NodeProbe p;
    for (double free : {108.0, free_gib}) {
      SocketProbe s;
      s.numa_node = static_cast<int>(p.sockets.size());
      s.cpulist = "0-71";
      s.total_bytes = static_cast<int64_t>(119.7 * kGiB);
      s.free_bytes = static_cast<int64_t>(free * kGiB);
      s.unattributed_bytes = static_cast<int64_t>(8 * kGiB);
      p.sockets.push_back(s);
    }
    return p;
  }
  Effects Register(const std::string& node, uint64_t reply, double free_gib = 106,
                   int launch = 1) {
    return launches_.gate.Register(Worker(node, launch), kVersion, "host-" + node, Probe(free_gib),
                              {"42", std::to_string(launch - 1)}, "", ReplyTo<GateAnswer>{reply});
  }
  // node1 .. node<n> register and pass; the run is RUNNING, as the GO stored it.
  Effects Go(int n = 2) {
    Effects fx;
    for (int i = 1; i <= n; ++i) fx += Register("node" + std::to_string(i), i);
    store_.runs["hello-1"].state = RunState::kRunning;
    return fx;
  }
  // A worker's final report: every rank of its node exited `exit_code`.
  Effects Report(const std::string& node, int exit_code = 0, bool time_limit = false) {
    WorkerReport r;
    int first = node == "node1" ? 0 : 2;
    for (int rank = first; rank < first + 2; ++rank) {
      RankEnd end;
      end.node = node;
      end.rank = rank;
      end.exit_code = exit_code;
      r.ranks.push_back(end);
    }
    r.exit_code = exit_code;
    r.time_limit_warned = time_limit;
    return launches_.ends.ReportExit(Worker(node), r, ReplyTo<bool>{100});
  }
  Effects Next(int step_exit_code, NextLaunchQuestion q = {}) {
    q.step_exit_code = step_exit_code;
    return launches_.ends.NextLaunch(Worker("node1"), q, ReplyTo<NextLaunchAnswer>{200});
  }
  static NextLaunchAnswer Answered(const Effects& fx) {
    for (const SendReply* r : fx.All<SendReply>())
      if (r->to == 200) return Replied<NextLaunchAnswer>(*r);
    ADD_FAILURE() << "no answer to the batch script";
    return {};
  }

  // hello-1 RUNNING in launch 1.1 on node1 and node2 as a controller that
  // stopped left it: the launch's row with its GO, no end (LaunchResume reads it).
  void StoreRunningLaunch() {
    store_.runs["hello-1"].state = RunState::kRunning;
    GoRecord go;
    go.go.kind = GateAnswer::kGo;
    go.go.reason = "2 of 2 nodes passed";
    go.go.ranks_per_node = 2;
    go.go.world_size = 4;
    go.go.master_addr = "host-node1";
    go.go.master_port = 29500;
    go.step = {"42", "0"};
    go.allocation = {"node1", "node2"};
    LaunchRecord row;
    row.run_id = "hello-1";
    row.attempt = 1;
    row.launch = 1;
    row.nodes = "node1,node2";
    row.started = clock_.Now();
    row.go_json = GoRecordToJson(go);
    store_.launches["hello-1"] = {row};
  }

  std::string spec_ = kSpec;
  Launches launches_{ctx_};
};

}  // namespace trellis::controller
