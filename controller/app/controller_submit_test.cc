// Submission written ahead: the attempt is stored before its sbatch, a job
// submitted before a controller restart is found by its name and adopted
// (never a second job for one attempt), and a run left between two states by
// a stop is repaired at start-up.

#include "common/sha256.h"
#include "controller/app/controller_fixture.h"
#include "controller/core/batch_script.h"

namespace trellis::controller {
namespace {

class SubmitTest : public ControllerTest {
 protected:
  // A job as if an earlier sbatch of the attempt had succeeded unseen.
  // The job-name tag of a run's attempt 1: from its secret file's digest.
  std::string Tag(const std::string& run_id) {
    std::ifstream in(Get(run_id).run_dir() + "/attempt-1/secret");
    std::string secret;
    in >> secret;
    return Sha256Hex(secret).substr(0, 8);
  }
  std::string InjectJob(const std::string& name) {
    auto id = slurm_->Submit({"--job-name=" + name}, "/dev/null");
    EXPECT_TRUE(id.ok());
    return *id;
  }
  void SetSubmitError(absl::Status st) {
    std::lock_guard<std::mutex> l(slurm_->mu);
    slurm_->submit_error = std::move(st);
  }
  // Waits until the run's state reason contains `text`.
  void WaitReason(const std::string& id, const std::string& text) {
    WaitUntil(
        id,
        [&](const v1::Run& run) {
          return run.summary().state_reason().find(text) != std::string::npos;
        },
        "gave a reason with '" + text + "'");
  }
};

TEST_F(SubmitTest, TheAttemptIsStoredBeforeItsSbatchAndKeepsItsNumber) {
  SetSubmitError(absl::UnavailableError("slurmctld not responding"));
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp).ok());
  WaitReason("hello-1", "sbatch failed, retrying");
  v1::Run run = Get("hello-1");
  EXPECT_EQ(run.summary().state(), v1::RUN_STATE_QUEUED);
  ASSERT_EQ(run.attempts_size(), 1) << "stored before sbatch ran";
  EXPECT_EQ(run.attempts(0).slurm_job_id(), "");

  SetSubmitError(absl::OkStatus());
  run = WaitFor("hello-1", v1::RUN_STATE_SUBMITTED);
  ASSERT_EQ(run.attempts_size(), 1) << "the same attempt, submitted again";
  EXPECT_EQ(run.attempts(0).attempt(), 1);
  auto subs = slurm_->Submissions();
  ASSERT_EQ(subs.size(), 1u);
  EXPECT_NE(std::find(subs[0].args.begin(), subs[0].args.end(),
                      "--job-name=" + AttemptJobName("hello-1", 1, Tag("hello-1"))),
            subs[0].args.end());
}

TEST_F(SubmitTest, AJobSubmittedUnseenIsAdoptedAndDuplicatesCancelled) {
  SetSubmitError(absl::UnavailableError("sbatch timed out"));
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(kSpec, &resp).ok());
  WaitReason("hello-1", "sbatch failed, retrying");
  const std::string tag = Tag("hello-1");
  StopController();
  SetSubmitError(absl::OkStatus());
  // sbatch had reached Slurm twice before the controller stopped.
  std::string first = InjectJob(AttemptJobName("hello-1", 1, tag));
  std::string second = InjectJob(AttemptJobName("hello-1", 1, tag));
  InjectJob(AttemptJobName("other-1", 1, tag));
  // Another controller's hello-1 (its ids start at 1 too): another secret, another tag.
  InjectJob(AttemptJobName("hello-1", 1, "0badc0de"));
  StartController();
  v1::Run run = WaitFor("hello-1", v1::RUN_STATE_SUBMITTED);
  ASSERT_EQ(run.attempts_size(), 1);
  EXPECT_EQ(run.attempts(0).slurm_job_id(), first);
  EXPECT_EQ(slurm_->Submissions().size(), 4u) << "the 4 injected, no new sbatch";
  EXPECT_EQ(slurm_->Cancelled(), std::vector<std::string>{second});
  EXPECT_NE(run.events(run.events_size() - 1).reason().find("found by name"), std::string::npos);
}

TEST_F(SubmitTest, ARunLeftRestartingIsRequeuedAtStartup) {
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit(std::string(kSpec) + "[restart]\nmax_restarts = 2\n", &resp).ok());
  WaitFor("hello-1", v1::RUN_STATE_SUBMITTED);
  StopController();
  {
    // The first of the two transactions of a failed attempt's end, alone.
    auto store = Store::Open((dir_ / "t.db").string());
    ASSERT_TRUE(store.ok());
    WallTime now = clock_.Now();
    ASSERT_TRUE((*store)
                    ->Transition("hello-1", RunState::kRestarting, "rank 1 exited with 3", "{}",
                                 now,
                                 [now](Store& s) {
                                   return s.EndAttempt("hello-1", 1, 3, "rank 1 exited with 3",
                                                       now);
                                 })
                    .ok());
  }
  {
    std::lock_guard<std::mutex> l(slurm_->mu);
    slurm_->jobs["100"].state = "FAILED";
  }
  StartController();
  v1::Run run = WaitFor("hello-1", v1::RUN_STATE_QUEUED);
  EXPECT_EQ(run.summary().restarts(), 1);
  EXPECT_EQ(slurm_->Submissions().size(), 1u) << "after the backoff, not at once";
}

}  // namespace
}  // namespace trellis::controller
