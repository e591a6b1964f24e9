// A controller started again while a launch's workers register: the gate's
// stored decision answers them (launches.cc, go_record.h). A worker whose GO
// was lost with the old controller registers again and gets the same GO; the
// node the GO left out stands by; a worker of a launch that ended is turned
// away. No second gate, so no rank starts twice.

#include "controller/app/controller_health_fixture.h"

namespace trellis::controller {
namespace {

constexpr char kRun[] = "again-1";

class ControllerRestartTest : public HealthTest {
 protected:
  void StartRun() {
    v1::SubmitRunResponse resp;
    ASSERT_TRUE(Submit("[job]\nname = \"again\"\ncommand = \"train\"\n"
                       "[slurm]\nnodes = 2\nranks_per_node = 2\nspare_nodes = 1\n"
                       "[restart]\nmax_restarts = 2\nbackoff_s = 0\n",
                       &resp)
                    .ok());
    ASSERT_EQ(resp.run_id(), kRun);
    WaitFor(kRun, v1::RUN_STATE_SUBMITTED);
  }
  void Restart() {
    StopController();
    StartController();
  }
  int GateRecords() {
    grpc::ClientContext ctx;
    v1::GateReportRequest req;
    req.set_run_id(kRun);
    v1::GateReportResponse report;
    EXPECT_TRUE(user_stub_->GateReport(&ctx, req, &report).ok());
    return report.gates_size();
  }
};

TEST_F(ControllerRestartTest, AWorkerRegisteringAgainGetsTheGoDecidedBeforeTheRestart) {
  StartRun();
  auto first = Register(kRun, 1, {"node1", "node2", "node3"});
  ASSERT_EQ(first["node2"].decision(), v1::GateDecision::DECISION_GO) << first["node2"].reason();
  ASSERT_EQ(first["node3"].decision(), v1::GateDecision::DECISION_STANDBY);
  WaitFor(kRun, v1::RUN_STATE_RUNNING);

  // node1 heard GO and runs ranks 0 and 1; node2's and node3's answers were
  // lost with the controller.
  Restart();
  auto again = Register(kRun, 1, {"node2", "node3"});
  const v1::GateDecision& go = again["node2"];
  ASSERT_EQ(go.decision(), v1::GateDecision::DECISION_GO) << go.reason();
  EXPECT_EQ(go.node_index(), first["node2"].node_index());
  EXPECT_EQ(go.rank_offset(), 2);
  EXPECT_EQ(go.ranks_per_node(), 2);
  EXPECT_EQ(go.world_size(), 4);
  EXPECT_EQ(go.master_addr(), "host-node1");
  EXPECT_EQ(go.master_port(), first["node2"].master_port());
  EXPECT_EQ(go.resume_step(), first["node2"].resume_step());
  EXPECT_EQ(go.checkpoint_dir(), first["node2"].checkpoint_dir());
  EXPECT_EQ(go.data_roots_size(), first["node2"].data_roots_size());
  EXPECT_EQ(again["node3"].decision(), v1::GateDecision::DECISION_STANDBY);
  EXPECT_EQ(again["node3"].reason(), "the gate of launch 1.1 already decided: node1, node2 go");
  // Nothing was gated a second time.
  EXPECT_EQ(GateRecords(), 1);
  EXPECT_EQ(WaitFor(kRun, v1::RUN_STATE_RUNNING).launches_size(), 1);

  // The launch ends as any launch across a restart: srun's status decides.
  EXPECT_EQ(NextLaunch(kRun, 1, 0).action(), v1::NextLaunchResponse::ACTION_EXIT);
  WaitFor(kRun, v1::RUN_STATE_SUCCEEDED);
}

TEST_F(ControllerRestartTest, AWorkerOfALaunchThatEndedIsTurnedAwayNotGated) {
  StartRun();
  Register(kRun, 1, {"node1", "node2", "node3"});
  WaitFor(kRun, v1::RUN_STATE_RUNNING);
  ReportExit(kRun, "node1", 1, {RankEnded(0, 3, 0, false), RankEnded(1, 143, 15, true)}, 3);
  ReportExit(kRun, "node2", 1, {RankEnded(2, 143, 15, true), RankEnded(3, 143, 15, true)}, 143);
  v1::NextLaunchResponse next = NextLaunch(kRun, 1, 3);
  ASSERT_EQ(next.action(), v1::NextLaunchResponse::ACTION_RELAUNCH) << next.reason();
  WaitFor(kRun, v1::RUN_STATE_RESTARTING);

  for (bool restarted : {false, true}) {
    if (restarted) Restart();
    auto late = Register(kRun, 1, {"node2"});
    EXPECT_EQ(late["node2"].decision(), v1::GateDecision::DECISION_ABORT);
    EXPECT_NE(late["node2"].reason().find("launch 1.1 already ended"), std::string::npos)
        << late["node2"].reason();
    // The run waits for its relaunch, not for a gate of the old launch.
    EXPECT_EQ(WaitFor(kRun, v1::RUN_STATE_RESTARTING).summary().state_reason(),
              next.reason());
  }
  EXPECT_EQ(GateRecords(), 1);
}

}  // namespace
}  // namespace trellis::controller
