// The Slurm calls of effects.h against FakeSlurmClient: what each brings back.
#include "controller/app/slurm_calls.h"

#include <gtest/gtest.h>

#include <csignal>
#include <memory>

#include "controller/app/kill_after_sbatch_client.h"
#include "controller/slurm/fake_slurm_client.h"

namespace trellis::controller {
namespace {

TEST(SlurmCallsTest, ANewAttemptIsSubmitted) {
  FakeSlurmClient slurm;
  SlurmAnswer a = CallSlurm(slurm, SubmitJob{"hello-1", 1, "trellis-hello-1.1.ab", {"--nodes=2"},
                                             "/tmp/batch.sh"});
  const JobSubmitted& out = std::get<JobSubmitted>(a);
  ASSERT_TRUE(out.job.ok());
  EXPECT_EQ(*out.job, "100");
  EXPECT_TRUE(out.adopted.empty());
  EXPECT_EQ(slurm.Submissions().size(), 1u);
}

TEST(SlurmCallsTest, AJobOfTheAttemptsNameIsAdoptedAndItsDuplicatesCancelled) {
  FakeSlurmClient slurm;
  for (const char* id : {"7", "5"}) {
    slurm.jobs[id] = {id, "RUNNING", "None", "node1", std::nullopt, 0};
    slurm.names[id] = "trellis-hello-1.1.ab";
  }
  const JobSubmitted out = std::get<JobSubmitted>(
      CallSlurm(slurm, SubmitJob{"hello-1", 1, "trellis-hello-1.1.ab", {}, "/tmp/batch.sh"}));
  EXPECT_EQ(*out.job, "5") << "the oldest";
  EXPECT_EQ(out.adopted, "5");
  EXPECT_EQ(out.cancelled, std::vector<std::string>{"7"});
  EXPECT_TRUE(slurm.Submissions().empty());
}

TEST(SlurmCallsTest, ALookupThatFailsSubmitsNothing) {
  FakeSlurmClient slurm;
  slurm.jobs_named_error = absl::UnavailableError("squeue down");
  const JobSubmitted out = std::get<JobSubmitted>(
      CallSlurm(slurm, SubmitJob{"hello-1", 1, "n", {}, "/tmp/batch.sh"}));
  EXPECT_EQ(out.job.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(slurm.Submissions().empty());
}

TEST(SlurmCallsTest, UsableNodesAreTheIdleAndAllocatedOnes) {
  FakeSlurmClient slurm;
  slurm.nodes = {{"node1", "idle"}, {"node2", "drained"}, {"node3", "allocated"}};
  const NodesListed out = std::get<NodesListed>(CallSlurm(slurm, ListUsableNodes{{""}}));
  EXPECT_EQ(*out.usable.at(""), (std::vector<std::string>{"node1", "node3"}));
}

TEST(SlurmCallsTest, AJobSqueueNoLongerListsIsShown) {
  FakeSlurmClient slurm;
  slurm.jobs["5"] = {"5", "RUNNING", "None", "node1", std::nullopt, 0};
  slurm.jobs["6"] = {"6", "COMPLETED", "None", "node2", 0, 0};
  const JobsSeen out = std::get<JobsSeen>(CallSlurm(slurm, QueryJobs{{"5", "6"}, true}));
  ASSERT_TRUE(out.listed.ok());
  EXPECT_EQ(out.listed->size(), 1u);
  ASSERT_EQ(out.shown.count("6"), 1u);
  EXPECT_EQ((*out.shown.at("6"))->state.name(), "COMPLETED");
  EXPECT_EQ(out.shown.count("5"), 0u);
  EXPECT_TRUE(out.startup);
}

TEST(SlurmCallsTest, CancellingARunsJobBringsBackTheCall) {
  FakeSlurmClient slurm;
  const RunJobCancelled out =
      std::get<RunJobCancelled>(CallSlurm(slurm, CancelRunJob{"hello-1", "5", "by me", {3}}));
  EXPECT_TRUE(out.status.ok());
  EXPECT_EQ(out.call.reply.id, 3u);
  EXPECT_EQ(slurm.Cancelled(), std::vector<std::string>{"5"});
  EXPECT_TRUE(std::holds_alternative<std::monostate>(CallSlurm(slurm, CancelJob{"6", "x"})));
}

TEST(KillAfterSbatchTest, TheControllerDiesRightAfterANewJobsSbatchOnly) {
  auto fake = std::make_shared<FakeSlurmClient>();
  fake->jobs["5"] = {"5", "RUNNING", "None", "node1", std::nullopt, 0};
  fake->names["5"] = "adopted";
  KillAfterSbatchClient slurm(fake);
  // A job found by name is adopted: no sbatch, no kill.
  EXPECT_EQ(*std::get<JobSubmitted>(CallSlurm(slurm, SubmitJob{"r-1", 1, "adopted", {}, "s"})).job,
            "5");
  EXPECT_EXIT(CallSlurm(slurm, SubmitJob{"r-1", 2, "new", {}, "s"}),
              ::testing::KilledBySignal(SIGKILL), "");
}

}  // namespace
}  // namespace trellis::controller
