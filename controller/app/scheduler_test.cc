// The scheduler alone: a FakeStoreView, a FakeClock, and the commands it
// returns (submit, adopt, backoff, cancel, new attempt, continuation).
#include "controller/app/scheduler.h"

#include "common/exit_codes.h"
#include "common/sha256.h"
#include "controller/app/part_test_util.h"
#include "controller/core/batch_script.h"

namespace trellis::controller {
namespace {

using std::chrono::seconds;

class SchedulerTest : public PartTest {
 protected:
  // Ticks, and answers sinfo with `usable` nodes in the default partition.
  Effects TickWith(int usable) {
    Effects asked = scheduler_.Tick();
    EXPECT_EQ(asked.All<ListUsableNodes>().size(), 1u);
    std::vector<std::string> nodes;
    for (int i = 1; i <= usable; ++i) nodes.push_back("node" + std::to_string(i));
    return scheduler_.OnEligibility({{{"", nodes}}});
  }
  // The shell's answer to the WriteAttemptFiles in `fx`.
  Effects Written(const Effects& fx, absl::Status status = absl::OkStatus()) {
    WriteAttemptFiles files = Only<WriteAttemptFiles>(fx);
    return scheduler_.OnAttemptFilesWritten({files.run_id, files.attempt, status});
  }
  Scheduler scheduler_{ctx_};
};

TEST_F(SchedulerTest, AValidSpecBecomesACreateRunAndTheCallerHearsItsId) {
  Effects fx = scheduler_.Submit(kSpec, /*dry_run=*/false, "alice", ReplyTo<SubmitResult>{7});
  CreateRun create = Only<CreateRun>(fx);
  EXPECT_EQ(create.name, "hello");
  EXPECT_EQ(create.user, "alice");
  EXPECT_EQ(create.nodes, 2);
  EXPECT_EQ(create.run_dir_base, config_.output_root);
  EXPECT_TRUE(fx.All<SendReply>().empty()) << "answered only once the run is stored";

  RunRecord run = AddRun(RunState::kQueued);
  Effects created = scheduler_.OnRunCreated({create.reply, run});
  EXPECT_EQ(Replied<SubmitResult>(Only<SendReply>(created)).run_id, "hello-1");
  EXPECT_EQ(Only<SendReply>(created).to, 7u);
  EXPECT_EQ(created.All<CountRunQueued>().size(), 1u);
  EXPECT_EQ(created.All<ScheduleNow>().size(), 1u);
}

TEST_F(SchedulerTest, ABadSpecOrPinIsRefusedAndNothingIsCreated) {
  Effects bad = scheduler_.Submit("[job]\nname = 3\n", false, "alice", {1});
  EXPECT_TRUE(bad.All<CreateRun>().empty());
  EXPECT_EQ(RepliedError(Only<SendReply>(bad)).code(), absl::StatusCode::kInvalidArgument);
  Effects pin =
      scheduler_.Submit(std::string(kSpec) + "nodelist='node[01-'\n", false, "a", {2});
  EXPECT_NE(RepliedError(Only<SendReply>(pin)).message().find("not a Slurm hostlist"),
            std::string::npos);
}

TEST_F(SchedulerTest, ADryRunShowsTheBatchScriptAndCreatesNothing) {
  Effects fx = scheduler_.Submit(kSpec, /*dry_run=*/true, "alice", {3});
  EXPECT_TRUE(fx.All<CreateRun>().empty());
  SubmitResult r = Replied<SubmitResult>(Only<SendReply>(fx));
  EXPECT_TRUE(r.run_id.empty());
  EXPECT_NE(r.batch_script.find("hello-1"), std::string::npos);
  EXPECT_TRUE(r.pool_sbatch_args.empty()) << "no spare pool asked for";

  fx = scheduler_.Submit(std::string(kSpec) + "[restart]\nspare_pool_nodes = 2\n", true, "alice",
                         {4});
  r = Replied<SubmitResult>(Only<SendReply>(fx));
  ASSERT_FALSE(r.pool_sbatch_args.empty());
  EXPECT_EQ(r.pool_sbatch_args[0], "--job-name=trellis-pool-hello-1.1.<tag>");
  EXPECT_EQ(r.pool_sbatch_args[1], "--nodes=2");
  EXPECT_NE(r.pool_sbatch_args.back().find(" standby --controller "), std::string::npos);
}

// A partition the cluster does not have: a queued run fails at the next
// eligibility check (submitted while the partitions were not known), and a
// submit after it is refused, naming the partitions there are.
TEST_F(SchedulerTest, APartitionTheClusterHasNotIsRefusedOnceKnown) {
  AddRun(RunState::kQueued, 1, std::string(kSpec) + "partition = 'gpux'\n");
  ASSERT_EQ(scheduler_.Tick().All<ListUsableNodes>().size(), 1u);
  NodesListed listed;
  listed.usable.emplace("gpux", std::vector<std::string>{});
  listed.partitions = {"debug", "gpu"};
  Effects fx = scheduler_.OnEligibility(listed);
  Transition t = Only<Transition>(fx);
  EXPECT_EQ(t.to, RunState::kFailed);
  EXPECT_EQ(t.reason, "slurm.partition: 'gpux' is not a partition of this cluster; its "
                      "partitions: debug, gpu");
  fx = scheduler_.Submit(std::string(kSpec) + "partition = 'gpux'\n", /*dry_run=*/true, "a", {5});
  EXPECT_EQ(RepliedError(Only<SendReply>(fx)).message(), t.reason);
  fx = scheduler_.Submit(std::string(kSpec) + "partition = 'gpu'\n", /*dry_run=*/true, "a", {6});
  EXPECT_TRUE(RepliedError(Only<SendReply>(fx)).ok());
}

// With accounting, an account or QOS the user has no association for is
// refused at submit and dry run, once the tick listed them (sacctmgr, at
// most every few minutes); without accounting nothing is checked.
TEST_F(SchedulerTest, AnAccountOrQosOutsideTheUsersAssociationsIsRefused) {
  const std::string bad_account = std::string(kSpec) + "account = 'proj9'\n";
  const std::string bad_qos =
      std::string(kSpec) + "account = 'proj7'\nextra_args = ['--qos=high']\n";
  const std::string good = std::string(kSpec) + "account = 'proj7'\nextra_args = ['--qos=low']\n";
  AddRun(RunState::kQueued);
  ListUsableNodes asked = Only<ListUsableNodes>(scheduler_.Tick());
  EXPECT_TRUE(asked.associations) << "asked at the first tick";
  NodesListed listed;
  listed.usable.emplace("", std::vector<std::string>{});
  scheduler_.OnEligibility(listed);  // sacctmgr failed: no accounting
  for (const std::string& spec : {bad_account, bad_qos, good})
    EXPECT_TRUE(RepliedError(Only<SendReply>(scheduler_.Submit(spec, true, "a", {1}))).ok());

  EXPECT_FALSE(Only<ListUsableNodes>(scheduler_.Tick()).associations) << "not again so soon";
  scheduler_.OnEligibility(listed);
  clock_.Advance(std::chrono::minutes(5));
  EXPECT_TRUE(Only<ListUsableNodes>(scheduler_.Tick()).associations);
  listed.associations = {{"proj7", {"normal", "low"}}, {"proj8", {"normal", "high"}}};
  scheduler_.OnEligibility(listed);
  EXPECT_EQ(RepliedError(Only<SendReply>(scheduler_.Submit(bad_account, true, "a", {2}))).message(),
            "slurm.account: 'proj9' is not an account of yours in Slurm's accounting; yours: "
            "proj7, proj8");
  EXPECT_EQ(RepliedError(Only<SendReply>(scheduler_.Submit(bad_qos, false, "a", {3}))).message(),
            "slurm.extra_args: --qos=high is not a QOS of account proj7 in Slurm's accounting; "
            "allowed: normal, low");
  EXPECT_TRUE(RepliedError(Only<SendReply>(scheduler_.Submit(good, true, "a", {4}))).ok());
}

TEST_F(SchedulerTest, AQueuedRunThatFitsGetsAnAttemptWrittenAheadThenItsSbatch) {
  AddRun(RunState::kQueued);
  EXPECT_TRUE(scheduler_.Tick().All<ListUsableNodes>().size() == 1);
  EXPECT_TRUE(scheduler_.Tick().empty()) << "one sinfo in flight at a time";
  Effects fx = scheduler_.OnEligibility({{{"", std::vector<std::string>{"node1", "node2"}}}});
  // Its files first (the part writes nothing itself): spec, a new secret, the batch script.
  WriteAttemptFiles files = Only<WriteAttemptFiles>(fx);
  const std::string dir = config_.output_root + "/hello-1/attempt-1";
  EXPECT_EQ(files.dir, dir);
  ASSERT_EQ(files.files.size(), 3u);
  EXPECT_EQ(files.files[0].path, config_.output_root + "/hello-1/spec.toml");
  EXPECT_EQ(files.files[1].path, dir + "/secret");
  EXPECT_EQ(files.files[1].mode, 0600);
  EXPECT_EQ(files.files[2].path, dir + "/batch.sh");
  EXPECT_EQ(files.files[2].mode, 0700);
  EXPECT_NE(files.files[2].content.find("hello-1"), std::string::npos);
  EXPECT_TRUE(files.kept_secret_file.empty());
  EXPECT_TRUE(fx.All<CreateAttempt>().empty()) << "stored once its files are written";
  EXPECT_TRUE(scheduler_.Tick().empty()) << "its preparation is in flight";

  Effects written = Written(fx);
  CreateAttempt create = Only<CreateAttempt>(written);
  EXPECT_EQ(create.record.attempt, 1);
  std::string secret = files.files[1].content;
  secret.pop_back();  // its newline
  EXPECT_EQ(create.record.secret_sha256, Sha256Hex(secret));
  EXPECT_TRUE(written.All<SubmitJob>().empty()) << "sbatch only once the attempt is stored";

  Effects stored = scheduler_.OnAttemptCreated({"hello-1", 1, absl::OkStatus()});
  SubmitJob submit = Only<SubmitJob>(stored);
  EXPECT_EQ(submit.attempt, 1);
  EXPECT_EQ(submit.job_name.rfind("trellis-hello-1.1.", 0), 0u) << submit.job_name;
  EXPECT_EQ(Only<SetWaitReason>(stored).reason, "submitting attempt 1");
  EXPECT_TRUE(scheduler_.Tick().empty()) << "its sbatch is in flight";
}

TEST_F(SchedulerTest, AnAttemptWhoseFilesCannotBeWrittenFailsTheRun) {
  AddRun(RunState::kQueued);
  Effects failed =
      Written(TickWith(2), absl::InternalError("cannot create /out/hello-1/attempt-1: No space"));
  Transition t = Only<Transition>(failed);
  EXPECT_EQ(t.to, RunState::kFailed);
  EXPECT_EQ(t.reason, "cannot prepare attempt: cannot create /out/hello-1/attempt-1: No space");
  EXPECT_TRUE(failed.All<CreateAttempt>().empty());
  EXPECT_TRUE(failed.All<SubmitJob>().empty());
}

TEST_F(SchedulerTest, AnAttemptTheStoreRefusedIsNotSubmitted) {
  AddRun(RunState::kQueued);
  Written(TickWith(2));
  Effects stored = scheduler_.OnAttemptCreated({"hello-1", 1, absl::InternalError("disk")});
  EXPECT_TRUE(stored.empty());
  EXPECT_EQ(scheduler_.Tick().All<ListUsableNodes>().size(), 1u) << "asked again next tick";
}

TEST_F(SchedulerTest, TooFewEligibleNodesIsAWaitReasonNotASubmission) {
  AddRun(RunState::kQueued);
  Effects fx = TickWith(1);
  EXPECT_TRUE(fx.All<WriteAttemptFiles>().empty());
  EXPECT_NE(Only<SetWaitReason>(fx).reason.find("eligible"), std::string::npos);
}

TEST_F(SchedulerTest, QuarantinedNodesAreNotEligible) {
  AddRun(RunState::kQueued);
  QuarantineEntry q;
  q.node = "node2";
  q.strikes = 1;
  q.since = clock_.Now();
  q.expiry = clock_.Now() + std::chrono::hours(1);
  store_.quarantine.push_back(q);
  EXPECT_TRUE(TickWith(2).All<WriteAttemptFiles>().empty());
}

TEST_F(SchedulerTest, ABackoffHoldsTheRunUntilItsTime) {
  AddRun(RunState::kQueued).not_before = clock_.Now() + seconds(60);
  Effects waiting = TickWith(2);
  EXPECT_TRUE(waiting.All<WriteAttemptFiles>().empty());
  EXPECT_NE(Only<SetWaitReason>(waiting).reason.find("backoff"), std::string::npos);
  clock_.Advance(seconds(61));
  EXPECT_EQ(TickWith(2).All<WriteAttemptFiles>().size(), 1u);
}

TEST_F(SchedulerTest, AnAttemptWrittenAheadIsSubmittedAgainUnderItsOwnNumber) {
  AddRun(RunState::kQueued);
  Effects first = TickWith(2);  // attempt 1 prepared with a new secret
  const std::string secret_file = config_.output_root + "/hello-1/attempt-1/secret";
  std::string secret = Only<WriteAttemptFiles>(first).files[1].content;
  secret.pop_back();
  Written(first);
  AttemptRecord& a = store_.AddAttempt("hello-1", 1, "");  // stored, never got a job id
  a.secret_sha256 = Sha256Hex(secret);
  scheduler_.OnAttemptCreated({"hello-1", 1, absl::InternalError("stopped")});

  // Again under number 1, keeping the secret its job may run with.
  Effects again = TickWith(2);
  WriteAttemptFiles files = Only<WriteAttemptFiles>(again);
  EXPECT_EQ(files.attempt, 1);
  EXPECT_EQ(files.kept_secret_file, secret_file);
  EXPECT_EQ(files.kept_secret_sha256, a.secret_sha256);
  for (const auto& f : files.files) EXPECT_NE(f.path, secret_file) << "the secret is not rewritten";
  Effects fx = Written(again);
  EXPECT_TRUE(fx.All<CreateAttempt>().empty());
  EXPECT_EQ(Only<SubmitJob>(fx).attempt, 1);
  const std::string tag = a.secret_sha256.substr(0, 8);
  EXPECT_EQ(Only<SubmitJob>(fx).job_name, AttemptJobName("hello-1", 1, tag))
      << "named by the kept secret's digest";
}

TEST_F(SchedulerTest, AnAlteredSecretFileFailsTheRunInsteadOfResubmitting) {
  AddRun(RunState::kQueued);
  store_.AddAttempt("hello-1", 1, "").secret_sha256 = Sha256Hex("another");
  const std::string why =
      "attempt 1's secret file /out/hello-1/attempt-1/secret is missing or altered";
  Effects fx = Written(TickWith(2), absl::FailedPreconditionError(why));
  EXPECT_TRUE(fx.All<SubmitJob>().empty());
  EXPECT_EQ(Only<Transition>(fx).to, RunState::kFailed);
  EXPECT_EQ(Only<Transition>(fx).reason, why) << "said as the shell found it";
}

TEST_F(SchedulerTest, ASubmittedJobIsRecordedWithTheTransitionAndAnAdoptedOneSaysSo) {
  Effects fx = scheduler_.OnSubmitted({"hello-1", 1, std::string("42"), "42", {"43"}});
  Transition t = Only<Transition>(fx);
  EXPECT_EQ(t.to, RunState::kSubmitted);
  EXPECT_NE(t.reason.find("found by name"), std::string::npos);
  EXPECT_NE(t.evidence_json.find("\"adopted\":true"), std::string::npos);
  EXPECT_NE(t.evidence_json.find("43"), std::string::npos);
  ASSERT_EQ(t.also.size(), 1u);
  EXPECT_EQ(std::get<RecordAttemptJob>(t.also[0]).job_id, "42");
  ASSERT_TRUE(t.records_job);
  EXPECT_EQ(t.records_job->job_id, "42");
}

TEST_F(SchedulerTest, AJobTheRunCanNoLongerUseIsEndedAndCancelled) {
  EXPECT_TRUE(scheduler_.OnJobRecorded({{"hello-1", 1, "42"}, absl::OkStatus()}).empty());
  Effects undo =
      scheduler_.OnJobRecorded({{"hello-1", 1, "42"}, absl::FailedPreconditionError("")});
  EXPECT_EQ(Only<RecordAttemptJob>(undo).job_id, "42");
  EXPECT_EQ(Only<RecordAttemptEnd>(undo).attempt, 1);
  EXPECT_EQ(Only<CancelJob>(undo).job_id, "42");
}

TEST_F(SchedulerTest, SbatchRefusingTheJobFailsTheRunAndOtherErrorsAreRetried) {
  Effects refused = scheduler_.OnSubmitted(
      {"hello-1", 1, absl::InternalError("Batch job submission failed: bad partition"), "", {}});
  Transition t = Only<Transition>(refused);
  EXPECT_EQ(t.to, RunState::kFailed);
  EXPECT_EQ(std::get<RecordAttemptEnd>(t.also[0]).exit_code, 1);
  Effects retried =
      scheduler_.OnSubmitted({"hello-1", 1, absl::UnavailableError("timeout"), "", {}});
  EXPECT_TRUE(retried.All<Transition>().empty());
  EXPECT_NE(Only<SetWaitReason>(retried).reason.find("retrying"), std::string::npos);
}

TEST_F(SchedulerTest, CancellingARunWithALiveJobCancelsTheJobFirst) {
  AddRun(RunState::kRunning);
  store_.AddAttempt("hello-1", 1, "42");
  Effects fx = scheduler_.Cancel("hello-1", "", ReplyTo<RunState>{5});
  CancelRunJob call = Only<CancelRunJob>(fx);
  EXPECT_EQ(call.job_id, "42");
  EXPECT_EQ(call.why, "cancelled by tester");
  EXPECT_TRUE(fx.All<Transition>().empty());

  Effects done = scheduler_.OnRunJobCancelled({call, absl::OkStatus()});
  Transition t = Only<Transition>(done);
  EXPECT_EQ(t.to, RunState::kCancelled);
  EXPECT_EQ(std::get<RecordAttemptEnd>(t.also[0]).exit_code, kExitCancelled);
  ASSERT_TRUE(t.reply);
  EXPECT_EQ(t.reply->id, 5u);
  EXPECT_EQ(Only<EndLaunchesOfRun>(done).run_id, "hello-1");

  Effects failed = scheduler_.OnRunJobCancelled({call, absl::InternalError("no scancel")});
  EXPECT_EQ(RepliedError(Only<SendReply>(failed)).code(), absl::StatusCode::kUnavailable);
}

TEST_F(SchedulerTest, CancellingAnEndedRunAnswersItsState) {
  AddRun(RunState::kSucceeded);
  Effects fx = scheduler_.Cancel("hello-1", "", {1});
  EXPECT_EQ(Replied<RunState>(Only<SendReply>(fx)), RunState::kSucceeded);
  EXPECT_EQ(RepliedError(Only<SendReply>(scheduler_.Cancel("nope-1", "", {2}))).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SchedulerTest, AFailedAttemptIsRequeuedAfterTheBackoffWhileTheBudgetLasts) {
  AddRun(RunState::kRunning, 1, std::string(kSpec) + "[restart]\nmax_restarts = 1\n");
  Effects fx = scheduler_.EndAttempt({"hello-1", 1, 3, "exit 3", "{}", std::nullopt, std::nullopt});
  Transition t = Only<Transition>(fx);
  EXPECT_EQ(t.to, RunState::kRestarting);
  ASSERT_TRUE(t.next);
  EXPECT_EQ(t.next->to, RunState::kQueued);
  SetRestartBackoff backoff = std::get<SetRestartBackoff>(t.next->also.at(0));
  EXPECT_EQ(backoff.restarts, 1);
  EXPECT_EQ(backoff.not_before, clock_.Now() + seconds(30));
  EXPECT_EQ(std::get<RecordAttemptEnd>(t.also.at(0)).exit_code, 3);
  EXPECT_EQ(fx.All<CountRestart>().size(), 1u);

  store_.runs["hello-1"].restarts = 1;  // the budget spent
  Transition last = Only<Transition>(
      scheduler_.EndAttempt({"hello-1", 2, 3, "exit 3", "{}", std::nullopt, std::nullopt}));
  EXPECT_EQ(last.next->to, RunState::kFailed);
}

TEST_F(SchedulerTest, AContinuationDecidedElsewhereIsANewAttemptWithoutARestart) {
  AddRun(RunState::kRunning);  // max_restarts = 0: no budget at all
  RecoveryDecision continued{RecoveryDecision::kNewAttempt, {}, clock_.Now(), false,
                             "time_limit: a new attempt continues from the newest checkpoint"};
  Transition t = Only<Transition>(scheduler_.EndAttempt(
      {"hello-1", 1, 0, "time limit", "{}", continued, FailureClass::kTimeLimit}));
  EXPECT_EQ(t.next->to, RunState::kQueued);
  EXPECT_EQ(std::get<SetRestartBackoff>(t.next->also.at(0)).restarts, 0);
}

TEST_F(SchedulerTest, ARunLeftRestartingWithItsAttemptEndedIsDecidedAtStartUp) {
  AddRun(RunState::kRestarting, 1, std::string(kSpec) + "[restart]\nmax_restarts = 2\n");
  AttemptRecord& a = store_.AddAttempt("hello-1", 1, "42");
  a.ended = clock_.Now();
  a.exit_code = 9;
  Transition t = Only<Transition>(scheduler_.RepairAtStartup());
  EXPECT_EQ(t.to, RunState::kQueued) << "RESTARTING already: one step";
  EXPECT_NE(t.evidence_json.find("repaired_at_start"), std::string::npos);
}

}  // namespace
}  // namespace trellis::controller
