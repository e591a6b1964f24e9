// The store: runs, transitions, attempts, step summaries, schema migrations
// (store_records_test.cc: quarantine, gate records, launches, pool jobs,
// final reports, health events).
#include <gtest/gtest.h>

#include "common/exit_codes.h"
#include "common/sha256.h"
#include "common/sqlite.h"
#include "controller/store/store_test_fixture.h"

namespace trellis::controller {
namespace {

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

// An older database (before certified return) opens, its quarantine entries
// kept, with no check. Schema 4: later ones need the store's own functions.
TEST_F(StoreTest, AnOlderQuarantineOpensWithoutACheck) {
  std::string old_path = (dir_ / "v4q.db").string();
  {
    auto db = sqlite::Db::Open(old_path);
    ASSERT_TRUE(db.ok());
    for (size_t v = 0; v < 4; ++v) ASSERT_TRUE((*db)->Exec(Migrations()[v]).ok());
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 4").ok());
    ASSERT_TRUE((*db)->Exec("INSERT INTO nodes (name, state, reason, since_ms, expiry_ms, "
                            "strikes, actor) VALUES ('node3', 'quarantine', 'r', 0, 1000, 1, "
                            "'gate')")
                    .ok());
  }
  auto store = Store::Open(old_path);
  ASSERT_TRUE(store.ok()) << store.status();
  auto e = (*store)->FindQuarantine("node3");
  ASSERT_TRUE(e.ok() && e->has_value()) << e.status();
  EXPECT_EQ((*e)->strikes, 1);
  EXPECT_FALSE((*e)->last_check.has_value());
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
