#include "controller/core/failure_class.h"

#include <csignal>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/exit_codes.h"

namespace trellis::controller {
namespace {

using FC = FailureClass;

RankEnd End(const std::string& node, int rank, int code, int sig = 0, bool after_stop = false,
            std::vector<std::string> markers = {}, std::string line = "") {
  return {node, rank, code, sig, after_stop, std::move(markers), std::move(line)};
}

LaunchEvidence Ranks(int step_exit, std::vector<RankEnd> ends) {
  LaunchEvidence e;
  e.step_exit_code = step_exit;
  e.rank_ends = std::move(ends);
  return e;
}

template <typename F>
LaunchEvidence With(LaunchEvidence e, F f) {
  f(e);
  return e;
}

TEST(FailureClassTest, NamesRoundTrip) {
  const std::pair<FC, const char*> names[] = {{FC::kSucceeded, "succeeded"},
                                              {FC::kRankExit, "rank_exit"},
                                              {FC::kSignal, "signal"},
                                              {FC::kDeviceOom, "device_oom"},
                                              {FC::kHostOom, "host_oom"},
                                              {FC::kDeviceError, "device_error"},
                                              {FC::kNccl, "nccl"},
                                              {FC::kNodeLost, "node_lost"},
                                              {FC::kHang, "hang"},
                                              {FC::kUserError, "user_error"},
                                              {FC::kGate, "gate"},
                                              {FC::kTimeLimit, "time_limit"},
                                              {FC::kPreemption, "preemption"},
                                              {FC::kTerminated, "terminated"},
                                              {FC::kCancel, "cancel"},
                                              {FC::kDamagedCheckpoint, "damaged_checkpoint"}};
  for (const auto& [cls, name] : names) {
    EXPECT_EQ(FailureClassName(cls), name);
    EXPECT_EQ(ParseFailureClass(name), cls) << name;
  }
  EXPECT_EQ(ParseFailureClass("Hang"), std::nullopt);
  EXPECT_EQ(ParseFailureClass(""), std::nullopt);
}

HangEvidence Hung(int rank, std::string node, int64_t last_step, double silent_s,
                  bool before_first_step) {
  HangEvidence h;
  h.rank = rank;
  h.node = std::move(node);
  h.last_step = last_step;
  h.silent_s = silent_s;
  h.before_first_step = before_first_step;
  return h;
}

struct Case {
  const char* name;
  LaunchEvidence evidence;
  FC cls;
  int exit_code;
  bool retryable;
  std::string blamed;
  std::string reason;  // exact
};

TEST(ClassifyLaunchTest, Table) {
  const HangEvidence hang = Hung(0, "node1", 17, 62.4, false);
  const auto failing = Ranks(1, {End("node2", 1, 3)});
  const Case cases[] = {
      {"success", Ranks(0, {End("n1", 0, 0), End("n2", 1, 0)}), FC::kSucceeded, 0, false, "",
       "all 2 ranks exited 0"},
      {"no reports, step 0", Ranks(0, {}), FC::kSucceeded, 0, false, "", "srun step ended with 0"},
      {"no reports, step killed", Ranks(137, {}), FC::kSignal, 137, true, "",
       "srun step ended with 137"},
      {"no reports, do not retry", Ranks(kExitDoNotRetry, {}), FC::kUserError, 79, false, "",
       "srun step ended with 79"},
      {"step failed, a worker never reported",
       With(Ranks(3, {End("n1", 0, 0)}),
            [](auto& e) {
              e.go_nodes = {"n1", "n2"};
              e.reported_nodes = {"n1"};
            }),
       FC::kRankExit, 3, true, "", "srun step ended with 3; no final report from n2"},
      {"the controller restarted: no reports kept",
       With(Ranks(137, {}),
            [](auto& e) {
              e.go_nodes = {"n1"};
              e.controller_restarted = true;
            }),
       FC::kSignal, 137, true, "",
       "srun step ended with 137; no final report from n1 (the controller restarted during the "
       "launch)"},
      {"cancel beats everything",
       With(failing,
            [](auto& e) {
              e.cancelled = e.time_limit = e.gate_aborted = true;
              e.lost_nodes = {"node3"};
            }),
       FC::kCancel, kExitCancelled, false, "", "cancelled"},
      {"time limit beats preemption and gate",
       With(failing, [](auto& e) { e.time_limit = e.preempted = e.gate_aborted = true; }),
       FC::kTimeLimit, 1, true, "", "reached the Slurm time limit"},
      {"time limit, a worker lost before it: still blamed",
       With(Ranks(0, {}),
            [](auto& e) {
              e.time_limit = true;
              e.lost_nodes = {"node7"};
              e.lost_silent_s = {{"node7", 30.0}};
            }),
       FC::kTimeLimit, 1, true, "node7",
       "reached the Slurm time limit; before that, node node7 lost: worker silent for 30 s"},
      {"preemption, a rank hung before it: its node blamed",
       With(Ranks(0, {}),
            [&](auto& e) {
              e.preempted = true;
              e.hang = hang;
            }),
       FC::kPreemption, 1, true, "node1",
       "preempted; before that, rank 0 on node1 hung: no step for 62 s after step 17"},
      {"time limit, a device error before it: its node blamed, not the peer's NCCL error",
       With(Ranks(1, {End("node4", 8, 1, 0, false, {"nccl_error"}),
                      End("node3", 4, 1, 0, false, {"device_error"}, "Xid 79"),
                      End("node5", 12, 1, 0, true, {"device_error"})}),
            [](auto& e) { e.time_limit = true; }),
       FC::kTimeLimit, 1, true, "node3",
       "reached the Slurm time limit; before that, rank 4 on node3 exited with 1: device error; "
       "log: Xid 79"},
      {"preemption, SIGBUS before it: blamed",
       With(Ranks(1, {End("node2", 1, 0, SIGBUS)}), [](auto& e) { e.preempted = true; }),
       FC::kPreemption, 1, true, "node2",
       "preempted; before that, rank 1 on node2 was killed by signal 7 (SIGBUS)"},
      {"time limit: kills, one node's NCCL error and a device error after the stop blame nobody",
       With(Ranks(137, {End("node2", 1, 137, SIGKILL), End("node3", 4, 1, 0, false, {"network"}),
                        End("node4", 8, 1, 0, true, {"device_error"})}),
            [](auto& e) {
              e.time_limit = true;
              e.oom_kills = {{"node2", 0}};
            }),
       FC::kTimeLimit, 137, true, "", "reached the Slurm time limit"},
      {"handoff: the time limit's signal, the controller's stop",
       With(Ranks(0, {}), [](auto& e) { e.handoff = e.time_limit = true; }), FC::kHandoff, 1,
       true, "", "stopped for the next attempt, waiting ahead and started"},
      {"handoff, a worker lost before it: still blamed",
       With(Ranks(0, {}),
            [](auto& e) {
              e.handoff = true;
              e.lost_nodes = {"node7"};
              e.lost_silent_s = {{"node7", 30.0}};
            }),
       FC::kHandoff, 1, true, "node7",
       "stopped for the next attempt, waiting ahead and started; before that, node node7 lost: "
       "worker silent for 30 s"},
      {"preemption beats gate",
       With(Ranks(0, {}), [](auto& e) { e.preempted = e.gate_aborted = true; }), FC::kPreemption, 1,
       true, "", "preempted"},
      {"gate beats a lost node",
       With(Ranks(0, {}),
            [](auto& e) {
              e.gate_aborted = true;
              e.lost_nodes = {"n1"};
            }),
       FC::kGate, kExitGateAbort, true, "", "the launch gate aborted"},
      {"lost beats hang and ranks",
       With(failing,
            [&](auto& e) {
              e.lost_nodes = {"node3"};
              e.lost_silent_s = {{"node3", 31.2}};
              e.hang = hang;
            }),
       FC::kNodeLost, 1, true, "node3", "node node3 lost: worker silent for 31 s"},
      {"several lost: the first is blamed, all named",
       With(Ranks(0, {}),
            [](auto& e) {
              e.lost_nodes = {"node3", "node5", "node7"};
            }),
       FC::kNodeLost, 1, true, "node3",
       "node node3 lost: its worker's stream broke without a final report; also lost: node5, "
       "node7"},
      {"hang beats a failing rank", With(failing, [&](auto& e) { e.hang = hang; }), FC::kHang, 1,
       true, "node1", "rank 0 on node1 hung: no step for 62 s after step 17"},
      {"hang before the first step",
       With(Ranks(143, {}),
            [](auto& e) {
              e.hang = Hung(2, "node2", -1, 905, true);
            }),
       FC::kHang, 143, true, "node2", "rank 2 on node2 hung: no first step after 905 s"},
      {"ranks that ended after the stop are consequences",
       Ranks(3, {End("node1", 0, 143, 0, true), End("node2", 1, 3), End("node2", 2, 0)}),
       FC::kRankExit, 3, true, "", "rank 1 on node2 exited with 3"},
      {"the first in arrival order decides, not the lowest rank",
       Ranks(1, {End("n2", 3, 2), End("n1", 0, 1)}), FC::kRankExit, 2, true, "",
       "rank 3 on n2 exited with 2"},
      {"a failing rank fails the launch even when srun said 0", Ranks(0, {End("n1", 0, 3)}),
       FC::kRankExit, 3, true, "", "rank 0 on n1 exited with 3"},
      {"no marker: the log line quoted is the log's last, and says so",
       Ranks(3, {End("n1", 0, 3, 0, false, {}, "checkpoint step 10 written in 4.3 s")}),
       FC::kRankExit, 3, true, "",
       "rank 0 on n1 exited with 3; last log line: checkpoint step 10 written in 4.3 s"},
      {"the same code on two nodes blames no one", Ranks(1, {End("n1", 0, 1), End("n2", 1, 1)}),
       FC::kRankExit, 1, true, "", "rank 0 on n1 exited with 1"},
      {"do not retry wins over markers",
       Ranks(79, {End("n1", 0, kExitDoNotRetry, 0, false, {"device_oom"})}), FC::kUserError, 79,
       false, "", "rank 0 on n1 exited with 79: the program asked not to be retried"},
      {"a damaged checkpoint wins over the peers heard before it, and blames no node",
       Ranks(1, {End("n1", 0, 1, 0, false, {"network"}, "all-gather failed (a peer exited)"),
                 End("n2", 1, kExitDamagedCheckpoint, 0, false, {"damaged_checkpoint"},
                     "trellis rank: damaged checkpoint step 40: checkpoint shard s.bin: "
                     "truncated")}),
       FC::kDamagedCheckpoint, 74, true, "",
       "rank 1 on n2 exited with 74: the checkpoint it resumed from is damaged; log: trellis "
       "rank: damaged checkpoint step 40: checkpoint shard s.bin: truncated"},
      {"exit 74 without the line is any program's EX_IOERR",
       Ranks(74, {End("n2", 1, kExitDamagedCheckpoint)}), FC::kRankExit, 74, true, "",
       "rank 1 on n2 exited with 74"},
      {"device OOM blames no node",
       Ranks(1, {End("node2", 1, 1, 0, false, {"device_oom", "nccl_error"},
                     "torch.OutOfMemoryError: CUDA out of memory")}),
       FC::kDeviceOom, 1, true, "",
       "rank 1 on node2 exited with 1: out of device memory; log: torch.OutOfMemoryError: CUDA "
       "out of memory"},
      {"host OOM marker", Ranks(1, {End("node2", 1, 1, 0, false, {"host_oom"})}), FC::kHostOom, 1,
       true, "", "rank 1 on node2 exited with 1: out of host memory"},
      {"SIGKILL with OOM kills is host OOM",
       With(Ranks(137, {End("node2", 1, 137, 9)}),
            [](auto& e) {
              e.oom_kills = {{"node2", 2}, {"node1", 0}};
            }),
       FC::kHostOom, 137, true, "",
       "rank 1 on node2 was killed by signal 9 (SIGKILL): out of host memory (2 OOM kills in "
       "the job on node2)"},
      {"a lone SIGKILL with no OOM kill blames no one",
       With(Ranks(137, {End("node2", 1, 137)}),
            [](auto& e) {
              e.oom_kills = {{"node2", 0}};
            }),
       FC::kSignal, 137, true, "",
       "rank 1 on node2 was killed by signal 9 (SIGKILL): no OOM kill and no second signal, so "
       "node2 is not blamed (a lone kill: a user's, a site watchdog's)"},
      {"a second lone SIGKILL on the node blames it",
       With(Ranks(137, {End("node2", 1, 137)}),
            [](auto& e) {
              e.oom_kills = {{"node2", 0}};
              e.earlier_lone_kills = {{"node2", "run r7 launch 1.1"},
                                      {"node1", "run r8 launch 2.1"}};
            }),
       FC::kSignal, 137, true, "node2",
       "rank 1 on node2 was killed by signal 9 (SIGKILL): blamed on node2: its second lone "
       "SIGKILL within 24 h (the first: run r7 launch 1.1)"},
      {"an earlier lone SIGKILL on another node does not blame this one",
       With(Ranks(137, {End("node2", 1, 137)}),
            [](auto& e) {
              e.oom_kills = {{"node2", 0}};
              e.earlier_lone_kills = {{"node1", "run r8 launch 2.1"}};
            }),
       FC::kSignal, 137, true, "",
       "rank 1 on node2 was killed by signal 9 (SIGKILL): no OOM kill and no second signal, so "
       "node2 is not blamed (a lone kill: a user's, a site watchdog's)"},
      {"a SIGKILL beside a device error on its node blames the node",
       With(Ranks(137, {End("node2", 1, 137), End("node2", 0, 1, 0, false, {"device_error"})}),
            [](auto& e) {
              e.oom_kills = {{"node2", 0}};
            }),
       FC::kSignal, 137, true, "node2",
       "rank 1 on node2 was killed by signal 9 (SIGKILL): blamed on node2: rank 0 on it had a "
       "device error"},
      {"SIGKILL with the OOM count unknown blames no one", Ranks(137, {End("node2", 1, 0, 9)}),
       FC::kSignal, 137, true, "", "rank 1 on node2 was killed by signal 9 (SIGKILL)"},
      {"SIGBUS blames the node", Ranks(135, {End("node4", 5, 135)}), FC::kSignal, 135, true,
       "node4", "rank 5 on node4 was killed by signal 7 (SIGBUS)"},
      {"SIGSEGV is the program's", Ranks(139, {End("node4", 5, 139, 11)}), FC::kSignal, 139, true,
       "", "rank 5 on node4 was killed by signal 11 (SIGSEGV)"},
      {"device error outranks the NCCL errors it causes",
       Ranks(1, {End("node3", 4, 1, 0, false, {"nccl_error", "device_error"}),
                 End("node1", 0, 1, 0, false, {"nccl_error"})}),
       FC::kDeviceError, 1, true, "node3", "rank 4 on node3 exited with 1: device error"},
      {"NCCL failures on one node blame it",
       Ranks(1, {End("node2", 2, 1, 0, false, {"nccl_timeout"}),
                 End("node2", 3, 1, 0, false, {"nccl_error"}), End("node1", 0, 143, 0, true)}),
       FC::kNccl, 1, true, "node2",
       "rank 2 on node2 exited with 1: NCCL or network failure (nccl_timeout)"},
      {"NCCL failures on several nodes blame no one",
       Ranks(1, {End("node2", 2, 1, 0, false, {"nccl_error"}),
                 End("node3", 4, 1, 0, false, {"network"})}),
       FC::kNccl, 1, true, "",
       "rank 2 on node2 exited with 1: NCCL or network failure (nccl_error) on 2 nodes"},
      {"network marker alone", Ranks(1, {End("node2", 2, 1, 0, false, {"network"})}), FC::kNccl, 1,
       true, "node2", "rank 2 on node2 exited with 1: NCCL or network failure (network)"},
      {"only stopped ranks failed: classified, nobody blamed",
       Ranks(1, {End("n1", 0, 0), End("n2", 1, 1, 0, true, {"device_error"})}), FC::kDeviceError, 1,
       true, "",
       "rank 1 on n2 exited with 1 after its worker began stopping the ranks: device error"},
  };
  for (const auto& c : cases) {
    LaunchVerdict v = ClassifyLaunch(c.evidence);
    EXPECT_EQ(FailureClassName(v.cls), FailureClassName(c.cls)) << c.name;
    EXPECT_EQ(v.succeeded, c.cls == FC::kSucceeded) << c.name;
    EXPECT_EQ(v.exit_code, c.exit_code) << c.name;
    EXPECT_EQ(v.retryable, c.retryable) << c.name;
    EXPECT_EQ(v.blamed_node, c.blamed) << c.name;
    EXPECT_EQ(v.reason, c.reason) << c.name;
    auto j = nlohmann::json::parse(v.evidence_json);
    EXPECT_EQ(j["class"], FailureClassName(c.cls)) << c.name;
  }
}

TEST(ClassifyLaunchTest, EvidenceNamesTheRank) {
  auto e = Ranks(137, {End("node2", 1, 137, 9, false, {"nccl_error"}, "NCCL WARN x")});
  e.oom_kills = {{"node2", 0}};
  auto j = nlohmann::json::parse(ClassifyLaunch(e).evidence_json);
  EXPECT_EQ(j["rank"], 1);
  EXPECT_EQ(j["node"], "node2");
  EXPECT_EQ(j["exit_code"], 137);
  EXPECT_EQ(j["signal"], 9);
  EXPECT_EQ(j["markers"], nlohmann::json::array({"nccl_error"}));
  EXPECT_EQ(j["evidence_line"], "NCCL WARN x");
  EXPECT_EQ(j["oom_kills"], 0);
  EXPECT_EQ(j["step_exit_code"], 137);
}

// A lone kill is marked so that the next one on its node is its second
// signal (launch_end.cc reads the mark back from the stored evidence).
TEST(ClassifyLaunchTest, ALoneKillIsMarkedAndASecondOneSaysWhy) {
  auto e = Ranks(137, {End("node2", 1, 137)});
  e.oom_kills = {{"node2", 0}};
  auto lone = nlohmann::json::parse(ClassifyLaunch(e).evidence_json);
  EXPECT_EQ(lone["lone_kill"], true);
  EXPECT_FALSE(lone.contains("second_signal"));
  e.earlier_lone_kills = {{"node2", "run r7 launch 1.1"}};
  auto second = nlohmann::json::parse(ClassifyLaunch(e).evidence_json);
  EXPECT_FALSE(second.contains("lone_kill"));
  EXPECT_EQ(second["second_signal"],
            "its second lone SIGKILL within 24 h (the first: run r7 launch 1.1)");
  e.oom_kills.clear();  // unknown: maybe an OOM kill, neither lone nor blamed
  auto unknown = nlohmann::json::parse(ClassifyLaunch(e).evidence_json);
  EXPECT_FALSE(unknown.contains("lone_kill"));
  EXPECT_FALSE(unknown.contains("second_signal"));
}

// A hang whose culprit is unknown (every rank at one step, none stopped)
// blames no node; one whose process was stopped says so and is blamed.
TEST(ClassifyLaunchTest, AHangBlamesANodeOnlyWhenItsRankIsKnown) {
  LaunchEvidence e;
  e.step_exit_code = 143;
  HangEvidence h;
  h.rank = 0;
  h.node = "node1";
  h.last_step = 134;
  h.silent_s = 5.4;
  h.culprit_unknown = true;
  e.hang = h;
  LaunchVerdict v = ClassifyLaunch(e);
  EXPECT_EQ(v.cls, FailureClass::kHang);
  EXPECT_EQ(v.blamed_node, "");
  EXPECT_EQ(v.reason,
            "every rank hung after step 134 (no step for 5 s), none of their processes "
            "stopped or stuck in the kernel: a collective that never completed, and nothing "
            "says which rank held it, so no node is blamed");
  h.culprit_unknown = false;
  h.rank = 1;
  h.process_state = 'T';
  e.hang = h;
  v = ClassifyLaunch(e);
  EXPECT_EQ(v.blamed_node, "node1");
  EXPECT_EQ(v.reason, "rank 1 on node1 hung: no step for 5 s after step 134 (its process was "
                      "stopped)");
  EXPECT_EQ(nlohmann::json::parse(v.evidence_json)["process_state"], "T");
}

TEST(ClassifyLaunchTest, EvidenceOfHangsAndLostNodes) {
  auto e = Ranks(0, {});
  e.hang = Hung(3, "n2", 17, 62.5, false);
  auto j = nlohmann::json::parse(ClassifyLaunch(e).evidence_json);
  EXPECT_EQ(j["last_step"], 17);
  EXPECT_EQ(j["silent_s"], 62.5);
  EXPECT_EQ(j["before_first_step"], false);
  e.lost_nodes = {"n4", "n1"};
  j = nlohmann::json::parse(ClassifyLaunch(e).evidence_json);
  EXPECT_EQ(j["lost_nodes"], nlohmann::json::array({"n4", "n1"}));
  EXPECT_EQ(j["class"], "node_lost");
}

TEST(ClassifyLaunchTest, LongLogLinesAreCutInTheReason) {
  auto v = ClassifyLaunch(Ranks(1, {End("n1", 0, 1, 0, false, {}, std::string(5000, 'x'))}));
  EXPECT_LT(v.reason.size(), 300u);
  EXPECT_EQ(nlohmann::json::parse(v.evidence_json)["evidence_line"].get<std::string>().size(),
            1024u);
}

TEST(ClassifyLaunchTest, CutsNeverSplitAUtf8CharacterAndBadBytesDoNotThrow) {
  // "é" is two bytes: 1023 of them followed by one cut at 1024 would split it.
  std::string line = "x";
  for (int i = 0; i < 700; ++i) line += "\xc3\xa9";
  auto v = ClassifyLaunch(Ranks(1, {End("n1", 0, 1, 0, false, {}, line)}));
  auto cut = nlohmann::json::parse(v.evidence_json)["evidence_line"].get<std::string>();
  EXPECT_EQ(cut.size() % 2, 1u);  // "x" plus whole two-byte characters
  auto bad = ClassifyLaunch(Ranks(1, {End("n1", 0, 1, 0, false, {}, "bad \xff\xfe bytes")}));
  EXPECT_TRUE(nlohmann::json::accept(bad.evidence_json));
}

}  // namespace
}  // namespace trellis::controller
