// Runs: views, transitions, scheduling and submission of attempts.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "common/log.h"
#include "common/status.h"
#include "controller/app/controller.h"
#include "controller/core/batch_script.h"
#include "controller/slurm/parsers.h"

namespace trellis::controller {

namespace asio = boost::asio;
namespace fs = std::filesystem;

namespace {

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

absl::Status WriteFile(const std::string& path, const std::string& text, mode_t mode) {
  std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus("cannot write " + tmp);
  bool ok = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = fsync(fd) == 0 && ok;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) return ErrnoStatus("cannot write " + path);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<spec::RunSpec> Controller::ParseStoredSpec(const RunRecord& run) {
  spec::FieldErrors errors;
  auto spec = spec::ParseRunSpec(run.spec_toml, &errors);
  if (!spec) return absl::DataLossError("stored spec of " + run.run_id + ": " + JoinErrors(errors));
  if (spec->slurm.partition.empty()) spec->slurm.partition = config_.default_partition;
  return *spec;
}

std::string Controller::RunDirFor(const spec::RunSpec& spec, const std::string& run_id) const {
  std::string base = config_.output_root;
  if (!spec.job.output_dir.empty()) base += "/" + spec.job.output_dir;
  return base + "/" + run_id;
}

absl::StatusOr<RunView> Controller::BuildView(const RunRecord& run, int steps) {
  RunView v;
  v.run = run;
  ASSIGN_OR_RETURN(v.attempts, store_->Attempts(run.run_id));
  ASSIGN_OR_RETURN(v.events, store_->Events(run.run_id));
  ASSIGN_OR_RETURN(v.recent_steps, store_->RecentSteps(run.run_id, steps));
  if (!v.recent_steps.empty()) {
    const StepRow& last = v.recent_steps.back();
    v.last_step = last.step;
    v.last_loss = last.ranks > 0 ? last.loss_sum / last.ranks : 0;
  }
  return v;
}

absl::Status Controller::Transition(const std::string& run_id, RunState to,
                                    const std::string& reason, const std::string& evidence_json,
                                    const std::function<absl::Status(Store&)>& also) {
  auto before = store_->GetRun(run_id);
  RETURN_IF_ERROR(before.status());
  WallTime now = clock_->Now();
  absl::Status st = store_->Transition(run_id, to, reason, evidence_json, now, also);
  if (!st.ok()) {
    spdlog::warn("run {}: {} -> {} refused: {}", run_id, StateName(before->state), StateName(to),
                 std::string(st.message()));
    return st;
  }
  spdlog::info("run {}: {} -> {}: {}", run_id, StateName(before->state), StateName(to), reason);
  if (IsTerminal(to)) rank_latest_.MarkEnded(run_id);
  watchers_.Transition(run_id, EventRecord{now, before->state, to, reason, evidence_json});
  return absl::OkStatus();
}

void Controller::ScheduleTick() {
  if (schedule_in_flight_ || stopped_) return;
  auto runs = store_->ListRuns(1000, /*active_only=*/true);
  if (!runs.ok()) return spdlog::error("schedule: {}", std::string(runs.status().message()));
  std::vector<RunRecord> queued;
  std::set<std::string> partitions;
  for (auto& r : *runs) {
    if (r.state != RunState::kQueued || submitting_.count(r.run_id)) continue;
    auto spec = ParseStoredSpec(r);
    if (!spec.ok()) {
      (void)Transition(r.run_id, RunState::kFailed, std::string(spec.status().message()));
      continue;
    }
    partitions.insert(spec->slurm.partition);
    queued.push_back(std::move(r));
  }
  if (queued.empty()) return;
  schedule_in_flight_ = true;
  // Eligibility needs sinfo: ask on the Slurm thread, decide back on the loop.
  asio::post(slurm_pool_, [this, queued = std::move(queued), partitions] {
    std::map<std::string, absl::StatusOr<std::vector<std::string>>> usable;
    for (const auto& p : partitions) {
      auto nodes = slurm_->ListNodes(p);
      if (!nodes.ok()) {
        usable.emplace(p, nodes.status());
        continue;
      }
      std::vector<std::string> names;
      for (const auto& node : *nodes)
        if (IsUsableNodeState(node.state)) names.push_back(node.name);
      usable.emplace(p, names);
    }
    asio::post(io_, [this, queued, usable] { OnEligibility(queued, usable); });
  });
}

void Controller::OnEligibility(
    std::vector<RunRecord> queued,
    std::map<std::string, absl::StatusOr<std::vector<std::string>>> usable) {
  std::vector<std::string> excluded = ExcludedNow();
  schedule_in_flight_ = false;
  for (const auto& snapshot : queued) {
    auto run = store_->GetRun(snapshot.run_id);
    if (!run.ok() || run->state != RunState::kQueued || submitting_.count(run->run_id)) continue;
    auto spec = ParseStoredSpec(*run);
    if (!spec.ok()) continue;
    const auto& eligible = usable.at(spec->slurm.partition);
    if (!eligible.ok()) {
      (void)store_->SetStateReason(run->run_id, "cannot list nodes: " +
                                                    std::string(eligible.status().message()));
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
        DecideSchedule(spec->total_nodes(), count, run->not_before, clock_->Now());
    if (!d.submit) {
      if (d.wait_reason != run->state_reason) (void)store_->SetStateReason(run->run_id, d.wait_reason);
      continue;
    }
    SubmitAttempt(*run, *spec, excluded);
  }
}

void Controller::SubmitAttempt(const RunRecord& run, const spec::RunSpec& spec,
                               const std::vector<std::string>& excluded) {
  auto attempts = store_->Attempts(run.run_id);
  if (!attempts.ok()) return;
  int attempt = static_cast<int>(attempts->size()) + 1;
  std::string attempt_dir = run.run_dir + "/attempt-" + std::to_string(attempt);
  AttemptPaths paths{run.run_id, attempt, run.run_dir, config_.worker_bin,
                     config_.advertise_addr, attempt_dir + "/secret"};
  std::string secret = RandomSecret();
  auto script = RenderBatchScript(config_.sbatch_template, paths);
  std::error_code ec;
  fs::create_directories(attempt_dir, ec);
  absl::Status st = ec ? absl::InternalError("cannot create " + attempt_dir + ": " + ec.message())
                       : script.status();
  if (st.ok()) st = WriteFile(run.run_dir + "/spec.toml", run.spec_toml, 0644);
  if (st.ok()) st = WriteFile(paths.secret_file, secret + "\n", 0600);
  if (st.ok()) st = WriteFile(attempt_dir + "/batch.sh", *script, 0755);
  if (!st.ok()) {
    (void)Transition(run.run_id, RunState::kFailed, "cannot prepare attempt: " +
                                                        std::string(st.message()));
    return;
  }
  std::vector<std::string> args = SbatchArgs(spec, paths, excluded);
  submitting_.insert(run.run_id);
  (void)store_->SetStateReason(run.run_id, "submitting attempt " + std::to_string(attempt));
  asio::post(slurm_pool_, [this, run_id = run.run_id, attempt, args, secret,
                           script_path = attempt_dir + "/batch.sh"] {
    auto job = slurm_->Submit(args, script_path);
    asio::post(io_, [this, run_id, attempt, args, secret, job] {
      OnSubmitted(run_id, attempt, args, secret, job);
    });
  });
}

void Controller::OnSubmitted(std::string run_id, int attempt, std::vector<std::string> args,
                             std::string secret, absl::StatusOr<std::string> job_id) {
  submitting_.erase(run_id);
  if (!job_id.ok()) {
    std::string why = std::string(job_id.status().message());
    // sbatch refusing the job is final (bad partition, account, node count);
    // anything else (controller unreachable, timeout) is retried next tick.
    if (why.find("Batch job submission failed") != std::string::npos) {
      (void)Transition(run_id, RunState::kFailed, "sbatch refused the job: " + why);
    } else {
      (void)store_->SetStateReason(run_id, "sbatch failed, retrying: " + why);
    }
    return;
  }
  AttemptRecord a;
  a.run_id = run_id;
  a.attempt = attempt;
  a.slurm_job_id = *job_id;
  a.sbatch_args = args;
  a.secret = secret;
  a.submitted = clock_->Now();
  absl::Status st = Transition(run_id, RunState::kSubmitted,
                               "attempt " + std::to_string(attempt) + " is Slurm job " + *job_id,
                               "{\"slurm_job_id\":\"" + *job_id + "\"}",
                               [&](Store& s) { return s.CreateAttempt(a); });
  if (!st.ok()) {
    // Cancelled meanwhile (or the store failed): do not leave the job behind.
    asio::post(slurm_pool_, [this, job = *job_id] { (void)slurm_->Cancel(job); });
  }
}

void Controller::FailAttempt(const std::string& run_id, int attempt, int exit_code,
                             const std::string& why, const std::string& evidence_json) {
  auto run = store_->GetRun(run_id);
  if (!run.ok() || IsTerminal(run->state)) return;
  auto end = [&](Store& s) { return s.EndAttempt(run_id, attempt, exit_code, why, clock_->Now()); };
  if (run->state != RunState::kRestarting &&
      !Transition(run_id, RunState::kRestarting, why, evidence_json, end).ok())
    return;
  auto spec = ParseStoredSpec(*run);
  spec::RestartSection policy = spec.ok() ? spec->restart : spec::RestartSection{};
  RestartDecision d = DecideRestart(run->restarts, policy, why, clock_->Now());
  if (d.requeue) {
    (void)Transition(run_id, RunState::kQueued, d.reason, evidence_json, [&](Store& s) {
      return s.SetRestartBackoff(run_id, run->restarts + 1, d.not_before);
    });
  } else {
    (void)Transition(run_id, RunState::kFailed, d.reason, evidence_json);
  }
}

}  // namespace trellis::controller
