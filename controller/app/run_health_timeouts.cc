// Run health's learned hang timeouts (controller/core/hang_timeout.h): the
// gaps between steps, the launch's start, the timeout each running rank is
// held to (docs/architecture.md, "Hangs: learned timeouts").
#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "controller/app/run_health.h"

namespace trellis::controller {
namespace {

HangTimeoutPolicy PolicyOf(const spec::RestartSection& r, bool model) {
  HangTimeoutPolicy p;
  p.bound_s = r.hang_timeout_s;
  p.startup_bound_s = r.startup_timeout_s;
  // The trainer's cadence is known (its records say when it checkpoints); a
  // command's own pauses are not.
  p.learned = r.hang_learned && model;
  if (!r.hang_learned)
    p.not_learned_why = "restart.hang_learned = false";
  else if (!model)
    p.not_learned_why = "learned only for [model] ranks: a command's own pauses are unknown";
  p.floor_s = r.hang_floor_s;
  p.factor = r.hang_factor;
  p.startup_floor_s = r.startup_floor_s;
  p.startup_factor = r.startup_factor;
  return p;
}

double SecondsBetween(SteadyTime a, SteadyTime b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

void RunHealth::LearnStartups(Watch& w) {
  w.timeouts = PolicyOf(w.launch.restart, w.launch.model);
  w.next_checkpoint.assign(w.ranks.size(), std::nullopt);
  // A resumed watch began at the controller's restart, not at GO: no start to time.
  w.start_said = w.launch.resumed;
  auto events = ctx_.store.HealthEventsOf(w.launch.ref.run_id, kLaunchStartedEvent);
  if (!events.ok()) return;
  for (const HealthEventRecord& e : *events) {
    if (e.attempt == w.launch.ref.attempt && e.launch == w.launch.ref.launch) continue;
    auto j = nlohmann::json::parse(e.detail_json, nullptr, false);
    if (j.is_object() && j.contains("start_s") && j["start_s"].is_number())
      w.earlier_starts_s.push_back(j["start_s"].get<double>());
  }
}

Effects RunHealth::NoteNewStep(Watch& w, const RankProgress& p, const StepRecord& record) {
  Effects fx;
  const SteadyTime now = ctx_.clock.SteadyNow();
  // The launch's next step, first heard: the gap from the last is a step's
  // (or a checkpoint's, when the record says it spent time on one). The
  // ranks step together, so one gap per step. A jump (records lost, a
  // controller restart) times nothing.
  if (record.step > w.newest_step) {
    if (w.newest_step >= 0 && record.step == w.newest_step + 1)
      w.gaps.Add(SecondsBetween(w.newest_at, now), record.checkpoint_seconds.value_or(0));
    w.newest_step = record.step;
    w.newest_at = now;
  }
  w.next_checkpoint[p.rank] = record.next_checkpoint_step;
  if (w.start_said || p.last_step >= 0) return fx;
  for (const RankProgress& other : w.ranks)
    if (other.rank != p.rank && other.last_step < 0) return fx;
  w.start_said = true;
  const double start_s = SecondsBetween(w.started, now);
  const std::string detail = "every rank stepped " + std::to_string(start_s).substr(0, 6) +
                             " s after GO (later launches learn their start-up timeout from it)";
  fx.Add(RecordHealthEvent{Event(w, kLaunchStartedEvent, -1, "", detail,
                                 nlohmann::json{{"start_s", start_s}}.dump())});
  return fx;
}

std::optional<TimeoutInForce> RunHealth::RankTimeout(const Watch& w,
                                                     const RankProgress& p) const {
  if (p.last_step < 0) {
    if (!w.launch.model) return std::nullopt;
    return StartupTimeout(w.timeouts, w.earlier_starts_s);
  }
  // The checkpoint after the next step, or one after the step reported that
  // is still to come (the end's).
  std::optional<bool> checkpoint_next;
  if (const auto& next = w.next_checkpoint[p.rank])
    checkpoint_next = *next == p.last_step + 1 || *next == p.last_step;
  return HangTimeout(w.timeouts, w.gaps, checkpoint_next, w.stopping);
}

Effects RunHealth::ApplyTimeouts(Watch& w, std::vector<RankProgress>* running) {
  std::optional<TimeoutInForce> longest;
  for (RankProgress& p : *running) {
    auto t = RankTimeout(w, p);
    if (!t) continue;
    p.timeout = std::chrono::milliseconds(static_cast<int64_t>(t->seconds * 1000));
    if (!longest || t->seconds > longest->seconds) longest = std::move(t);
  }
  if (!longest) return {};
  w.in_force = *longest;
  // The metric (and the log) follow moves of more than a tenth.
  if (w.in_force_exported >= 0 &&
      std::abs(w.in_force.seconds - w.in_force_exported) * 10 <= w.in_force_exported)
    return {};
  w.in_force_exported = w.in_force.seconds;
  spdlog::info("run {}: hang timeout {}", w.launch.ref.run_id, w.in_force.basis);
  return CountHangTimeout{w.launch.ref.run_id, w.in_force.seconds};
}

void RunHealth::RankStates(const WorkerId& id, const std::map<int, char>& states) {
  auto it = watches_.find({id.run_id, id.attempt, id.launch});
  if (it == watches_.end()) return;
  for (const auto& [rank, state] : states)
    if (rank >= 0 && rank < static_cast<int>(it->second.ranks.size()))
      it->second.ranks[rank].process_state = state;
}

void RunHealth::Stopping(const WorkerId& id) {
  auto it = watches_.find({id.run_id, id.attempt, id.launch});
  if (it != watches_.end()) it->second.stopping = true;
}

std::optional<TimeoutInForce> RunHealth::HangTimeoutOf(const std::string& run_id) const {
  const Watch* newest = nullptr;
  for (const auto& [ref, w] : watches_)
    if (ref.run_id == run_id && w.in_force_exported >= 0) newest = &w;
  if (newest == nullptr) return std::nullopt;
  return newest->in_force;
}

}  // namespace trellis::controller
