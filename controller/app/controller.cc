#include "controller/app/controller.h"

#include <future>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/status.h"
#include "controller/app/spec_paths.h"
#include "controller/app/timed_slurm_client.h"

namespace trellis::controller {

namespace asio = boost::asio;

namespace {

LoopTimer::Post PostTo(asio::io_context& io) {
  return [&io](std::function<void()> fn) { asio::post(io, std::move(fn)); };
}

}  // namespace

Controller::Controller(ControllerConfig config, std::unique_ptr<Store> store,
                       std::shared_ptr<SlurmClient> slurm, Clock* clock)
    : config_(std::move(config)),
      ingest_metrics_(*metrics_.registry()),
      store_(std::move(store)),
      store_view_(*store_),
      slurm_(std::make_shared<TimedSlurmClient>(std::move(slurm), metrics_)),
      clock_(clock),
      ctx_{config_, store_view_, *clock_},
      work_(asio::make_work_guard(io_)),
      schedule_timer_(*clock_, PostTo(io_)),
      reconcile_timer_(*clock_, PostTo(io_)),
      scheduler_(ctx_),
      launches_(ctx_),
      allocations_(ctx_),
      reconciler_(ctx_),
      continuations_(ctx_),
      spare_pools_(ctx_),
      certifier_(ctx_),
      health_(ctx_),
      targets_(config_.prometheus_sd_file),
      spools_(
          [this](const std::string& path, const BatchSource& source)
              -> absl::StatusOr<std::vector<StepBatch>> {
            if (!config_.read_step_spool) return absl::NotFoundError("spools are not read");
            return config_.read_step_spool(path, source);
          },
          [this](StepBatch batch, Ingester::Done done) {
            return SubmitSteps(std::move(batch), std::move(done));
          },
          [this](std::function<void()> fn) { asio::post(io_, std::move(fn)); }) {
  if (config_.data_roots.empty()) config_.data_roots = DefaultDataRoots(config_.output_root);
}

Controller::~Controller() { Stop(); }

absl::Status Controller::Start() {
  if (absl::Status bad = CheckDataRoots(config_.data_roots); !bad.ok()) return bad;
  std::string roots;
  for (const auto& r : config_.data_roots) roots += (roots.empty() ? "" : ", ") + r;
  spdlog::info("data roots ([model] corpora must lie under one): {}", roots);
  if (config_.quarantine.certify_return) {
    // The certification checks' scripts and results (node_certifier.h).
    std::error_code ec;
    std::filesystem::create_directories(certifier_.Dir(), ec);
    if (ec) return absl::FailedPreconditionError("cannot make " + certifier_.Dir() + ": " +
                                                 ec.message());
  }
  Ingester::Options ingest;
  ingest.db_path = store_->db().path();
  ingest.journal = store_->db().journal();
  ingest.may_commit = store_->db().commit_guard();
  ingest.retention = config_.step_retention;
  ingest.prune_every = config_.step_prune_every;
  auto ingester = Ingester::Start(ingest, clock_, &ingest_metrics_,
                                  [this](std::vector<StepBatch> b, std::vector<StoredStep> rows) {
                                    asio::post(io_, [this, b = std::move(b),
                                                     rows = std::move(rows)]() mutable {
                                      StepsStored(std::move(b), std::move(rows));
                                    });
                                  });
  if (!ingester.ok())
    return absl::Status(ingester.status().code(),
                        "step pipeline: " + std::string(ingester.status().message()));
  ingester_ = std::move(*ingester);
  loop_thread_ = std::thread([this] { io_.run(); });
  asio::post(io_, [this] {
    auto runs = store_->CountRunsByState();
    if (runs.ok())
      metrics_.SetRuns(*runs);
    else
      spdlog::error("runs by state not counted: {}", std::string(runs.status().message()));
    CountQuarantined();
    CountSparePools();
    FlushTargets();  // no launch is known yet: empty
    // Runs left between two states by a stop, then what finished or
    // vanished while the controller was down, before new work for those runs.
    Apply(scheduler_.RepairAtStartup());
    // The launches that ran before the stop are watched again before what
    // Slurm says now ends any of them.
    Apply(launches_.resume.ResumeAtStartup());
    Apply(reconciler_.Tick(/*startup=*/true));
    ScanStepSpools();
    ArmTick(schedule_timer_, config_.schedule_interval, [this] { return scheduler_.Tick(); });
    // Quarantines also end by time alone, and a live run's goodput moves
    // with time: both counted again with every reconciliation.
    ExportGoodputOfLiveRuns();
    ArmTick(reconcile_timer_, config_.reconcile_interval, [this] {
      CountQuarantined();
      CountSparePools();
      ExportGoodputOfLiveRuns();
      spools_.TryAll();
      metrics_.SetUnstoredStepRecords(spools_.Total());
      Effects fx = reconciler_.Tick(/*startup=*/false);
      fx += CertifyTick();
      return fx;
    });
  });
  return absl::OkStatus();
}

void Controller::ScanStepSpools() {
  // The runs whose workers may have left spools: live ones and those that
  // changed within the last week (a controller down longer loses nothing:
  // the files stay, and `trellis show` of such a run reads none).
  auto runs = store_->ListRuns(/*limit=*/100000, /*active_only=*/false, /*user=*/"");
  if (!runs.ok()) {
    spdlog::error("step spools not looked for: {}", std::string(runs.status().message()));
    return;
  }
  const WallTime since = clock_->Now() - std::chrono::hours(24 * 7);
  for (const RunRecord& run : *runs)
    if (!IsTerminal(run.state) || run.updated >= since) spools_.Scan(run.run_id, run.run_dir);
}

void Controller::BeginShutdown() {
  if (!loop_thread_.joinable() || shutdown_begun_.exchange(true)) return;
  std::promise<void> done;
  asio::post(io_, [this, &done] {
    stopped_ = true;
    schedule_timer_.Cancel();
    reconcile_timer_.Cancel();
    CancelAllTimers();
    Apply(launches_.gate.Shutdown());
    Apply(spare_pools_.Shutdown());
    watchers_.EndAll();
    done.set_value();
  });
  done.get_future().wait();
}

void Controller::Stop() {
  if (!loop_thread_.joinable()) return;  // never started, or stopped already
  BeginShutdown();
  // What the workers sent is committed (and answered) before the loop ends.
  if (ingester_) ingester_->Stop();
  asio::post(io_, [this] { work_.reset(); });
  // Slurm commands still running post their results to the loop, which
  // drains them before it returns.
  slurm_pool_.join();
  loop_thread_.join();
}

void Controller::ArmTick(LoopTimer& timer, std::chrono::milliseconds every,
                         std::function<Effects()> tick) {
  // BeginShutdown cancels the timer, which drops a call already posted.
  timer.Arm(every, [this, &timer, every, tick] {
    Apply(tick());
    ArmTick(timer, every, tick);
  });
}

absl::StatusOr<RunView> Controller::BuildView(const RunRecord& run, int steps, bool goodput) {
  RunView v;
  v.run = run;
  ASSIGN_OR_RETURN(v.attempts, store_->Attempts(run.run_id));
  ASSIGN_OR_RETURN(v.events, store_->Events(run.run_id));
  ASSIGN_OR_RETURN(v.recent_steps, store_->RecentSteps(run.run_id, steps));
  ASSIGN_OR_RETURN(v.launches, store_->Launches(run.run_id));
  ASSIGN_OR_RETURN(v.health_events, store_->HealthEvents(run.run_id, 20));
  ASSIGN_OR_RETURN(v.pool_jobs, store_->PoolJobs(run.run_id));
  if (!v.recent_steps.empty()) {
    const StepRow& last = v.recent_steps.back();
    v.last_step = last.step;
    v.last_loss = last.ranks > 0 ? last.loss_sum / last.ranks : 0;
  }
  if (goodput) {
    ASSIGN_OR_RETURN(v.goodput, GoodputOf(run.run_id, v.events));
  }
  v.unstored_step_records = spools_.Pending(run.run_id);
  return v;
}

absl::StatusOr<Goodput> Controller::GoodputOf(const std::string& run_id,
                                              const std::vector<EventRecord>& events) {
  std::vector<StateChange> changes;
  changes.reserve(events.size());
  for (const auto& e : events) {
    // A launch's end stored its verdict's evidence with the transition.
    bool handoff = false;
    if (e.to == RunState::kRestarting) {
      auto ev = nlohmann::json::parse(e.evidence_json, nullptr, false);
      handoff = ev.is_object() && ev.value("handoff", false);
    }
    changes.push_back({e.time, e.to, handoff});
  }
  ASSIGN_OR_RETURN(auto steps, store_->GoodputSteps(run_id));
  return ComputeGoodput(changes, steps, clock_->Now());
}

void Controller::ExportGoodput(const std::string& run_id) {
  auto events = store_->Events(run_id);
  auto goodput = events.ok() ? GoodputOf(run_id, *events) : events.status();
  if (!goodput.ok()) {
    spdlog::error("run {}: goodput not computed: {}", run_id,
                  std::string(goodput.status().message()));
    return;
  }
  metrics_.SetGoodput(run_id, *goodput);
}

void Controller::ExportGoodputOfLiveRuns() {
  auto runs = store_->ListRuns(10000, /*active_only=*/true);
  if (!runs.ok()) {
    spdlog::error("goodput not computed: {}", std::string(runs.status().message()));
    return;
  }
  for (const auto& r : *runs) ExportGoodput(r.run_id);
}

// --- users ---

void Controller::SubmitRun(std::string spec_toml, bool dry_run, std::string user,
                           Reply<SubmitResult> reply) {
  asio::post(io_, [this, spec_toml = std::move(spec_toml), dry_run, user = std::move(user),
                   reply = std::move(reply)] {
    Apply(scheduler_.Submit(spec_toml, dry_run, user, replies_.Hold(reply)));
  });
}

void Controller::GetRun(std::string run_id, Reply<RunView> reply, RanksQuery ranks) {
  asio::post(io_, [this, run_id = std::move(run_id), reply = std::move(reply), ranks] {
    auto run = store_->GetRun(run_id);
    if (!run.ok()) return reply(run.status());
    auto view = BuildView(*run, 20, /*goodput=*/true);
    if (view.ok() && ranks.include) view->ranks = health_.RanksPage(run_id, ranks.from, ranks.limit);
    if (view.ok()) view->hang_timeout = health_.HangTimeoutOf(run_id);
    reply(std::move(view));
  });
}

void Controller::ListRuns(int limit, bool active_only, std::string user,
                          Reply<std::vector<RunView>> reply) {
  asio::post(io_, [this, limit, active_only, user = std::move(user), reply = std::move(reply)] {
    auto runs = store_->ListRuns(limit, active_only, user);
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
                   reply = std::move(reply)] {
    Apply(scheduler_.Cancel(run_id, reason, replies_.Hold(reply)));
  });
}

void Controller::Watch(std::string run_id, WatchSink* sink, Reply<RunView> reply) {
  asio::post(io_, [this, run_id = std::move(run_id), sink, reply = std::move(reply)] {
    auto run = store_->GetRun(run_id);
    if (!run.ok()) return reply(run.status());
    auto view = BuildView(*run, 20, /*goodput=*/true);
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

void Controller::RunSteps(std::string run_id, int max_points, Reply<StepSeries> reply) {
  asio::post(io_, [this, run_id = std::move(run_id), max_points, reply = std::move(reply)] {
    auto run = store_->GetRun(run_id);
    if (!run.ok()) return reply(run.status());
    reply(ReadStepSeries(*store_, run_id, max_points));
  });
}

// --- workers ---

void Controller::Register(WorkerId id, std::string version, std::string hostname, NodeProbe probe,
                          SlurmStep step, std::string metrics_addr, Reply<GateAnswer> reply) {
  asio::post(io_, [this, id = std::move(id), version = std::move(version),
                   hostname = std::move(hostname), probe = std::move(probe), step = std::move(step),
                   metrics_addr = std::move(metrics_addr), reply = std::move(reply)] {
    ReplyTo<GateAnswer> to = replies_.Hold(reply);
    AsWorker(id, /*fresh=*/false, [=](absl::Status allowed) {
      if (!allowed.ok()) return Effects(Answer<GateAnswer>(to, allowed));
      return launches_.gate.Register(id, version, hostname, probe, step, metrics_addr, to);
    });
  });
}

void Controller::AsWorker(const WorkerId& id, bool fresh, WorkerCheck then) {
  auto job = launches_.gate.AuthenticatedJob(id);
  if (!job.ok()) return Apply(then(job.status()));
  // A node of a spare pool job the attempt drew runs its worker in that job.
  std::string in_job = spare_pools_.DrawnJobOn(id.run_id, id.attempt, id.node).value_or(*job);
  const uint64_t ticket = next_node_check_++;
  node_checks_[ticket] = std::move(then);
  Apply(allocations_.Check(in_job, id.node, fresh, ticket));
}

void Controller::Heartbeat(WorkerId id, bool stopping, std::map<int, char> rank_states) {
  asio::post(io_, [this, id = std::move(id), stopping, states = std::move(rank_states)] {
    health_.Heard(id);
    if (stopping) health_.Stopping(id);
    health_.RankStates(id, states);
  });
}

void Controller::AuthenticateWorker(WorkerId id, Reply<bool> reply) {
  asio::post(io_, [this, id = std::move(id), reply = std::move(reply)] {
    ReplyTo<bool> to = replies_.Hold(reply);
    AsWorker(id, /*fresh=*/false, [to](absl::Status allowed) {
      return Effects(allowed.ok() ? Answer(to, true) : Answer<bool>(to, allowed));
    });
  });
}

bool Controller::SubmitSteps(StepBatch batch, Ingester::Done done) {
  return ingester_ && ingester_->Submit(std::move(batch), std::move(done));
}

void Controller::StepsStored(std::vector<StepBatch> batches, std::vector<StoredStep> rows) {
  if (stopped_) return;
  for (const StepBatch& b : batches) {
    WorkerId id{b.source.run_id, b.source.attempt, b.source.launch, b.source.node, ""};
    for (const RankStepRecord& r : b.records) {
      Effects fx = health_.ObserveStep(id, r.rank, r.record);  // straggler events only
      if (!fx.empty()) Apply(std::move(fx));
    }
  }
  for (const StoredStep& s : rows) {
    Apply(health_.StepStored(s.run_id, s.row));
    // Watchers see a step once every rank has reported it (the summary is
    // then complete); when the world size is unknown (after a controller
    // restart), every update.
    int world = launches_.gate.WorldSize({s.run_id, s.row.attempt, s.row.launch, "", ""});
    if (world == 0 || s.row.ranks == world) watchers_.Step(s.run_id, s.row);
  }
}

void Controller::RecordRankExit(WorkerId id, RankExitInfo exit) {
  asio::post(io_, [this, id = std::move(id), exit = std::move(exit)] {
    health_.Heard(id);
    health_.RankEnded(id, exit.rank);
    launches_.ends.RecordRankExit(id, exit);
  });
}

void Controller::ReportExit(WorkerId id, WorkerReport report, Reply<bool> reply) {
  asio::post(io_, [this, id = std::move(id), report = std::move(report),
                   reply = std::move(reply)] {
    ReplyTo<bool> to = replies_.Hold(reply);
    AsWorker(id, /*fresh=*/false, [=](absl::Status allowed) {
      if (!allowed.ok()) return Effects(Answer<bool>(to, allowed));
      health_.Finished(id);
      return launches_.ends.ReportExit(id, report, to);
    });
  });
}

NextLaunchQuestion Controller::WithSlurmsNodes(const WorkerId& id,
                                               const NextLaunchQuestion& q) {
  // The nodes of a requeued job's new allocation are blamed if they never
  // register: they come from Slurm's answer (just asked, fresh), not from
  // what the batch script reports.
  if (q.requeue_count == 0) return q;
  auto job = launches_.gate.AuthenticatedJob(id);
  const Allocation* slurm = job.ok() ? allocations_.Known(*job) : nullptr;
  if (slurm == nullptr) return q;
  NextLaunchQuestion checked = q;
  auto reported = AllocationOf(q.allocation_nodelist);
  if (!reported.ok() || reported->nodes != slurm->nodes)
    spdlog::warn("run {}: the requeued batch script reports nodes '{}', Slurm '{}': Slurm's kept",
                 id.run_id, q.allocation_nodelist, slurm->nodelist);
  checked.allocation_nodelist = slurm->nodelist;
  return checked;
}

void Controller::NextLaunch(WorkerId id, NextLaunchQuestion question,
                            Reply<NextLaunchAnswer> reply) {
  asio::post(io_, [this, id = std::move(id), q = std::move(question), reply = std::move(reply)] {
    // A requeued job's batch script runs on its new allocation.
    ReplyTo<NextLaunchAnswer> to = replies_.Hold(reply);
    AsWorker(id, /*fresh=*/q.requeue_count > 0, [=](absl::Status allowed) {
      if (!allowed.ok()) return Effects(Answer<NextLaunchAnswer>(to, allowed));
      return launches_.ends.NextLaunch(id, WithSlurmsNodes(id, q), to);
    });
  });
}

void Controller::StandBy(StandbyCall call, Reply<StandbyAnswer> reply) {
  asio::post(io_, [this, call = std::move(call), reply = std::move(reply)] {
    ReplyTo<StandbyAnswer> to = replies_.Hold(reply);
    auto job = spare_pools_.StandbyJob(call);
    if (!job.ok()) return Apply(Answer<StandbyAnswer>(to, job.status()));
    const uint64_t ticket = next_node_check_++;
    node_checks_[ticket] = [this, call, to](absl::Status allowed) {
      if (!allowed.ok()) return Effects(Answer<StandbyAnswer>(to, allowed));
      return spare_pools_.StandBy(call, to);
    };
    Apply(allocations_.Check(*job, call.node, /*fresh=*/false, ticket));
  });
}

}  // namespace trellis::controller
