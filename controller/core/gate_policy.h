#pragma once
// The launch gate's per-node judgement on host memory (pure). The production
// lesson: a socket that starts a job short of memory lowers the ceiling of the
// whole job and fails hours later, so a node is judged by its worst socket.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/node_probe.h"
#include "common/spec/run_spec.h"

namespace trellis::controller {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct GatePolicy {
  double min_free_gib_per_socket = 100.0;
  double max_unattributed_gib_per_socket = 24.0;
  std::chrono::seconds timeout{120};
  bool touch_probe = false;
  // The host memory each rank of a [model] run takes that its spec decides
  // (common/model_layout/rank_host_memory.h), on the socket the rank is bound to
  // (SocketIndexForRank of `ranks_per_node`); 0: none. A socket with less free
  // than min_free plus its ranks' share still passes (min_free is the
  // production figure of a healthy socket, and checkpoint.async falls back to
  // writing in place), but its node is short: picked after every node that
  // is not, and named in the gate's reason.
  int64_t rank_host_bytes = 0;
  std::string rank_host_what;  // what it is, for the reasons
  int ranks_per_node = 1;
};

struct NodeVerdict {
  std::string node;
  bool passed = false;
  std::vector<std::string> reasons;  // why it failed; empty when passed
  // Higher is better: the node's worst socket's free bytes (the touch probe's
  // figure when present). Picks the best N of N + spares.
  double score = 0;
  // Sockets that pass but not with the ranks' host memory on top (GatePolicy
  // rank_host_bytes): "socket 1: 104.2 GiB free < 110.2 GiB with the ranks'
  // host memory (100.0 GiB + 1 rank x 10.2 GiB: checkpoint.async's ...)".
  std::vector<std::string> short_of_ranks_memory;
};

// A run's policy: its [gate] section, and for a [model] run the host memory
// each rank takes (common/model_layout/rank_host_memory.h) with its ranks per node.
GatePolicy GatePolicyFor(const spec::RunSpec& spec);

// "socket 2: 72.7 GiB free < 100.0 GiB required", "socket 1: 39.9 GiB
// unattributed > 24.0 GiB allowed", "probe failed: ...".
NodeVerdict JudgeNode(const std::string& node, const NodeProbe& probe, const GatePolicy& policy);

std::string FormatGiB(double bytes);  // "72.7 GiB"

}  // namespace trellis::controller
