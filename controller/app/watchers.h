#pragma once
// Fan-out of run events to WatchRun subscribers (loop thread only).

#include <map>
#include <set>
#include <string>

#include "controller/app/views.h"

namespace trellis::controller {

class Watchers {
 public:
  void Add(const std::string& run_id, WatchSink* sink);
  void Remove(const std::string& run_id, WatchSink* sink);
  void Transition(const std::string& run_id, const EventRecord& event);
  void Step(const std::string& run_id, const StepRow& step);
  void EndAll();

 private:
  std::map<std::string, std::set<WatchSink*>> sinks_;
};

}  // namespace trellis::controller
