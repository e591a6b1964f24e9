#pragma once
// The memory probe as the agent runs it before Register: read the node's
// sockets, optionally touch each one, log the figures. Never fails: a failure
// becomes the report's error, which the controller's gate fails the node with.

#include <string>

#include "common/clock.h"
#include "common/node_probe.h"
#include "worker/core/args.h"

namespace trellis::worker {

// `touch`: the spec's gate.touch_probe; each socket then gets `touch_gib`
// and an equal share of `touch_budget` (--touch-probe-gib, --touch-probe-seconds).
// Runs before the process starts gRPC threads (the touch probe forks).
// `probed_at`: the worker's clock when the probe starts (the report's time).
NodeProbe ProbeMemoryForRegister(const std::string& sysfs_root, bool touch, double touch_gib,
                                 Seconds touch_budget, WallTime probed_at);

}  // namespace trellis::worker
