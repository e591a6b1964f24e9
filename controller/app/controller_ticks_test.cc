// The schedule and reconcile ticks run on the controller's clock: a retry
// of sbatch waits for the next schedule tick and a job that ended unseen for
// the next reconciliation, each due once its interval has passed on the
// clock and not before; after Stop no timer of the controller is left on it.

#include "controller/app/controller_fixture.h"

namespace trellis::controller {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class TicksTest : public ControllerTest {
 protected:
  // Restarted with long intervals, so that each tick falls at a time the test
  // names; the waits hold the clock still.
  void SetUp() override {
    ControllerTest::SetUp();
    StopController();
    schedule_interval_ = seconds(30);
    reconcile_interval_ = seconds(60);
    waits_tick_ = false;
    StartController();
  }
  void SetSubmitError(absl::Status st) {
    std::lock_guard<std::mutex> l(slurm_->mu);
    slurm_->submit_error = std::move(st);
  }
  v1::RunState StateOf(const std::string& run_id) { return Get(run_id).summary().state(); }
};

TEST_F(TicksTest, EachTickFallsDueOnTheClockAndEndsWithTheController) {
  SetSubmitError(absl::UnavailableError("slurmctld not responding"));
  v1::SubmitRunResponse resp;
  ASSERT_TRUE(Submit("[job]\nname='tick'\ncommand='true'\n[restart]\nmax_restarts=0\n", &resp)
                  .ok());
  WaitUntil(
      "tick-1",
      [](const v1::Run& run) {
        return run.summary().state_reason().find("sbatch failed, retrying") != std::string::npos;
      },
      "failed its sbatch");
  SetSubmitError(absl::OkStatus());

  // The schedule tick at 30 s submits it again; not before. (What a tick
  // that came early started on the Slurm thread may still be under way when
  // the checks read: they can miss it, never fail a tick on time.)
  clock_.Advance(seconds(30) - milliseconds(1));
  EXPECT_EQ(StateOf("tick-1"), v1::RUN_STATE_QUEUED);
  EXPECT_TRUE(slurm_->Submissions().empty());
  clock_.Advance(milliseconds(1));
  WaitFor("tick-1", v1::RUN_STATE_SUBMITTED);

  // Its job is cancelled behind the controller's back: the reconciliation
  // at 60 s finds it ended and the run fails (no restart allowed).
  {
    std::lock_guard<std::mutex> l(slurm_->mu);
    slurm_->jobs["100"].state = "CANCELLED";
  }
  clock_.Advance(seconds(30) - milliseconds(1));
  EXPECT_EQ(StateOf("tick-1"), v1::RUN_STATE_SUBMITTED);
  clock_.Advance(milliseconds(1));
  WaitFor("tick-1", v1::RUN_STATE_FAILED);

  controller_->Stop();
  EXPECT_EQ(clock_.PendingTimers(), 0) << "the ticks were cancelled with the rest";
}

}  // namespace
}  // namespace trellis::controller
