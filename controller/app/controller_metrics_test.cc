// The controller's metrics and its service-discovery file through a run's
// life: submission, the gate, steps, a relaunch after a lost worker, the end.

#include <cmath>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "controller/app/controller_health_fixture.h"
#include "prometheus/text_serializer.h"

namespace trellis::controller {
namespace {

constexpr char kMetricsRun[] = "met-1";

std::string MetricsSpec(const std::string& more) {
  return "[job]\nname = \"met\"\ncommand = \"train\"\n"
         "[slurm]\nnodes = 2\nranks_per_node = 2\n" +
         more;
}

class ControllerMetricsTest : public HealthTest {
 protected:
  // What a scrape would read once the loop ran what was posted before.
  std::string Text() {
    Sync();
    return prometheus::TextSerializer().Serialize(controller_->metrics().registry()->Collect());
  }
  double Value(const std::string& series) {
    std::string text = Text(), key = "\n" + series + " ";
    size_t at = text.find(key);
    if (at == std::string::npos) return std::nan("");
    return std::strtod(text.c_str() + at + key.size(), nullptr);
  }
  nlohmann::json Targets() {
    Sync();
    std::ifstream in(dir_ / "targets.json");
    return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }
  nlohmann::json Target(const std::string& node, const std::string& addr) {
    return {{"targets", nlohmann::json::array({addr})},
            {"labels", {{"run", kMetricsRun}, {"node", node}}}};
  }
  void StartRun(const std::string& spec, const std::vector<std::string>& nodes) {
    v1::SubmitRunResponse resp;
    ASSERT_TRUE(Submit(spec, &resp).ok());
    ASSERT_EQ(resp.run_id(), kMetricsRun);
    WaitFor(kMetricsRun, v1::RUN_STATE_SUBMITTED);
    Register(kMetricsRun, 1, nodes);
    WaitFor(kMetricsRun, v1::RUN_STATE_RUNNING);
  }
};

TEST_F(ControllerMetricsTest, ARunsLifeFromSubmissionToItsEnd) {
  EXPECT_EQ(Targets(), nlohmann::json::array()) << "written empty at start";
  metrics_addrs_ = {
      {"node1", "host-node1:9400"}, {"node2", "host-node2:9400"}, {"node3", "host-node3:9400"}};
  StartRun(MetricsSpec("spare_nodes = 1\n"), {"node1", "node2", "node3"});

  // node3 stands by: not a target.
  EXPECT_EQ(Targets(), nlohmann::json::array({Target("node1", "host-node1:9400"),
                                              Target("node2", "host-node2:9400")}));
  EXPECT_EQ(Value("trellis_runs{state=\"RUNNING\"}"), 1);
  EXPECT_EQ(Value("trellis_runs{state=\"QUEUED\"}"), 0);
  EXPECT_EQ(Value("trellis_attempts_total"), 1);
  EXPECT_EQ(Value("trellis_launches_total"), 1);
  EXPECT_EQ(Value("trellis_gate_decisions_total{decision=\"GO\"}"), 1);
  EXPECT_EQ(Value("trellis_gate_socket_free_bytes{node=\"node3\",run=\"met-1\",socket=\"1\"}"),
            static_cast<double>(static_cast<int64_t>(106.0 * kGiB)));
  EXPECT_EQ(
      Value("trellis_gate_socket_unattributed_bytes{node=\"node1\",run=\"met-1\",socket=\"0\"}"),
      static_cast<double>(static_cast<int64_t>(8.0 * kGiB)));
  EXPECT_EQ(Value("trellis_rpc_duration_seconds_count{method=\"SubmitRun\"}"), 1);
  EXPECT_EQ(Value("trellis_rpc_duration_seconds_count{method=\"Register\"}"), 3);
  EXPECT_EQ(Value("trellis_slurm_command_duration_seconds_count{command=\"sbatch\"}"), 1);
  EXPECT_GE(Value("trellis_slurm_command_duration_seconds_count{command=\"sinfo\"}"), 1);
  EXPECT_GE(Value("trellis_store_write_duration_seconds_count"), 3);  // 3 transitions at least

  // Step 1 from every rank; rank 2 is the slowest. Step 2 is not complete.
  Send(Id(kMetricsRun, "node1", 1), {StepReport(0, 1, 0.5), StepReport(1, 1, 0.6)});
  Send(Id(kMetricsRun, "node2", 1),
       {StepReport(2, 1, 1.6), StepReport(3, 1, 0.5), StepReport(3, 2, 0.5)});
  EXPECT_EQ(Value("trellis_run_last_step{run=\"met-1\"}"), 1);
  EXPECT_EQ(Value("trellis_run_slowest_rank{run=\"met-1\"}"), 2);
  EXPECT_DOUBLE_EQ(Value("trellis_run_slowest_step_seconds{run=\"met-1\"}"), 1.6);
  EXPECT_DOUBLE_EQ(Value("trellis_run_median_step_seconds{run=\"met-1\"}"), 0.55);
  EXPECT_DOUBLE_EQ(Value("trellis_run_tokens_per_second{run=\"met-1\"}"), 400 / 1.6);

  for (const char* node : {"node1", "node2"}) ReportExit(kMetricsRun, node, 1, {}, 0);
  ASSERT_EQ(NextLaunch(kMetricsRun, 1, 0).action(), v1::NextLaunchResponse::ACTION_EXIT);
  WaitFor(kMetricsRun, v1::RUN_STATE_SUCCEEDED);
  EXPECT_EQ(Targets(), nlohmann::json::array());
  EXPECT_EQ(Value("trellis_runs{state=\"RUNNING\"}"), 0);
  EXPECT_EQ(Value("trellis_runs{state=\"SUCCEEDED\"}"), 1);
  EXPECT_EQ(Text().find("run=\"met-1\""), std::string::npos) << "the run's series are gone";
  EXPECT_EQ(Value("trellis_rpc_duration_seconds_count{method=\"NextLaunch\"}"), 1);
}

TEST_F(ControllerMetricsTest, ALostWorkerIsARestartOfItsClassAndTheTargetsFollowTheLaunches) {
  metrics_addrs_ = {
      {"node1", "host-node1:9400"}, {"node2", "not an address"}, {"node3", "host-node3:9400"}};
  StartRun(MetricsSpec("spare_nodes = 1\n[restart]\nmax_restarts = 1\n"),
           {"node1", "node2", "node3"});
  // node2's address was dropped at the edge.
  EXPECT_EQ(Targets(), nlohmann::json::array({Target("node1", "host-node1:9400")}));

  // node2's worker was killed: only node1 reports. The launch is classified
  // node_lost, node2 is struck and the run relaunches on node1 and node3.
  ReportExit(kMetricsRun, "node1", 1, {RankEnded(0, 143, 15, true), RankEnded(1, 143, 15, true)},
             143);
  ASSERT_EQ(NextLaunch(kMetricsRun, 1, 137).action(), v1::NextLaunchResponse::ACTION_RELAUNCH);
  WaitFor(kMetricsRun, v1::RUN_STATE_RESTARTING);
  EXPECT_EQ(Targets(), nlohmann::json::array()) << "launch 1 settled";
  EXPECT_EQ(Value("trellis_restarts_total{class=\"node_lost\"}"), 1);
  EXPECT_EQ(Value("trellis_relaunches_total"), 1);
  EXPECT_EQ(Value("trellis_node_strikes_total{node=\"node2\"}"), 1);
  EXPECT_EQ(Value("trellis_quarantined_nodes"), 1);

  Register(kMetricsRun, 2, {"node1", "node3"});
  WaitFor(kMetricsRun, v1::RUN_STATE_RUNNING);
  EXPECT_EQ(Targets(), nlohmann::json::array({Target("node1", "host-node1:9400"),
                                              Target("node3", "host-node3:9400")}));
  EXPECT_EQ(Value("trellis_launches_total"), 2);
  EXPECT_EQ(Value("trellis_attempts_total"), 1);
  // The relaunch's gate replaced the first gate's figures.
  EXPECT_TRUE(std::isnan(
      Value("trellis_gate_socket_free_bytes{node=\"node2\",run=\"met-1\",socket=\"0\"}")));
  EXPECT_FALSE(std::isnan(
      Value("trellis_gate_socket_free_bytes{node=\"node3\",run=\"met-1\",socket=\"0\"}")));

  // Cancelled: its workers are no targets any more.
  grpc::ClientContext ctx;
  v1::CancelRunRequest req;
  req.set_run_id(kMetricsRun);
  v1::CancelRunResponse resp;
  ASSERT_TRUE(user_stub_->CancelRun(&ctx, req, &resp).ok());
  EXPECT_EQ(Targets(), nlohmann::json::array());
  EXPECT_EQ(Value("trellis_runs{state=\"CANCELLED\"}"), 1);
}

// Goodput through the controller on the fake clock: 10 s SUBMITTED, 5 s
// GATING, launch 1 steps every 10 s from 25 s (step 10 at 115 s, the step the
// relaunch resumes from; step 12 at 135 s) and loses node2 at 150 s; 20 s
// RESTARTING; launch 2 runs steps 11 on from 180 s and succeeds at 200 s.
TEST_F(ControllerMetricsTest, GoodputFromTheStatesAndTheStepsKept) {
  using std::chrono::seconds;
  // Durations are measured on the clock: waits hold it still, and the one
  // reconciliation (which exports the run's goodput series) falls at 190 s.
  waits_tick_ = false;
  StopController();
  reconcile_interval_ = seconds(190);
  StartController();
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(MetricsSpec("spare_nodes = 1\n[restart]\nmax_restarts = 1\n"), &resp).ok());
  WaitFor(kMetricsRun, v1::RUN_STATE_SUBMITTED);
  clock_.Advance(seconds(10));
  auto first = std::async(std::launch::async, [&] {
    Register(kMetricsRun, 1, {"node1", "node2"});
  });
  WaitFor(kMetricsRun, v1::RUN_STATE_GATING);
  clock_.Advance(seconds(5));
  Register(kMetricsRun, 1, {"node3"});  // the spare: the gate has all three now
  first.get();
  WaitFor(kMetricsRun, v1::RUN_STATE_RUNNING);

  auto steps = [&](int launch, const std::vector<std::string>& nodes, int64_t from, int64_t to) {
    for (int64_t step = from; step <= to; ++step) {
      clock_.Advance(seconds(10));
      Send(Id(kMetricsRun, nodes[0], launch), {StepReport(0, step, 10), StepReport(1, step, 10)});
      Send(Id(kMetricsRun, nodes[1], launch), {StepReport(2, step, 10), StepReport(3, step, 10)});
      Sync();  // recorded at this second
    }
  };
  auto seconds_of = [&](const char* state) {
    return Value("trellis_run_state_seconds_total{run=\"met-1\",state=\"" + std::string(state) +
                 "\"}");
  };
  steps(1, {"node1", "node2"}, 1, 12);  // at 25 .. 135 s
  clock_.Advance(seconds(15));
  ReportExit(kMetricsRun, "node1", 1, {RankEnded(0, 143, 15, true), RankEnded(1, 143, 15, true)},
             143);
  ASSERT_EQ(NextLaunch(kMetricsRun, 1, 137).action(), v1::NextLaunchResponse::ACTION_RELAUNCH);
  v1::Run run = WaitFor(kMetricsRun, v1::RUN_STATE_RESTARTING);
  // No later launch has run a step: all of launch 1's steps still count as
  // kept; the step in flight (10 s, as its last) is lost, the rest restarting.
  const v1::StateSeconds& at150 = run.summary().state_seconds();
  EXPECT_EQ(at150.queued(), 10);
  EXPECT_EQ(at150.gating(), 5);
  EXPECT_EQ(at150.running(), 120);
  EXPECT_EQ(at150.redone(), 10);
  EXPECT_EQ(at150.restarting(), 5);
  EXPECT_DOUBLE_EQ(run.summary().goodput_ratio(), 120.0 / 150);
  EXPECT_EQ(seconds_of("queued"), 10);
  EXPECT_EQ(seconds_of("redone"), 10);
  EXPECT_EQ(seconds_of("restarting"), 5);
  EXPECT_EQ(Value("trellis_run_running_seconds{run=\"met-1\"}"), 120);
  EXPECT_DOUBLE_EQ(Value("trellis_run_goodput_ratio{run=\"met-1\"}"), 120.0 / 150);

  clock_.Advance(seconds(20));
  Register(kMetricsRun, 2, {"node1", "node3"});
  WaitFor(kMetricsRun, v1::RUN_STATE_RUNNING);
  steps(2, {"node1", "node3"}, 11, 12);  // at 180, 190 s: resumed from step 10
  run = Get(kMetricsRun);
  // Launch 1's steps 11 and 12 were redone: 115 .. 135 s moved out of running.
  const v1::StateSeconds& at190 = run.summary().state_seconds();
  EXPECT_EQ(at190.queued(), 10);
  EXPECT_EQ(at190.gating(), 5);
  EXPECT_EQ(at190.running(), 100 + 20);
  EXPECT_EQ(at190.redone(), 20 + 10);
  EXPECT_EQ(at190.restarting(), 5 + 20);
  EXPECT_DOUBLE_EQ(run.summary().goodput_ratio(), 120.0 / 190);
  // The series follow at the reconciliation at 190 s; the ratio was 120/170
  // at the transition at 170 s.
  EXPECT_TRUE(Eventually([&] {
    return std::abs(Value("trellis_run_goodput_ratio{run=\"met-1\"}") - 120.0 / 190) < 1e-9;
  }));
  EXPECT_EQ(seconds_of("queued"), 10);
  EXPECT_EQ(seconds_of("gating"), 5);
  EXPECT_EQ(seconds_of("redone"), 30);
  EXPECT_EQ(seconds_of("restarting"), 25);
  EXPECT_EQ(Value("trellis_run_running_seconds{run=\"met-1\"}"), 120);
  EXPECT_DOUBLE_EQ(Value("trellis_run_goodput_ratio{run=\"met-1\"}"), 120.0 / 190);

  clock_.Advance(seconds(10));
  for (const char* node : {"node1", "node3"}) ReportExit(kMetricsRun, node, 2, {}, 0);
  ASSERT_EQ(NextLaunch(kMetricsRun, 2, 0).action(), v1::NextLaunchResponse::ACTION_EXIT);
  run = WaitFor(kMetricsRun, v1::RUN_STATE_SUCCEEDED);
  EXPECT_EQ(run.summary().state_seconds().running(), 130);
  EXPECT_DOUBLE_EQ(run.summary().goodput_ratio(), 130.0 / 200);
  EXPECT_EQ(Text().find("run=\"met-1\""), std::string::npos) << "the run's series are gone";
  clock_.Advance(seconds(100));
  EXPECT_EQ(Get(kMetricsRun).summary().state_seconds().running(), 130)
      << "an ended run stays ended";
}

}  // namespace
}  // namespace trellis::controller
