#include "controller/core/decisions.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

using std::chrono::seconds;

TEST(DecideScheduleTest, WaitsWithTheReasonUsersSee) {
  WallTime now = FakeClock().Now();
  auto d = DecideSchedule(4, 3, now, now);
  EXPECT_FALSE(d.submit);
  EXPECT_EQ(d.wait_reason, "needs 4 nodes, 3 eligible");
  d = DecideSchedule(2, 3, now + seconds(30), now);
  EXPECT_FALSE(d.submit);
  EXPECT_EQ(d.wait_reason, "restart backoff, 30 s left");
  EXPECT_TRUE(DecideSchedule(3, 3, now, now).submit);
}

NodeVerdict Pass(const std::string& node, double free_gib) {
  return {node, true, {}, free_gib * kGiB, {}};
}
NodeVerdict Fail(const std::string& node, const std::string& why) {
  return {node, false, {why}, 0, {}};
}

struct GateCase {
  const char* name;
  std::vector<NodeVerdict> registered;
  std::vector<std::string> allocated;
  int expected, needed;
  bool timed_out;
  GateOutcome::Kind kind;
  std::vector<std::string> go;      // nodes that go, in rank order
  std::vector<std::string> failed;  // nodes to quarantine
  const char* reason_contains;
};

TEST(DecideGateTest, Table) {
  const GateCase cases[] = {
      {"waits for everyone", {Pass("n1", 108)}, {}, 2, 2, false, GateOutcome::kWaiting, {}, {}, ""},
      {"all pass", {Pass("n2", 108), Pass("n1", 108)}, {}, 2, 2, false, GateOutcome::kGo,
       {"n1", "n2"}, {}, "2 nodes go, 0 standing by"},
      {"best two of three by worst-socket free memory",
       {Pass("n1", 101), Pass("n2", 108), Pass("n3", 105)}, {}, 3, 2, false, GateOutcome::kGo,
       {"n2", "n3"}, {}, "1 standing by"},
      {"ties broken by node name", {Pass("n10", 108), Pass("n9", 108), Pass("n2", 108)}, {}, 3, 2,
       false, GateOutcome::kGo, {"n2", "n9"}, {}, "2 nodes go"},
      {"a short node is replaced by the spare",
       {Pass("node1", 108), Fail("node3", "socket 0: 72.7 GiB free < 100.0 GiB required"),
        Pass("node2", 108)},
       {}, 3, 2, false, GateOutcome::kGo, {"node1", "node2"}, {"node3"}, "1 failed the gate"},
      {"short without a spare aborts",
       {Pass("node1", 108), Fail("node3", "socket 0: 72.7 GiB free < 100.0 GiB required")}, {}, 2,
       2, false, GateOutcome::kAbort, {}, {"node3"},
       "1 of 2 nodes passed, 2 needed; node3: socket 0: 72.7 GiB free < 100.0 GiB required"},
      {"timeout with enough", {Pass("n1", 108), Pass("n2", 108)}, {"n1", "n2", "n3"}, 3, 2, true,
       GateOutcome::kGo, {"n1", "n2"}, {"n3"}, "2 nodes go"},
      {"timeout short names the missing node", {Pass("n1", 108)}, {"n1", "n2"}, 2, 2, true,
       GateOutcome::kAbort, {}, {"n2"}, "1 never registered; n2: no registration within 120 s"},
      {"all fail", {Fail("n1", "probe failed: x"), Fail("n2", "probe failed: y")}, {}, 2, 1, false,
       GateOutcome::kAbort, {}, {"n1", "n2"}, "0 of 2 nodes passed, 1 needed"},
      {"nobody registered", {}, {}, 2, 2, true, GateOutcome::kAbort, {}, {}, "2 never registered"},
  };
  for (const auto& c : cases) {
    auto out = DecideGate(c.registered, c.allocated, c.expected, c.needed, 4, c.timed_out,
                          seconds(120));
    EXPECT_EQ(out.kind, c.kind) << c.name;
    std::vector<std::pair<int, std::string>> go;
    for (const auto& a : out.assignments)
      if (a.go) go.push_back({a.node_index, a.node});
    std::sort(go.begin(), go.end());
    std::vector<std::string> go_names;
    for (const auto& [i, n] : go) go_names.push_back(n);
    EXPECT_EQ(go_names, c.go) << c.name;
    EXPECT_EQ(out.failed_nodes, c.failed) << c.name;
    EXPECT_NE(out.reason.find(c.reason_contains), std::string::npos) << c.name << ": " << out.reason;
  }
}

// A node short of the ranks' host memory (checkpoint.async's copy) passes,
// but a spare with room goes first, whatever its free memory; short nodes
// that go are named.
TEST(DecideGateTest, NodesShortOfTheRanksHostMemoryGoLast) {
  NodeVerdict short_one = Pass("n1", 109);
  short_one.short_of_ranks_memory = {"socket 1: 109.0 GiB free < 110.2 GiB with the ranks' ..."};
  auto out = DecideGate({short_one, Pass("n2", 111), Pass("n3", 110.5)}, {}, 3, 2, 4, false,
                        seconds(1));
  ASSERT_EQ(out.kind, GateOutcome::kGo);
  EXPECT_FALSE(out.assignments[0].go);
  EXPECT_TRUE(out.failed_nodes.empty());
  EXPECT_EQ(out.reason, "2 nodes go, 1 standing by");
  out = DecideGate({short_one, Pass("n2", 111)}, {}, 2, 2, 4, false, seconds(1));
  ASSERT_EQ(out.kind, GateOutcome::kGo);
  EXPECT_EQ(out.reason,
            "2 nodes go, 0 standing by; n1 short of the ranks' host memory: socket 1: 109.0 GiB "
            "free < 110.2 GiB with the ranks' ...");
}

TEST(DecideGateTest, RanksAreContiguousPerNodeInNodeNameOrder) {
  auto out = DecideGate({Pass("b", 108), Pass("a", 108), Pass("c", 100)}, {}, 3, 2, 4, false,
                        seconds(1));
  ASSERT_EQ(out.assignments.size(), 3u);
  EXPECT_EQ(out.assignments[0].node, "b");
  EXPECT_EQ(out.assignments[0].rank_offset, 4);
  EXPECT_EQ(out.assignments[1].rank_offset, 0);
  EXPECT_FALSE(out.assignments[2].go);
}

TEST(NaturalLessTest, DigitRunsCompareAsNumbers) {
  EXPECT_TRUE(NaturalLess("node2", "node10"));
  EXPECT_FALSE(NaturalLess("node10", "node2"));
  EXPECT_TRUE(NaturalLess("a1b", "a1c"));
  EXPECT_TRUE(NaturalLess("n01", "n2"));
  EXPECT_FALSE(NaturalLess("n1", "n1"));
}

TEST(DecideRestartTest, BacksOffExponentiallyThenGivesUp) {
  spec::RestartSection p;
  p.max_restarts = 2;
  p.backoff_s = 10;
  WallTime now = FakeClock().Now();
  auto first = DecideRestart(0, p, "rank 1 exited with 3", now);
  EXPECT_TRUE(first.requeue);
  EXPECT_EQ(first.not_before, now + seconds(10));
  auto second = DecideRestart(1, p, "x", now);
  EXPECT_EQ(second.not_before, now + seconds(20));
  auto third = DecideRestart(2, p, "rank 1 exited with 3", now);
  EXPECT_FALSE(third.requeue);
  EXPECT_EQ(third.reason, "rank 1 exited with 3 (2 of 2 restarts used)");
}

TEST(ReconcileTest, Table) {
  SlurmJob running{"7", "RUNNING", "None", "node[1-2]", std::nullopt, std::nullopt};
  SlurmJob done{"7", "COMPLETED", "None", "node[1-2]", 0, std::nullopt};
  SlurmJob failed{"7", "FAILED", "NonZeroExitCode", "node1", 3, std::nullopt};
  SlurmJob cancelled{"7", "CANCELLED", "None", "node1", 143, std::nullopt};
  ExitFile ok{0, 1, "launch 1 ended with 0", std::nullopt};
  ExitFile bad{3, 1, "launch 1 ended with 3", std::nullopt};

  EXPECT_EQ(Reconcile(running, std::nullopt).kind, Reconciliation::kAlive);
  auto r = Reconcile(done, ok);
  EXPECT_TRUE(r.succeeded);
  r = Reconcile(std::nullopt, ok);  // forgotten by Slurm, exit.json says 0
  EXPECT_TRUE(r.succeeded);
  r = Reconcile(failed, bad);
  EXPECT_FALSE(r.succeeded);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.reason, "launch 1 ended with 3 (Slurm: FAILED)");
  r = Reconcile(failed, std::nullopt);
  EXPECT_EQ(r.reason, "Slurm job 7 ended FAILED with exit code 3 and left no exit.json");
  r = Reconcile(cancelled, ok);  // killed after exit.json was written: not a success
  EXPECT_FALSE(r.succeeded);
  r = Reconcile(std::nullopt, std::nullopt);
  EXPECT_EQ(r.kind, Reconciliation::kEnded);
  EXPECT_FALSE(r.succeeded);
  EXPECT_EQ(r.reason, "Slurm job vanished and left no exit.json");
  EXPECT_FALSE(r.stopped_by);
  // Not the program's fault: continued without a restart.
  SlurmJob timeout{"7", "TIMEOUT", "TimeLimit", "node1", 0, std::nullopt};
  EXPECT_EQ(Reconcile(timeout, std::nullopt).stopped_by, FailureClass::kTimeLimit);
  SlurmJob preempted{"7", "PREEMPTED", "None", "node1", 0, std::nullopt};
  EXPECT_EQ(Reconcile(preempted, std::nullopt).stopped_by, FailureClass::kPreemption);
  ExitFile warned{1, 1, "wall-time warning", std::nullopt};
  EXPECT_EQ(Reconcile(std::nullopt, warned).stopped_by, FailureClass::kTimeLimit);
  EXPECT_FALSE(Reconcile(failed, bad).stopped_by);
}

TEST(ReconcileTest, AnExitFileFromBeforeARequeueIsSetAside) {
  // Slurm requeued job 7, then could not start it again (slurmd refused the
  // revoked credential): the exit.json there is the first run's.
  SlurmJob refused{"7", "FAILED", "NonZeroExitCode", "node1", 1, 1};
  ExitFile first_run{143, 1, "terminated by Slurm", 0};
  auto r = Reconcile(refused, first_run);
  EXPECT_EQ(r.kind, Reconciliation::kEnded);
  EXPECT_FALSE(r.succeeded);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.reason,
            "Slurm job 7 ended FAILED with exit code 1 after requeue 1, before its batch script "
            "wrote an exit.json (the one there is from before the requeue)");
  // Written by the run that ended, or with a count unknown on either side: used.
  ExitFile second_run{0, 2, "launch 2 ended with 0", 1};
  SlurmJob done{"7", "COMPLETED", "None", "node1", 0, 1};
  EXPECT_TRUE(Reconcile(done, second_run).succeeded);
  ExitFile count_unknown{143, 1, "terminated by Slurm", std::nullopt};
  EXPECT_EQ(Reconcile(refused, count_unknown).exit_code, 143);
  SlurmJob forgotten_count{"7", "FAILED", "NonZeroExitCode", "node1", 1, std::nullopt};
  EXPECT_EQ(Reconcile(forgotten_count, first_run).exit_code, 143);
  // A wall-time warning before the requeue does not make the end a time limit.
  EXPECT_FALSE(Reconcile(refused, ExitFile{1, 1, "wall-time warning", 0}).stopped_by);
}

TEST(UnknownPartitionTest, NamesThePartitionsThereAre) {
  EXPECT_EQ(UnknownPartition("gpu", {"debug", "gpu"}), "");
  EXPECT_EQ(UnknownPartition("", {"debug"}), "") << "the default partition";
  EXPECT_EQ(UnknownPartition("gpux", {}), "") << "not known: no check";
  EXPECT_EQ(UnknownPartition("gpux", {"debug", "gpu"}),
            "slurm.partition: 'gpux' is not a partition of this cluster; its partitions: "
            "debug, gpu");
}

TEST(RefusedAccountOrQosTest, NamesTheAccountsOrTheQosThereAre) {
  const std::vector<SlurmAssociation> assocs = {{"proj7", {"normal"}}, {"proj8", {"high"}}};
  spec::SlurmSection s;
  EXPECT_EQ(RefusedAccountOrQos(s, assocs), "") << "the default account";
  s.account = "proj9";
  EXPECT_EQ(RefusedAccountOrQos(s, {}), "") << "no accounting: no check";
  EXPECT_EQ(RefusedAccountOrQos(s, assocs),
            "slurm.account: 'proj9' is not an account of yours in Slurm's accounting; yours: "
            "proj7, proj8");
  s.account = "proj8";
  s.extra_args = {"--qos=normal", "--exclusive", "--qos=high"};  // the last one counts
  EXPECT_EQ(RefusedAccountOrQos(s, assocs), "");
  s.extra_args = {"--qos=normal"};
  EXPECT_EQ(RefusedAccountOrQos(s, assocs),
            "slurm.extra_args: --qos=normal is not a QOS of account proj8 in Slurm's "
            "accounting; allowed: high");
  s.account = "";
  s.extra_args = {"--qos=gold"};
  EXPECT_EQ(RefusedAccountOrQos(s, assocs),
            "slurm.extra_args: --qos=gold is not a QOS of your accounts in Slurm's accounting; "
            "allowed: normal, high");
  EXPECT_EQ(RefusedAccountOrQos(s, {{"proj7", {}}}), "") << "no QOS listed: none checked";
}

TEST(NeverStartsWhileTest, OnlyReasonsThatDoNotPassByThemselves) {
  for (const char* passes : {"Priority", "Resources", "BeginTime", "None", "Dependency", ""})
    EXPECT_EQ(NeverStartsWhile(passes), "") << passes;
  EXPECT_EQ(NeverStartsWhile("PartitionTimeLimit"), "its time limit is over its partition's");
  EXPECT_EQ(NeverStartsWhile("ReqNodeNotAvail, UnavailableNodes:node[3-4]"),
            "a node it needs is down, drained or reserved");
}

}  // namespace
}  // namespace trellis::controller
