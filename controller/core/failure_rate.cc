#include "controller/core/failure_rate.h"

#include <algorithm>
#include <cstdio>

namespace trellis::controller {

namespace {

std::string Hours(double h) {
  char buf[48];
  std::snprintf(buf, sizeof buf, h >= 100 ? "%.0f" : "%.3g", h);
  return buf;
}

}  // namespace

bool LosesUnsavedWork(FailureClass c) {
  switch (c) {
    case FailureClass::kRankExit:
    case FailureClass::kSignal:
    case FailureClass::kDeviceOom:
    case FailureClass::kHostOom:
    case FailureClass::kDeviceError:
    case FailureClass::kNccl:
    case FailureClass::kNodeLost:
    case FailureClass::kHang:
    case FailureClass::kPreemption:
    case FailureClass::kDamagedCheckpoint:
      return true;
    case FailureClass::kSucceeded:
    case FailureClass::kUserError:
    case FailureClass::kGate:
    case FailureClass::kTimeLimit:
    case FailureClass::kCancel:
    case FailureClass::kTerminated:
    case FailureClass::kHandoff:
      return false;
  }
  return false;
}

FailureHistory FailureHistoryOf(const std::vector<LaunchSpan>& launches) {
  FailureHistory h;
  for (const LaunchSpan& l : launches) {
    h.node_hours += std::max(0, l.nodes) * std::max(0.0, l.hours);
    if (l.ended_as && LosesUnsavedWork(*l.ended_as)) ++h.failures;
  }
  return h;
}

RunMtbf RunMtbfFor(const FailureHistory& history, int nodes, double prior_node_mtbf_hours) {
  const double per_node_hour =
      (history.failures + 1) / (history.node_hours + std::max(prior_node_mtbf_hours, 1e-6));
  const double node_mtbf_h = 1 / per_node_hour;
  const int n = std::max(1, nodes);
  RunMtbf out;
  out.seconds = node_mtbf_h * 3600 / n;
  out.basis = "a node fails every " + Hours(node_mtbf_h) + " h (" +
              std::to_string(history.failures) + " failure" +
              (history.failures == 1 ? "" : "s") + " in " + Hours(history.node_hours) +
              " node-hours seen, with a prior of 1 in " + Hours(prior_node_mtbf_hours) + "); " +
              std::to_string(n) + " node" + (n == 1 ? "" : "s") + ": every " +
              Hours(node_mtbf_h / n) + " h";
  return out;
}

}  // namespace trellis::controller
