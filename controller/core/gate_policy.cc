#include "controller/core/gate_policy.h"

#include <algorithm>
#include <cstdio>
#include <limits>

namespace trellis::controller {

std::string FormatGiB(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / kGiB);
  return buf;
}

NodeVerdict JudgeNode(const std::string& node, const NodeProbe& probe, const GatePolicy& policy) {
  NodeVerdict v;
  v.node = node;
  if (!probe.error.empty()) {
    v.reasons.push_back("probe failed: " + probe.error);
    return v;
  }
  if (probe.sockets.empty()) {
    v.reasons.push_back("probe found no socket (no NUMA node with CPUs)");
    return v;
  }
  const double min_free = policy.min_free_gib_per_socket * kGiB;
  const double max_unattributed = policy.max_unattributed_gib_per_socket * kGiB;
  char required[64];
  std::snprintf(required, sizeof(required), "%.1f GiB", policy.min_free_gib_per_socket);
  char allowed[64];
  std::snprintf(allowed, sizeof(allowed), "%.1f GiB", policy.max_unattributed_gib_per_socket);
  double worst = std::numeric_limits<double>::infinity();
  for (const auto& s : probe.sockets) {
    std::string where = "socket " + std::to_string(s.numa_node) + ": ";
    double usable = static_cast<double>(s.free_bytes);
    if (s.free_bytes < min_free)
      v.reasons.push_back(where + FormatGiB(s.free_bytes) + " free < " + required + " required");
    if (s.unattributed_bytes > max_unattributed)
      v.reasons.push_back(where + FormatGiB(s.unattributed_bytes) + " unattributed > " + allowed +
                          " allowed");
    if (policy.touch_probe) {
      if (!s.touch_obtainable_bytes) {
        v.reasons.push_back(where + "touch probe requested but not reported");
      } else {
        usable = static_cast<double>(*s.touch_obtainable_bytes);
        if (usable < min_free)
          v.reasons.push_back(where + "touch probe obtained " + FormatGiB(usable) + " < " +
                              required + " required");
      }
    }
    worst = std::min(worst, usable);
  }
  v.score = worst;
  v.passed = v.reasons.empty();
  return v;
}

}  // namespace trellis::controller
