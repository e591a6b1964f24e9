// The shell's queue: the commands the parts return, carried out in a fixed
// order, their answers routed back to the parts (docs/architecture.md, "The
// controller's parts").
#include <algorithm>
#include <cctype>

#include "common/checkpoint_layout.h"
#include "common/log.h"
#include "common/overloaded.h"
#include "controller/app/attempt_files.h"
#include "controller/app/controller.h"
#include "controller/app/init_from_link.h"

namespace trellis::controller {

namespace asio = boost::asio;

namespace {

// Store latency is measured on the real steady clock: it is the controller's
// own speed, not a schedule the fake clock drives.
using Stopwatch = std::chrono::steady_clock;

// The order of the queue (controller.h): the rank of each kind of command.
int RankOf(const Command& c) {
  return std::visit(
      Overloaded{
          [](const CountRunQueued&) { return 0; }, [](const CountRestart&) { return 0; },
          [](const CountGateDecided&) { return 0; }, [](const CountStraggler&) { return 0; },
          [](const CountStepComplete&) { return 0; }, [](const CountHangTimeout&) { return 0; },
          [](const StoreWrite&) { return 1; },
          [](const CreateRun&) { return 1; }, [](const WriteAttemptFiles&) { return 1; },
          [](const CreateAttempt&) { return 1; }, [](const SetAsideCheckpoint&) { return 1; },
          [](const Transition&) { return 2; }, [](const EndLaunchesOfRun&) { return 3; },
          [](const NodeChecked&) { return 3; },
          [](const AttemptEnded&) { return 4; }, [](const QueueAheadOf&) { return 4; },
          [](const AttemptTakenUp&) { return 4; }, [](const WatchLaunch&) { return 5; },
          [](const UnwatchLaunch&) { return 6; }, [](const LaunchFault&) { return 7; },
          [](const StrikeNode&) { return 8; }, [](const SendReply&) { return 10; },
          [](const ScheduleNow&) { return 11; },
          [](const auto&) { return 9; },  // Slurm calls and timers
      },
      c);
}
constexpr int kRanks = 12;

// What a failed write is logged as.
std::string Describe(const StoreWrite& w) {
  return std::visit(
      Overloaded{
          [](const SetWaitReason& x) { return "wait reason of " + x.run_id; },
          [](const RecordAttemptEnd& x) {
            return "end of attempt " + std::to_string(x.attempt) + " of " + x.run_id;
          },
          [](const SetRestartBackoff& x) { return "restart backoff of " + x.run_id; },
          [](const RecordAttemptJob& x) { return "job of " + x.run_id; },
          [](const TakeUpAttempt& x) {
            return "taking up attempt " + std::to_string(x.attempt) + " of " + x.run_id;
          },
          [](const RecordAttemptNodes& x) { return "nodes of " + x.run_id; },
          [](const RecordAttemptLaunches& x) { return "launches of " + x.run_id; },
          [](const RecordLaunch& x) { return "launch record of " + x.row.run_id; },
          [](const RecordWorkerReport& x) {
            return "final report of " + x.row.node + " for " + x.row.run_id;
          },
          [](const RecordGate& x) { return "gate record of " + x.run_id; },
          [](const RecordHealthEvent& x) { return "health event of " + x.event.run_id; },
          [](const RecordPoolJob& x) {
            return "pool job " + std::to_string(x.row.pool) + " of " + x.row.run_id;
          },
          [](const RecordNodeCheck& x) { return "certification check of " + x.node; },
      },
      w);
}

absl::Status WriteTo(Store& s, const StoreWrite& w) {
  return std::visit(
      Overloaded{
          [&](const SetWaitReason& x) { return s.SetStateReason(x.run_id, x.reason); },
          [&](const RecordAttemptEnd& x) {
            return s.EndAttempt(x.run_id, x.attempt, x.exit_code, x.reason, x.at);
          },
          [&](const SetRestartBackoff& x) {
            return s.SetRestartBackoff(x.run_id, x.restarts, x.not_before);
          },
          [&](const RecordAttemptJob& x) { return s.SetAttemptJob(x.run_id, x.attempt, x.job_id); },
          [&](const TakeUpAttempt& x) {
            return s.TakeUpWaitingAttempt(x.run_id, x.attempt, x.begin);
          },
          [&](const RecordAttemptNodes& x) {
            return s.SetAttemptNodes(x.run_id, x.attempt, x.nodes);
          },
          [&](const RecordAttemptLaunches& x) {
            return s.SetAttemptLaunches(x.run_id, x.attempt, x.launches);
          },
          [&](const RecordLaunch& x) { return s.PutLaunch(x.row); },
          [&](const RecordWorkerReport& x) { return s.PutWorkerReport(x.row); },
          [&](const RecordGate& x) { return s.AddGateRecord(x.run_id, x.row); },
          [&](const RecordHealthEvent& x) { return s.AddHealthEvent(x.event); },
          [&](const RecordPoolJob& x) { return s.PutPoolJob(x.row); },
          [&](const RecordNodeCheck& x) { return s.SetNodeCheck(x.node, x.check); },
      },
      w);
}

// The writes of a transition, in its SQLite transaction.
std::function<absl::Status(Store&)> WritesOf(std::vector<StoreWrite> writes) {
  if (writes.empty()) return nullptr;
  return [writes = std::move(writes)](Store& s) {
    for (const StoreWrite& w : writes)
      if (absl::Status st = WriteTo(s, w); !st.ok()) return st;
    return absl::OkStatus();
  };
}

}  // namespace

void Controller::Enqueue(Effects fx) {
  if (queue_.empty()) queue_.resize(kRanks);
  for (Command& c : fx.commands) queue_[RankOf(c)].push_back(std::move(c));
}

void Controller::Apply(Effects fx) {
  Enqueue(std::move(fx));
  if (applying_) return;  // the loop below, further up the stack, takes them
  applying_ = true;
  for (;;) {
    auto next = std::find_if(queue_.begin(), queue_.end(), [](auto& q) { return !q.empty(); });
    if (next == queue_.end()) break;
    Command c = std::move(next->front());
    next->pop_front();
    Carry(std::move(c));
  }
  applying_ = false;
  FlushTargets();  // runs that ended left it
}

void Controller::Carry(Command command) {
  std::visit(
      Overloaded{
          [&](const StoreWrite& w) { Write(w); },
          [&](const CreateRun& c) {
            auto start = Stopwatch::now();
            auto run = store_->CreateRun(
                c.name, c.user, c.spec_toml, c.nodes, c.ranks_per_node,
                [&](const std::string& id) { return c.run_dir_base + "/" + id; }, clock_->Now());
            metrics_.ObserveStoreWrite(Stopwatch::now() - start);
            // Before the answer: the run's first attempt reads the spec then.
            if (run.ok() && c.init_from_source)
              run = KeepInitFromStep(*store_, *run, *c.init_from_source, clock_->Now());
            Enqueue(scheduler_.OnRunCreated({c.reply, std::move(run)}));
          },
          [&](const WriteAttemptFiles& w) {
            Enqueue(scheduler_.OnAttemptFilesWritten({w.run_id, w.attempt,
                                                      WriteAttemptFilesNow(w)}));
          },
          [&](const CreateAttempt& c) {
            auto start = Stopwatch::now();
            absl::Status st = store_->CreateAttempt(c.record);
            metrics_.ObserveStoreWrite(Stopwatch::now() - start);
            Enqueue(scheduler_.OnAttemptCreated({c.record.run_id, c.record.attempt, st}));
          },
          [&](const Transition& t) {
            absl::Status st = ApplyTransition(t);
            RunState reached = t.next ? t.next->to : t.to;
            if (t.reply)
              Enqueue(st.ok() ? Answer(*t.reply, reached) : Answer<RunState>(*t.reply, st));
            if (t.records_job) Enqueue(scheduler_.OnJobRecorded({*t.records_job, st}));
          },
          [&](const NodeChecked& c) {
            auto held = node_checks_.find(c.ticket);
            if (held == node_checks_.end()) return;
            WorkerCheck then = std::move(held->second);
            node_checks_.erase(held);
            Enqueue(then(c.status));
          },
          [&](const EndLaunchesOfRun& e) {
            Enqueue(launches_.gate.AbortRun(e.run_id, e.why, e.attempt));
            health_.StopWatching(e.run_id);
            targets_.RemoveRun(e.run_id);
            FlushTargets();
          },
          [&](const AttemptEnded& e) { Enqueue(scheduler_.EndAttempt(e)); },
          [&](const QueueAheadOf& q) { Enqueue(scheduler_.QueueAhead(q)); },
          [&](const AttemptTakenUp& t) { Enqueue(launches_.gate.TakenUp(t)); },
          [&](const WatchLaunch& w) {
            Enqueue(health_.Start(w));
            targets_.Add(w.ref, w.metrics_addresses);
            if (!w.resumed) metrics_.LaunchStarted(w.ref.run_id);
            FlushTargets();
          },
          [&](const UnwatchLaunch& u) {
            health_.End(u.ref);
            targets_.Remove(u.ref);
            FlushTargets();
          },
          [&](const LaunchFault& f) { Enqueue(launches_.ends.Fault(f)); },
          [&](const StrikeNode& s) { ApplyStrike(s); },
          [&](const StoreStepSpool& s) {
            auto run = store_->GetRun(s.run_id);
            if (run.ok()) spools_.Add(run->run_dir, {s.run_id, s.attempt, s.launch, s.node});
          },
          [&](const SetAsideCheckpoint& c) {
            std::string error;
            const std::string to = SetAsideCheckpointStep(c.checkpoint_dir, c.step, &error);
            // A failed rename is caught when the next launch meets the same
            // step (recovery.h: set aside before).
            if (to.empty())
              spdlog::error("run {}: damaged checkpoint step {} not set aside: {}", c.run_id,
                            c.step, error);
            else
              spdlog::warn("run {}: damaged checkpoint step {} set aside as {}", c.run_id,
                           c.step, to);
          },
          [&](const StartTimer& t) { StartPartTimer(t.key, t.after); },
          [&](const CancelTimer& t) { CancelPartTimer(t.key); },
          [&](const CountRunQueued&) { metrics_.RunQueued(); },
          [&](const CountRestart& c) {
            metrics_.Restart(c.run_id, c.failure_class, c.relaunch);
          },
          [&](const CountGateDecided& c) { metrics_.GateDecided(c.run_id, c.go, c.probes); },
          [&](const CountStraggler& c) { metrics_.Straggler(c.run_id); },
          [&](const CountStepComplete& c) {
            metrics_.StepComplete(c.run_id, c.spread, c.tokens);
          },
          [&](const CountHangTimeout& c) { metrics_.SetHangTimeout(c.run_id, c.seconds); },
          [&](const SendReply&) {},  // below: it is moved
          [&](const ScheduleNow&) {
            if (!stopped_) Enqueue(scheduler_.Tick());
          },
          [&](const auto&) {},  // Slurm calls: below, moved
      },
      command);
  if (auto* reply = std::get_if<SendReply>(&command)) replies_.Send(std::move(*reply));
  if (IsSlurmCall(command)) RunOnSlurm(std::move(command));
}

void Controller::Write(const StoreWrite& w) {
  auto start = Stopwatch::now();
  absl::Status st = WriteTo(*store_, w);
  metrics_.ObserveStoreWrite(Stopwatch::now() - start);
  if (!st.ok()) {
    spdlog::error("{}: not stored: {}", Describe(w), std::string(st.message()));
    return;
  }
  if (const auto* pool = std::get_if<RecordPoolJob>(&w))
    Enqueue(spare_pools_.PoolWritten(pool->row));
  // Why a run waits, to its watchers too: an event of its state to itself,
  // streamed, not stored (the store keeps the newest reason on the run). A
  // reason that only counts on ("restart backoff, 19 s left") is not sent again.
  if (const auto* wait = std::get_if<SetWaitReason>(&w)) {
    std::string shape = wait->reason;
    shape.erase(std::remove_if(shape.begin(), shape.end(), ::isdigit), shape.end());
    std::string& said = wait_reasons_said_[wait->run_id];
    if (shape != said)
      if (auto run = store_->GetRun(wait->run_id); run.ok()) {
        said = shape;
        watchers_.Transition(wait->run_id, EventRecord{clock_->Now(), run->state, run->state,
                                                       wait->reason, "{}"});
      }
  }
}

absl::Status Controller::ApplyTransition(const Transition& t) {
  auto before = store_->GetRun(t.run_id);
  if (!before.ok()) {
    spdlog::error("run {}: -> {} not stored: {}", t.run_id, StateName(t.to),
                  std::string(before.status().message()));
    return before.status();
  }
  WallTime now = clock_->Now();
  std::vector<Store::Step> steps = {{t.to, t.reason, t.evidence_json, WritesOf(t.also)}};
  if (t.next)
    steps.push_back({t.next->to, t.next->reason, t.evidence_json, WritesOf(t.next->also)});
  auto start = Stopwatch::now();
  absl::Status st = store_->Transitions(t.run_id, steps, now);
  metrics_.ObserveStoreWrite(Stopwatch::now() - start);
  if (!st.ok()) {
    spdlog::warn("run {}: {} -> {} refused: {}", t.run_id, StateName(before->state),
                 StateName(t.to), std::string(st.message()));
    return st;
  }
  RunState from = before->state;
  auto run_spec = ctx_.ParseStoredSpec(*before);
  const spec::NotifySection notify = NotifyFor(
      run_spec.ok() ? run_spec->notify : spec::NotifySection{}, config_.notify_defaults);
  for (const Store::Step& step : steps) {
    spdlog::info("run {}: {} -> {}: {}", t.run_id, StateName(from), StateName(step.to),
                 step.reason);
    // A failure's RESTARTING on its way to FAILED in the same transaction is
    // no restart: the end says it.
    const bool ends_here = IsTerminal(steps.back().to);
    for (const std::string& event : EventsOf(from, step.to, step.reason))
      if (!(ends_here && event == "restart"))
        notifier_.Send(notify, Notification{event, t.run_id, std::string(StateName(step.to)),
                                            step.reason, "", ToUnixMillis(now)});
    metrics_.Transition(t.run_id, from, step.to);
    watchers_.Transition(t.run_id,
                         EventRecord{now, from, step.to, step.reason, t.evidence_json});
    from = step.to;
  }
  if (IsTerminal(from)) {
    wait_reasons_said_.erase(t.run_id);
    health_.RunEnded(t.run_id);
    targets_.RemoveRun(t.run_id);
    Enqueue(scheduler_.RunEnded(t.run_id));
    Enqueue(spare_pools_.RunEnded(t.run_id));
  } else {
    ExportGoodput(t.run_id);
  }
  return absl::OkStatus();
}

void Controller::StartPartTimer(const TimerKey& key, std::chrono::nanoseconds after) {
  if (stopped_) return;
  CancelPartTimer(key);
  uint64_t generation = ++timer_generation_;
  TimerId id = clock_->ScheduleAfter(after, [this, key, generation] {
    asio::post(io_, [this, key, generation] {
      auto it = timers_.find(key);
      if (stopped_ || it == timers_.end() || it->second.generation != generation) return;
      timers_.erase(it);
      switch (key.kind) {
        case TimerKey::kGateTimeout: return Apply(launches_.gate.GateTimedOut(key.ref));
        case TimerKey::kStopGrace: return Apply(launches_.ends.StopGraceOver(key.ref));
        case TimerKey::kHealthCheck: return Apply(health_.CheckDue());
      }
    });
  });
  timers_[key] = {id, generation};
}

void Controller::CancelPartTimer(const TimerKey& key) {
  auto it = timers_.find(key);
  if (it == timers_.end()) return;
  clock_->Cancel(it->second.id);
  timers_.erase(it);
}

void Controller::CancelAllTimers() {
  for (const auto& [key, timer] : timers_) clock_->Cancel(timer.id);
  timers_.clear();
}

void Controller::RunOnSlurm(Command call) {
  asio::post(slurm_pool_, [this, call = std::move(call)] {
    SlurmAnswer answer = CallSlurm(*slurm_, call);
    // Answers are applied even while stopping: an sbatch that went through
    // must be recorded (or cancelled).
    asio::post(io_, [this, answer = std::move(answer)]() mutable { Route(std::move(answer)); });
  });
}

void Controller::Route(SlurmAnswer answer) {
  std::visit(Overloaded{
                 [](std::monostate) {},
                 [&](const NodesListed& a) { Apply(scheduler_.OnEligibility(a)); },
                 [&](const JobSubmitted& a) {
                   if (!a.certify_node.empty()) return Apply(certifier_.OnSubmitted(a));
                   Apply(a.pool > 0 ? spare_pools_.OnSubmitted(a) : scheduler_.OnSubmitted(a));
                 },
                 [&](const RunJobCancelled& a) { Apply(scheduler_.OnRunJobCancelled(a)); },
                 [&](const JobsSeen& a) {
                   if (a.listed.ok()) allocations_.Observe(*a.listed);
                   Effects fx = reconciler_.OnSnapshot(a);
                   if (a.listed.ok()) fx += continuations_.OnSnapshot(*a.listed);
                   fx += spare_pools_.OnSnapshot(a);
                   Apply(std::move(fx));
                 },
                 [&](const JobShown& a) { Apply(allocations_.Answered(a)); },
             },
             answer);
}

void Controller::FlushTargets() {
  absl::Status st = targets_.Flush();
  if (!st.ok()) spdlog::error("--prometheus-sd-file not written: {}", std::string(st.message()));
}

}  // namespace trellis::controller
