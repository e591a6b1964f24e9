#pragma once
// The launch gate's per-node judgement on host memory (pure). The production
// lesson: a socket that starts a job short of memory lowers the ceiling of the
// whole job and fails hours later, so a node is judged by its worst socket.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace trellis::controller {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct GatePolicy {
  double min_free_gib_per_socket = 100.0;
  double max_unattributed_gib_per_socket = 24.0;
  std::chrono::seconds timeout{120};
  bool touch_probe = false;
};

struct SocketFigures {
  int numa_node = 0;
  std::string cpulist;
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
  int64_t file_pages_bytes = 0;
  int64_t anon_pages_bytes = 0;
  int64_t slab_bytes = 0;
  int64_t kernel_stack_bytes = 0;
  int64_t page_tables_bytes = 0;
  int64_t shmem_bytes = 0;
  int64_t hugepages_bytes = 0;
  int64_t unattributed_bytes = 0;
  std::optional<int64_t> touch_obtainable_bytes;
};

struct DeviceNodeFigures {
  int numa_node = 0;
  int64_t total_bytes = 0;
  int64_t free_bytes = 0;
};

// What one worker reported at registration.
struct NodeProbeFigures {
  std::vector<SocketFigures> sockets;
  std::vector<DeviceNodeFigures> device_nodes;
  std::string error;  // the probe itself failed
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
NodeVerdict JudgeNode(const std::string& node, const NodeProbeFigures& probe,
                      const GatePolicy& policy);

std::string FormatGiB(double bytes);  // "72.7 GiB"

}  // namespace trellis::controller
