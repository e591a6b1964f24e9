// The simulator's own pieces: the trace, the evidence it shows the
// controller, and the ledger's arithmetic on traces whose cost is known.
#include <gtest/gtest.h>

#include <chrono>

#include "bench/goodput-sim/evidence.h"
#include "bench/goodput-sim/rows.h"
#include "bench/goodput-sim/simulator.h"
#include "bench/goodput-sim/spare_pool.h"
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

TEST(GoodputSimTest, ACertifiedReturnKeepsOutANodeWhoseFaultEveryCheckCatches) {
  // Five nodes, four a run, an attempt an hour: once its quarantine ends, the
  // unrepaired faulty node is mostly in the next attempt and fails it again,
  // unless the check it must pass first catches its fault (here always).
  Scenario s = Small();
  s.cluster_nodes = 5;
  s.time_limit_s = 3600;
  s.horizon_s = 2 * 86400;
  s.repeat_mean_s = 600;
  s.site_repair_s = 100 * 86400;
  Strategy unrepaired = Trellis(0);
  unrepaired.quarantine_repairs = false;
  Strategy certified = unrepaired;
  certified.certify_return = true;
  certified.certify_catch = 1;
  const auto trace = One(FaultKind::kDeviceError, 1800);
  SimResult back = Simulate(s, unrepaired, trace, 7), out = Simulate(s, certified, trace, 7);
  EXPECT_GT(back.counts.repeats["device_error"], 0);
  EXPECT_EQ(back.counts.certify.checks, 0);
  EXPECT_EQ(out.counts.repeats.size(), 0u);
  EXPECT_EQ(out.counts.strikes, 1);  // the run's only one: the node never trained again
  EXPECT_GE(out.counts.certify.checks, 4);  // after 1, 2, 4, 8 and 16 h out
  EXPECT_EQ(out.counts.certify.failed, out.counts.certify.checks);
  ExpectConsistent(back);
  ExpectConsistent(out);
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

Strategy Pooled(int spares, int pool_nodes) {
  Strategy st = Trellis(spares);
  st.spare_pool_nodes = pool_nodes;
  return st;
}

// Queue waits of exactly `wait_s`, no time limit.
Scenario Queued(double wait_s) {
  Scenario s = Small();
  s.queue_median_s = wait_s;
  s.queue_sigma = 0;
  return s;
}

TEST(GoodputSimTest, AFailureWithTheSparesUsedUpDrawsTheStandingPoolInsteadOfANewAttempt) {
  // No spares: a blamed node leaves 3 healthy of 4 needed. The pool job,
  // submitted when the job started (no queue here), stands by then.
  const auto trace = One(FaultKind::kDeviceError, 10 * kSegmentS + 200);
  SimResult pooled = Simulate(Small(), Pooled(0, 1), trace, 1);
  EXPECT_EQ(pooled.counts.relaunches, 1);
  EXPECT_EQ(pooled.counts.new_attempts_after_failure, 0);
  EXPECT_EQ(pooled.counts.attempts, 1);
  EXPECT_EQ(pooled.counts.pool.draws, 1);
  EXPECT_EQ(pooled.counts.pool.jobs_submitted, 2);  // the first, and the refill
  EXPECT_EQ(pooled.counts.restarts_used, 1);        // a relaunch uses a restart
  EXPECT_EQ(pooled.ledger.relaunch_ms, 120'000);
  EXPECT_EQ(pooled.ledger.start_ms + pooled.ledger.queue_ms + pooled.ledger.backoff_ms, 0);
  ExpectConsistent(pooled);
  // Without the pool the same failure is a new attempt.
  SimResult alone = Simulate(Small(), Trellis(0), trace, 1);
  EXPECT_EQ(alone.counts.relaunches, 0);
  EXPECT_EQ(alone.counts.new_attempts_after_failure, 1);
  EXPECT_EQ(alone.counts.pool.jobs_submitted, 0);
}

TEST(GoodputSimTest, APoolJobStillInTheQueueIsNotDrawn) {
  // Every job waits 3600 s: the run's job starts at 3600 s, its pool job is
  // submitted then and stands from 7200 s.
  const Scenario s = Queued(3600);
  SimResult early = Simulate(s, Pooled(0, 1), One(FaultKind::kDeviceError, 4600), 1);
  EXPECT_EQ(early.counts.pool.draws, 0);
  EXPECT_EQ(early.counts.pool.queued_at_need, 1);
  EXPECT_EQ(early.counts.new_attempts_after_failure, 1);
  EXPECT_EQ(early.counts.relaunches, 0);
  ExpectConsistent(early);
  SimResult later = Simulate(s, Pooled(0, 1), One(FaultKind::kDeviceError, 7600), 1);
  EXPECT_EQ(later.counts.pool.draws, 1);
  EXPECT_EQ(later.counts.pool.queued_at_need, 0);
  EXPECT_EQ(later.counts.new_attempts_after_failure, 0);
  EXPECT_EQ(later.counts.relaunches, 1);
  ExpectConsistent(later);
}

TEST(GoodputSimTest, ADrawnPoolIsRefilledByAJobThatWaitsTheQueue) {
  // The pool stands from 7200 s; a failure at 7600 s draws it and submits
  // the refill, standing from 7630 + 3600 = 11230 s. A second blamed node
  // before then needs a new attempt; after it, the refill is drawn.
  const Scenario s = Queued(3600);
  auto two = [](int64_t second_s) {
    return std::vector<TraceEvent>{{7600 * 1000LL, FaultKind::kDeviceError, 0.5},
                                   {second_s * 1000, FaultKind::kDeviceError, 0.5}};
  };
  SimResult before = Simulate(s, Pooled(0, 1), two(11000), 1);
  EXPECT_EQ(before.counts.pool.draws, 1);
  EXPECT_EQ(before.counts.pool.queued_at_need, 1);
  EXPECT_EQ(before.counts.relaunches, 1);
  EXPECT_EQ(before.counts.new_attempts_after_failure, 1);
  ExpectConsistent(before);
  SimResult after = Simulate(s, Pooled(0, 1), two(11300), 1);
  EXPECT_EQ(after.counts.pool.draws, 2);
  EXPECT_EQ(after.counts.pool.jobs_submitted, 3);
  EXPECT_EQ(after.counts.relaunches, 2);
  EXPECT_EQ(after.counts.new_attempts_after_failure, 0);
  ExpectConsistent(after);
}

TEST(GoodputSimTest, ThePoolsNodesAreNoneOfTheAllocations) {
  // Five nodes: the allocation holds four, so the pool job gets the fifth,
  // and the continuation after the time limit is allocated the other four
  // again; a blamed node is then replaced by the pool's.
  Scenario s = Small();
  s.cluster_nodes = 5;
  s.time_limit_s = 3600;
  s.horizon_s = 2 * 3600 - 100;
  SimResult r = Simulate(s, Pooled(0, 1), One(FaultKind::kDeviceError, 3600 + 1800), 1);
  EXPECT_EQ(r.counts.time_limit_stops, 1);
  EXPECT_EQ(r.counts.pool.draws, 1);
  EXPECT_EQ(r.counts.relaunches, 1);
  EXPECT_EQ(r.counts.new_attempts_after_failure, 0);
  ExpectConsistent(r);
}

TEST(GoodputSimTest, AStandingPoolJobEndsAtItsTimeLimitAndIsReplaced) {
  // Jobs wait 600 s and last an hour: the pool job stands 1200-4800 s, its
  // replacement 5400-9000 s, the next from 9600 s to the horizon.
  Scenario s = Queued(600);
  s.time_limit_s = 3600;
  s.horizon_s = 3 * 3600;
  SimResult r = Simulate(s, Pooled(2, 1), {}, 1);
  EXPECT_EQ(r.counts.pool.expired, 2);
  EXPECT_EQ(r.counts.pool.jobs_submitted, 3);
  EXPECT_EQ(r.counts.pool.standing_ms, (3600 + 3600 + 1200) * 1000);
  ExpectConsistent(r);
}

// As the controller does (controller/core/spare_pool.h): a standing pool job
// that would end before the run's job is replaced, never drawn.
TEST(GoodputSimTest, AStandingPoolJobThatWouldEndBeforeTheRunsJobIsReplaced) {
  Scenario s = Queued(600);
  s.time_limit_s = 3600;
  SparePool pool(s, 1, 1);
  Cluster cluster(8);
  pool.Submit(0);  // stands 600 s .. 4200 s
  EXPECT_FALSE(pool.Standing(599 * 1000, {}, cluster, 4000 * 1000)) << "still queued";
  auto ok = pool.Standing(700 * 1000, {}, cluster, 4200 * 1000);
  ASSERT_TRUE(ok) << "it outlasts the run's job";
  EXPECT_EQ(ok->nodes.size(), 1u);
  EXPECT_FALSE(pool.Standing(800 * 1000, {}, cluster, 4201 * 1000)) << "it would end first";
  EXPECT_TRUE(pool.Standing(1400 * 1000, {}, cluster, 4201 * 1000)) << "its replacement";
  PoolCounts c = pool.Finish(1400 * 1000);
  EXPECT_EQ(c.replaced_short, 1);
  EXPECT_EQ(c.jobs_submitted, 2);
  EXPECT_EQ(c.standing_ms, 200 * 1000);
}

TEST(GoodputSimTest, ACheckpointWrittenBehindTheStepsIsLostToAFailureBeforeItIsOnDisk) {
  Scenario s = Small();
  s.checkpoint_write_s = 100;
  // 50 s after the 10th checkpoint's stall: it was not on disk yet.
  SimResult early =
      Simulate(s, Trellis(2), One(FaultKind::kNcclEverywhere, 10 * kSegmentS + 50), 1);
  EXPECT_EQ(early.ledger.redone_ms, (kSegmentS + 50) * 1000);
  ExpectConsistent(early);
  SimResult late =
      Simulate(s, Trellis(2), One(FaultKind::kNcclEverywhere, 10 * kSegmentS + 150), 1);
  EXPECT_EQ(late.ledger.redone_ms, 150'000);
  ExpectConsistent(late);
  // A stop writes its checkpoint in place: the stall and the write.
  s.time_limit_s = 3600;
  s.horizon_s = 2 * 3600;
  SimResult stop = Simulate(s, Trellis(2), {}, 1);
  EXPECT_EQ(stop.counts.time_limit_stops, 1);
  const int64_t segments = 3600 / kSegmentS;
  EXPECT_EQ(stop.ledger.stall_ms, (2 * segments * 5 + 105) * 1000);
  ExpectConsistent(stop);
}

TEST(GoodputSimTest, ARankThatEndsByItselfIsNoticedAfterTheExitDetection) {
  Scenario s = Small();
  s.exit_detect_s = 1;
  for (FaultKind kind : {FaultKind::kDeviceError, FaultKind::kSameExit, FaultKind::kNodeLost}) {
    SimResult r = Simulate(s, Trellis(2), One(kind, 10 * kSegmentS + 200), 1);
    EXPECT_EQ(r.ledger.detection_ms, kind == FaultKind::kNodeLost ? 30'000 : 1'000)
        << FaultKindName(kind);
    ExpectConsistent(r);
  }
}

TEST(GoodputSimTest, EveryRowAgreesWithComputeGoodputOnAShortTrace) {
  for (Row row : BenchRows()) {
    row.scenario.nodes_needed = 16;
    // Room for what the row keeps out; certified return keeps a caught node
    // out until the site repairs it (a day), where the others let it back.
    row.scenario.cluster_nodes = row.strategy.spares > 16    ? 256
                                 : row.strategy.certify_return ? 32
                                                               : 24 + row.strategy.spare_pool_nodes;
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
