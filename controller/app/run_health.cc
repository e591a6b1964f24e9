#include "controller/app/run_health.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "common/checkpoint_interval.h"
#include "common/log.h"

namespace trellis::controller {

namespace {

double Seconds(SteadyTime::duration d) { return std::chrono::duration<double>(d).count(); }

PhaseTimes PhasesOf(const StepRecord& r) {
  return {r.step_seconds, r.fwd_seconds.value_or(0), r.bwd_seconds.value_or(0),
          r.optim_seconds.value_or(0), r.comm_seconds.value_or(0)};
}

nlohmann::json PhasesJson(const PhaseTimes& p) {
  return {{"step_s", p.step_s}, {"fwd_s", p.fwd_s}, {"bwd_s", p.bwd_s},
          {"optim_s", p.optim_s}, {"comm_s", p.comm_s}};
}

}  // namespace

void RunHealth::KeepLatest(const WorkerId& id, int rank, const StepRecord& record) {
  using Result = RankLatestTable::Result;
  Result r = rank_latest_.Record(id.run_id, id.attempt, id.launch, rank, id.node, record,
                                 ctx_.clock.Now());
  if (r == Result::kNoSet) {
    // The launch's first record here (or the first since the controller
    // started): one read for the world size; an ended run starts no set.
    auto run = ctx_.store.GetRun(id.run_id);
    if (!run.ok() || IsTerminal(run->state)) return;
    if (rank_latest_.Begin(id.run_id, id.attempt, id.launch, run->nodes * run->ranks_per_node))
      r = rank_latest_.Record(id.run_id, id.attempt, id.launch, rank, id.node, record,
                              ctx_.clock.Now());
  }
  if (r == Result::kOutOfRange)
    spdlog::debug("run {}: step record of rank {} from {} is outside the world; not kept",
                  id.run_id, rank, id.node);
}

HealthEventRecord RunHealth::Event(const Watch& w, std::string kind, int rank, std::string node,
                                   std::string detail, std::string detail_json) const {
  return {w.launch.ref.run_id, w.launch.ref.attempt, w.launch.ref.launch, ctx_.clock.Now(),
          std::move(kind), rank, std::move(node), std::move(detail), std::move(detail_json)};
}

// checkpoint.every_steps = "auto" chose the steps to the next checkpoint
// (rank 0's record says it; every rank chose the same): the figures it took
// and the formula, with what GO told the ranks of their nodes' failures.
HealthEventRecord RunHealth::CheckpointIntervalEvent(const Watch& w, const std::string& node,
                                                     const StepRecord& r) const {
  CheckpointIntervalInput in;
  in.cost_s = r.checkpoint_choice_cost_seconds.value_or(0);
  in.step_s = r.checkpoint_choice_step_seconds.value_or(0);
  in.mtbf_s = w.launch.mtbf_s;
  CheckpointInterval chose;
  chose.steps = *r.checkpoint_every_steps;
  chose.young_s = std::sqrt(2 * in.cost_s * in.mtbf_s);
  chose.period_s = static_cast<double>(chose.steps) * in.step_s;
  std::string detail = "after step " + std::to_string(r.step) + ", a checkpoint " +
                       DescribeCheckpointInterval(in, chose);
  // The bounds are the spec's; a period off Young's by more than a step was bounded.
  if (std::abs(chose.period_s - chose.young_s) > in.step_s)
    detail += " (bounded by checkpoint.auto_min_s / auto_max_s)";
  if (in.mtbf_s <= 0)
    detail += "; the ranks took the default failure rate (the controller sent none)";
  else
    detail += "; " + w.launch.mtbf_basis;
  const nlohmann::json j = {{"step", r.step},         {"every_steps", chose.steps},
                            {"cost_s", in.cost_s},    {"step_s", in.step_s},
                            {"mtbf_s", in.mtbf_s},    {"young_s", chose.young_s},
                            {"period_s", chose.period_s}};
  spdlog::info("run {}: checkpoint interval: {}", w.launch.ref.run_id, detail);
  return Event(w, kCheckpointIntervalEvent, 0, node, detail, j.dump());
}

Effects RunHealth::ObserveStep(const WorkerId& id, int rank, const StepRecord& record) {
  Effects out;
  KeepLatest(id, rank, record);
  Heard(id);
  auto it = watches_.find({id.run_id, id.attempt, id.launch});
  if (it == watches_.end()) return out;
  Watch& w = it->second;
  if (rank < 0 || rank >= static_cast<int>(w.ranks.size())) return out;
  RankProgress& p = w.ranks[rank];
  if (record.step > p.last_step) {
    out += NoteNewStep(w, p, record);
    p.process_state = 0;  // read before this step: it says nothing of a hang after it
    p.last_step = record.step;
    p.last_change = ctx_.clock.SteadyNow();
  }
  w.stragglers->Add(rank, id.node, record.step, PhasesOf(record));
  if (auto done = w.stragglers->TakeCompleted()) w.completed = *done;
  for (const StragglerEvent& e : w.stragglers->TakeEvents()) {
    std::string detail = "rank " + std::to_string(e.rank) + " on " + e.node + " took " +
                         std::to_string(e.rank_s).substr(0, 6) + " s per step, the others " +
                         std::to_string(e.median_others_s).substr(0, 6) + " s, in " +
                         std::to_string(e.slow_steps) + " of the last " +
                         std::to_string(e.window) + " steps";
    nlohmann::json j = {{"rank", e.rank},         {"node", e.node},
                        {"slow_steps", e.slow_steps}, {"window", e.window},
                        {"rank_s", e.rank_s},     {"median_others_s", e.median_others_s},
                        {"rank_phases", PhasesJson(e.rank_phases)},
                        {"others_phases", PhasesJson(e.others_phases)}};
    spdlog::warn("run {}: straggler: {}", id.run_id, detail);
    out.Add(CountStraggler{id.run_id});
    out.Add(RecordHealthEvent{Event(w, kStragglerEvent, e.rank, e.node, detail, j.dump())});
    if (w.launch.health.straggler_strike)
      out.Add(StrikeNode{e.node, "straggler: " + detail, j.dump(),
                         "run " + id.run_id + " (straggler)"});
  }
  // An event for the launch's first interval and for each that moved by
  // more than a tenth: a choice after every checkpoint would crowd `show`.
  if (rank == 0 && record.checkpoint_every_steps &&
      std::abs(*record.checkpoint_every_steps - w.checkpoint_every_said) * 10 >
          w.checkpoint_every_said) {
    w.checkpoint_every_said = *record.checkpoint_every_steps;
    out.Add(RecordHealthEvent{CheckpointIntervalEvent(w, id.node, record)});
  }
  for (const StragglerEnd& e : w.stragglers->TakeEnds()) {
    const std::string detail = "rank " + std::to_string(e.rank) + " on " + e.node +
                               " is no longer a straggler: slow in " +
                               std::to_string(e.slow_steps) + " of the last " +
                               std::to_string(e.window) + " steps (at step " +
                               std::to_string(e.step) + "; an event takes " +
                               std::to_string(w.launch.health.straggler_min_slow) + ")";
    const nlohmann::json j = {{"rank", e.rank}, {"node", e.node}, {"step", e.step},
                              {"slow_steps", e.slow_steps}, {"window", e.window}};
    spdlog::info("run {}: straggler episode over: {}", id.run_id, detail);
    out.Add(RecordHealthEvent{Event(w, kStragglerEndedEvent, e.rank, e.node, detail, j.dump())});
  }
  return out;
}

Effects RunHealth::StepStored(const std::string& run_id, const StepRow& row) {
  auto it = watches_.find({run_id, row.attempt, row.launch});
  if (it == watches_.end()) return {};
  Watch& w = it->second;
  if (!w.completed || w.completed->step != row.step) return {};
  Effects fx = CountStepComplete{run_id, *w.completed, row.tokens};
  w.completed.reset();
  return fx;
}

void RunHealth::Heard(const WorkerId& id) {
  auto it = watches_.find({id.run_id, id.attempt, id.launch});
  if (it == watches_.end()) return;
  Watch& w = it->second;
  if (w.go_nodes.count(id.node) && !w.finished_nodes.count(id.node))
    w.last_heard[id.node] = ctx_.clock.SteadyNow();
}

void RunHealth::RankEnded(const WorkerId& id, int rank) {
  auto it = watches_.find({id.run_id, id.attempt, id.launch});
  if (it != watches_.end()) it->second.ended_ranks.insert(rank);
}

void RunHealth::Finished(const WorkerId& id) {
  auto it = watches_.find({id.run_id, id.attempt, id.launch});
  if (it == watches_.end()) return;
  it->second.finished_nodes.insert(id.node);
  it->second.last_heard.erase(id.node);
}

Effects RunHealth::Start(const WatchLaunch& started) {
  Watch w;
  w.launch = started;
  // A launch resumed after a controller restart: its workers that had not
  // finished are given heartbeat_timeout_s from now (kReconnectGrace at the
  // least) to be heard again.
  w.started = ctx_.clock.SteadyNow();
  w.judge_lost_from = started.resumed ? w.started + kReconnectGrace : w.started;
  w.finished_nodes = started.finished_nodes;
  w.ended_ranks = started.ended_ranks;
  for (size_t r = 0; r < started.rank_nodes.size(); ++r) {
    RankProgress p;
    p.rank = static_cast<int>(r);
    p.node = started.rank_nodes[r];
    p.last_change = w.started;
    w.ranks.push_back(std::move(p));
    w.go_nodes.insert(started.rank_nodes[r]);
  }
  for (const auto& n : w.go_nodes)
    if (!w.finished_nodes.count(n)) w.last_heard[n] = w.started;
  const spec::HealthSection& h = started.health;
  w.stragglers = std::make_unique<StragglerWindow>(static_cast<int>(started.rank_nodes.size()),
                                                   h.straggler_window, h.straggler_min_slow,
                                                   h.straggler_factor);
  for (int rank : started.straggler_ranks) w.stragglers->HoldEpisode(rank);
  LearnStartups(w);
  watches_[started.ref] = std::move(w);
  return ArmCheck();
}

void RunHealth::End(const LaunchRef& ref) { watches_.erase(ref); }

void RunHealth::RunEnded(const std::string& run_id) {
  rank_latest_.MarkEnded(run_id);
  StopWatching(run_id);
}

void RunHealth::StopWatching(const std::string& run_id) {
  for (auto it = watches_.begin(); it != watches_.end();)
    it = it->first.run_id == run_id ? watches_.erase(it) : std::next(it);
}

Effects RunHealth::ArmCheck() {
  if (check_armed_ || watches_.empty()) return {};
  check_armed_ = true;
  return StartTimer{{TimerKey::kHealthCheck, {}}, kCheckEvery};
}

Effects RunHealth::CheckDue() {
  check_armed_ = false;
  Effects fx = Check();
  fx += ArmCheck();
  return fx;
}

Effects RunHealth::Check() {
  Effects fx;
  SteadyTime now = ctx_.clock.SteadyNow();
  for (auto& [ref, w] : watches_) {
    if (w.faulted) continue;
    const spec::RestartSection& r = w.launch.restart;
    LaunchFault fault;
    fault.ref = ref;
    if (now >= w.judge_lost_from)
      fault.lost_nodes =
          FindLostWorkers(w.last_heard, now, std::chrono::seconds(r.heartbeat_timeout_s));
    for (const auto& n : fault.lost_nodes) {
      double silent = Seconds(now - w.last_heard[n]);
      fault.lost_silent_s[n] = silent;
      std::string detail = "worker on " + n + " silent for " + std::to_string(int(silent)) +
                           " s (heartbeat_timeout_s = " + std::to_string(r.heartbeat_timeout_s) +
                           ")";
      fx.Add(RecordHealthEvent{Event(w, "node_lost", -1, n, detail,
                                     nlohmann::json{{"node", n}, {"silent_s", silent}}.dump())});
    }
    // Ranks of generic commands need not report steps at all: only [model]
    // ranks are held to the start-up timeout.
    std::chrono::seconds startup =
        w.launch.model ? std::chrono::seconds(r.startup_timeout_s) : std::chrono::hours(24 * 365);
    std::vector<RankProgress> running;  // ended ranks and finished nodes' ranks step no more
    for (const RankProgress& p : w.ranks)
      if (!w.ended_ranks.count(p.rank) && !w.finished_nodes.count(p.node)) running.push_back(p);
    fx += ApplyTimeouts(w, &running);
    fault.hang = FindHang(running, w.started, now, std::chrono::seconds(r.hang_timeout_s),
                          startup);
    if (fault.hang) {
      HangEvidence& h = *fault.hang;
      if (auto t = RankTimeout(w, w.ranks[h.rank])) h.timeout_basis = t->basis;
      std::string detail =
          "rank " + std::to_string(h.rank) + " on " + h.node + " made no progress for " +
          std::to_string(int(h.silent_s)) + " s" +
          (h.before_first_step ? " before its first step"
                               : " after step " + std::to_string(h.last_step)) +
          (h.timeout_basis.empty() ? "" : "; timeout " + h.timeout_basis);
      fx.Add(RecordHealthEvent{Event(
          w, "hang", h.rank, h.node, detail,
          nlohmann::json{{"rank", h.rank}, {"node", h.node}, {"last_step", h.last_step},
                         {"silent_s", h.silent_s}, {"timeout_s", h.timeout_s},
                         {"timeout_basis", h.timeout_basis}}.dump())});
    }
    if (fault.lost_nodes.empty() && !fault.hang) continue;
    w.faulted = true;
    fx.Add(std::move(fault));
  }
  return fx;
}

}  // namespace trellis::controller
