// The store's records of what happened to runs: quarantine entries, gate
// records, launches, spare pool jobs, workers' final reports, health events.
#include <gtest/gtest.h>

#include "common/exit_codes.h"
#include "controller/core/certify.h"
#include "controller/store/store_test_fixture.h"

namespace trellis::controller {
namespace {

TEST_F(StoreTest, QuarantineEntriesUpsertAndReadBack) {
  QuarantineConfig config;
  auto e = Strike(std::nullopt, "node3", "socket 0: 72.7 GiB free < 100.0 GiB required",
                  "{\"free_bytes\":1}", "gate", false, clock_.Now(), config);
  ASSERT_TRUE(store_->PutQuarantine(e).ok());
  auto again = Strike(e, "node3", "second", "{}", "gate", false, clock_.Now(), config);
  ASSERT_TRUE(store_->PutQuarantine(again).ok());
  ASSERT_TRUE(store_->PutQuarantine(Strike(std::nullopt, "node1", "manual", "{}", "user:bob", true,
                                           clock_.Now(), config)).ok());
  auto all = store_->QuarantineEntries();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[1].node, "node3");
  EXPECT_EQ((*all)[1].strikes, 2);
  EXPECT_EQ((*all)[1].reason, "second");
  EXPECT_EQ(*(*all)[1].expiry, *again.expiry);
  EXPECT_FALSE((*all)[0].expiry.has_value());
  EXPECT_EQ((*all)[0].actor, "user:bob");
  EXPECT_FALSE(store_->FindQuarantine("node9")->has_value());
}

// Certified return: the newest check is kept beside the entry, in flight
// (no job id yet, then one) and ended; a new strike keeps it.
TEST_F(StoreTest, ANodesCheckIsKeptWithItsEntry) {
  QuarantineConfig config;
  auto e = Strike(std::nullopt, "node3", "probe failed", "{}", "gate", false, clock_.Now(), config);
  ASSERT_TRUE(store_->PutQuarantine(e).ok());
  EXPECT_FALSE((*store_->FindQuarantine("node3"))->last_check.has_value());
  NodeCheck c{"", clock_.Now(), std::nullopt, false, ""};
  ASSERT_TRUE(store_->SetNodeCheck("node3", c).ok());
  auto in_flight = (*store_->FindQuarantine("node3"))->last_check;
  ASSERT_TRUE(in_flight.has_value());
  EXPECT_EQ(in_flight->job_id, "");
  EXPECT_FALSE(in_flight->ended.has_value());
  c.job_id = "77";
  c = EndCheck(c, false, "exit 1: certify: FAILED: numa", clock_.Now());
  ASSERT_TRUE(store_->SetNodeCheck("node3", c).ok());
  auto again = Strike(*store_->FindQuarantine("node3"), "node3", "check failed", "{}", "certify",
                      false, clock_.Now(), config);
  ASSERT_TRUE(store_->PutQuarantine(again).ok());
  auto read = *store_->FindQuarantine("node3");
  ASSERT_TRUE(read->last_check.has_value());
  EXPECT_EQ(read->strikes, 2);
  EXPECT_EQ(read->last_check->job_id, "77");
  EXPECT_EQ(read->last_check->started, c.started);
  EXPECT_EQ(*read->last_check->ended, *c.ended);
  EXPECT_FALSE(read->last_check->passed);
  EXPECT_EQ(read->last_check->summary, "exit 1: certify: FAILED: numa");
  auto missing = store_->SetNodeCheck("node9", c);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, GateRecordsByAttempt) {
  RunRecord r = NewRun("hello");
  ASSERT_TRUE(store_->AddGateRecord(r.run_id, {1, 1, clock_.Now(), "ABORT", "x", "{}", "[]"}).ok());
  ASSERT_TRUE(store_->AddGateRecord(r.run_id, {2, 1, clock_.Now(), "GO", "y", "{}", "[]"}).ok());
  EXPECT_EQ(store_->GateRecords(r.run_id, 0)->size(), 2u);
  auto second = store_->GateRecords(r.run_id, 2);
  ASSERT_EQ(second->size(), 1u);
  EXPECT_EQ((*second)[0].decision, "GO");
}

TEST_F(StoreTest, LaunchesAreUpsertedAndListedInOrder) {
  RunRecord r = NewRun("hello");
  LaunchRecord l;
  l.run_id = r.run_id;
  l.attempt = 1;
  l.launch = 1;
  l.nodes = "node1,node2";
  l.started = clock_.Now();
  l.go_json = R"({"master_port":29500})";
  ASSERT_TRUE(store_->PutLaunch(l).ok());
  LaunchRecord second = l;
  second.launch = 2;
  second.nodes = "node1,node3";
  second.go_json = R"({"master_port":29501})";
  ASSERT_TRUE(store_->PutLaunch(second).ok());
  // How the launch ended, written without its GO: the GO stays.
  l.go_json.clear();
  l.ended = clock_.Now();
  l.failure_class = "node_lost";
  l.exit_code = 137;
  l.blamed_node = "node2";
  l.evidence_json = R"({"node":"node2"})";
  l.recovery = "relaunch";
  l.next_nodes = "node1,node3";
  ASSERT_TRUE(store_->PutLaunch(l).ok());
  auto all = store_->Launches(r.run_id);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].failure_class, "node_lost");
  EXPECT_EQ(*(*all)[0].exit_code, 137);
  EXPECT_EQ((*all)[0].blamed_node, "node2");
  EXPECT_EQ((*all)[0].recovery, "relaunch");
  EXPECT_EQ((*all)[0].go_json, R"({"master_port":29500})");
  EXPECT_EQ((*all)[0].next_nodes, "node1,node3");
  EXPECT_EQ((*all)[1].go_json, R"({"master_port":29501})");
  EXPECT_TRUE((*all)[0].ended.has_value());
  EXPECT_FALSE((*all)[1].ended.has_value());
  EXPECT_FALSE((*all)[1].exit_code.has_value());
}

// Spare pool jobs: stored before their sbatch, then with the job, standing,
// drawn and ended; read per run, or every run's live ones.
TEST_F(StoreTest, PoolJobsAreKeptThroughTheirLife) {
  RunRecord r = NewRun("hello");
  RunRecord other = NewRun("other");
  PoolJobRecord p;
  p.run_id = r.run_id;
  p.pool = 1;
  p.job_name = "trellis-pool-" + r.run_id + ".1.abcdef01";
  p.nodes_asked = 2;
  p.submitted = clock_.Now();
  ASSERT_TRUE(store_->PutPoolJob(p).ok());
  p.job_id = "77";
  p.nodelist = "node[9-10]";
  p.standing_since = clock_.Now() + std::chrono::seconds(5);
  p.drawn_attempt = 1;
  p.drawn_launch = 2;
  p.secret_sha256 = "ab12";
  ASSERT_TRUE(store_->PutPoolJob(p).ok());
  PoolJobRecord refill = p;
  refill.pool = 2;
  refill.job_id = "";
  refill.nodelist = "";
  refill.standing_since.reset();
  refill.drawn_attempt = refill.drawn_launch = 0;
  refill.ended = clock_.Now() + std::chrono::seconds(9);
  refill.end_reason = "sbatch refused: QOS";
  ASSERT_TRUE(store_->PutPoolJob(refill).ok());
  PoolJobRecord theirs = refill;
  theirs.run_id = other.run_id;
  theirs.pool = 1;
  theirs.ended.reset();
  ASSERT_TRUE(store_->PutPoolJob(theirs).ok());

  auto got = store_->PoolJobs(r.run_id);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  const PoolJobRecord& first = (*got)[0];
  EXPECT_EQ(first.job_id, "77");
  EXPECT_EQ(first.job_name, p.job_name);
  EXPECT_EQ(first.nodes_asked, 2);
  EXPECT_EQ(first.nodelist, "node[9-10]");
  EXPECT_EQ(first.standing_since, p.standing_since);
  EXPECT_EQ(first.drawn_attempt, 1);
  EXPECT_EQ(first.drawn_launch, 2);
  EXPECT_EQ(first.secret_sha256, "ab12");
  EXPECT_TRUE(first.live());
  EXPECT_FALSE((*got)[1].live());
  EXPECT_EQ((*got)[1].end_reason, "sbatch refused: QOS");
  auto live = store_->PoolJobs("");
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 2u);
  EXPECT_EQ((*live)[0].run_id, r.run_id);
  EXPECT_EQ((*live)[1].run_id, other.run_id);
}

// Every run's launches of one class ended since a time (the lone kills a
// new one is compared with, failure_class.h), oldest first.
TEST_F(StoreTest, LaunchesEndedSinceSpanRunsAndSkipOlderOrOtherClasses) {
  RunRecord a = NewRun("hello"), b = NewRun("hello");
  const WallTime t0 = clock_.Now();
  auto put = [&](const RunRecord& run, int launch, std::optional<WallTime> ended,
                 const std::string& cls) {
    LaunchRecord l;
    l.run_id = run.run_id;
    l.attempt = 1;
    l.launch = launch;
    l.started = t0;
    l.ended = ended;
    l.failure_class = cls;
    l.evidence_json = R"({"node":"node2","lone_kill":true})";
    ASSERT_TRUE(store_->PutLaunch(l).ok());
  };
  put(a, 1, t0 - std::chrono::hours(30), "signal");  // too old
  put(a, 2, t0 - std::chrono::hours(2), "signal");
  put(b, 1, t0 - std::chrono::hours(3), "signal");
  put(b, 2, t0 - std::chrono::hours(1), "hang");     // another class
  put(b, 3, std::nullopt, "");                      // not ended
  auto rows = store_->LaunchesEndedSince(t0 - std::chrono::hours(24), "signal");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].run_id, b.run_id);
  EXPECT_EQ((*rows)[1].run_id, a.run_id);
  EXPECT_EQ((*rows)[1].launch, 2);
  EXPECT_EQ((*rows)[1].evidence_json, R"({"node":"node2","lone_kill":true})");
}

TEST_F(StoreTest, WorkerReportsAreKeptPerLaunchInTheOrderTheyCame) {
  RunRecord r = NewRun("hello");
  WorkerReportRecord node2{r.run_id, 1, 1, "node2", clock_.Now(), 3, "rank 3 exited 3", 0, false,
                           R"([{"rank":3}])"};
  WorkerReportRecord node1{r.run_id, 1, 1, "node1", clock_.Now() + std::chrono::seconds(1), 143,
                           "stopped", -1, true, "[]"};
  WorkerReportRecord next_launch = node1;
  next_launch.launch = 2;
  for (const auto* w : {&node2, &node1, &next_launch})
    ASSERT_TRUE(store_->PutWorkerReport(*w).ok());
  // A report sent again replaces the first.
  node1.reason = "stopped, sent again";
  ASSERT_TRUE(store_->PutWorkerReport(node1).ok());
  auto got = store_->WorkerReports(r.run_id, 1, 1);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].node, "node2");
  EXPECT_EQ((*got)[0].exit_code, 3);
  EXPECT_EQ((*got)[0].oom_kills, 0);
  EXPECT_FALSE((*got)[0].time_limit_warned);
  EXPECT_EQ((*got)[0].ranks_json, R"([{"rank":3}])");
  EXPECT_EQ((*got)[1].node, "node1");
  EXPECT_EQ((*got)[1].reason, "stopped, sent again");
  EXPECT_EQ((*got)[1].oom_kills, -1);
  EXPECT_TRUE((*got)[1].time_limit_warned);
  EXPECT_EQ(store_->WorkerReports(r.run_id, 1, 2)->size(), 1u);
  EXPECT_TRUE(store_->WorkerReports(r.run_id, 2, 1)->empty());
}

// A launch still open when its attempt ends closes with it, keeping what a
// launch that ended on its own recorded.
TEST_F(StoreTest, EndingAnAttemptClosesItsOpenLaunches) {
  for (int exit_code : {kExitCancelled, 0, 1}) {
    RunRecord r = NewRun("hello");
    AttemptRecord a;
    a.run_id = r.run_id;
    a.attempt = 1;
    a.submitted = clock_.Now();
    ASSERT_TRUE(store_->CreateAttempt(a).ok());
    LaunchRecord ended, open;
    ended.run_id = open.run_id = r.run_id;
    ended.attempt = open.attempt = 1;
    ended.launch = 1;
    open.launch = 2;
    ended.started = open.started = clock_.Now();
    ended.ended = clock_.Now();
    ended.failure_class = "node_lost";
    ended.reason = "node2 stopped answering";
    ASSERT_TRUE(store_->PutLaunch(ended).ok());
    ASSERT_TRUE(store_->PutLaunch(open).ok());
    clock_.Advance(std::chrono::seconds(5));
    ASSERT_TRUE(store_->EndAttempt(r.run_id, 1, exit_code, "cancelled by alice", clock_.Now()).ok());
    auto all = store_->Launches(r.run_id);
    ASSERT_TRUE(all.ok() && all->size() == 2u);
    EXPECT_EQ((*all)[0].failure_class, "node_lost");
    EXPECT_EQ((*all)[0].reason, "node2 stopped answering");
    ASSERT_TRUE((*all)[1].ended.has_value()) << exit_code;
    EXPECT_EQ(*(*all)[1].ended, clock_.Now());
    EXPECT_EQ((*all)[1].failure_class,
              exit_code == kExitCancelled ? "cancel" : exit_code == 0 ? "succeeded" : "");
    EXPECT_EQ((*all)[1].reason, "cancelled by alice");
    EXPECT_EQ((*all)[1].exit_code, exit_code) << "the attempt's: a cancel's 130, not 0";
    EXPECT_EQ((*all)[0].exit_code, std::nullopt) << "an ended launch keeps its own";
  }
}

TEST_F(StoreTest, HealthEventsKeepTheNewestInOrder) {
  RunRecord r = NewRun("hello");
  for (int rank = 0; rank < 5; ++rank)
    ASSERT_TRUE(store_->AddHealthEvent({r.run_id, 1, 1, clock_.Now(), "straggler", rank, "node1",
                                        "slow", "{}"}).ok());
  auto last = store_->HealthEvents(r.run_id, 3);
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_EQ(last->size(), 3u);
  EXPECT_EQ((*last)[0].rank, 2);
  EXPECT_EQ((*last)[2].rank, 4);
}

// RanksWithEvents: a launch's own, of one kind, less those ended since.
TEST_F(StoreTest, RanksWithEventsAreTheLaunchsOwnOfThatKind) {
  RunRecord r = NewRun("hello");
  auto add = [&](int attempt, int launch, const char* kind, int rank) {
    ASSERT_TRUE(store_->AddHealthEvent({r.run_id, attempt, launch, clock_.Now(), kind, rank,
                                        "node1", "detail", "{}"}).ok());
  };
  add(1, 1, "straggler", 3);
  add(1, 1, "straggler", 3);
  add(1, 1, "straggler", 0);
  add(1, 1, "hang", 1);
  add(1, 2, "straggler", 2);
  add(2, 1, "straggler", 5);
  auto ranks = store_->RanksWithEvents(r.run_id, 1, 1, "straggler");
  ASSERT_TRUE(ranks.ok()) << ranks.status();
  EXPECT_EQ(*ranks, (std::set<int>{0, 3}));
  auto none = store_->RanksWithEvents(r.run_id, 3, 1, "straggler");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());

  // Episodes that ended: rank 3's did (its newest event is the end), rank 0's
  // ended and began again; an end in another launch counts for nothing.
  add(1, 1, "straggler_ended", 3);
  add(1, 1, "straggler_ended", 0);
  add(1, 1, "straggler", 0);
  add(1, 2, "straggler_ended", 4);
  auto open = store_->RanksWithEvents(r.run_id, 1, 1, "straggler", "straggler_ended");
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(*open, (std::set<int>{0}));
  auto named = store_->RanksWithEvents(r.run_id, 1, 1, "straggler");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(*named, (std::set<int>{0, 3})) << "without ended_by, every rank named";
}

}  // namespace
}  // namespace trellis::controller
