#include "cli/watch_tracker.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace trellis::cli {
namespace {

v1::StepSummary Step(int attempt, int launch, int64_t step) {
  v1::StepSummary s;
  s.set_attempt(attempt);
  s.set_launch(launch);
  s.set_step(step);
  s.set_ranks(4);
  s.set_loss(1.0);
  s.set_tokens(1000);
  s.set_step_seconds(1.0);
  return s;
}

v1::RunEvent Transition(int64_t ms, v1::RunState from, v1::RunState to) {
  v1::RunEvent e;
  e.set_unix_ms(ms);
  e.set_from(from);
  e.set_to(to);
  e.set_reason("because");
  return e;
}

v1::WatchRunEvent Snapshot(v1::RunState state, std::vector<v1::RunEvent> events,
                           std::vector<v1::StepSummary> steps) {
  v1::WatchRunEvent e;
  auto* run = e.mutable_snapshot();
  run->mutable_summary()->set_run_id("r-1");
  run->mutable_summary()->set_state(state);
  for (auto& ev : events) *run->add_events() = ev;
  for (auto& s : steps) *run->add_recent_steps() = s;
  return e;
}

v1::WatchRunEvent Of(const v1::RunEvent& t) {
  v1::WatchRunEvent e;
  *e.mutable_transition() = t;
  return e;
}

v1::WatchRunEvent Of(const v1::StepSummary& s) {
  v1::WatchRunEvent e;
  *e.mutable_step() = s;
  return e;
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(CliWatchTrackerTest, FollowsStateAndPrintsEachStepOnce) {
  WatchTracker t(/*json=*/false, /*utc=*/true);
  auto run_start = Transition(1000, v1::RUN_STATE_GATING, v1::RUN_STATE_RUNNING);
  std::string out = t.OnEvent(Snapshot(v1::RUN_STATE_RUNNING, {run_start}, {Step(1, 1, 2)}), 0);
  EXPECT_EQ(Count(out, "run r-1  RUNNING"), 1);
  EXPECT_EQ(Count(out, "STEP"), 2);               // STEP and STEP_S of the header
  EXPECT_EQ(Count(out, "GATING -> RUNNING"), 0);  // history is not replayed
  EXPECT_EQ(t.state(), v1::RUN_STATE_RUNNING);

  EXPECT_NE(t.OnEvent(Of(Step(1, 1, 3)), 0), "");
  EXPECT_EQ(t.OnEvent(Of(Step(1, 1, 3)), 0), "");  // duplicate
  EXPECT_EQ(t.OnEvent(Of(Step(1, 1, 1)), 0), "");  // older
  std::string done =
      t.OnEvent(Of(Transition(5000, v1::RUN_STATE_RUNNING, v1::RUN_STATE_SUCCEEDED)), 0);
  EXPECT_EQ(Count(done, "RUNNING -> SUCCEEDED  because"), 1);
  EXPECT_EQ(t.state(), v1::RUN_STATE_SUCCEEDED);
}

TEST(CliWatchTrackerTest, ReconnectPrintsOnlyWhatWasMissed) {
  WatchTracker t(false, true);
  auto t1 = Transition(1000, v1::RUN_STATE_GATING, v1::RUN_STATE_RUNNING);
  t.OnEvent(Snapshot(v1::RUN_STATE_RUNNING, {t1}, {Step(1, 1, 1)}), 0);
  t.OnEvent(Of(Step(1, 1, 2)), 0);
  // While disconnected: a restart into a new launch, which resumed at step 1.
  auto t2 = Transition(2000, v1::RUN_STATE_RUNNING, v1::RUN_STATE_RESTARTING);
  auto t3 = Transition(3000, v1::RUN_STATE_RESTARTING, v1::RUN_STATE_GATING);
  auto t4 = Transition(4000, v1::RUN_STATE_GATING, v1::RUN_STATE_RUNNING);
  std::string out = t.OnEvent(Snapshot(v1::RUN_STATE_RUNNING, {t1, t2, t3, t4},
                                       {Step(1, 2, 1), Step(1, 1, 2), Step(1, 1, 1)}),
                              0);
  EXPECT_EQ(Count(out, "reconnected"), 1);
  EXPECT_EQ(Count(out, " -> "), 3);  // t2, t3, t4; not t1 again
  EXPECT_EQ(Count(out, "RUNNING -> RESTARTING"), 1);
  EXPECT_EQ(Count(out, "\n"), 1 + 3 + 1);  // the note, 3 transitions, step (1,2,1) only
  EXPECT_EQ(t.state(), v1::RUN_STATE_RUNNING);
}

v1::StepSummary GpuStep(int attempt, int launch, int64_t step, bool ctas = true) {
  v1::StepSummary s = Step(attempt, launch, step);
  s.mutable_last()->set_step(step);
  s.mutable_last()->set_alloc_retries(0);
  s.mutable_last()->set_mem_reserved_peak_bytes(int64_t{1} << 30);
  if (ctas) s.mutable_last()->set_nccl_max_ctas(16);
  return s;
}

TEST(CliWatchTrackerTest, CpuRunsHaveNoGpuColumns) {
  WatchTracker t(false, true);
  std::string out = t.OnEvent(Snapshot(v1::RUN_STATE_RUNNING, {}, {Step(1, 1, 1)}), 0);
  out += t.OnEvent(Of(Step(1, 1, 2)), 0);
  EXPECT_EQ(Count(out, "    STEP        LOSS    TOKENS/S    STEP_S  RANKS\n"
                       "       1      1.0000        1.0k      1.00      4\n"
                       "       2      1.0000        1.0k      1.00      4\n"),
            1)
      << out;
  EXPECT_EQ(Count(out, "RETRIES"), 0) << out;
}

TEST(CliWatchTrackerTest, GpuColumnsAppearWithTheFirstRecordThatHasThem) {
  WatchTracker t(false, true);
  // Watching from the start: no step yet, so the header has no GPU columns.
  std::string out = t.OnEvent(Snapshot(v1::RUN_STATE_RUNNING, {}, {}), 0);
  EXPECT_EQ(Count(out, "RETRIES"), 0) << out;
  // One GPU (no NCCL) first: a new header with the allocator's columns.
  out = t.OnEvent(Of(GpuStep(1, 1, 1, /*ctas=*/false)), 0);
  EXPECT_EQ(Count(out, "\n"), 2) << out;
  EXPECT_EQ(Count(out, "RANKS  RETRIES  RESV_PEAK_GIB\n"), 1) << out;
  EXPECT_EQ(Count(out, "  0           1.00\n"), 1) << out;  // no retries, 1 GiB reserved
  // Then NCCL's count: one more header, the columns only grow.
  out = t.OnEvent(Of(GpuStep(1, 1, 2)), 0);
  EXPECT_EQ(Count(out, "\n"), 2) << out;
  EXPECT_EQ(Count(out, "RETRIES  RESV_PEAK_GIB  NCCL_CTAS\n"), 1) << out;
  // Same columns: rows only; a record without them shows "-".
  out = t.OnEvent(Of(GpuStep(1, 1, 3)), 0);
  EXPECT_EQ(Count(out, "\n"), 1) << out;
  EXPECT_EQ(Count(out, "16\n"), 1) << out;
  out = t.OnEvent(Of(Step(1, 1, 4)), 0);
  EXPECT_EQ(Count(out, "\n"), 1) << out;
  EXPECT_EQ(Count(out, "  -"), 3) << out;
}

TEST(CliWatchTrackerTest, ASnapshotWithGpuStepsHasTheColumnsAtOnce) {
  WatchTracker t(false, true);
  std::string out =
      t.OnEvent(Snapshot(v1::RUN_STATE_RUNNING, {}, {GpuStep(1, 1, 2), Step(1, 1, 1)}), 0);
  EXPECT_EQ(Count(out, "NCCL_CTAS"), 1) << out;  // one header
  EXPECT_EQ(Count(out, "\n"), 1 + 1 + 2) << out;  // run line, header, two steps
  EXPECT_EQ(t.OnEvent(Of(GpuStep(1, 1, 3)), 0).find("NCCL_CTAS"), std::string::npos);
}

TEST(CliWatchTrackerTest, JsonIsOneObjectPerEvent) {
  WatchTracker t(/*json=*/true);
  std::string out = t.OnEvent(Snapshot(v1::RUN_STATE_QUEUED, {}, {}), 0);
  ASSERT_EQ(Count(out, "\n"), 1);
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["snapshot"]["state"], "QUEUED");
  out = t.OnEvent(Of(Transition(1, v1::RUN_STATE_QUEUED, v1::RUN_STATE_CANCELLED)), 0);
  EXPECT_EQ(nlohmann::json::parse(out)["transition"]["to"], "CANCELLED");
  EXPECT_EQ(t.state(), v1::RUN_STATE_CANCELLED);
}

TEST(CliWatchTrackerTest, ReconnectDelayDoublesToACap) {
  using std::chrono::milliseconds;
  EXPECT_EQ(ReconnectDelay(0), milliseconds(250));
  EXPECT_EQ(ReconnectDelay(1), milliseconds(500));
  EXPECT_EQ(ReconnectDelay(4), milliseconds(4000));
  EXPECT_EQ(ReconnectDelay(5), milliseconds(5000));
  EXPECT_EQ(ReconnectDelay(1000), milliseconds(5000));
}

}  // namespace
}  // namespace trellis::cli
