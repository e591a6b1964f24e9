#pragma once
// The launch gate's per-node judgement on host memory (pure). The production
// lesson: a socket that starts a job short of memory lowers the ceiling of the
// whole job and fails hours later, so a node is judged by its worst socket.

#include <chrono>
#include <string>
#include <vector>

#include "common/node_probe.h"

namespace trellis::controller {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct GatePolicy {
  double min_free_gib_per_socket = 100.0;
  double max_unattributed_gib_per_socket = 24.0;
  std::chrono::seconds timeout{120};
  bool touch_probe = false;
};

struct NodeVerdict {
  std::string node;
  bool passed = false;
  std::vector<std::string> reasons;  // why it failed; empty when passed
  // Higher is better: the node's worst socket's free bytes (the touch probe's
  // figure when present). Picks the best N of N + spares.
  double score = 0;
};

// "socket 2: 72.7 GiB free < 100.0 GiB required", "socket 1: 39.9 GiB
// unattributed > 24.0 GiB allowed", "probe failed: ...".
NodeVerdict JudgeNode(const std::string& node, const NodeProbe& probe, const GatePolicy& policy);

std::string FormatGiB(double bytes);  // "72.7 GiB"

}  // namespace trellis::controller
