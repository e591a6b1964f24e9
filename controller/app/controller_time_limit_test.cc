// The time limit as a planned stop: workers that passed Slurm's wall-time
// warning on to their ranks report it; the launch ends as a time-limit stop
// and the run continues in a new attempt at once, using no restart, resuming
// from the newest checkpoint (tests/e2e/time_limit.sh runs it on Slurm), or
// uses a restart when no newer checkpoint was written. A job that Slurm ended
// TIMEOUT unseen is continued too (with progress).

#include <filesystem>
#include <fstream>

#include "controller/app/controller_health_fixture.h"

namespace trellis::controller {
namespace {

constexpr char kTimeLimitRun[] = "wall-1";

class TimeLimitTest : public HealthTest {
 protected:
  void StartRun() {
    SubmitAndRun("[job]\nname = \"wall\"\ncommand = \"train\"\n"
                 "[slurm]\nnodes = 2\nranks_per_node = 2\n"
                 "[restart]\nmax_restarts = 0\nbackoff_s = 600\n",
                 kTimeLimitRun);
  }
};

// The ranks checkpoint step 7 at the warning, as the rank contract asks: the
// next attempt resumes further on, so it costs no restart.
TEST_F(TimeLimitTest, AWarnedLaunchContinuesInANewAttemptWithoutARestart) {
  StartRun();
  Send(Id(kTimeLimitRun, "node1", 1), {StepReport(0, 7, 0.5), StepReport(1, 7, 0.5)});
  const auto step7 =
      std::filesystem::path(Get(kTimeLimitRun).run_dir()) / "checkpoints" / "step-00000007";
  std::filesystem::create_directories(step7);
  std::ofstream(step7 / "manifest.json") << "{}";
  ReportExit(kTimeLimitRun, "node1", 1, {RankEnded(0, 0, 0, true), RankEnded(1, 0, 0, true)}, 0,
             "time_limit");
  // A generic rank without a handler dies of the signal: still a planned stop.
  ReportExit(kTimeLimitRun, "node2", 1, {RankEnded(2, 138, 10, true), RankEnded(3, 0, 0, true)},
             138, "time_limit");
  v1::NextLaunchResponse next = NextLaunch(kTimeLimitRun, 1, 138);
  EXPECT_EQ(next.action(), v1::NextLaunchResponse::ACTION_EXIT);
  v1::Run run = WaitFor(kTimeLimitRun, v1::RUN_STATE_SUBMITTED);
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_EQ(run.launches(0).failure_class(), "time_limit");
  EXPECT_EQ(run.launches(0).blamed_node(), "");
  EXPECT_EQ(run.summary().restarts(), 0) << "max_restarts = 0, and the run goes on";
  ASSERT_EQ(run.attempts_size(), 2) << "submitted at once: no backoff";
  EXPECT_EQ(slurm_->Submissions().size(), 2u);
}

// Without a checkpoint newer than where the launch started, the next attempt
// would redo the same steps: a restart, and with none left the run fails,
// saying why (a generic run that never checkpoints stops looping).
TEST_F(TimeLimitTest, AWarnedLaunchWithoutANewCheckpointUsesARestart) {
  StartRun();
  Send(Id(kTimeLimitRun, "node1", 1), {StepReport(0, 7, 0.5), StepReport(1, 7, 0.5)});
  ReportExit(kTimeLimitRun, "node1", 1, {RankEnded(0, 0, 0, true), RankEnded(1, 0, 0, true)}, 0,
             "time_limit");
  ReportExit(kTimeLimitRun, "node2", 1, {RankEnded(2, 0, 0, true), RankEnded(3, 0, 0, true)}, 0,
             "time_limit");
  NextLaunch(kTimeLimitRun, 1, 0);
  v1::Run run = WaitFor(kTimeLimitRun, v1::RUN_STATE_FAILED);
  ASSERT_EQ(run.launches_size(), 1);
  EXPECT_EQ(run.launches(0).failure_class(), "time_limit");
  ASSERT_EQ(run.attempts_size(), 1);
  const std::string why = run.events(run.events_size() - 1).reason();
  EXPECT_NE(why.find("no checkpoint newer than the start it resumed from"), std::string::npos)
      << why;
  EXPECT_NE(why.find("(0 of 0 restarts used)"), std::string::npos) << why;
}

// Unseen, with a checkpoint newer than where the launch started (without one
// the budget decides, as above: reconciler_test.cc).
TEST_F(TimeLimitTest, AJobEndedTimeoutUnseenIsContinuedToo) {
  StartRun();
  const auto step7 =
      std::filesystem::path(Get(kTimeLimitRun).run_dir()) / "checkpoints" / "step-00000007";
  std::filesystem::create_directories(step7);
  std::ofstream(step7 / "manifest.json") << "{}";
  {
    std::lock_guard<std::mutex> l(slurm_->mu);
    slurm_->jobs["100"].state = "TIMEOUT";
  }
  v1::Run run = WaitFor(kTimeLimitRun, v1::RUN_STATE_SUBMITTED);  // from RUNNING: a new attempt
  ASSERT_EQ(run.attempts_size(), 2);
  EXPECT_EQ(run.summary().restarts(), 0);
  EXPECT_NE(run.attempts(0).end_reason().find("TIMEOUT"), std::string::npos)
      << run.attempts(0).end_reason();
}

}  // namespace
}  // namespace trellis::controller
