#include "controller/slurm/parsers.h"

#include "controller/core/decisions.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace trellis::controller {
namespace {

std::string Fixture(const std::string& name) {
  std::ifstream in(std::string(TRELLIS_FIXTURES) + "/slurm/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_FALSE(ss.str().empty()) << name;
  return ss.str();
}

TEST(ParsersTest, SbatchParsable) {
  EXPECT_EQ(*ParseSbatchParsable("1234\n"), "1234");
  EXPECT_EQ(*ParseSbatchParsable("77;cluster2\n"), "77");
  EXPECT_FALSE(ParseSbatchParsable("sbatch: error: Batch job submission failed").ok());
  EXPECT_FALSE(ParseSbatchParsable("").ok());
}

TEST(ParsersTest, ScontrolCompletedJobWithSpacesInPaths) {
  auto job = ParseScontrolJob(Fixture("scontrol_show_job_completed.txt"));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->id, "2");
  EXPECT_EQ(job->state.base(), SlurmJobState::kCompleted);
  EXPECT_EQ(job->nodelist, "node[1-2]");
  EXPECT_EQ(job->exit_code, 0);
  auto pairs = ParseScontrolPairs(Fixture("scontrol_show_job_completed.txt"));
  EXPECT_EQ(pairs["WorkDir"], "/srv/out/my runs/hello-1");
  EXPECT_EQ(pairs["AllocNode:Sid"], "localhost:1234");
}

TEST(ParsersTest, ScontrolFailedJob) {
  auto job = ParseScontrolJob(Fixture("scontrol_show_job_failed.txt"));
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state.base(), SlurmJobState::kFailed);
  EXPECT_EQ(job->reason, "NonZeroExitCode");
  EXPECT_EQ(job->exit_code, 3);
  EXPECT_FALSE(ParseScontrolJob("garbage").ok());
  // Keys present with empty values name no job.
  EXPECT_FALSE(ParseScontrolJob("JobId= JobName=x JobState=RUNNING").ok());
  EXPECT_FALSE(ParseScontrolJob("JobId=12 JobName=x JobState= Reason=None").ok());
  EXPECT_TRUE(ParseScontrolJob("JobId=12 JobName=x JobState=RUNNING Reason=None").ok());
  EXPECT_EQ(job->restarts, 0);
  EXPECT_FALSE(ParseScontrolJob("JobId=12 JobState=RUNNING Restarts=x")->restarts.has_value());
}

TEST(ParsersTest, ScontrolJobRequeuedThenRefusedByItsNode) {
  // Released in the second slurmd revoked its credential: "Job credential
  // revoked", and the job ends FAILED with its restart count.
  auto job = ParseScontrolJob(Fixture("scontrol_show_job_failed_after_requeue.txt"));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state.base(), SlurmJobState::kFailed);
  EXPECT_EQ(job->restarts, 1);
  EXPECT_EQ(job->exit_code, 1);
}

TEST(ParsersTest, Squeue) {
  auto jobs = ParseSqueue(Fixture("squeue.txt"));
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].id, "12");
  EXPECT_EQ((*jobs)[0].nodelist, "node[1-2]");
  EXPECT_EQ((*jobs)[1].state.base(), SlurmJobState::kPending);
  EXPECT_EQ((*jobs)[1].reason, "Resources");
  EXPECT_EQ((*jobs)[0].time_limit, std::chrono::seconds(180));
  EXPECT_EQ((*jobs)[0].time_left, std::chrono::seconds(151));
  EXPECT_EQ((*jobs)[1].time_left, std::chrono::seconds(86400));
  EXPECT_FALSE((*jobs)[2].time_limit.has_value()) << "UNLIMITED";
  EXPECT_FALSE(ParseSqueue("12 RUNNING").ok());
  EXPECT_FALSE(ParseSqueue("12|RUNNING|node1|None").ok()) << "the old four fields";
  // A reason may hold the separator: it is the last field.
  EXPECT_EQ((*ParseSqueue("7|PENDING||5:00|5:00|a|b"))[0].reason, "a|b");
}

TEST(ParsersTest, SlurmDurations) {
  using std::chrono::seconds;
  EXPECT_EQ(ParseSlurmDuration("0:00"), seconds(0));
  EXPECT_EQ(ParseSlurmDuration("2:31"), seconds(151));
  EXPECT_EQ(ParseSlurmDuration("1:02:03"), seconds(3723));
  EXPECT_EQ(ParseSlurmDuration("2-00:00:01"), seconds(2 * 86400 + 1));
  for (const char* bad : {"UNLIMITED", "NOT_SET", "INVALID", "", "5", "1:60", "2-3:00", "-1:00",
                          "1:2:3:4", "a:00"})
    EXPECT_FALSE(ParseSlurmDuration(bad).has_value()) << bad;
}

TEST(ParsersTest, SacctAndExitCodes) {
  auto jobs = ParseSacct(Fixture("sacct.txt"));
  ASSERT_TRUE(jobs.ok());
  EXPECT_EQ((*jobs)[1].state.base(), SlurmJobState::kCancelled);
  EXPECT_EQ((*jobs)[1].exit_code, 128 + 15);
  EXPECT_EQ(ParseExitCode("3:0"), 3);
  EXPECT_FALSE(ParseExitCode("x").has_value());
}

TEST(ParsersTest, AssociationsMergeAnAccountsLinesAndQos) {
  auto assocs = ParseAssociations("trellis|normal\nproj7|normal,high\ntrellis|low,normal\n"
                                  "proj8|\n");
  ASSERT_TRUE(assocs.ok()) << assocs.status();
  ASSERT_EQ(assocs->size(), 3u);
  EXPECT_EQ((*assocs)[0].account, "trellis");
  EXPECT_EQ((*assocs)[0].qos, (std::vector<std::string>{"normal", "low"}));
  EXPECT_EQ((*assocs)[1].qos, (std::vector<std::string>{"normal", "high"}));
  EXPECT_TRUE((*assocs)[2].qos.empty());
  EXPECT_TRUE(ParseAssociations("").ok());
  EXPECT_FALSE(ParseAssociations("no separator\n").ok());
}

TEST(ParsersTest, SinfoNodesDeduplicatedAndUsability) {
  auto nodes = ParseSinfoNodes(Fixture("sinfo_nodes.txt"));
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 4u);
  std::vector<bool> usable;
  for (const auto& n : *nodes) usable.push_back(IsUsableNodeState(n.state));
  EXPECT_EQ(usable, (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ((*nodes)[2].state.base(), SlurmNodeState::kDrained);
  EXPECT_EQ((*nodes)[3].state.base(), SlurmNodeState::kDown);
  EXPECT_TRUE((*nodes)[3].state.has(SlurmNodeState::kFlagNotResponding)) << "down*";
}

}  // namespace
}  // namespace trellis::controller

namespace trellis::controller {
namespace {

// Outputs captured from the local Slurm 22.05 cluster (deploy/slurm/local-cluster).
TEST(ParsersTest, RealSlurm2205Outputs) {
  auto job = ParseScontrolJob(Fixture("scontrol_show_job_failed_2205.txt"));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state.base(), SlurmJobState::kFailed);
  EXPECT_EQ(job->exit_code, 3);
  EXPECT_EQ(job->nodelist, "node[1-2]");
  // A job pending --begin, one with a 3-minute limit, one with a day's.
  auto jobs = ParseSqueue(Fixture("squeue_2205.txt"));
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].state.base(), SlurmJobState::kPending);
  EXPECT_EQ((*jobs)[0].reason, "BeginTime");
  EXPECT_FALSE((*jobs)[0].time_limit.has_value()) << "UNLIMITED";
  EXPECT_EQ((*jobs)[1].state.base(), SlurmJobState::kRunning);
  EXPECT_EQ((*jobs)[1].time_limit, std::chrono::seconds(180));
  EXPECT_EQ((*jobs)[1].time_left, std::chrono::seconds(174));
  EXPECT_EQ((*jobs)[2].nodelist, "node[1-4]");
  EXPECT_EQ((*jobs)[2].time_left, std::chrono::seconds(86400 - 6));
  auto nodes = ParseSinfoNodes(Fixture("sinfo_nodes_2205.txt"));
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ(nodes->size(), 4u);
}

}  // namespace
}  // namespace trellis::controller

namespace trellis::controller {
namespace {

// sacct of a real Slurm 22.05 with accounting (deploy/slurm/local-cluster up --accounting:
// slurmdbd and MariaDB), asked as SlurmCliClient::AccountingJob asks, for a 2-node job that
// exited 3 and one that succeeded, after both left squeue. tests/slurm/accounting_test.sh
// checks that the cluster still prints exactly this (job ids renumbered from 1).
TEST(ParsersTest, RealSlurm2205Sacct) {
  auto jobs = ParseSacct(Fixture("sacct_2205.txt"));
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].id, "1");
  EXPECT_EQ((*jobs)[0].state.base(), SlurmJobState::kFailed);
  EXPECT_TRUE(IsTerminalJobState((*jobs)[0].state));
  EXPECT_EQ((*jobs)[0].exit_code, 3);
  EXPECT_EQ((*jobs)[0].nodelist, "node[1-2]");
  EXPECT_EQ((*jobs)[1].id, "2");
  EXPECT_EQ((*jobs)[1].state.base(), SlurmJobState::kCompleted);
  EXPECT_TRUE(IsTerminalJobState((*jobs)[1].state));
  EXPECT_EQ((*jobs)[1].exit_code, 0);
  EXPECT_EQ(*ExpandHostlist((*jobs)[1].nodelist),
            (std::vector<std::string>{"node1", "node2"}));
}

// A job Slurm requeued once, then completed, as `sacct -D` printed it on the
// local cluster (tests/slurm/accounting_test.sh checks it prints exactly this).
TEST(ParsersTest, RealSlurm2205SacctOfARequeuedJob) {
  auto jobs = ParseSacct(Fixture("sacct_2205_requeued.txt"));
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 1u) << "one job, its two runs";
  const SlurmJob& job = (*jobs)[0];
  EXPECT_EQ(job.id, "3");
  EXPECT_EQ(job.state.base(), SlurmJobState::kCompleted) << "the latest run";
  EXPECT_EQ(job.nodelist, "node2");
  EXPECT_EQ(job.exit_code, 0);
  EXPECT_EQ(job.restarts, 1);
  // The jobs of the other fixture were never requeued.
  auto plain = ParseSacct(Fixture("sacct_2205.txt"));
  ASSERT_TRUE(plain.ok());
  for (const auto& j : *plain) EXPECT_EQ(j.restarts, 0) << j.id;
}

// -D over a name (JobsNamed) interleaves jobs: each keeps its own runs.
TEST(ParsersTest, SacctCountsEachJobsRunsApart) {
  auto jobs = ParseSacct(
      "7|REQUEUED|0:0|n1\n8|COMPLETED|0:0|n2\n7|NODE_FAIL|0:0|n3\n7|RUNNING|0:0|n4\n");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].id, "7");
  EXPECT_EQ((*jobs)[0].state.base(), SlurmJobState::kRunning);
  EXPECT_EQ((*jobs)[0].nodelist, "n4");
  EXPECT_EQ((*jobs)[0].restarts, 2);
  EXPECT_EQ((*jobs)[1].id, "8");
  EXPECT_EQ((*jobs)[1].restarts, 0);
}

// What the count is for: an exit.json left by the run before the requeue is
// set aside when only accounting still knows the job.
TEST(ParsersTest, AnExitFileFromBeforeTheRequeueIsSetAsideOnSacctsCount) {
  auto jobs = ParseSacct(Fixture("sacct_2205_requeued.txt"));
  ASSERT_TRUE(jobs.ok());
  ExitFile before;  // written by the first run (SLURM_RESTART_COUNT unset: 0)
  before.exit_code = 143;
  before.reason = "terminated by Slurm";
  before.restarts = 0;
  Reconciliation r = Reconcile((*jobs)[0], before);
  EXPECT_EQ(r.kind, Reconciliation::kEnded);
  EXPECT_TRUE(r.succeeded) << r.reason;
  EXPECT_NE(r.reason.find("after requeue 1"), std::string::npos) << r.reason;
  ExitFile latest = before;  // written by the run that completed
  latest.exit_code = 0;
  latest.reason = "";
  latest.restarts = 1;
  r = Reconcile((*jobs)[0], latest);
  EXPECT_TRUE(r.succeeded) << r.reason;
  EXPECT_EQ(r.reason, "batch script exited 0");
}

}  // namespace
}  // namespace trellis::controller
