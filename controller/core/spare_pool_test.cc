#include "controller/core/spare_pool.h"

#include <gtest/gtest.h>

namespace trellis::controller {
namespace {

using std::chrono::seconds;
using PoolStep = PoolJobStep::Kind;

PoolJobRecord Queued() {
  PoolJobRecord p;
  p.run_id = "r-1";
  p.pool = 1;
  p.job_id = "77";
  p.nodes_asked = 1;
  return p;
}

SlurmJob Job(const char* state, const char* nodelist = "") {
  SlurmJob j;
  j.id = "77";
  j.state = state;
  j.nodelist = nodelist;
  return j;
}

TEST(DecidePoolJobTest, AQueuedJobStandsOnceItRunsAndOnlyThen) {
  PoolJobSeen seen;
  seen.listed = Job("PENDING");
  EXPECT_EQ(DecidePoolJob(Queued(), seen).kind, PoolStep::kNothing);
  seen.listed = Job("RUNNING", "node9");
  PoolJobStep step = DecidePoolJob(Queued(), seen);
  EXPECT_EQ(step.kind, PoolStep::kStands);
  EXPECT_EQ(step.nodelist, "node9");
  PoolJobRecord standing = Queued();
  standing.standing_since = WallTime{};
  standing.nodelist = "node9";
  EXPECT_EQ(DecidePoolJob(standing, seen).kind, PoolStep::kNothing) << "already standing";
  PoolJobRecord drawn = standing;
  drawn.drawn_attempt = 1;
  drawn.drawn_launch = 2;
  EXPECT_EQ(DecidePoolJob(drawn, seen).kind, PoolStep::kNothing);
}

TEST(DecidePoolJobTest, SlurmEndingItEndsItAndANotAskedForJobWaits) {
  PoolJobSeen seen;
  EXPECT_EQ(DecidePoolJob(Queued(), seen).kind, PoolStep::kNothing) << "not listed, not looked up";
  seen.looked_up = true;
  seen.ended = Job("TIMEOUT");
  PoolJobStep step = DecidePoolJob(Queued(), seen);
  EXPECT_EQ(step.kind, PoolStep::kEnded);
  EXPECT_EQ(step.reason, "Slurm ended it: TIMEOUT");
  seen.ended.reset();
  EXPECT_EQ(DecidePoolJob(Queued(), seen).reason, "Slurm no longer knows it");
  PoolJobSeen listed;
  listed.listed = Job("CANCELLED");
  EXPECT_EQ(DecidePoolJob(Queued(), listed).kind, PoolStep::kEnded);
}

TEST(DecidePoolJobTest, ItIsCancelledWhenTheRunOrTheAttemptThatDrewItEnds) {
  PoolJobSeen seen;
  seen.listed = Job("RUNNING", "node9");
  seen.run_over = true;
  PoolJobStep step = DecidePoolJob(Queued(), seen);
  EXPECT_EQ(step.kind, PoolStep::kCancel);
  EXPECT_EQ(step.reason, "the run ended");
  PoolJobRecord drawn = Queued();
  drawn.drawn_attempt = 2;
  seen.run_over = false;
  seen.drawn_attempt_over = true;
  step = DecidePoolJob(drawn, seen);
  EXPECT_EQ(step.kind, PoolStep::kCancel);
  EXPECT_EQ(step.reason, "attempt 2, which drew it, ended");
  EXPECT_EQ(DecidePoolJob(Queued(), seen).kind, PoolStep::kStands) << "a standing one is the run's";
  PoolJobRecord unsubmitted = Queued();
  unsubmitted.job_id = "";
  seen.run_over = true;
  EXPECT_EQ(DecidePoolJob(unsubmitted, seen).kind, PoolStep::kNothing) << "its sbatch decides";
}

// A standing pool job with less time left than the run's job (one submitted
// in an earlier attempt) is replaced: drawn, it would end under the launch.
TEST(DecidePoolJobTest, AStandingJobThatWouldEndBeforeTheRunsJobIsReplaced) {
  PoolJobSeen seen;
  seen.listed = Job("RUNNING", "node9");
  seen.listed->time_left = seconds(600);
  seen.run_job_time_left = seconds(3600);
  PoolJobStep step = DecidePoolJob(Queued(), seen);
  EXPECT_EQ(step.kind, PoolStep::kCancel);
  EXPECT_EQ(step.reason,
            "it would end before the run's job (600 s left, the job 3600 s): replaced by one "
            "that outlasts it");
  seen.run_job_time_left = seconds(500);
  EXPECT_EQ(DecidePoolJob(Queued(), seen).kind, PoolStep::kStands);
  seen.run_job_time_left.reset();
  EXPECT_EQ(DecidePoolJob(Queued(), seen).kind, PoolStep::kStands) << "no limit known";
  PoolJobRecord drawn = Queued();
  drawn.drawn_attempt = 1;
  seen.run_job_time_left = seconds(3600);
  EXPECT_EQ(DecidePoolJob(drawn, seen).kind, PoolStep::kNothing) << "drawn: the attempt's";
}

TEST(DecidePoolJobTest, AStandingJobOnANodeStruckSinceIsReplaced) {
  PoolJobRecord standing = Queued();
  standing.standing_since = WallTime{};
  standing.nodelist = "node9";
  PoolJobSeen seen;
  seen.listed = Job("RUNNING", "node9");
  seen.quarantined = {"node9"};
  PoolJobStep step = DecidePoolJob(standing, seen);
  EXPECT_EQ(step.kind, PoolStep::kCancel);
  EXPECT_EQ(step.reason, "its node node9 is quarantined: replaced by one off the quarantined nodes");
  PoolJobRecord drawn = standing;
  drawn.drawn_attempt = 1;
  EXPECT_EQ(DecidePoolJob(drawn, seen).kind, PoolStep::kNothing) << "drawn: the relaunch's";
}

TEST(NeedsPoolJobTest, ARunThatTrainsGetsOneAndARefillAfterADraw) {
  const WallTime now{};
  EXPECT_TRUE(NeedsPoolJob(RunState::kRunning, 1, {}, now));
  EXPECT_FALSE(NeedsPoolJob(RunState::kRunning, 0, {}, now)) << "no pool asked for";
  EXPECT_FALSE(NeedsPoolJob(RunState::kSubmitted, 1, {}, now)) << "not before it trains";
  EXPECT_FALSE(NeedsPoolJob(RunState::kRestarting, 1, {}, now));
  PoolJobRecord live = Queued();
  EXPECT_FALSE(NeedsPoolJob(RunState::kRunning, 1, {live}, now)) << "one queued";
  live.drawn_attempt = 1;
  EXPECT_TRUE(NeedsPoolJob(RunState::kRunning, 1, {live}, now)) << "drawn: refill";
  PoolJobRecord ended = Queued();
  ended.ended = now;
  ended.end_reason = "Slurm ended it: TIMEOUT";
  EXPECT_TRUE(NeedsPoolJob(RunState::kRunning, 1, {ended}, now));
}

TEST(NeedsPoolJobTest, AfterRefusalsTheNextWaitsADoublingBackoff) {
  const WallTime t0{};
  auto refused = [&](int pool, WallTime at) {
    PoolJobRecord p = Queued();
    p.pool = pool;
    p.job_id = "";
    p.ended = at;
    p.end_reason = std::string(kPoolRefusedPrefix) + ": Batch job submission failed";
    return p;
  };
  std::vector<PoolJobRecord> rows = {refused(1, t0)};
  EXPECT_EQ(PoolRefusalsInARow(rows), 1);
  EXPECT_FALSE(NeedsPoolJob(RunState::kRunning, 1, rows, t0 + seconds(59)));
  EXPECT_TRUE(NeedsPoolJob(RunState::kRunning, 1, rows, t0 + seconds(60)));
  rows.push_back(refused(2, t0 + seconds(60)));
  EXPECT_EQ(PoolRefusalsInARow(rows), 2);
  EXPECT_FALSE(NeedsPoolJob(RunState::kRunning, 1, rows, t0 + seconds(179)));
  EXPECT_TRUE(NeedsPoolJob(RunState::kRunning, 1, rows, t0 + seconds(180)));
  for (int i = 3; i <= 12; ++i) rows.push_back(refused(i, t0));
  EXPECT_FALSE(NeedsPoolJob(RunState::kRunning, 1, rows, t0 + seconds(3599)));
  EXPECT_TRUE(NeedsPoolJob(RunState::kRunning, 1, rows, t0 + seconds(3600))) << "an hour at most";
  PoolJobRecord drawn = Queued();
  drawn.pool = 13;
  drawn.drawn_attempt = 1;
  rows.push_back(drawn);
  EXPECT_EQ(PoolRefusalsInARow(rows), 0) << "a pool job that stood ends the run of refusals";
}

}  // namespace
}  // namespace trellis::controller
