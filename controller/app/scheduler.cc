#include "controller/app/scheduler.h"

#include <nlohmann/json.hpp>

#include "common/exit_codes.h"
#include "common/log.h"
#include "common/spec/spec_overrides.h"
#include "common/spec/spec_writer.h"
#include "common/status.h"
#include "controller/app/gate_json.h"
#include "controller/app/init_from.h"
#include "controller/app/spec_paths.h"
#include "controller/core/batch_script.h"
#include "controller/core/decisions.h"
#include "controller/slurm/parsers.h"

namespace trellis::controller {

namespace {

// How often the scheduler's tick lists the user's accounting associations.
constexpr auto kAssociationsEvery = std::chrono::minutes(5);

}  // namespace

absl::StatusOr<std::string> Scheduler::ResolveSpecPaths(const std::string& submitted_toml,
                                                        spec::RunSpec* spec,
                                                        std::optional<InitFromFound>* source) {
  if (!spec->has_model) return submitted_toml;
  auto& t = spec->trainer.training;
  std::vector<std::string> sets;
  std::string said;  // what was found, as comment lines
  auto data = ResolveTrainingData(t.data, ctx_.config.data_roots);
  if (!data.ok()) return data.status();
  if (*data != t.data) {
    sets.push_back("training.data=" + *data);
    said += "# training.data \"" + t.data + "\" found at " + *data + "\n";
    t.data = *data;
  }
  if (!t.init_from.empty()) {
    std::vector<std::string> roots = ctx_.config.data_roots;
    roots.push_back(ctx_.config.output_root);
    auto from = ResolveInitFrom(t.init_from, ctx_.store, roots);
    if (!from.ok()) return from.status();
    if (!from->run.empty()) *source = *from;
    if (from->value() != t.init_from) {
      sets.push_back("training.init_from=" + from->value());
      said += "# training.init_from \"" + t.init_from + "\" is " + from->value() + "\n";
      t.init_from = from->value();
    }
  }
  if (sets.empty()) return submitted_toml;
  // The file's opening comment lines are kept (the CLI says there where the
  // spec came from); TOML written again keeps no others.
  spec::FieldErrors errors;
  auto rewritten = spec::ApplyOverridesKeepingOpening(submitted_toml, sets, said, &errors);
  if (!rewritten) return absl::InvalidArgumentError(spec::JoinErrors(errors));
  return *rewritten;
}

Effects Scheduler::Submit(const std::string& submitted_toml, bool dry_run, const std::string& user,
                          ReplyTo<SubmitResult> reply) {
  auto refuse = [&](absl::Status st) { return Effects(Answer<SubmitResult>(reply, st)); };
  spec::FieldErrors errors;
  auto spec = spec::ParseRunSpec(submitted_toml, &errors);
  if (!spec) return refuse(absl::InvalidArgumentError(spec::JoinErrors(errors)));
  // A corpus named relative to the data roots, and a run to start from, are
  // stored as what they are found to be, which the ranks open and every later
  // check reads.
  std::optional<InitFromFound> source;
  auto resolved = ResolveSpecPaths(submitted_toml, &*spec, &source);
  if (!resolved.ok()) return refuse(resolved.status());
  const std::string& spec_toml = *resolved;
  if (absl::Status st =
          CheckSpecPaths(*spec, ctx_.config.data_roots, ctx_.config.output_root);
      !st.ok())
    return refuse(st);
  // The scheduler counts eligible nodes inside the pin: a pin it cannot read
  // would keep the run waiting with no reason worth reading.
  if (!spec->slurm.nodelist.empty()) {
    if (auto names = ExpandHostlist(spec->slurm.nodelist); !names.ok()) {
      return refuse(absl::InvalidArgumentError(
          "slurm.nodelist: '" + spec->slurm.nodelist + "' is not a Slurm hostlist (" +
          std::string(names.status().message()) + "); write names and ranges such as " +
          "node[01-04,07],gpu9"));
    }
  }
  if (spec->slurm.partition.empty()) spec->slurm.partition = ctx_.config.default_partition;
  if (std::string unknown = UnknownPartition(spec->slurm.partition, partitions_);
      !unknown.empty())
    return refuse(absl::InvalidArgumentError(unknown));
  if (std::string refused = RefusedAccountOrQos(spec->slurm, associations_); !refused.empty())
    return refuse(absl::InvalidArgumentError(refused));
  if (dry_run) {
    // Show exactly what would be submitted for the run's first attempt.
    auto runs = ctx_.store.ListRuns(1, false);
    int64_t next = runs.ok() && !runs->empty() ? runs->front().seq + 1 : 1;
    std::string run_id = spec->job.name + "-" + std::to_string(next);
    std::string run_dir = ctx_.RunDirFor(*spec, run_id);
    AttemptPaths paths{run_id, 1, run_dir, ctx_.config.worker_bin, ctx_.config.advertise_addr,
                       run_dir + "/attempt-1/secret", /*job_tag=*/"<tag>",
                       ctx_.config.worker_tls_ca, ctx_.config.controller_file};
    auto script = RenderBatchScript(ctx_.config.sbatch_template, paths);
    if (!script.ok()) return refuse(script.status());
    SubmitResult shown{"", *script, SbatchArgs(*spec, paths, {}),
                       PolicyToJson(GatePolicyFor(*spec))};
    shown.resolved_spec = spec::ResolvedSpecToml(*spec);
    if (spec->restart.spare_pool_nodes > 0) {
      // Its exclusions (the quarantine, the run's own nodes) are those of
      // the moment it is submitted; a name's tag comes from a secret.
      auto pool = PoolSbatchArgs(
          *spec, run_id, run_dir, PoolJobName(run_id, 1, "<tag>"), 1, {},
          {ctx_.config.worker_bin, ctx_.config.advertise_addr, PoolSecretPath(run_dir, 1),
           ctx_.config.worker_tls_ca, ctx_.config.controller_file});
      if (!pool.ok()) return refuse(pool.status());
      shown.pool_sbatch_args = std::move(*pool);
    }
    return Answer<SubmitResult>(reply, std::move(shown));
  }
  // RunDirFor(spec, id) is this base, "/", and the id the store gives.
  std::string base = ctx_.RunDirFor(*spec, "");
  base.pop_back();
  return CreateRun{spec->job.name,  user, spec_toml, spec->slurm.nodes, spec->slurm.ranks_per_node,
                   std::move(base), reply, std::move(source)};
}

Effects Scheduler::OnRunCreated(const RunCreated& created) {
  if (!created.run.ok()) return Answer<SubmitResult>(created.reply, created.run.status());
  const RunRecord& run = *created.run;
  spdlog::info("run {} queued by {}: {} node(s) x {} rank(s)", run.run_id, run.user, run.nodes,
               run.ranks_per_node);
  Effects fx = CountRunQueued{};
  fx.Add(Answer<SubmitResult>(created.reply, SubmitResult{run.run_id, "", {}, ""}));
  fx.Add(ScheduleNow{});
  return fx;
}

Effects Scheduler::Cancel(const std::string& run_id, const std::string& reason,
                          ReplyTo<RunState> reply) {
  auto run = ctx_.store.GetRun(run_id);
  if (!run.ok()) return Answer<RunState>(reply, run.status());
  if (IsTerminal(run->state)) return Answer<RunState>(reply, run->state);  // idempotent
  std::string why = reason.empty() ? "cancelled by " + run->user : reason;
  auto attempt = ctx_.store.LatestAttempt(run_id);
  if (!attempt.ok()) return Answer<RunState>(reply, attempt.status());
  if (!attempt->has_value() || !(*attempt)->live() || (*attempt)->slurm_job_id.empty())
    return FinishCancel(run_id, why, reply);
  return CancelRunJob{run_id, (*attempt)->slurm_job_id, why, reply};
}

Effects Scheduler::OnRunJobCancelled(const RunJobCancelled& cancelled) {
  if (!cancelled.status.ok())
    return Answer<RunState>(cancelled.call.reply,
                            absl::UnavailableError("scancel failed: " +
                                                   std::string(cancelled.status.message())));
  return FinishCancel(cancelled.call.run_id, cancelled.call.why, cancelled.call.reply);
}

Effects Scheduler::FinishCancel(const std::string& run_id, const std::string& reason,
                                ReplyTo<RunState> reply) {
  auto run = ctx_.store.GetRun(run_id);
  if (!run.ok()) return Answer<RunState>(reply, run.status());
  if (IsTerminal(run->state)) return Answer<RunState>(reply, run->state);
  auto attempt = ctx_.store.LatestAttempt(run_id);
  Transition t{run_id, RunState::kCancelled, reason};
  if (attempt.ok() && attempt->has_value() && (*attempt)->live())
    t.also.push_back(RecordAttemptEnd{run_id, (*attempt)->attempt, kExitCancelled, reason,
                                      ctx_.clock.Now()});
  t.reply = reply;
  Effects fx = std::move(t);
  fx.Add(EndLaunchesOfRun{run_id, reason, std::nullopt});  // the waiting attempt's too
  return fx;
}

Effects Scheduler::Tick() {
  if (tick_in_flight_) return {};
  auto runs = ctx_.store.ListRuns(1000, /*active_only=*/true);
  if (!runs.ok()) {
    spdlog::error("schedule: {}", std::string(runs.status().message()));
    return {};
  }
  Effects fx;
  std::vector<RunRecord> queued;
  std::set<std::string> partitions;
  for (auto& r : *runs) {
    if (r.state != RunState::kQueued || submitting_.count(r.run_id)) continue;
    auto spec = ctx_.ParseStoredSpec(r);
    if (!spec.ok()) {
      fx.Add(Transition{r.run_id, RunState::kFailed, std::string(spec.status().message())});
      continue;
    }
    partitions.insert(spec->slurm.partition);
    queued.push_back(std::move(r));
  }
  if (queued.empty()) return fx;
  tick_in_flight_ = true;
  queued_at_tick_ = std::move(queued);
  // Eligibility needs sinfo: asked on the Slurm thread, decided back on the loop.
  const WallTime now = ctx_.clock.Now();
  const bool associations =
      !associations_asked_ || now - *associations_asked_ >= kAssociationsEvery;
  if (associations) associations_asked_ = now;
  fx.Add(ListUsableNodes{std::move(partitions), associations});
  return fx;
}

Effects Scheduler::OnEligibility(const NodesListed& listed) {
  tick_in_flight_ = false;
  std::vector<RunRecord> queued = std::move(queued_at_tick_);
  queued_at_tick_.clear();
  std::vector<std::string> excluded = ctx_.ExcludedNow();
  if (!listed.partitions.empty()) partitions_ = listed.partitions;
  if (listed.associations) associations_ = *listed.associations;
  Effects fx;
  for (const auto& snapshot : queued) {
    auto run = ctx_.store.GetRun(snapshot.run_id);
    if (!run.ok() || run->state != RunState::kQueued || submitting_.count(run->run_id)) continue;
    auto spec = ctx_.ParseStoredSpec(*run);
    if (!spec.ok()) continue;
    // Submitted before the partitions were known (a controller just started),
    // or a partition removed since: it would wait for nodes that never come.
    if (std::string unknown = UnknownPartition(spec->slurm.partition, partitions_);
        !unknown.empty()) {
      fx.Add(Transition{run->run_id, RunState::kFailed, unknown});
      continue;
    }
    auto asked = listed.usable.find(spec->slurm.partition);
    if (asked == listed.usable.end()) continue;  // its spec changed meanwhile: next tick
    const auto& eligible = asked->second;
    if (!eligible.ok()) {
      fx.Add(SetWaitReason{
          run->run_id, "cannot list nodes: " + std::string(eligible.status().message())});
      continue;
    }
    // Eligible: usable in the partition (and in the pinned nodelist), not quarantined.
    std::vector<std::string> pinned;
    if (!spec->slurm.nodelist.empty()) {
      auto names = ExpandHostlist(spec->slurm.nodelist);
      if (names.ok()) pinned = *names;
    }
    int count = 0;
    for (const auto& n : *eligible) {
      bool in_pin = pinned.empty() || std::find(pinned.begin(), pinned.end(), n) != pinned.end();
      bool out = std::find(excluded.begin(), excluded.end(), n) != excluded.end();
      count += in_pin && !out;
    }
    ScheduleDecision d =
        DecideSchedule(spec->total_nodes(), count, run->not_before, ctx_.clock.Now());
    if (!d.submit) {
      if (d.wait_reason != run->state_reason) fx.Add(SetWaitReason{run->run_id, d.wait_reason});
      continue;
    }
    fx += SubmitAttempt(*run, *spec, excluded);
  }
  return fx;
}

Effects Scheduler::RepairAtStartup() {
  Effects fx;
  auto runs = ctx_.store.ListRuns(100000, /*active_only=*/true);
  if (!runs.ok()) {
    spdlog::error("start-up repair: {}", std::string(runs.status().message()));
    return fx;
  }
  for (const RunRecord& run : *runs) {
    if (run.state != RunState::kRestarting) continue;
    auto latest = ctx_.store.LatestAttempt(run.run_id);
    if (!latest.ok() || !latest->has_value() || (*latest)->live()) continue;  // a relaunch goes on
    const AttemptRecord& a = **latest;
    spdlog::warn("run {}: left RESTARTING after attempt {} ended; deciding its requeue now",
                 run.run_id, a.attempt);
    AttemptEnded end{run.run_id, a.attempt, a.exit_code.value_or(1),
                         a.end_reason.empty() ? "attempt " + std::to_string(a.attempt) + " ended"
                                              : a.end_reason,
                         "{\"repaired_at_start\":true}", std::nullopt, std::nullopt};
    fx += EndAttempt(end);
  }
  return fx;
}

Effects Scheduler::EndAttempt(const AttemptEnded& end) {
  Effects fx;
  auto run = ctx_.store.GetRun(end.run_id);
  if (!run.ok() || IsTerminal(run->state)) return fx;
  WallTime now = ctx_.clock.Now();
  RecoveryDecision d;
  if (end.decided) {
    d = *end.decided;
  } else {
    // Nobody saw the launch end (the job vanished, or the controller
    // restarted meanwhile): the restart budget alone decides.
    auto spec = ctx_.ParseStoredSpec(*run);
    // For the backoff (recovery.h): the run's launches before the one that
    // ended, which is this attempt's launch not ended by a relaunch.
    std::vector<PastLaunch> earlier;
    if (auto past = ctx_.store.Launches(end.run_id); past.ok())
      for (const auto& p : *past)
        if (p.attempt != end.attempt || p.recovery == "relaunch")
          earlier.push_back({p.started, p.ended, ParseFailureClass(p.failure_class)});
    RestartDecision r = DecideRestart(run->restarts, spec.ok() ? spec->restart
                                                                : spec::RestartSection{},
                                      end.why, now, earlier);
    d.kind = r.requeue ? RecoveryDecision::kNewAttempt : RecoveryDecision::kFail;
    d.not_before = r.not_before;
    d.uses_restart = r.requeue;
    d.reason = r.reason;
  }
  const std::string& run_id = end.run_id;
  if (d.kind == RecoveryDecision::kNewAttempt) {
    // An attempt waits ahead: it is the new attempt, with its place in the
    // queue. One whose sbatch has not answered yet is ended, and a new
    // attempt submitted as usual (its job, if any, is then cancelled).
    auto all = ctx_.store.Attempts(run_id);
    if (auto w = all.ok() ? WaitingAttemptOf(*all) : std::nullopt) {
      if (!w->slurm_job_id.empty()) {
        fx.Add(CountRestart{run_id, end.failure_class, /*relaunch=*/false});
        fx += TakeUpWaiting(*run, end, d, *w);
        return fx;
      }
      fx.Add(RecordAttemptEnd{run_id, w->attempt, kExitCancelled,
                              "needed before its sbatch answered: a new attempt replaces it", now});
    }
  }
  RecordAttemptEnd end_attempt{run_id, end.attempt, end.exit_code, end.why, now};
  int restarts = run->restarts + (d.uses_restart ? 1 : 0);
  // The attempt's end and what follows are one transaction: no stop can
  // leave the run RESTARTING with its attempt ended.
  Transition::Next follow{RunState::kFailed, d.reason, {}};
  if (d.kind == RecoveryDecision::kNewAttempt) {
    fx.Add(CountRestart{run_id, end.failure_class, /*relaunch=*/false});
    follow = {RunState::kQueued, d.reason, {SetRestartBackoff{run_id, restarts, d.not_before}}};
  }
  if (run->state != RunState::kRestarting) {
    Transition t{run_id, RunState::kRestarting, end.why, end.evidence_json, {end_attempt}};
    t.next = std::move(follow);
    fx.Add(std::move(t));
  } else {
    // A relaunch ended the launch before (RESTARTING): the attempt ends here.
    Transition t{run_id, follow.to, follow.reason, end.evidence_json, {end_attempt}};
    for (auto& w : follow.also) t.also.push_back(std::move(w));
    fx.Add(std::move(t));
  }
  return fx;
}

}  // namespace trellis::controller
