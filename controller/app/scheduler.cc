#include "controller/app/scheduler.h"

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "common/exit_codes.h"
#include "common/log.h"
#include "common/sha256.h"
#include "common/status.h"
#include "controller/app/gate_json.h"
#include "controller/app/metrics.h"
#include "controller/app/spec_paths.h"
#include "controller/core/batch_script.h"
#include "controller/core/decisions.h"
#include "controller/slurm/parsers.h"
#include "controller/slurm/slurm_client.h"

namespace trellis::controller {

namespace fs = std::filesystem;

namespace {

std::string ReadSecret(const std::string& path) {
  std::ifstream in(path);
  std::string secret;
  in >> secret;
  return secret;
}

std::string RandomSecret() {
  std::random_device rd;  // /dev/urandom
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) {
    unsigned v = rd();
    s += kHex[v & 15];
    s += kHex[(v >> 4) & 15];
  }
  return s;
}

StoreEffect SetReason(const std::string& run_id, std::string reason) {
  return {"wait reason of " + run_id,
          [run_id, reason = std::move(reason)](Store& s) { return s.SetStateReason(run_id, reason); }};
}

}  // namespace

Effects Scheduler::Submit(const std::string& spec_toml, bool dry_run, const std::string& user,
                          Reply<SubmitResult> reply) {
  spec::FieldErrors errors;
  auto spec = spec::ParseRunSpec(spec_toml, &errors);
  if (!spec) return Effects::Reply([=] { reply(absl::InvalidArgumentError(spec::JoinErrors(errors))); });
  if (absl::Status st =
          CheckSpecPaths(*spec, ctx_.config.data_roots, ctx_.config.output_root);
      !st.ok())
    return Effects::Reply([=] { reply(st); });
  // The scheduler counts eligible nodes inside the pin: a pin it cannot read
  // would keep the run waiting with no reason worth reading.
  if (!spec->slurm.nodelist.empty()) {
    if (auto names = ExpandHostlist(spec->slurm.nodelist); !names.ok()) {
      absl::Status st = absl::InvalidArgumentError(
          "slurm.nodelist: '" + spec->slurm.nodelist + "' is not a Slurm hostlist (" +
          std::string(names.status().message()) + "); write names and ranges such as " +
          "node[01-04,07],gpu9");
      return Effects::Reply([=] { reply(st); });
    }
  }
  if (spec->slurm.partition.empty()) spec->slurm.partition = ctx_.config.default_partition;
  if (dry_run) {
    // Show exactly what would be submitted for the run's first attempt.
    auto runs = ctx_.store.ListRuns(1, false);
    int64_t next = runs.ok() && !runs->empty() ? runs->front().seq + 1 : 1;
    std::string run_id = spec->job.name + "-" + std::to_string(next);
    std::string run_dir = ctx_.RunDirFor(*spec, run_id);
    AttemptPaths paths{run_id, 1, run_dir, ctx_.config.worker_bin, ctx_.config.advertise_addr,
                       run_dir + "/attempt-1/secret", /*job_tag=*/"", ctx_.config.worker_tls_ca};
    auto script = RenderBatchScript(ctx_.config.sbatch_template, paths);
    if (!script.ok()) return Effects::Reply([=] { reply(script.status()); });
    SubmitResult result{"", *script, SbatchArgs(*spec, paths, {}),
                        PolicyToJson(GatePolicyFor(*spec))};
    return Effects::Reply([=] { reply(result); });
  }
  auto run = ctx_.store.CreateRun(spec->job.name, user, spec_toml, spec->slurm.nodes,
                                  spec->slurm.ranks_per_node,
                                  [&](const std::string& id) { return ctx_.RunDirFor(*spec, id); },
                                  ctx_.clock.Now());
  if (!run.ok()) return Effects::Reply([=] { reply(run.status()); });
  ctx_.metrics.RunQueued();
  spdlog::info("run {} queued by {}: {} node(s) x {} rank(s)", run->run_id, user,
               spec->slurm.nodes, spec->slurm.ranks_per_node);
  Effects fx = Effects::Reply([reply, id = run->run_id] { reply(SubmitResult{id, "", {}}); });
  fx.schedule_now = true;
  return fx;
}

Effects Scheduler::Cancel(const std::string& run_id, const std::string& reason,
                          Reply<RunState> reply) {
  auto run = ctx_.store.GetRun(run_id);
  if (!run.ok()) return Effects::Reply([=] { reply(run.status()); });
  if (IsTerminal(run->state)) return Effects::Reply([=] { reply(run->state); });  // idempotent
  std::string why = reason.empty() ? "cancelled by " + run->user : reason;
  auto attempt = ctx_.store.LatestAttempt(run_id);
  if (!attempt.ok()) return Effects::Reply([=] { reply(attempt.status()); });
  if (!attempt->has_value() || !(*attempt)->live() || (*attempt)->slurm_job_id.empty())
    return FinishCancel(run_id, why, std::move(reply));
  Effects fx;
  fx.slurm.push_back([this, run_id, why, job = (*attempt)->slurm_job_id,
                      reply](SlurmClient& slurm) -> std::function<Effects()> {
    absl::Status st = slurm.Cancel(job);
    return [this, st, run_id, why, reply] {
      if (!st.ok())
        return Effects::Reply(
            [=] { reply(absl::UnavailableError("scancel failed: " + std::string(st.message()))); });
      return FinishCancel(run_id, why, reply);
    };
  });
  return fx;
}

Effects Scheduler::FinishCancel(const std::string& run_id, const std::string& reason,
                                Reply<RunState> reply) {
  auto run = ctx_.store.GetRun(run_id);
  if (!run.ok()) return Effects::Reply([=] { reply(run.status()); });
  if (IsTerminal(run->state)) return Effects::Reply([=] { reply(run->state); });
  auto attempt = ctx_.store.LatestAttempt(run_id);
  std::optional<int> live;
  if (attempt.ok() && attempt->has_value() && (*attempt)->live()) live = (*attempt)->attempt;
  Effects fx;
  WallTime now = ctx_.clock.Now();
  fx.transitions.push_back(
      {run_id, RunState::kCancelled, reason, "{}",
       [=](Store& s) {
         return live ? s.EndAttempt(run_id, *live, kExitCancelled, reason, now) : absl::OkStatus();
       },
       [reply](const absl::Status& st) {
         return Effects::Reply([reply, st] {
           if (st.ok())
             reply(RunState::kCancelled);
           else
             reply(st);
         });
       }});
  fx.aborted_runs.push_back({run_id, reason});
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
      fx.transitions.push_back({r.run_id, RunState::kFailed, std::string(spec.status().message())});
      continue;
    }
    partitions.insert(spec->slurm.partition);
    queued.push_back(std::move(r));
  }
  if (queued.empty()) return fx;
  tick_in_flight_ = true;
  // Eligibility needs sinfo: asked on the Slurm thread, decided back on the loop.
  fx.slurm.push_back([this, queued, partitions](SlurmClient& slurm) -> std::function<Effects()> {
    Usable usable;
    for (const auto& p : partitions) {
      auto nodes = slurm.ListNodes(p);
      if (!nodes.ok()) {
        usable.emplace(p, nodes.status());
        continue;
      }
      std::vector<std::string> names;
      for (const auto& node : *nodes)
        if (IsUsableNodeState(node.state)) names.push_back(node.name);
      usable.emplace(p, names);
    }
    return [this, queued, usable] { return OnEligibility(queued, usable); };
  });
  return fx;
}

Effects Scheduler::OnEligibility(const std::vector<RunRecord>& queued, const Usable& usable) {
  tick_in_flight_ = false;
  std::vector<std::string> excluded = ctx_.ExcludedNow();
  Effects fx;
  for (const auto& snapshot : queued) {
    auto run = ctx_.store.GetRun(snapshot.run_id);
    if (!run.ok() || run->state != RunState::kQueued || submitting_.count(run->run_id)) continue;
    auto spec = ctx_.ParseStoredSpec(*run);
    if (!spec.ok()) continue;
    const auto& eligible = usable.at(spec->slurm.partition);
    if (!eligible.ok()) {
      fx.writes.push_back(SetReason(
          run->run_id, "cannot list nodes: " + std::string(eligible.status().message())));
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
      if (d.wait_reason != run->state_reason) fx.writes.push_back(SetReason(run->run_id, d.wait_reason));
      continue;
    }
    fx += SubmitAttempt(*run, *spec, excluded);
  }
  return fx;
}

Effects Scheduler::SubmitAttempt(const RunRecord& run, const spec::RunSpec& spec,
                                 const std::vector<std::string>& excluded) {
  Effects fx;
  auto latest = ctx_.store.LatestAttempt(run.run_id);
  if (!latest.ok()) {
    spdlog::error("run {}: attempts unreadable: {}", run.run_id,
                  std::string(latest.status().message()));
    return fx;
  }
  // Written ahead: an attempt is stored (no job id yet) before its sbatch
  // runs. One still without a job id was being submitted when sbatch failed
  // or the controller stopped: it is submitted again under its own number,
  // after a look for a job of its name (docs/architecture.md, "A run's life").
  const bool resume = latest->has_value() && (*latest)->live() && (*latest)->slurm_job_id.empty();
  int attempt = resume ? (*latest)->attempt : (latest->has_value() ? (*latest)->attempt : 0) + 1;
  std::string attempt_dir = run.run_dir + "/attempt-" + std::to_string(attempt);
  AttemptPaths paths{run.run_id, attempt, run.run_dir, ctx_.config.worker_bin,
                     ctx_.config.advertise_addr, attempt_dir + "/secret", /*job_tag=*/"",
                     ctx_.config.worker_tls_ca};
  // Resumed: the secret file written before is kept (a job submitted before
  // a stop may be running with it); the store has only its digest.
  std::string secret = resume ? ReadSecret(paths.secret_file) : "";
  if (resume && Sha256Hex(secret) != (*latest)->secret_sha256) {
    spdlog::error("run {}: attempt {}'s secret file {} is missing or altered; not resubmitting",
                  run.run_id, attempt, paths.secret_file);
    fx.transitions.push_back({run.run_id, RunState::kFailed,
                              "attempt " + std::to_string(attempt) + "'s secret file " +
                                  paths.secret_file + " is missing or altered"});
    return fx;
  }
  if (!resume) secret = RandomSecret();
  paths.job_tag = Sha256Hex(secret).substr(0, 8);
  auto script = RenderBatchScript(ctx_.config.sbatch_template, paths);
  std::error_code ec;
  fs::create_directories(attempt_dir, ec);
  absl::Status st = ec ? absl::InternalError("cannot create " + attempt_dir + ": " + ec.message())
                       : script.status();
  if (st.ok()) st = WriteFileAtomically(run.run_dir + "/spec.toml", run.spec_toml, 0600);
  if (st.ok() && !resume) st = WriteFileAtomically(paths.secret_file, secret + "\n", 0600);
  if (st.ok()) st = WriteFileAtomically(attempt_dir + "/batch.sh", *script, 0700);
  if (!st.ok()) {
    fx.transitions.push_back({run.run_id, RunState::kFailed,
                              "cannot prepare attempt: " + std::string(st.message())});
    return fx;
  }
  std::vector<std::string> args = SbatchArgs(spec, paths, excluded);
  if (!resume) {
    AttemptRecord a;
    a.run_id = run.run_id;
    a.attempt = attempt;
    a.sbatch_args = args;
    a.secret_sha256 = Sha256Hex(secret);
    a.submitted = ctx_.clock.Now();
    if (absl::Status created = ctx_.store.CreateAttempt(a); !created.ok()) {
      spdlog::error("run {}: attempt {} not stored, not submitted: {}", run.run_id, attempt,
                    std::string(created.message()));
      return fx;
    }
  }
  submitting_.insert(run.run_id);
  fx.writes.push_back(SetReason(run.run_id, "submitting attempt " + std::to_string(attempt)));
  fx.slurm.push_back([this, run_id = run.run_id, attempt, args, name = AttemptJobName(run.run_id, attempt, paths.job_tag),
                      script_path = attempt_dir + "/batch.sh",
                      kill_after = ctx_.config.test_kill_after_sbatch](SlurmClient& slurm)
                         -> std::function<Effects()> {
    SubmitOutcome out = SubmitOnce(slurm, name, args, script_path);
    if (kill_after && out.job.ok() && out.adopted.empty()) {
      spdlog::warn("--test-kill-after-sbatch: killed after sbatch returned job {}", *out.job);
      raise(SIGKILL);
    }
    return [=] { return OnSubmitted(run_id, attempt, out); };
  });
  return fx;
}

Scheduler::SubmitOutcome Scheduler::SubmitOnce(SlurmClient& slurm, const std::string& name,
                                               const std::vector<std::string>& args,
                                               const std::string& script_path) {
  SubmitOutcome out;
  auto named = slurm.JobsNamed(name);
  if (!named.ok()) {
    out.job = absl::UnavailableError("cannot look for a job named " + name + ": " +
                                     std::string(named.status().message()));
    return out;
  }
  if (named->empty()) {
    out.job = slurm.Submit(args, script_path);
    return out;
  }
  // Submitted before the controller heard the id: keep the oldest job of
  // the name, cancel any other (an attempt has one job).
  auto oldest = std::min_element(named->begin(), named->end(), [](const auto& a, const auto& b) {
    return std::stoll(a.id) < std::stoll(b.id);
  });
  out.job = oldest->id;
  out.adopted = oldest->id;
  for (const auto& j : *named)
    if (j.id != oldest->id) {
      absl::Status c = slurm.Cancel(j.id);
      out.cancelled.push_back(j.id + (c.ok() ? "" : " (scancel failed: " + std::string(c.message()) + ")"));
    }
  return out;
}

Effects Scheduler::OnSubmitted(const std::string& run_id, int attempt, const SubmitOutcome& out) {
  submitting_.erase(run_id);
  Effects fx;
  const absl::StatusOr<std::string>& job_id = out.job;
  if (!job_id.ok()) {
    std::string why = std::string(job_id.status().message());
    // sbatch refusing the job is final (bad partition, account, node count);
    // anything else (controller unreachable, timeout) is retried next tick
    // (the attempt stays stored without a job id).
    if (why.find("Batch job submission failed") != std::string::npos) {
      WallTime now = ctx_.clock.Now();
      std::string reason = "sbatch refused the job: " + why;
      fx.transitions.push_back({run_id, RunState::kFailed, reason, "{}", [=](Store& s) {
                                  return s.EndAttempt(run_id, attempt, 1, reason, now);
                                }});
    } else {
      fx.writes.push_back(SetReason(run_id, "sbatch failed, retrying: " + why));
    }
    return fx;
  }
  std::string job = *job_id;
  if (!out.adopted.empty())
    spdlog::warn("run {}: attempt {} already had Slurm job {} (submitted before a controller "
                 "restart): adopted{}",
                 run_id, attempt, job,
                 out.cancelled.empty() ? "" : "; cancelled " + std::to_string(out.cancelled.size()) +
                                                  " more of its name");
  nlohmann::json evidence = {{"slurm_job_id", job}};
  if (!out.adopted.empty()) evidence["adopted"] = true;
  if (!out.cancelled.empty()) evidence["cancelled_duplicates"] = out.cancelled;
  fx.transitions.push_back(
      {run_id, RunState::kSubmitted,
       "attempt " + std::to_string(attempt) + " is Slurm job " + job +
           (out.adopted.empty() ? "" : " (found by name after a restart)"),
       evidence.dump(), [run_id, attempt, job](Store& s) { return s.SetAttemptJob(run_id, attempt, job); },
       [job, run_id, attempt, now = ctx_.clock.Now()](const absl::Status& st) {
         Effects undo;
         if (st.ok()) return undo;
         // Cancelled meanwhile (or the store failed): do not leave the job behind.
         undo.writes.push_back({"end of attempt " + std::to_string(attempt) + " of " + run_id,
                                [=](Store& s) {
                                  absl::Status set = s.SetAttemptJob(run_id, attempt, job);
                                  if (!set.ok()) return set;
                                  return s.EndAttempt(run_id, attempt, 1,
                                                      "the run ended while it was submitted", now);
                                }});
         undo.slurm.push_back([job](SlurmClient& slurm) -> std::function<Effects()> {
           absl::Status cancelled = slurm.Cancel(job);
           return [cancelled, job] {
             if (!cancelled.ok())
               spdlog::error("scancel {} (an attempt not recorded) failed: {}", job,
                             std::string(cancelled.message()));
             return Effects{};
           };
         });
         return undo;
       }});
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
    AttemptEndEffect end{run.run_id, a.attempt, a.exit_code.value_or(1),
                         a.end_reason.empty() ? "attempt " + std::to_string(a.attempt) + " ended"
                                              : a.end_reason,
                         "{\"repaired_at_start\":true}", std::nullopt, std::nullopt};
    fx += EndAttempt(end);
  }
  return fx;
}

Effects Scheduler::EndAttempt(const AttemptEndEffect& end) {
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
  std::string run_id = end.run_id;
  int attempt = end.attempt, exit_code = end.exit_code;
  std::string why = end.why;
  auto end_attempt = [=](Store& s) { return s.EndAttempt(run_id, attempt, exit_code, why, now); };
  int restarts = run->restarts + (d.uses_restart ? 1 : 0);
  // The attempt's end and what follows are one transaction: no stop can
  // leave the run RESTARTING with its attempt ended.
  TransitionEffect::Next follow{RunState::kFailed, d.reason, nullptr};
  if (d.kind == RecoveryDecision::kNewAttempt) {
    ctx_.metrics.Restart(end.run_id, end.failure_class, /*relaunch=*/false);
    follow = {RunState::kQueued, d.reason, [=](Store& s) {
                return s.SetRestartBackoff(run_id, restarts, d.not_before);
              }};
  }
  if (run->state != RunState::kRestarting) {
    TransitionEffect t{run_id, RunState::kRestarting, why, end.evidence_json, end_attempt};
    t.next = std::move(follow);
    fx.transitions.push_back(std::move(t));
  } else {
    // A relaunch ended the launch before (RESTARTING): the attempt ends here.
    fx.transitions.push_back({run_id, follow.to, follow.reason, end.evidence_json,
                              [=, also = follow.also](Store& s) {
                                RETURN_IF_ERROR(end_attempt(s));
                                return also ? also(s) : absl::OkStatus();
                              }});
  }
  return fx;
}

}  // namespace trellis::controller
