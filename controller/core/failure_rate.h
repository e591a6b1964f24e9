#pragma once
// How often the nodes fail, as this controller has seen it: the mean time
// between failures of a launch's nodes together, which the ranks' checkpoint
// interval follows (checkpoint.every_steps = "auto", common/checkpoint_interval.h;
// docs/architecture.md, "Checkpoints as often as they pay"). Pure.

#include <optional>
#include <string>
#include <vector>

#include "controller/core/failure_class.h"

namespace trellis::controller {

// Whether a launch that ended so lost the steps since its last checkpoint:
// a rank, node or device failed, or the run hung. Not a user's error, a
// gate, a time limit or handoff (they checkpoint first), a cancel.
bool LosesUnsavedWork(FailureClass c);

// One ended launch: its nodes, how long it ran and how it ended.
struct LaunchSpan {
  int nodes = 0;
  double hours = 0;
  std::optional<FailureClass> ended_as;  // none: a class this controller does not know
};

struct FailureHistory {
  int failures = 0;        // launches that lost unsaved work
  double node_hours = 0;   // nodes x hours over all the ended launches
};
FailureHistory FailureHistoryOf(const std::vector<LaunchSpan>& launches);

struct RunMtbf {
  double seconds = 0;  // mean time between failures of `nodes` nodes together
  std::string basis;   // for the run's events: how it was found
};
// Nodes fail independently at one rate per node-hour: the history's with a
// prior of one failure in `prior_node_mtbf_hours` node-hours, (failures + 1) /
// (node_hours + prior), so that a new controller starts from the prior and a
// long history outweighs it.
RunMtbf RunMtbfFor(const FailureHistory& history, int nodes, double prior_node_mtbf_hours);

}  // namespace trellis::controller
