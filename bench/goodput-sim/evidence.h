#pragma once
// What the controller's shell would gather about a launch that ended (the
// rank ends, lost workers, the hang detector's finding), for the controller's
// own ClassifyLaunch to judge. Pure.

#include <cstdint>
#include <string>
#include <vector>

#include "bench/goodput-sim/trace.h"
#include "controller/core/failure_class.h"

namespace trellis::bench {

// `culprit` is the node the interruption hit (for the no-evidence kinds: the
// first node whose ranks noticed); `go_nodes` the launch's nodes, NaturalLess
// order; `silent_s` how long the detector waited.
controller::LaunchEvidence EvidenceOf(FaultKind kind, const std::string& culprit,
                                      const std::vector<std::string>& go_nodes, int ranks_per_node,
                                      int64_t last_step, double silent_s);

// The launch reached the partition's time limit.
controller::LaunchEvidence TimeLimitEvidence(const std::vector<std::string>& go_nodes);

// The controller stopped the launch for the attempt waiting ahead, whose
// allocation started (a handoff): the ranks stopped together at a step
// boundary with a checkpoint and exited 0.
controller::LaunchEvidence HandoffEvidence(const std::vector<std::string>& go_nodes);

}  // namespace trellis::bench
