#include "controller/app/controller.h"

#include <sys/stat.h>
#include <unistd.h>

#include <future>

#include "common/log.h"
#include "common/status.h"
#include "controller/core/batch_script.h"

namespace trellis::controller {

namespace asio = boost::asio;

namespace {

// The ranks start in the run directory on other hosts, so the corpus must
// be named by an absolute path on the shared file system, and it must be
// readable here (the login node sees the same file system).
absl::Status CheckTrainingData(const std::string& path) {
  if (path.empty())
    return absl::InvalidArgumentError(
        "training.data: a [model] run needs a corpus (a file written by trellis-corpus)");
  if (path.front() != '/')
    return absl::InvalidArgumentError("training.data: must be an absolute path (ranks start in "
                                      "the run directory), got \"" + path + "\"");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(path.c_str(), R_OK) != 0)
    return absl::InvalidArgumentError("training.data: " + path +
                                      " is not a readable file on the controller's host");
  return absl::OkStatus();
}

}  // namespace

Controller::Controller(ControllerConfig config, std::unique_ptr<Store> store,
                       std::shared_ptr<SlurmClient> slurm, const Clock* clock)
    : config_(std::move(config)),
      store_(std::move(store)),
      slurm_(std::move(slurm)),
      clock_(clock),
      work_(asio::make_work_guard(io_)),
      schedule_timer_(io_),
      reconcile_timer_(io_) {}

Controller::~Controller() { Stop(); }

void Controller::Start() {
  loop_thread_ = std::thread([this] { io_.run(); });
  asio::post(io_, [this] {
    // Settle what finished or vanished while the controller was down before
    // accepting new work for those runs.
    ReconcileTick(/*startup=*/true);
    ArmTimer(schedule_timer_, config_.schedule_interval, &Controller::ScheduleTick);
    ArmTimer(reconcile_timer_, config_.reconcile_interval, &Controller::ReconcileTimerTick);
  });
}

void Controller::BeginShutdown() {
  if (!loop_thread_.joinable() || shutdown_begun_.exchange(true)) return;
  std::promise<void> done;
  asio::post(io_, [this, &done] {
    stopped_ = true;
    schedule_timer_.cancel();
    reconcile_timer_.cancel();
    for (auto& [key, launch] : launches_) {
      if (launch.gate_timer) launch.gate_timer->cancel();
      for (auto& w : launch.waiting)
        w.reply(absl::UnavailableError("the controller is shutting down; register again"));
      launch.waiting.clear();
    }
    watchers_.EndAll();
    done.set_value();
  });
  done.get_future().wait();
}

void Controller::Stop() {
  if (!loop_thread_.joinable()) return;  // never started, or stopped already
  BeginShutdown();
  asio::post(io_, [this] { work_.reset(); });
  // Slurm commands still running post their results to the loop, which
  // drains them before it returns.
  slurm_pool_.join();
  loop_thread_.join();
}

void Controller::ArmTimer(asio::steady_timer& timer, std::chrono::milliseconds every,
                          void (Controller::*tick)()) {
  timer.expires_after(every);
  timer.async_wait([this, &timer, every, tick](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    (this->*tick)();
    ArmTimer(timer, every, tick);
  });
}

void Controller::SubmitRun(std::string spec_toml, bool dry_run, std::string user,
                           Reply<SubmitResult> reply) {
  asio::post(io_, [this, spec_toml = std::move(spec_toml), dry_run, user = std::move(user),
                   reply = std::move(reply)]() mutable {
    spec::FieldErrors errors;
    auto spec = spec::ParseRunSpec(spec_toml, &errors);
    if (!spec) return reply(absl::InvalidArgumentError(spec::JoinErrors(errors)));
    if (spec->has_model) {
      if (absl::Status st = CheckTrainingData(spec->trainer.training.data); !st.ok())
        return reply(st);
    }
    if (spec->slurm.partition.empty()) spec->slurm.partition = config_.default_partition;
    if (dry_run) {
      // Show exactly what would be submitted for the run's first attempt.
      auto runs = store_->ListRuns(1, false);
      int64_t next = runs.ok() && !runs->empty() ? runs->front().seq + 1 : 1;
      std::string run_id = spec->job.name + "-" + std::to_string(next);
      std::string run_dir = RunDirFor(*spec, run_id);
      AttemptPaths paths{run_id, 1, run_dir, config_.worker_bin, config_.advertise_addr,
                         run_dir + "/attempt-1/secret"};
      auto script = RenderBatchScript(config_.sbatch_template, paths);
      if (!script.ok()) return reply(script.status());
      return reply(SubmitResult{"", *script, SbatchArgs(*spec, paths, {})});
    }
    auto run = store_->CreateRun(spec->job.name, user, spec_toml, spec->slurm.nodes,
                                 spec->slurm.ranks_per_node,
                                 [&](const std::string& id) { return RunDirFor(*spec, id); },
                                 clock_->Now());
    if (!run.ok()) return reply(run.status());
    spdlog::info("run {} queued by {}: {} node(s) x {} rank(s)", run->run_id, user,
                 spec->slurm.nodes, spec->slurm.ranks_per_node);
    reply(SubmitResult{run->run_id, "", {}});
    ScheduleTick();
  });
}

void Controller::GetRun(std::string run_id, Reply<RunView> reply, RanksQuery ranks) {
  asio::post(io_, [this, run_id = std::move(run_id), reply = std::move(reply), ranks] {
    auto run = store_->GetRun(run_id);
    if (!run.ok()) return reply(run.status());
    auto view = BuildView(*run, 20);
    if (view.ok() && ranks.include)
      view->ranks = rank_latest_.Page(run_id, ranks.from, ranks.limit);
    reply(std::move(view));
  });
}

void Controller::ListRuns(int limit, bool active_only, Reply<std::vector<RunView>> reply) {
  asio::post(io_, [this, limit, active_only, reply = std::move(reply)] {
    auto runs = store_->ListRuns(limit, active_only);
    if (!runs.ok()) return reply(runs.status());
    std::vector<RunView> views;
    for (const auto& r : *runs) {
      auto v = BuildView(r, 1);
      if (!v.ok()) return reply(v.status());
      views.push_back(std::move(*v));
    }
    reply(std::move(views));
  });
}

void Controller::CancelRun(std::string run_id, std::string reason, Reply<RunState> reply) {
  asio::post(io_, [this, run_id = std::move(run_id), reason = std::move(reason),
                   reply = std::move(reply)]() mutable {
    auto run = store_->GetRun(run_id);
    if (!run.ok()) return reply(run.status());
    if (IsTerminal(run->state)) return reply(run->state);  // idempotent
    std::string why = reason.empty() ? "cancelled by " + run->user : reason;
    auto attempt = store_->LatestAttempt(run_id);
    if (!attempt.ok()) return reply(attempt.status());
    if (!attempt->has_value() || !(*attempt)->live() || (*attempt)->slurm_job_id.empty())
      return FinishCancel(run_id, why, std::move(reply));
    std::string job = (*attempt)->slurm_job_id;
    asio::post(slurm_pool_, [this, run_id, why, job, reply = std::move(reply)]() mutable {
      absl::Status st = slurm_->Cancel(job);
      asio::post(io_, [this, st, run_id, why, reply = std::move(reply)]() mutable {
        if (!st.ok()) return reply(absl::UnavailableError("scancel failed: " +
                                                          std::string(st.message())));
        FinishCancel(run_id, why, std::move(reply));
      });
    });
  });
}

void Controller::FinishCancel(const std::string& run_id, const std::string& reason,
                              Reply<RunState> reply) {
  auto run = store_->GetRun(run_id);
  if (!run.ok()) return reply(run.status());
  if (IsTerminal(run->state)) return reply(run->state);
  auto attempt = store_->LatestAttempt(run_id);
  absl::Status st = Transition(run_id, RunState::kCancelled, reason, "{}", [&](Store& s) {
    if (attempt.ok() && attempt->has_value() && (*attempt)->live())
      return s.EndAttempt(run_id, (*attempt)->attempt, 130, reason, clock_->Now());
    return absl::OkStatus();
  });
  if (!st.ok()) return reply(st);
  AbortLaunches(run_id, reason);
  reply(RunState::kCancelled);
}

void Controller::Watch(std::string run_id, WatchSink* sink, Reply<RunView> reply) {
  asio::post(io_, [this, run_id = std::move(run_id), sink, reply = std::move(reply)] {
    auto run = store_->GetRun(run_id);
    if (!run.ok()) return reply(run.status());
    auto view = BuildView(*run, 20);
    if (!view.ok()) return reply(view.status());
    bool terminal = IsTerminal(run->state);
    reply(std::move(*view));
    if (terminal)
      sink->OnEnd();
    else
      watchers_.Add(run_id, sink);
  });
}

void Controller::Unwatch(std::string run_id, WatchSink* sink, std::function<void()> done) {
  // On the loop, so it is ordered after any notification already queued.
  asio::post(io_, [this, run_id = std::move(run_id), sink, done = std::move(done)] {
    watchers_.Remove(run_id, sink);
    done();
  });
}

}  // namespace trellis::controller
