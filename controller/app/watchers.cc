#include "controller/app/watchers.h"

namespace trellis::controller {

void Watchers::Add(const std::string& run_id, WatchSink* sink) { sinks_[run_id].insert(sink); }

void Watchers::Remove(const std::string& run_id, WatchSink* sink) {
  auto it = sinks_.find(run_id);
  if (it == sinks_.end()) return;
  it->second.erase(sink);
  if (it->second.empty()) sinks_.erase(it);
}

void Watchers::Transition(const std::string& run_id, const EventRecord& event) {
  auto it = sinks_.find(run_id);
  if (it == sinks_.end()) return;
  auto sinks = it->second;  // OnEnd may remove
  for (WatchSink* s : sinks) s->OnTransition(event);
  if (IsTerminal(event.to)) {
    for (WatchSink* s : sinks) s->OnEnd();
    sinks_.erase(run_id);
  }
}

void Watchers::Step(const std::string& run_id, const StepRow& step) {
  auto it = sinks_.find(run_id);
  if (it == sinks_.end()) return;
  for (WatchSink* s : it->second) s->OnStep(step);
}

void Watchers::EndAll() {
  auto all = std::move(sinks_);
  sinks_.clear();
  for (auto& [run, sinks] : all)
    for (WatchSink* s : sinks) s->OnEnd();
}

}  // namespace trellis::controller
