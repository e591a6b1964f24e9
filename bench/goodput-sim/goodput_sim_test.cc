// The simulator's own pieces: the trace, the evidence it shows the
// controller, and the ledger's arithmetic on traces whose cost is known.
#include <gtest/gtest.h>

#include <chrono>

#include "bench/goodput-sim/evidence.h"
#include "bench/goodput-sim/rows.h"
#include "bench/goodput-sim/simulator.h"
#include "bench/goodput-sim/trace.h"

namespace trellis::bench {
namespace {

constexpr int64_t kSegmentS = 305;  // 300 s of training, then a 5 s checkpoint stall

// A small cluster with no queue wait and no start-up, so that costs are exact.
Scenario Small() {
  Scenario s;
  s.nodes_needed = 4;
  s.ranks_per_node = 2;
  s.cluster_nodes = 8;
  s.horizon_s = 100 * kSegmentS;
  s.interruptions = 0;
  s.queue_median_s = 0;
  s.job_start_s = 0;
  s.time_limit_s = 0;
  return s;
}

Strategy Trellis(int spares) {
  Strategy st;
  st.key = "t";
  st.spares = spares;
  return st;
}

std::vector<TraceEvent> One(FaultKind kind, int64_t at_s) { return {{at_s * 1000, kind, 0.5}}; }

void ExpectConsistent(const SimResult& r) {
  EXPECT_EQ(r.ledger.total_ms(), r.horizon_ms);
  EXPECT_TRUE(r.check.agrees) << r.check.mismatch;
}

TEST(GoodputSimTest, NoFailuresLeavesAllButTheCheckpointStalls) {
  SimResult r = Simulate(Small(), Trellis(2), {}, 1);
  EXPECT_EQ(r.ledger.productive_ms, 100 * 300 * 1000);
  EXPECT_EQ(r.ledger.stall_ms, 100 * 5 * 1000);
  EXPECT_DOUBLE_EQ(r.effective_ratio(), 300.0 / 305.0);
  ExpectConsistent(r);
}

TEST(GoodputSimTest, OneInterruptionCostsDetectionRedoneAndRelaunch) {
  // 200 s into the 11th segment: those 200 s are redone.
  for (FaultKind kind : {FaultKind::kNcclEverywhere, FaultKind::kDeviceError}) {
    SimResult r = Simulate(Small(), Trellis(2), One(kind, 10 * kSegmentS + 200), 1);
    EXPECT_EQ(r.ledger.redone_ms, 200'000);
    EXPECT_EQ(r.ledger.detection_ms, 30'000);
    EXPECT_EQ(r.ledger.relaunch_ms, 120'000);
    EXPECT_EQ(r.ledger.productive_ms + r.ledger.stall_ms, (100 * kSegmentS - 350) * 1000);
    EXPECT_EQ(r.counts.relaunches, 1);
    EXPECT_EQ(r.counts.new_attempts_after_failure, 0);
    EXPECT_EQ(r.counts.strikes, kind == FaultKind::kDeviceError ? 1 : 0);
    ExpectConsistent(r);
  }
}

TEST(GoodputSimTest, AHangIsNoticedAfterTheHangTimeout) {
  SimResult r = Simulate(Small(), Trellis(2), One(FaultKind::kHang, 10 * kSegmentS + 200), 1);
  EXPECT_EQ(r.ledger.detection_ms, 300'000);
  EXPECT_EQ(r.counts.strikes, 1);  // the hung rank's node
  EXPECT_EQ(r.counts.relaunches, 1);
  ExpectConsistent(r);
}

TEST(GoodputSimTest, ABlamedNodeWithoutSparesNeedsANewAttempt) {
  Scenario s = Small();
  s.job_start_s = 300;
  SimResult r = Simulate(s, Trellis(0), One(FaultKind::kDeviceError, 10 * kSegmentS), 1);
  EXPECT_EQ(r.counts.relaunches, 0);
  EXPECT_EQ(r.counts.new_attempts_after_failure, 1);
  EXPECT_EQ(r.counts.attempts, 2);
  EXPECT_EQ(r.ledger.backoff_ms, 30'000);  // RestartBackoff of the first restart
  EXPECT_EQ(r.ledger.start_ms, 2 * 300'000);
  ExpectConsistent(r);
}

TEST(GoodputSimTest, TheBackoffStartsAgainAfterAHealthyStretch) {
  Scenario s = Small();
  s.cluster_nodes = 20;  // room for the struck nodes' quarantine
  // Six failures 40 min apart, a launch of about 2.7 h, then one of 39 min:
  // every failure blames a node of an allocation without spares, so each is
  // a new attempt after the backoff.
  std::vector<TraceEvent> trace;
  for (int k = 1; k <= 6; ++k) trace.push_back({k * 2400 * 1000LL, FaultKind::kDeviceError, 0.5});
  trace.push_back({25200 * 1000LL, FaultKind::kDeviceError, 0.5});
  trace.push_back({27600 * 1000LL, FaultKind::kDeviceError, 0.5});
  Strategy never = Trellis(0);
  never.backoff_reset_s = 7 * 86400;  // longer than any launch: the doubling never resets
  SimResult reset = Simulate(s, Trellis(0), trace, 1), old = Simulate(s, never, trace, 1);
  EXPECT_EQ(reset.counts.new_attempts_after_failure, 8);
  EXPECT_EQ(old.counts.new_attempts_after_failure, 8);
  const int64_t first_six = (30 + 60 + 120 + 240 + 480 + 960) * 1000;
  EXPECT_EQ(reset.ledger.backoff_ms, first_six + 30'000 + 60'000);
  EXPECT_EQ(old.ledger.backoff_ms, first_six + 1920'000 + 1920'000);
  EXPECT_EQ(reset.counts.restarts_used, 8);  // the budget counts every restart
  ExpectConsistent(reset);
  ExpectConsistent(old);
}

TEST(GoodputSimTest, TheTimeLimitContinuesWithoutLosingWorkOrARestart) {
  Scenario s = Small();
  s.time_limit_s = 3600;
  s.horizon_s = 3 * 3600;
  SimResult r = Simulate(s, Trellis(2), {}, 1);
  EXPECT_EQ(r.counts.time_limit_stops, 2);
  EXPECT_EQ(r.counts.attempts, 3);
  EXPECT_EQ(r.counts.restarts_used, 0);
  EXPECT_EQ(r.ledger.productive_ms + r.ledger.stall_ms, s.horizon_s * 1000);
  ExpectConsistent(r);
}

TEST(GoodputSimTest, EdgesAgreeWithComputeGoodput) {
  Scenario s = Small();
  s.time_limit_s = 3600;
  // A failure whose detection the time limit cuts: the time limit decides.
  SimResult cut = Simulate(s, Trellis(2), One(FaultKind::kSameExit, 3600 - 10), 1);
  EXPECT_EQ(cut.counts.time_limit_stops, 8);  // one an hour in the 8.5 h
  EXPECT_EQ(cut.ledger.detection_ms, 10'000);
  ExpectConsistent(cut);
  // A failure the horizon comes before the controller notices.
  SimResult late = Simulate(Small(), Trellis(2), One(FaultKind::kHang, 100 * kSegmentS - 10), 1);
  EXPECT_EQ(late.ledger.undetected_at_end_ms, (kSegmentS - 10) * 1000 + 10'000);
  ExpectConsistent(late);
}

TEST(GoodputSimTest, TheRunFailsOnceItsRestartsAreUsed) {
  Strategy st = Trellis(2);
  st.max_restarts = 1;
  std::vector<TraceEvent> trace = {{1000 * 1000, FaultKind::kSameExit, 0.1},
                                   {5000 * 1000, FaultKind::kSameExit, 0.1}};
  SimResult r = Simulate(Small(), st, trace, 1);
  EXPECT_TRUE(r.counts.run_failed);
  EXPECT_EQ(r.counts.relaunches, 1);
  EXPECT_EQ(r.ledger.after_fail_ms, (100 * kSegmentS - 5030) * 1000);
  ExpectConsistent(r);
}

TEST(GoodputSimTest, AFaultyNodeComesBackWithoutQuarantineOnly) {
  Scenario s = Small();
  s.cluster_nodes = 5;  // one node more than an allocation: a faulty one mostly returns
  s.horizon_s = 2 * 86400;
  s.repeat_mean_s = 600;
  s.site_repair_s = 100 * 86400;
  const auto trace = One(FaultKind::kDeviceError, 3600);
  Strategy plain = Trellis(0);
  plain.quarantine = false;
  plain.relaunch_in_allocation = false;
  SimResult without = Simulate(s, plain, trace, 7);
  SimResult with = Simulate(s, Trellis(0), trace, 7);
  EXPECT_GT(without.counts.repeats["device_error"], 0);
  EXPECT_EQ(with.counts.repeats.size(), 0u);
  EXPECT_EQ(with.counts.nodes_quarantined, 1);
  ExpectConsistent(without);
  ExpectConsistent(with);
}

TEST(GoodputSimTest, TheEvidenceBlamesWhatTheScenarioSays) {
  const std::vector<std::string> go = {"node1", "node2", "node3", "node4"};
  struct Case {
    FaultKind kind;
    const char* cls;
    bool blames;
  } cases[] = {{FaultKind::kDeviceError, "device_error", true},
               {FaultKind::kNodeLost, "node_lost", true},
               {FaultKind::kNcclOneNode, "nccl", true},
               {FaultKind::kNcclEverywhere, "nccl", false},
               {FaultKind::kSameExit, "rank_exit", false},
               {FaultKind::kHang, "hang", true}};
  for (const Case& c : cases) {
    auto v = controller::ClassifyLaunch(EvidenceOf(c.kind, "node3", go, 8, 12, 30));
    EXPECT_EQ(controller::FailureClassName(v.cls), c.cls) << FaultKindName(c.kind);
    EXPECT_EQ(v.blamed_node, c.blames ? "node3" : "") << FaultKindName(c.kind);
    EXPECT_TRUE(v.retryable);
  }
  auto limit = controller::ClassifyLaunch(TimeLimitEvidence(go));
  EXPECT_EQ(limit.cls, controller::FailureClass::kTimeLimit);
  // Noticed only after the time limit (simulator.cc): a lost worker and a
  // device error are still blamed; a network error is not (a stop leaves
  // those on healthy ranks too).
  for (const Case& c : cases) {
    auto e = EvidenceOf(c.kind, "node3", go, 8, 12, 30);
    e.time_limit = true;
    e.hang.reset();
    auto v = controller::ClassifyLaunch(e);
    EXPECT_EQ(v.cls, controller::FailureClass::kTimeLimit) << FaultKindName(c.kind);
    bool kept = c.kind == FaultKind::kDeviceError || c.kind == FaultKind::kNodeLost;
    EXPECT_EQ(v.blamed_node, kept ? "node3" : "") << FaultKindName(c.kind);
  }
}

TEST(GoodputSimTest, TheTraceHasItsCountInTheHorizonAndDependsOnlyOnTheSeed) {
  Scenario s;
  auto a = MakeTrace(s, 1), b = MakeTrace(s, 1), c = MakeTrace(s, 2);
  ASSERT_EQ(a.size(), 419u);
  int node = 0, none = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_GE(a[i].at_ms, i ? a[i - 1].at_ms : 0);
    EXPECT_LT(a[i].at_ms, s.horizon_s * 1000);
    EXPECT_EQ(a[i].at_ms, b[i].at_ms);
    node += GroupOf(a[i].kind) == FaultGroup::kNodeEvidence;
    none += GroupOf(a[i].kind) == FaultGroup::kNoEvidence;
  }
  EXPECT_NE(a[0].at_ms, c[0].at_ms);
  EXPECT_NEAR(node / 419.0, 0.60, 0.08);
  EXPECT_NEAR(none / 419.0, 0.25, 0.08);
}

Strategy Ahead(int spares, int lead_s = 0) {
  Strategy st = Trellis(spares);
  st.continuation_ahead = true;
  st.continuation_lead_s = lead_s;
  return st;
}

// Queue waits of exactly `wait_s` under a 1 h time limit.
Scenario Limited(double wait_s, int64_t horizon_s) {
  Scenario s = Small();
  s.time_limit_s = 3600;
  s.horizon_s = horizon_s;
  s.queue_median_s = wait_s;
  s.queue_sigma = 0;
  return s;
}

TEST(GoodputSimTest, ContinuationsAheadShorterThanTheLeadLoseNoQueueWaitAtTimeLimits) {
  // 60 s waits, the lead at least 150 s (the auto floor): every continuation
  // starts before the limit and takes over. Only the first sbatch waits.
  const Scenario s = Limited(60, 5 * 3600);
  SimResult ahead = Simulate(s, Ahead(2), {}, 1), after = Simulate(s, Trellis(2), {}, 1);
  EXPECT_EQ(ahead.ledger.queue_ms, 60'000);
  EXPECT_EQ(ahead.counts.queue_after_time_limit_ms, 0);
  EXPECT_EQ(ahead.counts.time_limit_stops, 0);
  EXPECT_EQ(ahead.counts.ahead_waited_at_limit, 0);
  EXPECT_GE(ahead.counts.handoffs, 4);
  EXPECT_EQ(ahead.counts.attempts, ahead.counts.handoffs + 1);
  EXPECT_EQ(ahead.ledger.handoff_ms, ahead.counts.handoffs * 120'000);  // relaunch_s each
  EXPECT_EQ(ahead.ledger.redone_ms + ahead.ledger.detection_ms + ahead.ledger.relaunch_ms, 0);
  EXPECT_EQ(ahead.counts.restarts_used, 0);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(ahead.check.goodput.handoff),
            std::chrono::milliseconds(ahead.ledger.handoff_ms));
  ExpectConsistent(ahead);
  // The same run continuing after the limit waits at every one of them.
  EXPECT_EQ(after.counts.handoffs, 0);
  EXPECT_EQ(after.ledger.handoff_ms, 0);
  EXPECT_EQ(after.ledger.queue_ms, after.counts.attempts * 60'000);
  EXPECT_GT(after.counts.queue_after_time_limit_ms, 0);
  ExpectConsistent(after);
}

TEST(GoodputSimTest, AContinuationAheadLongerThanTheLeadWaitsOnlyItsRestAtTheLimit) {
  // 1000 s waits, a 600 s lead: eligible 600 s before each limit, started
  // 400 s after it; no new sbatch. Attempts start at 1000, 5000, 9000, 13000
  // and 17000 s; the horizon (18000 s) comes while the fifth trains.
  const Scenario s = Limited(1000, 18000);
  SimResult r = Simulate(s, Ahead(2, 600), {}, 1);
  EXPECT_EQ(r.counts.time_limit_stops, 4);
  EXPECT_EQ(r.counts.ahead_submitted, 4);
  EXPECT_EQ(r.counts.ahead_waited_at_limit, 4);
  EXPECT_EQ(r.counts.handoffs, 0);
  EXPECT_EQ(r.ledger.queue_ms, 1000'000 + 4 * 400'000);
  EXPECT_EQ(r.counts.queue_after_time_limit_ms, 4 * 400'000);
  ExpectConsistent(r);
}

TEST(GoodputSimTest, ANewAttemptAfterAFailureTakesTheContinuationWaitingAhead) {
  // Attempt 1 starts at 1000 s (limit at 4600 s); its continuation is
  // submitted at 3880 s, eligible at 4000 s, up at 5000 s. A device error at
  // 4200 s without spares needs a new attempt (noticed at 4230 s, backoff
  // 30 s): the waiting job is released with the struck node excluded and
  // keeps its place, so it starts at 5000 s: 770 s of queue, no sbatch.
  const Scenario s = Limited(1000, 7000);
  SimResult r = Simulate(s, Ahead(0, 600), One(FaultKind::kDeviceError, 4200), 1);
  EXPECT_EQ(r.counts.new_attempts_after_failure, 1);
  EXPECT_EQ(r.counts.ahead_taken_after_failure, 1);
  EXPECT_EQ(r.counts.attempts, 2);
  EXPECT_EQ(r.ledger.queue_ms, 1000'000 + 770'000);
  EXPECT_EQ(r.ledger.backoff_ms, 0);  // the queue outlasts it
  EXPECT_EQ(r.counts.strikes, 1);
  ExpectConsistent(r);
}

TEST(GoodputSimTest, EveryRowAgreesWithComputeGoodputOnAShortTrace) {
  for (Row row : BenchRows()) {
    row.scenario.nodes_needed = 16;
    row.scenario.cluster_nodes = row.strategy.spares > 16 ? 256 : 24;
    row.scenario.horizon_s = 6 * 86400;
    row.scenario.interruptions = 60;
    SimResult r = Simulate(row.scenario, row.strategy, MakeTrace(row.scenario, 3), 3);
    SCOPED_TRACE(row.strategy.key);
    ExpectConsistent(r);
    EXPECT_GT(r.effective_ratio(), 0.1);
  }
}

}  // namespace
}  // namespace trellis::bench
