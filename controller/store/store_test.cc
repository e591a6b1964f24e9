#include "controller/store/store.h"

#include "common/exit_codes.h"
#include "controller/store/step_writer.h"
#include "common/sha256.h"
#include "common/sqlite.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace trellis::controller {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("store_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "trellis.db").string();
    auto s = Store::Open(path_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  RunRecord NewRun(const std::string& name) {
    auto r = store_->CreateRun(name, "alice", "[job]\nname='x'\n", 2, 1,
                               [](const std::string& id) { return "/out/" + id; }, clock_.Now());
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }

  // One rank's record, stored as the step pipeline stores it.
  absl::StatusOr<StepRow> RecordStep(const std::string& run_id, int attempt, int launch,
                                     int64_t step, double loss, int64_t tokens, double seconds) {
    if (!writer_) {
      auto w = StepWriter::Open(path_);
      if (!w.ok()) return w.status();
      writer_ = std::move(*w);
    }
    StepRecord rec;
    rec.step = step;
    rec.loss = loss;
    rec.tokens = tokens;
    rec.step_seconds = seconds;
    StepBatch b{{run_id, attempt, launch, "node1"}, ++seq_, {{0, rec}}};
    auto out = writer_->Commit({&b}, clock_.Now());
    if (!out.ok()) return out.status();
    return out->rows.at(0).row;
  }

  std::filesystem::path dir_;
  std::string path_;
  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<StepWriter> writer_;
  uint64_t seq_ = 0;
};

TEST_F(StoreTest, RunIdsAreNamePlusSequence) {
  EXPECT_EQ(NewRun("hello").run_id, "hello-1");
  RunRecord r = NewRun("other");
  EXPECT_EQ(r.run_id, "other-2");
  EXPECT_EQ(r.run_dir, "/out/other-2");
  EXPECT_EQ(r.state, RunState::kQueued);
  EXPECT_EQ(store_->GetRun("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, TransitionWritesStateAndEventTogether) {
  RunRecord r = NewRun("hello");
  ASSERT_TRUE(store_->Transition(r.run_id, RunState::kSubmitted, "sbatch 12", "{\"job\":\"12\"}",
                                 clock_.Now()).ok());
  auto illegal = store_->Transition(r.run_id, RunState::kSucceeded, "x", "", clock_.Now());
  EXPECT_EQ(illegal.code(), absl::StatusCode::kFailedPrecondition);
  auto events = store_->Events(r.run_id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].to, RunState::kSubmitted);
  EXPECT_EQ((*events)[1].evidence_json, "{\"job\":\"12\"}");
  EXPECT_EQ(store_->GetRun(r.run_id)->state, RunState::kSubmitted);
}

TEST_F(StoreTest, CountsRunsByState) {
  EXPECT_TRUE(store_->CountRunsByState()->empty());
  NewRun("a");
  RunRecord b = NewRun("b");
  NewRun("c");
  ASSERT_TRUE(store_->Transition(b.run_id, RunState::kCancelled, "x", "{}", clock_.Now()).ok());
  auto counts = store_->CountRunsByState();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(*counts,
            (std::map<RunState, int64_t>{{RunState::kQueued, 2}, {RunState::kCancelled, 1}}));
}

TEST_F(StoreTest, FailedSideEffectRollsTheTransitionBack) {
  RunRecord r = NewRun("hello");
  auto st = store_->Transition(r.run_id, RunState::kSubmitted, "x", "", clock_.Now(),
                               [](Store&) { return absl::InternalError("sbatch bookkeeping"); });
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(store_->GetRun(r.run_id)->state, RunState::kQueued);
  EXPECT_EQ(store_->Events(r.run_id)->size(), 1u);
}

// A database of schema 4 kept worker secrets in clear: opening it hashes them.
TEST_F(StoreTest, ClearSecretsOfAnOlderSchemaAreHashed) {
  std::string old_path = (dir_ / "v4.db").string();
  {
    auto db = sqlite::Db::Open(old_path);
    ASSERT_TRUE(db.ok());
    for (size_t v = 0; v < 4; ++v) ASSERT_TRUE((*db)->Exec(Migrations()[v]).ok());
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 4").ok());
    ASSERT_TRUE((*db)->Exec("INSERT INTO runs (run_id, name, user, spec_toml, run_dir, state, "
                            "nodes, ranks_per_node, created_ms, updated_ms) VALUES "
                            "('x-1', 'x', 'alice', '', '/out/x-1', 'RUNNING', 1, 1, 0, 0)")
                    .ok());
    ASSERT_TRUE((*db)->Exec("INSERT INTO attempts (run_id, attempt, sbatch_args, secret, "
                            "submitted_ms) VALUES ('x-1', 1, '[]', 's3cret', 0)")
                    .ok());
  }
  auto store = Store::Open(old_path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto a = (*store)->LatestAttempt("x-1");
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->secret_sha256, Sha256Hex("s3cret"));
}

// An attempt's end and what follows land together or not at all.
TEST_F(StoreTest, ChainedTransitionsLandTogetherOrNotAtAll) {
  RunRecord r = NewRun("hello");
  bool second_ran = false;
  auto st = store_->Transitions(
      r.run_id,
      {{RunState::kSubmitted, "attempt 1 is Slurm job 7"},
       {RunState::kSucceeded, "not from SUBMITTED", "{}", [&](Store&) {
          second_ran = true;
          return absl::OkStatus();
        }}},
      clock_.Now());
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_FALSE(second_ran);
  EXPECT_EQ(store_->GetRun(r.run_id)->state, RunState::kQueued) << "the first step rolled back";
  EXPECT_EQ(store_->Events(r.run_id)->size(), 1u);

  ASSERT_TRUE(store_->Transitions(r.run_id,
                                  {{RunState::kSubmitted, "attempt 1 is Slurm job 7"},
                                   {RunState::kGating, "node1 registered"}},
                                  clock_.Now())
                  .ok());
  auto events = store_->Events(r.run_id);
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[1].to, RunState::kSubmitted);
  EXPECT_EQ((*events)[2].from, RunState::kSubmitted);
  EXPECT_EQ((*events)[2].to, RunState::kGating);
  EXPECT_EQ(store_->GetRun(r.run_id)->state_reason, "node1 registered");
}

TEST_F(StoreTest, AttemptsAndStepSummaries) {
  RunRecord r = NewRun("hello");
  AttemptRecord a;
  a.run_id = r.run_id;
  a.attempt = 1;
  a.sbatch_args = {"--nodes=2", "--exclude=node3"};
  a.secret_sha256 = Sha256Hex("s3cret");
  a.submitted = clock_.Now();
  ASSERT_TRUE(store_->CreateAttempt(a).ok());
  ASSERT_TRUE(store_->SetAttemptJob(r.run_id, 1, "42").ok());
  ASSERT_TRUE(store_->EndAttempt(r.run_id, 1, 3, "rank 1 exited with 3", clock_.Now()).ok());
  auto latest = store_->LatestAttempt(r.run_id);
  ASSERT_TRUE(latest.ok() && latest->has_value());
  EXPECT_EQ((*latest)->slurm_job_id, "42");
  EXPECT_EQ((*latest)->sbatch_args, a.sbatch_args);
  EXPECT_EQ((*latest)->exit_code, 3);
  EXPECT_FALSE((*latest)->live());

  ASSERT_TRUE(RecordStep(r.run_id, 1, 1, 5, 2.0, 100, 0.5).ok());
  auto row = RecordStep(r.run_id, 1, 1, 5, 4.0, 100, 0.7);
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->ranks, 2);
  EXPECT_DOUBLE_EQ(row->loss_sum, 6.0);
  EXPECT_EQ(row->tokens, 200);
  EXPECT_DOUBLE_EQ(row->step_seconds_max, 0.7);
  EXPECT_EQ(store_->RecentSteps(r.run_id, 10)->size(), 1u);
}

// An attempt waiting ahead is never the run's current one until it is taken
// up; its number is taken; taking it up keeps or moves its eligibility.
TEST_F(StoreTest, AWaitingAttemptIsNotCurrentUntilTakenUp) {
  RunRecord r = NewRun("ahead");
  AttemptRecord a;
  a.run_id = r.run_id;
  a.attempt = 1;
  a.submitted = clock_.Now();
  ASSERT_TRUE(store_->CreateAttempt(a).ok());
  AttemptRecord w = a;
  w.attempt = 2;
  w.waiting = true;
  w.begin = clock_.Now() + std::chrono::seconds(90);
  ASSERT_TRUE(store_->CreateAttempt(w).ok());
  EXPECT_EQ((*store_->LatestAttempt(r.run_id))->attempt, 1);
  auto all = store_->Attempts(r.run_id);
  ASSERT_TRUE(all.ok());
  ASSERT_TRUE(WaitingAttemptOf(*all).has_value());
  EXPECT_EQ(WaitingAttemptOf(*all)->attempt, 2);
  EXPECT_EQ(WaitingAttemptOf(*all)->begin, w.begin);
  EXPECT_EQ(NextAttemptNumber(*all), 3);
  EXPECT_FALSE(store_->TakeUpWaitingAttempt(r.run_id, 1, std::nullopt).ok()) << "not waiting";
  const WallTime sooner = clock_.Now() + std::chrono::seconds(5);
  ASSERT_TRUE(store_->TakeUpWaitingAttempt(r.run_id, 2, sooner).ok());
  auto latest = store_->LatestAttempt(r.run_id);
  EXPECT_EQ((*latest)->attempt, 2);
  EXPECT_FALSE((*latest)->waiting);
  EXPECT_EQ((*latest)->begin, sooner);
  EXPECT_FALSE(WaitingAttemptOf(*store_->Attempts(r.run_id)).has_value());
  EXPECT_FALSE(store_->TakeUpWaitingAttempt(r.run_id, 2, std::nullopt).ok()) << "only once";
  // One that ended waiting (not needed) stays out of the way.
  w.attempt = 3;
  ASSERT_TRUE(store_->CreateAttempt(w).ok());
  ASSERT_TRUE(store_->EndAttempt(r.run_id, 3, kExitCancelled, "not needed", clock_.Now()).ok());
  EXPECT_EQ((*store_->LatestAttempt(r.run_id))->attempt, 2);
  EXPECT_FALSE(WaitingAttemptOf(*store_->Attempts(r.run_id)).has_value());
  EXPECT_EQ(NextAttemptNumber(*store_->Attempts(r.run_id)), 4);
}

// Per launch: its first step, its newest kept step (below the later launches'
// lowest first step) and its last, with the last one's time.
TEST_F(StoreTest, GoodputStepsReadTheMarksThatMatter) {
  RunRecord r = NewRun("hello");
  EXPECT_TRUE(store_->GoodputSteps(r.run_id)->empty());
  auto step = [&](int attempt, int launch, int64_t step, double seconds) {
    clock_.Advance(std::chrono::seconds(1));
    ASSERT_TRUE(
        RecordStep(r.run_id, attempt, launch, step, 2.0, 100, seconds)
            .ok());
  };
  const WallTime t0 = clock_.Now();
  auto at = [&](int s) { return t0 + std::chrono::seconds(s); };
  for (int64_t s = 1; s <= 14; ++s) step(1, 1, s, 0.5);    // at 1..14 s
  for (int64_t s = 11; s <= 12; ++s) step(1, 2, s, 0.75);  // at 15, 16 s
  for (int64_t s = 1; s <= 3; ++s) step(2, 1, s, 1.0);     // at 17..19 s: afresh
  step(2, 1, 3, 1.25);                                     // a second rank: at 20 s
  auto got = store_->GoodputSteps(r.run_id);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  auto marks = [](const LaunchSteps& l) {
    std::vector<std::pair<int64_t, WallTime>> out;
    for (const auto& m : l.marks) out.push_back({m.step, m.time});
    return out;
  };
  using Marks = std::vector<std::pair<int64_t, WallTime>>;
  // Attempt 2 began at step 1: nothing of attempt 1 was kept.
  EXPECT_EQ(marks((*got)[0]), (Marks{{1, at(1)}, {14, at(14)}}));
  EXPECT_EQ((*got)[0].last_step_time, std::chrono::milliseconds(500));
  EXPECT_EQ(marks((*got)[1]), (Marks{{11, at(15)}, {12, at(16)}}));
  EXPECT_EQ(marks((*got)[2]), (Marks{{1, at(17)}, {3, at(20)}}));
  EXPECT_EQ((*got)[2].last_step_time, std::chrono::milliseconds(1250));

  // Without attempt 2, launch 2 resumed from step 10: launch 1's newest kept step is 10.
  RunRecord other = NewRun("other");
  for (int64_t s = 1; s <= 12; ++s) {
    clock_.Advance(std::chrono::seconds(1));
    ASSERT_TRUE(RecordStep(other.run_id, 1, 1, s, 2, 1, 0.5).ok());
  }
  clock_.Advance(std::chrono::seconds(1));
  ASSERT_TRUE(RecordStep(other.run_id, 1, 2, 11, 2, 1, 0.5).ok());
  auto two = store_->GoodputSteps(other.run_id);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  ASSERT_EQ((*two)[0].marks.size(), 3u);
  EXPECT_EQ((*two)[0].marks[1].step, 10);
  EXPECT_EQ((*two)[0].marks[2].step, 12);
  ASSERT_EQ((*two)[1].marks.size(), 1u);
}

TEST_F(StoreTest, SurvivesReopenAndRefusesNewerSchema) {
  RunRecord r = NewRun("hello");
  store_.reset();
  auto again = Store::Open(path_);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->GetRun(r.run_id)->run_id, "hello-1");
  ASSERT_TRUE((*again)->db().Exec("PRAGMA user_version = 999").ok());
  again->reset();
  auto newer = Store::Open(path_);
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.status().message().find("newer than this controller"), std::string::npos);
}

}  // namespace
}  // namespace trellis::controller

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
  EXPECT_TRUE(first.live());
  EXPECT_FALSE((*got)[1].live());
  EXPECT_EQ((*got)[1].end_reason, "sbatch refused: QOS");
  auto live = store_->PoolJobs("");
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 2u);
  EXPECT_EQ((*live)[0].run_id, r.run_id);
  EXPECT_EQ((*live)[1].run_id, other.run_id);
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
