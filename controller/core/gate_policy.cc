#include "controller/core/gate_policy.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>

#include "common/model_layout/rank_host_memory.h"

namespace trellis::controller {

std::string FormatGiB(double bytes) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / kGiB);
  return buf;
}

namespace {

// What the ranks bound to socket `index` of `sockets` take on top of the
// policy's minimum, and the words for it; empty when nothing.
std::pair<double, std::string> RanksShare(const GatePolicy& policy, int index, int sockets) {
  const int ranks = RanksOnSocket(index, policy.ranks_per_node, sockets);
  const double bytes = static_cast<double>(ranks) * static_cast<double>(policy.rank_host_bytes);
  if (bytes <= 0) return {0, ""};
  return {bytes, FormatGiB(policy.min_free_gib_per_socket * kGiB) + " + " +
                     std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") + " x " +
                     FormatGiB(static_cast<double>(policy.rank_host_bytes)) + ": " +
                     policy.rank_host_what};
}

}  // namespace

GatePolicy GatePolicyFor(const spec::RunSpec& spec) {
  GatePolicy p;
  p.min_free_gib_per_socket = spec.gate.min_free_gib_per_socket;
  p.max_unattributed_gib_per_socket = spec.gate.max_unattributed_gib_per_socket;
  p.timeout = std::chrono::seconds(spec.gate.timeout_s);
  p.touch_probe = spec.gate.touch_probe;
  if (spec.has_model) {
    const spec::RankHostMemory host =
        spec::RankHostMemoryOf(spec.trainer, spec.world_size(), spec.slurm.gpus_per_node > 0);
    p.rank_host_bytes = host.total();
    p.rank_host_what = host.Describe();
    p.ranks_per_node = spec.slurm.ranks_per_node;
  }
  return p;
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
  const int sockets = static_cast<int>(probe.sockets.size());
  for (int i = 0; i < sockets; ++i) {
    const SocketProbe& s = probe.sockets[i];
    const std::string where = "socket " + std::to_string(s.numa_node) + ": ";
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
    const auto [share, share_words] = RanksShare(policy, i, sockets);
    if (usable >= min_free && usable < min_free + share)
      v.short_of_ranks_memory.push_back(where + FormatGiB(usable) +
                                        (policy.touch_probe ? " obtainable < " : " free < ") +
                                        FormatGiB(min_free + share) +
                                        " with the ranks' host memory (" + share_words + ")");
    worst = std::min(worst, usable);
  }
  v.score = worst;
  v.passed = v.reasons.empty();
  return v;
}

}  // namespace trellis::controller
